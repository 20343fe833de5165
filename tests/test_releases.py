"""The runtime's releases, as a platform team takes them (RELEASING.md, and a
project's docs/updating.md): built and published to a team's own index, a
render pinned by version from there; and a bump of the pin alone moves a
project from the previous release to this one, its whole suite passing."""

import difflib
import json
import re
import shutil
import tomllib
from pathlib import Path

import pytest
import yaml

from local_extensions import RELEASE_TAG, release_tag

from .baked import TEMPLATE, BakedProject, find_python, run, succeeds, tool
from .test_generated_suites import Part, run_part
from .test_provenance import RUNTIME_VERSION
from .test_updates import GIT_IDENTITY

# The runtime's line in a project's [tool.uv.sources], as the template renders it.
RUNTIME_SOURCE = re.compile(r"^sandbox-agent-runtime = \{.*\}$", re.MULTILINE)


def updating_guide(project: BakedProject) -> str:
    return re.sub(r"\s+", " ", project.text("docs/updating.md"))


def copy_of(project: BakedProject, to: Path) -> BakedProject:
    """A render of the session's, to change without changing it for other tests."""
    shutil.copytree(project.path, to, ignore=shutil.ignore_patterns(".venv", "uv.lock", "__pycache__"))
    return BakedProject(to, project.context)


@pytest.mark.slow
def test_a_project_pinned_by_version_installs_the_runtime_from_a_teams_own_index(bake, tmp_path: Path) -> None:
    """`uv build` makes the runtime's wheel and source archive; a directory
    of them is an index; a default render, its runtime line moved to that
    index and its version pinned as docs/updating.md says, locks, installs
    and imports that version from its own environment."""
    index = tmp_path / "index"
    succeeds(tool("uv"), "build", "--out-dir", str(index), cwd=TEMPLATE / "runtime")
    assert sorted(path.name for path in index.iterdir() if not path.name.startswith(".")) == [
        f"sandbox_agent_runtime-{RUNTIME_VERSION}-py3-none-any.whl",
        f"sandbox_agent_runtime-{RUNTIME_VERSION}.tar.gz",
    ]

    project = copy_of(bake({}), tmp_path / "sandbox-agent")
    guide = updating_guide(project)
    for said in (
        "uv build",
        'sandbox-agent-runtime = { index = "platform" }',
        '[[tool.uv.index]] name = "platform"',
        'format = "flat"',
        "explicit = true",
        '"sandbox-agent-runtime[...]==X.Y.Z"',
        "uv lock --upgrade-package sandbox-agent-runtime && uv sync && uv run pytest",
    ):
        assert said in guide, said
    pyproject = project.path / "pyproject.toml"
    text = pyproject.read_text()
    text = RUNTIME_SOURCE.sub('sandbox-agent-runtime = { index = "platform" }', text, count=1)
    # The dependency, its extras as they are, pinned to the version.
    text = re.sub(
        r'^(    "sandbox-agent-runtime\[[a-z0-9,]+\])"', rf'\1=={RUNTIME_VERSION}"', text, count=1, flags=re.MULTILINE
    )
    [dependency] = tomllib.loads(text)["project"]["dependencies"]
    assert dependency.endswith(f"]=={RUNTIME_VERSION}"), dependency
    text += f'\n[[tool.uv.index]]\nname = "platform"\nurl = "{index.as_uri()}"\nformat = "flat"\nexplicit = true\n'
    pyproject.write_text(text)

    succeeds(tool("uv"), "lock", "--no-python-downloads", cwd=project.path)
    locked = tomllib.loads((project.path / "uv.lock").read_text())
    [runtime] = [entry for entry in locked["package"] if entry["name"] == "sandbox-agent-runtime"]
    assert (runtime["version"], runtime["source"]) == (RUNTIME_VERSION, {"registry": str(index)})
    installed = project.install()
    assert installed.returncode == 0, installed.stderr
    imported = project.run(
        tool("uv"),
        "run",
        "--no-sync",
        "python",
        "-c",
        "import importlib.metadata, sandbox_agent_runtime; "
        "print(importlib.metadata.version('sandbox-agent-runtime'), sandbox_agent_runtime.__file__)",
    )
    assert imported.returncode == 0, imported.stderr
    version, module = imported.stdout.split()
    assert version == RUNTIME_VERSION
    assert Path(module).is_relative_to(project.path / ".venv"), module


def listed_releases(repo: Path) -> dict[str, str]:
    """The releases releases.txt lists in ``repo``'s tree: each tag and the
    commit it names (a clone may come without its tags; the list is in it)."""
    releases: dict[str, str] = {}
    for number, line in enumerate((repo / "releases.txt").read_text().splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        tag, _, commit = line.partition(" ")
        assert RELEASE_TAG.fullmatch(tag) and re.fullmatch(r"[0-9a-f]{40}", commit), (
            f"releases.txt:{number}: {line!r} is not 'vX.Y.Z <the 40 hex digits of its commit>'"
        )
        assert tag not in releases, f"releases.txt:{number}: {tag} is listed twice"
        releases[tag] = commit
    return releases


def previous_release(repo: Path) -> tuple[str, str] | None:
    """The newest release releases.txt lists whose commit HEAD contains,
    other than HEAD itself (whose release is this tree): its tag and commit."""
    if succeeds("git", "rev-parse", "--is-shallow-repository", cwd=repo).stdout.strip() == "true":
        pytest.fail(f"{repo} is a shallow clone: its history is cut (git fetch --unshallow)")
    head = succeeds("git", "rev-parse", "HEAD", cwd=repo).stdout.strip()
    before = {
        tag: commit
        for tag, commit in listed_releases(repo).items()
        if commit != head and run("git", "merge-base", "--is-ancestor", commit, "HEAD", cwd=repo).returncode == 0
    }
    tag = release_tag("\n".join(before))
    return (tag, before[tag]) if tag else None


def test_the_previous_release_is_the_newest_listed_before_head(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args: str) -> str:
        return succeeds("git", *args, cwd=repo, **GIT_IDENTITY).stdout.strip()

    def commit(message: str) -> str:
        git("commit", "-q", "--allow-empty", "-m", message)
        return git("rev-parse", "HEAD")

    git("init", "-q", "-b", "main")
    one = commit("one")
    (repo / "releases.txt").write_text("# releases\n")
    assert previous_release(repo) is None
    (repo / "releases.txt").write_text(f"v0.9.0 {one}\nv0.10.0 {one}\n")
    assert previous_release(repo) is None  # HEAD's own release
    two = commit("two")
    assert previous_release(repo) == ("v0.10.0", one)
    git("checkout", "-q", "-b", "aside", one)
    aside = commit("aside")
    git("checkout", "-q", "main")
    (repo / "releases.txt").write_text(f"v0.10.0 {one}\nv0.11.0 {two}\nv0.12.0 {aside}\n")
    commit("three")
    # v0.12.0 is not in HEAD's history.
    assert previous_release(repo) == ("v0.11.0", two)
    (repo / "releases.txt").write_text(f"v0.11.0 {two}\nv0.11.0 {one}\n")
    with pytest.raises(AssertionError, match="v0.11.0 is listed twice"):
        previous_release(repo)
    (repo / "releases.txt").write_text("v0.11 abc\n")
    with pytest.raises(AssertionError, match=r"releases.txt:1: 'v0.11 abc' is not"):
        previous_release(repo)


def test_the_release_tags_of_this_clone_name_the_commits_releases_txt_lists() -> None:
    """A tag made (or moved) without its line, or a line without its commit
    in the history, fails; a clone without the tags has the list alone."""
    listed = listed_releases(TEMPLATE)
    assert listed, "releases.txt lists no release"
    for tag, commit in listed.items():
        assert run("git", "merge-base", "--is-ancestor", commit, "HEAD", cwd=TEMPLATE).returncode == 0, (
            f"releases.txt: {tag}'s commit {commit} is not in HEAD's history"
        )
    for tag in succeeds("git", "tag", "--list", "v*", cwd=TEMPLATE).stdout.split():
        if not RELEASE_TAG.fullmatch(tag):
            continue
        named = succeeds("git", "rev-parse", f"{tag}^{{commit}}", cwd=TEMPLATE).stdout.strip()
        assert listed.get(tag) == named, f"the tag {tag} names {named}; releases.txt says {listed.get(tag)}"


@pytest.mark.slow
def test_a_project_of_the_previous_release_passes_its_whole_suite_after_its_runtime_pin_alone_moves(
    tmp_path: Path,
) -> None:
    """As docs/updating.md says: a project copied from the previous release
    (by Copier, which pins that release's commit), its runtime's line moved
    to this tree and `uv lock --upgrade-package sandbox-agent-runtime`, runs
    its whole suite, its recorded histories replayed, and it passes."""
    previous = previous_release(TEMPLATE)
    assert previous is not None, "releases.txt lists no release before HEAD"
    _, previous_commit = previous
    project_path = tmp_path / "sandbox-agent"
    succeeds(
        tool("copier"),
        "copy",
        "--trust",
        "--defaults",
        "--vcs-ref",
        previous_commit,
        str(TEMPLATE),
        str(project_path),
        cwd=tmp_path,
        **GIT_IDENTITY,
    )
    answers = yaml.safe_load((project_path / ".copier-answers.yml").read_text())
    project = BakedProject(project_path, {k: v for k, v in answers.items() if not k.startswith("_")})
    python = find_python(str(project.context["python_version"]))
    uv_python = {"UV_PYTHON": python} if python else {}
    # The project as its team has it: locked at the release it was made from.
    succeeds(tool("uv"), "lock", "--no-python-downloads", cwd=project.path, **uv_python)

    pyproject = project.path / "pyproject.toml"
    before = pyproject.read_text()
    here = f"sandbox-agent-runtime = {{ path = {json.dumps(str(TEMPLATE / 'runtime'))} }}"
    after = RUNTIME_SOURCE.sub(lambda _: here, before, count=1)
    changed = list(difflib.unified_diff(before.splitlines(), after.splitlines(), n=0))[2:]
    assert [line[0] for line in changed] == ["@", "-", "+"], changed
    pyproject.write_text(after)
    moved = run(
        tool("uv"),
        "lock",
        "--no-python-downloads",
        "--upgrade-package",
        "sandbox-agent-runtime",
        cwd=project.path,
        **uv_python,
    )
    assert moved.returncode == 0, moved.stderr
    installed = project.install()
    assert installed.returncode == 0, installed.stderr

    # Its whole suite as `uv run pytest` selects it, with the tests of its
    # commands as processes (what a render calls of the runtime by name: its
    # console scripts), every test run, its recorded histories replayed among
    # them. (The long, fault and monitoring tests exercise the runtime, not
    # what a render calls of it; the runtime's own suite runs them.)
    selection = ("-m", "not live and not long and not faults and not monitoring")
    run_part(
        project,
        Part(selection, ("test_histories", "test_agent_workflow", "test_commands")),
        tmp_path / "report.xml",
    )
