"""Each combination's own checks pass, offline, with no API key: its test suite,
its type checker (mypy, strict) and its pre-commit hooks, after one install."""

import xml.etree.ElementTree as ET

import pytest

from .baked import BakedProject, find_python, tool

# Every combination runs its long-run tests (hundreds of steps through a chain
# of runs, a minute or two): the chain carries each backend's sandbox session
# and names. The process tests (worker and starter as real processes, the
# exit-status stress test, two to three minutes a project) run for the default
# local project and for one whose remote backends the stand-in worker replaces.
WITH_PROCESS_TEST = {"local-defaults", "daytona-plus-local-and-e2b-two-secrets"}
# Sandbox affinity with two worker processes as two hosts under load (seconds)
# runs for the Docker backend as well.
WITH_AFFINITY_PROCESS_TEST = {"docker-defaults"}
# The fault tests (Temporal restarted and cut off, a model storm, hostile
# commands; two to three minutes a project) run for the local and the Docker
# backend: the faults are the service's, and the contained sandbox Docker's.
WITH_FAULT_TESTS = {"local-defaults", "docker-defaults"}


@pytest.fixture(scope="session")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One mypy cache for every generated project a test process checks.
    Checking the SDKs' ~1,500 modules takes ~40 s and gives the same result in
    every project; mypy checks each cached module against its source's hash,
    so a shared cache changes how long mypy takes, never what it reports."""
    return str(tmp_path_factory.mktemp("mypy-cache"))


@pytest.mark.slow
def test_generated_suite_types_and_hooks_pass(request, mypy_cache: str, tmp_path, project: BakedProject) -> None:
    version = str(project.context["python_version"])
    if find_python(version) is None:
        pytest.skip(f"no Python {version} on this machine to install the project with")

    installed = project.install()
    assert installed.returncode == 0, installed.stderr

    # What a plain `uv run pytest` runs, plus the long-run tests; where chosen,
    # the process tests too, with the long-run tests on their own afterwards,
    # as the generated CI runs them (next to the process tests, their load
    # would starve the process tests' waits on a 2-core machine).
    combination = request.node.callspec.id
    if combination in WITH_PROCESS_TEST:
        suites = [["-m", "not live and not long and not faults"], ["-m", "long"]]
    else:
        suites = [["-m", "not live and not process and not faults"]]
    if combination in WITH_AFFINITY_PROCESS_TEST:
        suites.append(["-m", "process", "tests/test_affinity_processes.py"])
    if combination in WITH_FAULT_TESTS:
        suites.append(["-m", "faults"])
    ran: list[ET.Element] = []
    for number, selection in enumerate(suites):
        report = tmp_path / f"report-{number}.xml"
        tests = project.run_tests(
            *selection, f"--junitxml={report}", OPENAI_API_KEY="", OPENAI_BASE_URL="http://127.0.0.1:9"
        )
        assert tests.returncode == 0, tests.stdout + tests.stderr
        assert " passed" in tests.stdout and "failed" not in tests.stdout
        ran += ET.parse(report).iter("testcase")

    def assert_ran(module: str) -> None:
        cases = [case for case in ran if case.get("classname") == f"tests.{module}"]
        skips = [skip.get("message") for case in cases for skip in case.iter("skipped")]
        assert cases and not skips, skips or f"tests/{module}.py ran no test"

    # The long-run tests ran, none skipped.
    assert_ran("test_long_runs")
    if combination in WITH_FAULT_TESTS:
        # Faults injected into real processes, and the worker's environment
        # out of reach of a process of its user.
        assert_ran("test_faults")
        assert_ran("test_worker_secrets")
    # A deploy while runs are in flight, versioned and not; the agent's own tool.
    assert_ran("test_versioning")
    assert_ran("test_tools")
    if project.context["approval"] != "none":
        # A person approves: in-process, and with the starter on a terminal.
        assert_ran("test_approvals")
    if project.derived.host_bound_backends:
        # Sandbox affinity with workers as hosts in one process, and where
        # chosen as processes (in their own mount namespaces: .ci/run is root).
        assert_ran("test_affinity")
        if combination in WITH_PROCESS_TEST | WITH_AFFINITY_PROCESS_TEST:
            assert_ran("test_affinity_processes")
    if "docker" in project.derived.backends:
        # The Docker tests ran on a real engine, none skipped (.ci/run provides one).
        assert_ran("test_docker")

    types = project.run(tool("uv"), "run", "--no-sync", "mypy", "src", "tests", MYPY_CACHE_DIR=mypy_cache)
    assert types.returncode == 0, types.stdout + types.stderr
    assert types.stdout.startswith("Success: no issues found")

    # The hooks run on a repository's tracked files, as they would on a commit.
    for command in (["git", "init", "-q"], ["git", "add", "-A"]):
        assert project.run(*command).returncode == 0
    hooks = project.run(
        tool("uv"),
        "run",
        "--no-sync",
        "pre-commit",
        "run",
        "--all-files",
        PRE_COMMIT_HOME=str(project.path / ".git" / "pre-commit"),
        MYPY_CACHE_DIR=mypy_cache,
    )
    assert hooks.returncode == 0, hooks.stdout + hooks.stderr
    for hook in ("ruff check", "ruff format", "mypy"):
        assert any(line.startswith(hook) and line.endswith("Passed") for line in hooks.stdout.splitlines()), (
            hooks.stdout
        )
