"""The runtime's version moves with what a service depends on: its public
names and their signatures, and the settings it reads (surface.py lists
them; surface.txt keeps the listing of the version it names)."""

import re
import subprocess
import sys

from tests.surface import REWRITE, RUNTIME, SURFACE, version


def test_the_version_moves_with_the_public_surface_and_the_settings() -> None:
    # In a process of its own: the listing configures a service with every backend.
    now = subprocess.run(
        [sys.executable, "-m", "tests.surface"],
        cwd=RUNTIME,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    kept = SURFACE.read_text()
    kept_version = kept.splitlines()[0].removeprefix("version ")
    if kept_version == version():
        assert now == kept, (
            f"the runtime's public surface or settings changed and its version ({version()}) did not: "
            f"bump it in runtime/pyproject.toml, add its entry to runtime/CHANGELOG.md, then run `{REWRITE}`"
        )
    else:
        assert now == kept, (
            f"runtime/surface.txt lists {kept_version}, the runtime is {version()}: run `{REWRITE}`"
        )


def test_the_changelog_has_an_entry_for_the_version() -> None:
    changelog = (RUNTIME / "CHANGELOG.md").read_text()
    assert re.search(
        rf"^## \[{re.escape(version())}\] - \d{{4}}-\d{{2}}-\d{{2}}$", changelog, re.MULTILINE
    ), (
        f"runtime/CHANGELOG.md has no '## [{version()}] - YYYY-MM-DD' entry for the runtime's version"
    )
