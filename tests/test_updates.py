"""A generated project can follow the template: cruft, or copier, records where
it came from and brings template changes in without losing the project's own
changes. Both take a version by its git tag."""

import json
import shutil
import subprocess
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


def test_cruft_link_adopts_a_project_made_with_plain_cookiecutter(template_repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    answers = {"project_name": "Data Cleaner", "sandbox_backend": "e2b", "license": "Apache-2.0"}
    sh(
        tool("cookiecutter"),
        "--no-input",
        "--output-dir",
        str(out),
        str(template_repo),
        *(f"{key}={value}" for key, value in answers.items()),
        cwd=tmp_path,
    )
    project = out / "data-cleaner"
    sh("git", "init", "-q", "-b", "main", cwd=project)
    commit_all(project, "generated with cookiecutter")

    sh(
        tool("cruft"),
        "link",
        str(template_repo),
        "--no-input",
        "--extra-context",
        json.dumps(answers),
        cwd=project,
    )

    context = json.loads((project / ".cruft.json").read_text())["context"]["cookiecutter"]
    assert {key: context[key] for key in answers} == answers
    # Linked with the answers it was made with, the project matches the template exactly.
    sh(tool("cruft"), "diff", "--exit-code", cwd=project)


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
    edit_and_release(project, template_repo)

    copier("update", cwd=project)

    assert answers_of(project)["_commit"] == "v1.1.0"
    assert (project / ".gitignore").read_text().endswith("*.log\n")
    assert (project / "README.md").read_text().endswith("Owned by the platform team.\n")
    commit_all(project, "template v1.1.0")

    # Later, the same worker takes a second backend: its files come in, its
    # questions are answered (here by their defaults) and recorded.
    docker = project / "src" / "sandbox_agent" / "machinery" / "backends" / "docker.py"
    assert not docker.exists()
    copier("update", "--data", "additional_sandbox_backends=docker", cwd=project)

    assert docker.exists()
    assert (project / "tests" / "test_docker.py").exists()
    assert 'DOCKER_PROVIDER = "docker"' in (project / "src" / "sandbox_agent" / "machinery" / "shared.py").read_text()
    answers = answers_of(project)
    assert (answers["additional_sandbox_backends"], answers["docker_network"]) == ("docker", "none")
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
