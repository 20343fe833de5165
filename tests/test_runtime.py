"""The runtime (runtime/, the sandbox-agent-runtime package every project
depends on) is plain Python, checked once here rather than in every render: no
Jinja, ruff-clean with its own settings, strictly typed with every backend's
SDK installed (each backend's module type-checks against its SDK; its tests
too), and its own test suite (runtime/tests/) passes, against two stand-in
projects whose packages are renders': a default one, and one with every
remote backend and approvals (REMOTE_ANSWERS)."""

import fcntl
import os
import re
import shutil
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import pytest

from .baked import TEMPLATE, BakedProject, one_mypy_at_a_time, run, tool

RUNTIME = TEMPLATE / "runtime"
# The stand-ins the runtime's suite runs against (runtime/tests/conftest.py),
# each a render's package with its console scripts: by its directory, the
# answers it was rendered with and its package.
REMOTE_ANSWERS = {
    "project_name": "Remote Agent",
    "sandbox_backend": "daytona",
    "additional_sandbox_backends": "local,e2b,modal,runloop,vercel,blaxel,cloudflare",
    "approval": "commands_and_writes",
    "sandbox_secret_env_vars": "GITHUB_TOKEN,NPM_TOKEN",
    # Vercel ends a sandbox after five hours at most.
    "workflow_execution_timeout_seconds": 18000,
}
STAND_INS = {
    "project": ({}, "sandbox_agent"),
    "remote_project": (REMOTE_ANSWERS, "remote_agent"),
}
# What working in runtime/ leaves there, which git ignores.
LOCAL_STATE = {".venv", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
JINJA = re.compile(r"\{%|\{\{ *cookiecutter|cookiecutter\.")


def test_the_runtime_holds_no_jinja() -> None:
    found = [
        str(path.relative_to(RUNTIME))
        for path in RUNTIME.rglob("*")
        if path.is_file() and not LOCAL_STATE.intersection(path.parts)
        if JINJA.search(path.read_text(errors="replace"))
    ]
    assert not found, found


def test_the_runtime_is_ruff_clean() -> None:
    lint = run(tool("ruff"), "check", "--no-cache", ".", cwd=RUNTIME)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    fmt = run(tool("ruff"), "format", "--check", "--no-cache", ".", cwd=RUNTIME)
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


@pytest.fixture(scope="session")
def runtime_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the runtime with every backend's SDK and both stand-ins
    installed (the checkout keeps no virtualenv or lock of the runtime's),
    made once for every test process of the session (pytest-xdist's) and
    shared by the type check and each part of the suite: the parts only read
    it, each its own pytest session with its own temp dirs."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    copy = shared / "runtime"
    with open(shared / "runtime.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (copy / ".venv").is_dir():
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(RUNTIME, copy, ignore=shutil.ignore_patterns(*LOCAL_STATE, "uv.lock"))
            installed = run(tool("uv"), "sync", "--all-packages", "--all-extras", "--no-python-downloads", cwd=copy)
            if installed.returncode != 0:
                shutil.rmtree(copy / ".venv", ignore_errors=True)
            assert installed.returncode == 0, installed.stderr
    return copy


@pytest.mark.slow
def test_the_runtime_type_checks_strictly_with_every_backend(runtime_copy: Path, mypy_cache: str) -> None:
    copy = runtime_copy
    # Its tests too, and the stand-in project they import (mypy_path); with
    # the cache of the renders' checks (the SDKs' modules, the runtime's own
    # as a render installs it), which the suite runs before this one.
    with one_mypy_at_a_time(mypy_cache):
        typed = run(tool("uv"), "run", "--no-sync", "mypy", "src", "tests", cwd=copy, MYPY_CACHE_DIR=mypy_cache)
    assert typed.returncode == 0, typed.stdout + typed.stderr
    assert "Success: no issues found" in typed.stdout


@pytest.mark.parametrize("stand_in", STAND_INS)
def test_the_runtime_tests_stand_in_projects_are_renders(bake, stand_in: str) -> None:
    """The projects the runtime's suite runs against have renders' packages,
    byte for byte, and their console scripts: what the runtime's tests
    prove, they prove of the service a team gets."""
    answers, name = STAND_INS[stand_in]
    rendered: BakedProject = bake(answers)
    package = rendered.path / "src" / name
    theirs = {p.relative_to(package): p.read_bytes() for p in sorted(package.rglob("*.py"))}
    ours_root = RUNTIME / "tests" / stand_in / "src" / name
    ours = {p.relative_to(ours_root): p.read_bytes() for p in sorted(ours_root.rglob("*.py"))}
    assert sorted(ours) == sorted(theirs), f"copy src/{name} of a render with {answers} there"
    differ = [str(path) for path in theirs if ours[path] != theirs[path]]
    assert not differ, f"{differ} differ from a render's with {answers}: copy them from one"
    scripts = tomllib.loads((rendered.path / "pyproject.toml").read_text())["project"]["scripts"]
    stand_in_file = RUNTIME / "tests" / stand_in / "pyproject.toml"
    assert tomllib.loads(stand_in_file.read_text())["project"]["scripts"] == scripts


# One run of the runtime's suite: the stand-in it runs against and its
# pytest arguments.
class Selection(NamedTuple):
    stand_in: str
    arguments: tuple[str, ...]


# The runtime's suite in parts, longest first (tests/conftest.py starts them
# before any other test), the selections of a part side by side: against the
# default stand-in, the default selection with the process tests, the long
# tests and the fault tests; against the remote one, all but the long tests,
# and the long tests.
SUITE_PARTS = {
    # The tests in runtime/tests/remote/ and the modules that run against
    # both stand-ins (conftest.py's BOTH), against the remote stand-in, the
    # long tests apart; beside them the fault tests, four at a time: they
    # mostly wait out their faults (a minute's storm of 429s, a clone at its
    # time limit, a network cut for 30 s), using a third of a core between
    # them, which would otherwise leave a core idle for their two minutes.
    "remote-and-faults": (
        Selection("remote", ("-m", "not live and not monitoring and not long")),
        Selection("default", ("-m", "faults", "-n", "4")),
    ),
    "long": (Selection("default", ("-m", "long")),),
    "default-and-processes": (Selection("default", ("-m", "not live and not long and not faults and not monitoring")),),
    "remote-long": (Selection("remote", ("-m", "long")),),
}


def run_selection(copy: Path, selection: Selection) -> None:
    """Run ``selection`` of the runtime's suite in ``copy``: it passes, and
    skips nothing."""
    tests = run(
        tool("uv"),
        "run",
        "--no-sync",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        *selection.arguments,
        cwd=copy,
        timeout=1500,
        OPENAI_API_KEY="",
        OPENAI_BASE_URL="http://127.0.0.1:9",
        SANDBOX_AGENT_STAND_IN=selection.stand_in,
        # The copy is outside git: its surface is compared with the last
        # release's in the template's repository (runtime/tests/test_surface.py).
        SANDBOX_AGENT_TEMPLATE_GIT=str(TEMPLATE),
    )
    said = f"{selection}:\n{tests.stdout[-20000:]}{tests.stderr[-5000:]}"
    assert tests.returncode == 0, said
    assert " passed" in tests.stdout and " skipped" not in tests.stdout, said


@pytest.mark.slow
@pytest.mark.parametrize("part", SUITE_PARTS)
def test_the_runtimes_own_suite_passes(runtime_copy: Path, part: str) -> None:
    selections = SUITE_PARTS[part]
    with ThreadPoolExecutor(len(selections)) as side_by_side:
        for done in [side_by_side.submit(run_selection, runtime_copy, each) for each in selections]:
            done.result()
