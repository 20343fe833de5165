"""The runtime's version moves with what a service depends on: its public
names and their signatures, and the settings it reads (surface.py lists
them; surface.txt keeps the listing of the version it names)."""

import os
import re
import subprocess
import sys
from pathlib import Path

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


def _last_release() -> tuple[str, str]:
    """The last release's tag and its surface.txt: the last line of the
    template repository's releases.txt (its tags may not have come with a
    clone; its list did) and its commit's listing, from git."""
    # A copy of the runtime outside its repository (the template's suite
    # runs one) is told where the repository is.
    repository = Path(os.environ.get("SANDBOX_AGENT_TEMPLATE_GIT", str(RUNTIME.parent)))
    lines = [
        line
        for line in (repository / "releases.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines, f"{repository / 'releases.txt'} lists no release"
    name, _, commit = lines[-1].partition(" ")
    listing = subprocess.run(
        ["git", "show", f"{commit}:runtime/surface.txt"],
        cwd=repository,
        capture_output=True,
        text=True,
    )
    assert listing.returncode == 0, f"{name} ({commit}): {listing.stderr.strip()}"
    return name, listing.stdout


def test_a_surface_that_moved_since_the_last_release_has_a_version_of_its_own() -> None:
    name, listing = _last_release()
    released_version, _, released = listing.removeprefix("version ").partition("\n")
    kept_version, _, kept = SURFACE.read_text().removeprefix("version ").partition("\n")
    if kept != released:
        assert kept_version != released_version, (
            f"the runtime's public surface or settings moved since {name} and surface.txt still "
            f"says {released_version}: bump the version in runtime/pyproject.toml, add its entry "
            f"to runtime/CHANGELOG.md, then run `{REWRITE}`"
        )
