"""A generated project can follow the template: cruft, or copier, records where
it came from and brings template changes in without losing the project's own
changes. Both take a version by its git tag."""

import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

from .baked import TEMPLATE, run, succeeds, tool

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Template Test",
    "GIT_AUTHOR_EMAIL": "template-test@example.com",
    "GIT_COMMITTER_NAME": "Template Test",
    "GIT_COMMITTER_EMAIL": "template-test@example.com",
}
NOT_TEMPLATE = shutil.ignore_patterns(".git", ".venv", "venv", "__pycache__", "*.egg-info", ".pytest_cache")
README_INSTALL_LINE = "uv sync                 # install the service and its dev tools"


def sh(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return succeeds(*args, cwd=cwd, **GIT_IDENTITY)


def commit_all(repo: Path, message: str) -> str:
    sh("git", "add", "-A", cwd=repo)
    sh("git", "commit", "-q", "-m", message, cwd=repo)
    return sh("git", "rev-parse", "HEAD", cwd=repo).stdout.strip()


@pytest.fixture
def template_repo(tmp_path: Path) -> Path:
    """The template as it is in this checkout, committed in a git repository of its own."""
    repo = tmp_path / "template"
    shutil.copytree(TEMPLATE, repo, ignore=NOT_TEMPLATE)
    sh("git", "init", "-q", "-b", "main", cwd=repo)
    commit_all(repo, "template A")
    return repo


def project_readme(template: Path) -> Path:
    return template / "{{cookiecutter.project_slug}}" / "README.md"


def head(repo: Path) -> str:
    return sh("git", "rev-parse", "HEAD", cwd=repo).stdout.strip()


def assert_made_from(project: Path, commit: str, follow: str) -> None:
    """The project names the template's commit it was rendered from (the
    README by its first 12 digits, docs/updating.md whole) and how to follow
    it: the README for every engine, docs/updating.md for the one that made it."""
    readme = (project / "README.md").read_text()
    version = tomllib.loads((TEMPLATE / "pyproject.toml").read_text())["project"]["version"]
    assert (
        f"[sandbox-agent-template](https://github.com/org/sandbox-agent-template) {version}, commit `{commit[:12]}`"
        in readme
    )
    assert "copier update --trust" in readme
    assert "uvx cruft update" in readme
    updating = (project / "docs" / "updating.md").read_text()
    assert f"commit `{commit}`" in updating
    assert follow in updating
    assert ("cruft" in updating) == ("cruft" in follow)


def create_with_cruft(template: Path, into: Path) -> Path:
    into.mkdir()
    sh(tool("cruft"), "create", str(template), "--no-input", "--output-dir", str(into), cwd=into)
    project = into / "sandbox-agent"
    sh("git", "init", "-q", "-b", "main", cwd=project)
    commit_all(project, "generated")
    return project


def test_cruft_update_brings_template_changes_and_keeps_hand_changes(template_repo: Path, tmp_path: Path) -> None:
    project = create_with_cruft(template_repo, tmp_path / "out")
    recorded = json.loads((project / ".cruft.json").read_text())
    assert recorded["template"] == str(template_repo)
    assert recorded["context"]["cookiecutter"]["sandbox_backend"] == "local"
    assert_made_from(project, recorded["commit"], follow="uvx cruft update")

    # The team changes its project...
    with (project / "README.md").open("a") as readme:
        readme.write("\n## Team notes\n\nOwned by the platform team.\n")
    commit_all(project, "our notes")
    # ...and the template moves on.
    gitignore = template_repo / "{{cookiecutter.project_slug}}" / ".gitignore"
    gitignore.write_text(gitignore.read_text() + "*.log\n")
    commit_b = commit_all(template_repo, "template B")

    outdated = run(tool("cruft"), "check", cwd=project)
    assert outdated.returncode != 0, outdated.stdout

    sh(tool("cruft"), "update", "--skip-apply-ask", "--allow-untracked-files", cwd=project)

    assert (project / ".gitignore").read_text().endswith("*.log\n")
    assert (project / "README.md").read_text().endswith("Owned by the platform team.\n")
    assert json.loads((project / ".cruft.json").read_text())["commit"] == commit_b
    assert_made_from(project, commit_b, follow="uvx cruft update")
    sh(tool("cruft"), "check", cwd=project)


def test_cruft_update_renders_the_new_commit_with_its_own_local_extensions(template_repo: Path, tmp_path: Path) -> None:
    # cruft renders the old commit and the new one in one process: the new
    # commit's files may use a filter that only its local_extensions.py has.
    project = create_with_cruft(template_repo, tmp_path / "out")
    extensions = template_repo / "local_extensions.py"
    last_filter = "            secret_env_vars=lambda answers: derive(answers).secret_env_vars,\n"
    assert last_filter in extensions.read_text()
    extensions.write_text(
        extensions.read_text().replace(
            last_filter, last_filter + '            added_later=lambda answers: "added later",\n'
        )
    )
    gitignore = template_repo / "{{cookiecutter.project_slug}}" / ".gitignore"
    gitignore.write_text(gitignore.read_text() + "# {{ cookiecutter | added_later }}\n")
    commit_all(template_repo, "template B")

    sh(tool("cruft"), "update", "--skip-apply-ask", "--allow-untracked-files", cwd=project)

    assert (project / ".gitignore").read_text().endswith("# added later\n")


def test_cruft_update_reports_a_conflict_and_keeps_both_sides(template_repo: Path, tmp_path: Path) -> None:
    project = create_with_cruft(template_repo, tmp_path / "out")
    readme = project / "README.md"
    readme.write_text(readme.read_text().replace(README_INSTALL_LINE, "uv sync --frozen  # our way"))
    commit_all(project, "our install line")
    template_readme = project_readme(template_repo)
    template_readme.write_text(
        template_readme.read_text().replace(README_INSTALL_LINE, "uv sync  # the template's new way")
    )
    commit_all(template_repo, "template B")

    update = sh(tool("cruft"), "update", "--skip-apply-ask", "--allow-untracked-files", cwd=project)

    assert "Applied patch to 'README.md' with conflicts." in update.stdout + update.stderr
    status = sh("git", "status", "--porcelain", cwd=project).stdout
    assert "UU README.md" in status
    text = readme.read_text()
    assert "uv sync --frozen  # our way" in text
    assert "uv sync  # the template's new way" in text
    assert "<<<<<<< " in text


ANSWERS = {"project_name": "Data Cleaner", "sandbox_backend": "e2b", "license": "Apache-2.0"}


def create_with_cookiecutter(template: Path, into: Path) -> Path:
    """A project made with plain cookiecutter (nothing records its answers),
    in git: from the template's git address, as cruft and copier take it
    (here a file:// one: its clone, as theirs, pins the runtime at its commit)."""
    config = into.parent / "cookiecutter.yaml"
    config.write_text(f'cookiecutters_dir: "{into.parent / "clones"}"\nreplay_dir: "{into.parent / "replay"}"\n')
    sh(
        tool("cookiecutter"),
        "--no-input",
        "--config-file",
        str(config),
        "--output-dir",
        str(into),
        f"git+{template.resolve().as_uri()}",
        *(f"{key}={value}" for key, value in ANSWERS.items()),
        cwd=into.parent,
    )
    project = into / "data-cleaner"
    sh("git", "init", "-q", "-b", "main", cwd=project)
    commit_all(project, "generated with cookiecutter")
    return project


def adoption(project: Path) -> tuple[str, str]:
    """What docs/updating.md gives a project made with plain cookiecutter to
    adopt cruft or copier: its answers (answers.json) and the template's commit."""
    updating = (project / "docs" / "updating.md").read_text()
    answers = re.search(r"```json\n(.*?)\n```", updating, re.DOTALL)
    commits = set(re.findall(r"--(?:checkout|vcs-ref) ([0-9a-f]{40}) ", updating))
    assert answers and len(commits) == 1, updating
    return answers.group(1), commits.pop()


def test_cruft_link_adopts_a_project_made_with_plain_cookiecutter(template_repo: Path, tmp_path: Path) -> None:
    project = create_with_cookiecutter(template_repo, tmp_path / "out")
    assert_made_from(project, head(template_repo), follow="uvx cruft update")
    answers, commit = adoption(project)
    assert commit == head(template_repo)

    # As docs/updating.md says, with the template's address where it has gh:org/...
    sh(
        tool("cruft"),
        "link",
        str(template_repo),
        "--checkout",
        commit,
        "--no-input",
        "--extra-context",
        answers,
        cwd=project,
    )

    recorded = json.loads((project / ".cruft.json").read_text())
    assert recorded["commit"] == commit
    assert recorded["context"]["cookiecutter"] == {**recorded["context"]["cookiecutter"], **json.loads(answers)}
    assert {key: recorded["context"]["cookiecutter"][key] for key in ANSWERS} == ANSWERS
    # Linked with the answers it was made with, the project matches the template exactly.
    sh(tool("cruft"), "diff", "--exit-code", cwd=project)


def test_copier_adopts_a_project_made_with_plain_cookiecutter_and_then_updates_it(
    template_repo: Path, tmp_path: Path
) -> None:
    release(template_repo, "v1.0.0")
    project = create_with_cookiecutter(template_repo, tmp_path / "out")
    with (project / "README.md").open("a") as readme:
        readme.write("\n## Team notes\n\nOwned by the platform team.\n")
    commit_all(project, "our notes")
    answers, commit = adoption(project)
    (project / "answers.json").write_text(answers)

    # As docs/updating.md says (answers.json is kept out of the project's history).
    copier(
        "copy", "--overwrite", "--vcs-ref", commit, "--data-file", "answers.json", str(template_repo), ".", cwd=project
    )
    (project / "answers.json").unlink()
    sh("git", "restore", ".", ":!docs/updating.md", cwd=project)

    # Only the answers file is new, and the guide is Copier's: every other
    # file is the project's, hand changes and all.
    assert sh("git", "status", "--porcelain", cwd=project).stdout == " M docs/updating.md\n?? .copier-answers.yml\n"
    recorded = answers_of(project)
    assert recorded["_commit"] == "v1.0.0"
    assert {key: recorded[key] for key in ANSWERS} == ANSWERS
    commit_all(project, "follows the template with copier")
    gitignore = template_repo / "{{cookiecutter.project_slug}}" / ".gitignore"
    gitignore.write_text(gitignore.read_text() + "*.log\n")
    commit_all(template_repo, "template B")
    commit_b = release(template_repo, "v1.1.0")

    copier("update", cwd=project)

    assert answers_of(project)["_commit"] == "v1.1.0"
    assert (project / ".gitignore").read_text().endswith("*.log\n")
    assert (project / "README.md").read_text().endswith("Owned by the platform team.\n")
    # Copier's update renders a Copier project: it is told to follow the template with copier.
    assert_made_from(project, commit_b, follow="copier update --trust")


def release(template: Path, version: str) -> str:
    """Tag the template's last commit as a version (copier and cruft can check out a tag)."""
    sh("git", "tag", version, cwd=template)
    return sh("git", "rev-parse", "HEAD", cwd=template).stdout.strip()


def edit_and_release(project: Path, template: Path) -> str:
    """A project made from v1.0.0 goes into git and the team changes its README
    (committed); then the template releases v1.1.0, which ignores ``*.log``.
    Returns v1.1.0's commit."""
    sh("git", "init", "-q", "-b", "main", cwd=project)
    commit_all(project, "generated from v1.0.0")
    with (project / "README.md").open("a") as readme:
        readme.write("\n## Team notes\n\nOwned by the platform team.\n")
    commit_all(project, "our notes")
    gitignore = template / "{{cookiecutter.project_slug}}" / ".gitignore"
    gitignore.write_text(gitignore.read_text() + "*.log\n")
    commit_all(template, "template B")
    return release(template, "v1.1.0")


def test_cruft_update_moves_a_project_from_one_tag_to_the_next(template_repo: Path, tmp_path: Path) -> None:
    release(template_repo, "v1.0.0")
    out = tmp_path / "out"
    out.mkdir()
    sh(
        tool("cruft"),
        "create",
        str(template_repo),
        "--checkout",
        "v1.0.0",
        "--no-input",
        "--output-dir",
        str(out),
        cwd=out,
    )
    project = out / "sandbox-agent"
    commit_b = edit_and_release(project, template_repo)

    sh(tool("cruft"), "update", "--checkout", "v1.1.0", "--skip-apply-ask", "--allow-untracked-files", cwd=project)

    assert (project / ".gitignore").read_text().endswith("*.log\n")
    assert (project / "README.md").read_text().endswith("Owned by the platform team.\n")
    assert json.loads((project / ".cruft.json").read_text())["commit"] == commit_b
    assert_made_from(project, commit_b, follow="uvx cruft update")


def copier(*args: str, cwd: Path) -> str:
    """The copier command as a user types it (--trust: the template's questions use its local_extensions.py)."""
    done = sh(tool("copier"), *args, "--trust", "--defaults", cwd=cwd)
    return done.stdout + done.stderr


def answers_of(project: Path) -> dict[str, object]:
    return yaml.safe_load((project / ".copier-answers.yml").read_text())


def test_copier_update_brings_a_newer_tag_and_a_backend_added_later_keeping_hand_changes(
    template_repo: Path, tmp_path: Path
) -> None:
    release(template_repo, "v1.0.0")
    project = tmp_path / "sandbox-agent"
    copier("copy", str(template_repo), str(project), cwd=tmp_path)
    assert answers_of(project)["_commit"] == "v1.0.0"
    assert not (project / ".cruft.json").exists()
    assert_made_from(project, head(template_repo), follow="copier update --trust")
    commit_b = edit_and_release(project, template_repo)

    # As docs/updating.md says, with no one to answer: without
    # --skip-answered (or --defaults) copier asks every question again.
    documented = re.search(
        r"^copier update --trust --skip-answered +# to the template's newest release",
        (project / "docs" / "updating.md").read_text(),
        re.MULTILINE,
    )
    assert documented, "docs/updating.md shows no update that asks only new questions"
    updated = subprocess.run(
        [tool("copier"), "update", "--trust", "--skip-answered"],
        cwd=project,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, **GIT_IDENTITY},
    )
    assert updated.returncode == 0, updated.stdout + updated.stderr

    assert answers_of(project)["_commit"] == "v1.1.0"
    assert_made_from(project, commit_b, follow="copier update --trust")
    assert (project / ".gitignore").read_text().endswith("*.log\n")
    assert (project / "README.md").read_text().endswith("Owned by the platform team.\n")
    commit_all(project, "template v1.1.0")

    # Later, the same worker takes a second backend: its files come in, and
    # the answer is recorded (its settings are the worker's environment
    # variables, DOCKER_SANDBOX_IMAGE and the like: no questions).
    docker = project / "tests" / "test_docker.py"
    assert not docker.exists()
    copier("update", "--data", "additional_sandbox_backends=docker", cwd=project)

    assert docker.exists()
    assert 'DOCKER_PROVIDER = "docker"' in (project / "src" / "sandbox_agent" / "service.py").read_text()
    answers = answers_of(project)
    assert answers["additional_sandbox_backends"] == "docker"
    assert not [name for name in answers if name.startswith("docker_")]
    assert (project / "README.md").read_text().endswith("Owned by the platform team.\n")
    # Every file but the hand-changed README is what a project made with docker from the start has.
    fresh = tmp_path / "fresh"
    copier("copy", "--data", "additional_sandbox_backends=docker", str(template_repo), str(fresh), cwd=tmp_path)
    made = sorted(str(p.relative_to(fresh)) for p in fresh.rglob("*") if p.is_file())
    updated = sorted(str(p.relative_to(project)) for p in project.rglob("*") if p.is_file() and ".git" not in p.parts)
    assert updated == made
    for relative in made:
        if relative != "README.md":
            assert (project / relative).read_bytes() == (fresh / relative).read_bytes(), relative
