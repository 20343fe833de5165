"""A run reads top to bottom: following a recorded run from the workflow's
``run_agent`` (its history replayed, every call traced:
sandbox_agent_runtime.testing.run_path), no module calls back up into a
module above it in the runtime's layers (pyproject.toml's
``[tool.importlinter]``, which tests/test_layers.py keeps), and each of the
run's phases (workflow.py and phases/: begin, prompting, deciding, between,
interruptions, ending) is entered from at most two modules. The modules below
them (the sandbox client, the workspace's steps, hosts, records such as the
run's progress) are called from any phase, and call none back.

The histories (tests/histories/) are the ones a default render ships (the
template's ``tests/histories/``, rendered): a chain of two runs, the first
continued as new, and a conversation of two prompts, released and restored
between them."""

import asyncio
import json
from collections import defaultdict
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from sandbox_agent_runtime.object_store import data_converter
from sandbox_agent_runtime.testing import project
from sandbox_agent_runtime.testing.run_path import PHASES, Entry, Layers, traced
from sandbox_agent_runtime.testing.support import SETTINGS, sandboxes_for_tests
from sandbox_agent_runtime.worker import agents_plugin, workflow_runner

RUNTIME = Path(__file__).resolve().parents[1]
HISTORIES = RUNTIME / "tests" / "histories"
RECORDED = ["scripted-chain.run-1", "scripted-chain.run-2", "scripted-chain.conversation"]
MOST_CALLERS = 2


def path_of(name: str) -> list[Entry]:
    """The entries of the recorded run ``name``, its history replayed as
    the worker would replay it (and as a project's test_histories.py does)."""
    path = HISTORIES / f"{name}.json"
    history = WorkflowHistory.from_json(name.partition(".")[0], json.loads(path.read_text()))

    async def replay() -> None:
        replayer = Replayer(
            workflows=[project().workflow],
            workflow_runner=workflow_runner(),
            plugins=[agents_plugin(SETTINGS, sandboxes=sandboxes_for_tests())],
            data_converter=data_converter(None),
        )
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert result.replay_failure is None, f"{name}: {result.replay_failure}"

    return traced(replay, project().package)


def callers(entries: list[Entry]) -> dict[str, set[str]]:
    """The modules each module is entered from."""
    found: dict[str, set[str]] = defaultdict(set)
    for entry in entries:
        found[entry.called].add(entry.calling)
    return found


@pytest.mark.parametrize("name", RECORDED)
def test_a_recorded_run_never_climbs_back_into_a_module_above(name: str) -> None:
    entries = path_of(name)
    # The path was followed: the phases, and the modules below them.
    assert {"phases.begin", "phases.prompting", "chain", "workspace.steps"} <= {
        entry.called for entry in entries
    }
    climbs = Layers(RUNTIME / "pyproject.toml").climbs(entries)
    assert climbs == [], [f"{e.calling} > {e.called}.{e.function}" for e in climbs]


@pytest.mark.parametrize("name", RECORDED)
def test_each_phase_of_a_recorded_run_is_entered_from_at_most_two_modules(name: str) -> None:
    entered = callers(path_of(name))
    crowded = {
        module: sorted(entered[module])
        for module in PHASES
        if len(entered.get(module, ())) > MOST_CALLERS
    }
    assert crowded == {}, crowded
    assert "phases.prompting" in entered


def test_a_coroutine_closed_under_another_modules_frame_is_no_call_from_it() -> None:
    """The garbage collector closes a replayed run's coroutines whenever it
    runs, under whatever frame runs then: closing (or throwing into) a
    suspended coroutine is not a call into its module from that frame."""
    workflow: dict[str, object] = {"__name__": "sandbox_agent_runtime.workflow", "asyncio": asyncio}
    exec(
        "async def run_agent():\n    await _run()\n"
        "async def _run():\n    await asyncio.sleep(3600)\n",
        workflow,
    )
    prompting: dict[str, object] = {"__name__": "sandbox_agent_runtime.phases.prompting"}
    exec("def close(run):\n    run.close()\n", prompting)

    async def replay() -> None:
        run = workflow["run_agent"]()  # type: ignore[operator]
        run.send(None)
        prompting["close"](run)  # type: ignore[operator]

    entries = traced(replay, project().package)
    assert [e for e in entries if e.called == "workflow"] == [], entries
