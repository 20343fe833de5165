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

from .baked import TEMPLATE, BakedProject, succeeds, tool
from .test_updates import GIT_IDENTITY, NOT_TEMPLATE, commit_all, head

VERSION = tomllib.loads((TEMPLATE / "pyproject.toml").read_text())["project"]["version"]
RUNTIME_VERSION = tomllib.loads((TEMPLATE / "runtime" / "pyproject.toml").read_text())["project"]["version"]
# A link to a file of the template, as the generated docs write it.
TEMPLATE_LINK = re.compile(re.escape(TEMPLATE_URL) + r"/(?:blob|tree)/main/([^)\s]+)\)")


def test_the_readme_names_the_template_its_version_and_commit(project: BakedProject) -> None:
    readme = project.text("README.md")
    made = provenance(TEMPLATE)
    if made.commit == "unknown":
        named = "commit unknown (rendered from files outside git)"
    else:
        named = f"commit `{made.commit[:12]}`" + (" with changes not committed" if made.uncommitted else "")
    release = f", its release `{made.tag}`" if made.tag else ""
    assert (
        f"Made from [sandbox-agent-template]({TEMPLATE_URL}) {VERSION}, {named}{release}; "
        f"it runs `sandbox-agent-runtime` {RUNTIME_VERSION} (`[tool.uv.sources]` in `pyproject.toml`)."
    ) in readme
    assert "[docs/updating.md](docs/updating.md)" in readme
    assert (project.path / "docs" / "updating.md").exists()


def test_every_link_to_the_template_names_a_file_it_has(project: BakedProject) -> None:
    linked = {
        target for path in project.files() if path.suffix == ".md" for target in TEMPLATE_LINK.findall(path.read_text())
    }
    assert "docs" in linked  # the README's link to the template's docs
    for target in linked:
        path, _, anchor = target.partition("#")
        assert (TEMPLATE / path).exists(), target
        if anchor:
            assert anchor in anchors(TEMPLATE / path), target


def anchors(markdown: Path) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown file."""
    headings = re.findall(r"^#+ (.+)$", markdown.read_text(), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


def git(repo: Path, *args: str) -> str:
    return succeeds("git", *args, cwd=repo, **GIT_IDENTITY).stdout.strip()


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The template's files, outside git."""
    copy = tmp_path / "template"
    shutil.copytree(TEMPLATE, copy, ignore=NOT_TEMPLATE)
    return copy


def test_a_release_is_one_version_of_the_template_and_its_runtime() -> None:
    """A release's tag, vX.Y.Z, names both (RELEASING.md)."""
    assert VERSION == RUNTIME_VERSION, (
        f"the template is {VERSION} and its runtime {RUNTIME_VERSION}: bump both (RELEASING.md)"
    )


def test_files_outside_git_have_no_commit(copy: Path) -> None:
    assert provenance(copy) == Provenance(VERSION, "unknown", False)


def test_a_checkout_names_its_commit_and_whether_it_has_changes(copy: Path) -> None:
    git(copy, "init", "-q", "-b", "main")
    commit_all(copy, "template A")
    assert provenance(copy) == Provenance(VERSION, head(copy), False)
    (copy / "cookiecutter.json").write_text((copy / "cookiecutter.json").read_text() + "\n")
    assert provenance(copy) == Provenance(VERSION, head(copy), True)


def test_a_checkout_at_a_release_names_its_tag(copy: Path) -> None:
    git(copy, "init", "-q", "-b", "main")
    commit_all(copy, "template A")
    git(copy, "tag", "v0.9.0")
    git(copy, "tag", "v0.10.0")
    git(copy, "tag", "not-a-release")
    assert provenance(copy) == Provenance(VERSION, head(copy), False, "v0.10.0")
    (copy / "README.md").write_text("A later commit.\n")
    commit_all(copy, "template B")
    assert provenance(copy) == Provenance(VERSION, head(copy), False, "")


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


# Where a project takes the runtime from, and what it says when only the
# machine that rendered it can install it (local_extensions.runtime_origin).


@pytest.fixture
def template_repo(copy: Path) -> Path:
    """The template's files, committed in a repository of their own."""
    git(copy, "init", "-q", "-b", "main")
    commit_all(copy, "template A")
    return copy


def runtime_of(project: Path) -> dict[str, str]:
    return tomllib.loads((project / "pyproject.toml").read_text())["tool"]["uv"]["sources"]["sandbox-agent-runtime"]


def build_command(project: Path) -> str:
    """The image build docs/kubernetes.md tells a user to run."""
    [command] = re.findall(r"^docker build .*$", (project / "docs" / "kubernetes.md").read_text(), re.MULTILINE)
    return command


def notices(said: str) -> list[str]:
    return [line for line in said.splitlines() if line.startswith("Note: the runtime is")]


def cookiecutter(*args: str, cwd: Path) -> str:
    done = succeeds(tool("cookiecutter"), "--no-input", *args, cwd=cwd, HOME=str(cwd), **GIT_IDENTITY)
    return done.stdout + done.stderr


def test_a_render_in_place_says_in_one_line_that_its_runtime_is_the_unpinned_working_tree(tmp_path: Path) -> None:
    said = cookiecutter("--output-dir", str(tmp_path / "out"), str(TEMPLATE), cwd=tmp_path)

    project = tmp_path / "out" / "sandbox-agent"
    runtime = str(TEMPLATE / "runtime")
    assert runtime_of(project) == {"path": runtime}
    [notice] = notices(said)
    assert notice.startswith(f"Note: the runtime is {runtime}, the template's working tree, unpinned ")
    # The image's build needs that directory, as its named context.
    assert build_command(project) == (
        f"docker build --build-context runtime={runtime} -t registry.example.com/sandbox-agent-worker:0.1.0 ."
    )


def test_copier_from_a_local_repository_at_an_old_tag_pins_that_tags_runtime(
    template_repo: Path, tmp_path: Path
) -> None:
    git(template_repo, "tag", "v1.0.0")
    old = head(template_repo)
    (template_repo / "runtime" / "README.md").write_text("A newer runtime.\n")
    commit_all(template_repo, "template B")
    project = tmp_path / "sandbox-agent"

    done = succeeds(
        tool("copier"),
        "copy",
        "--trust",
        "--defaults",
        "--vcs-ref",
        "v1.0.0",
        str(template_repo),
        str(project),
        cwd=tmp_path,
        **GIT_IDENTITY,
    )

    address = template_repo.resolve().as_uri()
    assert runtime_of(project) == {"git": address, "rev": old, "subdirectory": "runtime"}
    [notice] = notices(done.stdout + done.stderr)
    assert notice.startswith(f"Note: the runtime is pinned at commit {old[:12]} of {address}, a repository on this")
    locked = succeeds(tool("uv"), "lock", "--offline", "--no-python-downloads", cwd=project)
    assert locked.returncode == 0
    assert f'source = {{ git = "{address}?subdirectory=runtime&rev={old}#{old}" }}' in (project / "uv.lock").read_text()
    # The project names the release it was made from.
    assert f"commit `{old[:12]}`, its release `v1.0.0`;" in (project / "README.md").read_text()
    assert f"commit `{old}`, its release `v1.0.0`." in (project / "docs" / "updating.md").read_text()
    assert build_command(project).startswith(f"docker build --build-context runtime={template_repo.resolve()} -t ")


def config_file(tmp_path: Path) -> Path:
    """A cookiecutter config file that puts its clones somewhere of its own."""
    config = tmp_path / "platform.yaml"
    config.write_text(f'cookiecutters_dir: "{tmp_path / "clones"}"\nreplay_dir: "{tmp_path / "replay"}"\n')
    return config


def test_cookiecutter_from_a_file_url_pins_the_commit_with_the_config_files_clones(
    template_repo: Path, tmp_path: Path
) -> None:
    said = cookiecutter(
        "--config-file",
        str(config_file(tmp_path)),
        "--output-dir",
        str(tmp_path / "out"),
        f"git+{template_repo.resolve().as_uri()}",
        cwd=tmp_path,
    )

    assert (tmp_path / "clones" / template_repo.name).is_dir()
    project = tmp_path / "out" / "sandbox-agent"
    address = template_repo.resolve().as_uri()
    assert runtime_of(project) == {"git": address, "rev": head(template_repo), "subdirectory": "runtime"}
    assert len(notices(said)) == 1


def test_a_clone_of_the_templates_address_is_pinned_says_nothing_and_builds_without_a_named_context(
    template_repo: Path, tmp_path: Path
) -> None:
    # A clone of the public address, where the config file keeps its clones:
    # cookiecutter takes it by name, offline.
    clones = tmp_path / "clones"
    clones.mkdir()
    git(clones, "clone", "-q", str(template_repo), "sandbox-agent-template")
    clone = clones / "sandbox-agent-template"
    git(clone, "remote", "set-url", "origin", f"{TEMPLATE_URL}.git")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    said = cookiecutter(
        "--config-file",
        str(config_file(tmp_path)),
        "--output-dir",
        str(tmp_path / "out"),
        "sandbox-agent-template",
        cwd=elsewhere,
    )

    project = tmp_path / "out" / "sandbox-agent"
    assert runtime_of(project) == {"git": TEMPLATE_URL, "rev": head(template_repo), "subdirectory": "runtime"}
    assert notices(said) == []
    assert build_command(project) == "docker build -t registry.example.com/sandbox-agent-worker:0.1.0 ."
    assert "--build-context" not in (project / "Dockerfile").read_text()
