"""Each combination's own checks pass, offline, with no API key: its test suite,
its type checker (mypy, strict) and its pre-commit hooks, after one install.

Not every combination runs all of its suite: each guarantee is proven where
the answers change what it rests on (the README's "What the template's tests
prove" says which combination proves what). A chosen test module that did not
run, or skipped a test, fails the combination."""

import json
import re
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import pytest

from .baked import TEMPLATE, BakedProject, find_python, one_mypy_at_a_time, tool
from .combinations import COMBINATIONS

# The default selection of a generated suite (`uv run pytest`).
DEFAULT = "not live and not process and not long and not faults and not monitoring"
# With the long tests (Docker's run that continues as new in its container).
WITH_LONG = "not live and not process and not faults and not monitoring"
# With the process tests instead: the console scripts, the health endpoint and
# workers as real processes. The long tests then run on their own, as the
# generated CI runs them: next to the process tests, their load would starve
# the process tests' waits.
WITH_PROCESSES = "not live and not long and not faults and not monitoring"
PROCESS_MODULES = ("test_commands", "test_health")


class Part(NamedTuple):
    """One run of a generated suite: its pytest arguments, and the test
    modules it must have run, none of their tests skipped."""

    arguments: tuple[str, ...]
    modules: tuple[str, ...]


def part(selection: str, *modules: str, only: bool = False, processes: str | None = None) -> Part:
    """``selection`` of the suite; ``only``: of ``modules`` alone; ``processes``:
    how many test processes (pytest-xdist's ``-n``), if not the suite's own."""
    files = tuple(f"tests/{module}.py" for module in modules) if only else ()
    workers = ("-n", processes) if processes else ()
    return Part(("-m", selection, *workers, *files), modules)


# A run end to end under the combination's names, the answers' own
# configuration, the recorded histories replayed under its provider's name.
SMOKE = ("test_agent_workflow", "test_agent", "test_configuration", "test_histories", "test_layout")


def smoke(*modules: str) -> Part:
    """A few modules in one test process."""
    return part(DEFAULT, *SMOKE, *modules, only=True, processes="0")


# What each combination runs: a list of phases, one after the other; the
# parts of a phase run side by side (the fault tests mostly wait out their
# faults). Longest first. What a run does, whatever its backend, the
# runtime's suite proves once (tests/test_runtime.py); a render runs what
# its answers change.
PHASES: dict[str, list[list[Part]]] = {
    # The local backend's default selection; the console scripts, the health
    # endpoint, two worker processes as two hosts and several sized together,
    # as processes; a tool of its own that fails; a blocked event loop; its
    # dashboard and alerts.
    "local-defaults": [
        [
            part(
                WITH_PROCESSES,
                *PROCESS_MODULES,
                "test_affinity_processes",
                "test_tools",
                "test_capacity_workers",
            )
        ],
        [
            part("long", "test_health"),
            part("faults", "test_tools"),
            part("monitoring", "test_monitoring"),
        ],
    ],
    # Docker's module and its long run on a real engine (the rest of its
    # suite takes local-defaults' code paths, a host-bound sandbox); two
    # worker processes as two hosts with their own engines; hostile commands
    # and an engine restart.
    "docker-defaults": [
        [part(WITH_LONG, *SMOKE, "test_docker", only=True)],
        [part("process", "test_affinity_processes", only=True)],
        [part("faults", "test_docker", only=True)],
    ],
    # Three backends in one worker with approvals (the runtime's remote
    # stand-in proves routing, approvals and each backend's module once):
    # its console scripts as processes, the stand-in worker in place of the
    # remote backends; a blocked event loop; the host and approval panels
    # and alerts.
    "daytona-plus-local-and-e2b-two-secrets": [
        [smoke()],
        [part("process", *PROCESS_MODULES, only=True)],
        [
            part("long", "test_health", only=True),
            part("monitoring", "test_monitoring", only=True),
        ],
    ],
    # A remote backend's dashboard and alerts, with no host panel or alert.
    "e2b-defaults": [
        [smoke()],
        [part("monitoring", "test_monitoring", only=True)],
    ],
    # Docker beside a remote backend, with approvals of file edits.
    "e2b-plus-docker-short-runs-writes-approved": [
        [part(DEFAULT, *SMOKE, "test_docker", only=True)],
    ],
    # Each backend's render, type-checked and linted, and a run end to end
    # under its names (each backend's module runs once, in the runtime's
    # suite against its remote stand-in); a service of remote backends alone
    # (Daytona) its run moved to another worker with its sandbox.
    "daytona-defaults": [[smoke("test_remote_sandboxes")]],
    "modal-defaults": [[smoke()]],
    "runloop-defaults": [[smoke()]],
    "vercel-defaults": [[smoke()]],
    "blaxel-defaults": [[smoke()]],
    "cloudflare-defaults": [[smoke()]],
    # Odd names and odd answers: they change what renders, not how it runs.
    "local-custom-names-plus-daytona-py312": [[smoke()]],
    "daytona-custom-provider-one-secret-py313": [[smoke()]],
    # Two of them in one worker; runs of two hours (the sandboxes' default
    # lifetimes follow them).
    "runloop-plus-modal-two-hour-runs": [[smoke()]],
}
# Each combination a group of its own (pytest-xdist's --dist loadgroup, in
# pyproject.toml): a test process takes the next group in this order once it
# is done with one, so the longest ones start first, on separate cores.
ORDERED = [
    pytest.param(*param.values, id=param.id, marks=[*param.marks, pytest.mark.xdist_group(str(param.id))])
    for param in sorted(COMBINATIONS, key=lambda param: list(PHASES).index(str(param.id)))
]


def test_every_combination_runs_a_part_of_its_suite() -> None:
    assert sorted(PHASES) == sorted(str(param.id) for param in COMBINATIONS)


def run_part(project: BakedProject, part: Part, report: Path) -> None:
    """Run ``part`` of the project's suite; it passes, and ran each of its
    modules with no test skipped (as the junit report of the run says)."""
    tests = project.run_tests(
        *part.arguments, f"--junitxml={report}", OPENAI_API_KEY="", OPENAI_BASE_URL="http://127.0.0.1:9"
    )
    said = f"{' '.join(part.arguments)}:\n{tests.stdout}{tests.stderr}"
    assert tests.returncode == 0, said
    suite = ET.parse(report).getroot().find("testsuite")
    assert suite is not None, said
    assert int(suite.get("tests", "0")) > 0, said
    for outcome in ("failures", "errors", "skipped"):
        assert suite.get(outcome) == "0", f"{outcome}: {suite.get(outcome)}, {said}"
    ran = {str(case.get("classname")).removeprefix("tests.") for case in suite.iter("testcase")}
    for module in part.modules:
        assert module in ran, f"tests/{module}.py ran no test, {said}"


@pytest.mark.slow
@pytest.mark.parametrize("project", ORDERED, indirect=True)
def test_generated_suite_types_and_hooks_pass(request, mypy_cache: str, tmp_path, project: BakedProject) -> None:
    version = str(project.context["python_version"])
    assert find_python(version), f"no Python {version} on this machine to install the project with"

    installed = project.install()
    assert installed.returncode == 0, installed.stderr

    for number, phase in enumerate(PHASES[request.node.callspec.id]):
        with ThreadPoolExecutor(len(phase)) as side_by_side:
            runs = [
                side_by_side.submit(run_part, project, part, tmp_path / f"report-{number}-{each}.xml")
                for each, part in enumerate(phase)
            ]
            for run in runs:
                run.result()

    # The hooks run on a repository's tracked files, as they would on a
    # commit: ruff, ruff's format check and mypy (strict) on src and tests.
    for command in (["git", "init", "-q"], ["git", "add", "-A"]):
        assert project.run(*command).returncode == 0
    with one_mypy_at_a_time(mypy_cache):
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


# Models a new user may well pick: a GPT-5 model whose reasoning efforts the
# SDK knows, variants whose efforts it does not (verbosity alone), a chat
# alias that takes no reasoning at all, and a model of another family.
MODELS = ("gpt-5.6-luna", "gpt-5-mini", "gpt-5-nano", "gpt-5-codex", "gpt-5-chat-latest", "gpt-4.1")


@pytest.mark.slow
def test_the_model_settings_test_passes_whatever_the_model(bake) -> None:
    """Each model's render runs its own test of the agent's settings, in one
    installed render's environment with the model's package first on the
    path (only agent.py and its test differ between them)."""
    installed: BakedProject = bake({"model_name": MODELS[0]})
    done = installed.install()
    assert done.returncode == 0, done.stderr
    python = str(installed.path / ".venv" / "bin" / "python")
    for model in MODELS:
        render: BakedProject = bake({"model_name": model})
        assert f"MODEL = {json.dumps(model)}" in render.text(f"src/{render.context['package_name']}/agent.py")
        tests = render.run(
            python,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-n",
            "0",
            "tests/test_agent.py::test_the_agents_settings_are_the_sdks_defaults_for_its_model",
            PYTHONPATH=str(render.path / "src"),
        )
        assert tests.returncode == 0 and "1 passed" in tests.stdout, f"{model}:\n{tests.stdout}{tests.stderr}"


@pytest.mark.slow
def test_the_templates_docs_count_a_default_projects_tests(bake) -> None:
    """docs/benchmarks.md gives the number of tests a default render runs
    (its default selection, of all it has), as `--collect-only` counts them."""
    project: BakedProject = bake({})
    installed = project.install()
    assert installed.returncode == 0, installed.stderr
    collected = project.run_tests("--collect-only", "-n", "0")
    assert collected.returncode == 0, collected.stdout + collected.stderr
    counted = re.search(r"^(\d+)/(\d+) tests collected", collected.stdout, re.MULTILINE)
    assert counted, collected.stdout
    selected, every = counted.groups()
    said = re.sub(r"\s+", " ", (TEMPLATE / "docs" / "benchmarks.md").read_text())
    assert f"**{selected} tests** in its default selection, of {every}," in said
