"""A project says where it came from: the template, its version, the commit
its files were rendered from (or that it is unknown), and it links to the
template's own docs where it cites them. What each engine's update then does
with it: tests/test_updates.py."""

import re
import shutil
import tomllib
from pathlib import Path

import pytest

from local_extensions import COPIER_DRAFT_COMMIT, TEMPLATE_URL, Provenance, provenance

from .baked import TEMPLATE, BakedProject, succeeds
from .test_updates import GIT_IDENTITY, NOT_TEMPLATE, commit_all, head

VERSION = tomllib.loads((TEMPLATE / "pyproject.toml").read_text())["project"]["version"]
# A link to a file of the template, as the generated docs write it.
TEMPLATE_LINK = re.compile(re.escape(TEMPLATE_URL) + r"/(?:blob|tree)/main/([^)\s]+)\)")


def test_the_readme_names_the_template_its_version_and_commit(project: BakedProject) -> None:
    readme = project.text("README.md")
    made = provenance(TEMPLATE)
    if made.commit == "unknown":
        named = "commit unknown (rendered from files outside git)"
    else:
        named = f"commit `{made.commit[:12]}`" + (" with changes not committed" if made.uncommitted else "")
    assert f"Made from [sandbox-agent-template]({TEMPLATE_URL}) {VERSION}, {named}." in readme
    assert "[docs/updating.md](docs/updating.md)" in readme
    assert (project.path / "docs" / "updating.md").exists()


def test_every_link_to_the_template_names_a_file_it_has(project: BakedProject) -> None:
    linked = {
        target for path in project.files() if path.suffix == ".md" for target in TEMPLATE_LINK.findall(path.read_text())
    }
    assert "docs" in linked  # the README's link to the template's docs
    for target in linked:
        assert (TEMPLATE / target).exists(), target


def git(repo: Path, *args: str) -> str:
    return succeeds("git", *args, cwd=repo, **GIT_IDENTITY).stdout.strip()


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The template's files, outside git."""
    copy = tmp_path / "template"
    shutil.copytree(TEMPLATE, copy, ignore=NOT_TEMPLATE)
    return copy


def test_files_outside_git_have_no_commit(copy: Path) -> None:
    assert provenance(copy) == Provenance(VERSION, "unknown", False)


def test_a_checkout_names_its_commit_and_whether_it_has_changes(copy: Path) -> None:
    git(copy, "init", "-q", "-b", "main")
    commit_all(copy, "template A")
    assert provenance(copy) == Provenance(VERSION, head(copy), False)
    (copy / "cookiecutter.json").write_text((copy / "cookiecutter.json").read_text() + "\n")
    assert provenance(copy) == Provenance(VERSION, head(copy), True)


def test_copiers_commit_of_a_checkouts_changes_is_not_taken_for_the_templates(copy: Path) -> None:
    git(copy, "init", "-q", "-b", "main")
    commit_all(copy, "template A")
    real = head(copy)
    (copy / "cookiecutter.json").write_text((copy / "cookiecutter.json").read_text() + "\n")
    commit_all(copy, COPIER_DRAFT_COMMIT)
    assert provenance(copy) == Provenance(VERSION, real, True)


def test_a_template_inside_another_repository_has_no_commit_of_its_own(tmp_path: Path, copy: Path) -> None:
    git(tmp_path, "init", "-q", "-b", "main")
    commit_all(tmp_path, "a repository holding a copy of the template")
    assert provenance(copy) == Provenance(VERSION, "unknown", False)
