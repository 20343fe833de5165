"""Long runs and large outputs stay inside Temporal's limits.

A run continues as new before its history grows large, so a run of any
length the turn budget allows finishes: in the same workspace, with the same
conversation, through runs that each stay far below Temporal's 10 MB warning.
A command that prints more than one payload may hold is cut, and the run goes
on. These tests take about a minute (``-m long``; CI runs them).

It runs against both stand-ins (conftest.py): the default one (the local
backend, its sandbox on the worker's host: every sandbox operation of the
chain goes to that host's queue) and the remote one (a Daytona sandbox that
any worker reaches, with approvals: its operations go to the task queue, and
the agent's run resumes the sandbox once more after each approved command).
"""

import asyncio
import uuid
from collections.abc import Sequence
from datetime import timedelta
from functools import partial

import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import CancelledError
from temporalio.worker import Replayer

from sandbox_agent_runtime.affinity import host_queue
from sandbox_agent_runtime.backends import sandbox_backends
from sandbox_agent_runtime.run_request import RunRequest
from sandbox_agent_runtime.shared import LONGEST_OUTPUT
from sandbox_agent_runtime.starter import attach
from sandbox_agent_runtime.testing import project_service
from sandbox_agent_runtime.testing.long_workflow import (
    BudgetedSandboxAgentWorkflow,
    LongSandboxAgentWorkflow,
    start_long,
)
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server
from sandbox_agent_runtime.testing.support import (
    SETTINGS,
    STARTER_SETTINGS,
    RunOfChain,
    activities,
    activities_in,
    approvals_in,
    failure_of,
    openai_model,
    running_worker,
    runs_of_chain,
    sandboxes_for_tests,
)
from sandbox_agent_runtime.worker import agents_plugin, workflow_runner

pytestmark = pytest.mark.long

# A worker here runs hundreds of steps: longer than a test's usual wait
# (RUN_TIME_LIMIT, support.py) before it gives up on its runs.
long_running_worker = partial(running_worker, time_limit=timedelta(minutes=8))

# About 1.5 kB of output, like a typical command's.
STEP = "seq 1 400"
# About 60 kB: a chain of a few runs in a few dozen steps.
BIG_STEP = "head -c 60000 /dev/zero | tr '\\0' x"
TEN_MB = 10_000_000


def operations(runs: Sequence[RunOfChain], operation: str) -> int:
    """How many times the chain scheduled one sandbox operation."""
    name = f"{project_service().sandbox_provider}-{operation}"
    return [a.name for run in runs for a in activities_in(run.history)].count(name)


# The tests that share it run in one test process (pytest-xdist's
# --dist loadgroup, pyproject.toml), which makes the chain once.
ONE_CHAIN = pytest.mark.xdist_group("long_chain")


@pytest.fixture(scope="session")
async def long_chain(temporal_client: Client) -> tuple[str, list[RunOfChain]]:
    """A 300-step run: the first step writes a file, the last reads it."""
    commands = ["echo written-at-step-1 > first.txt", *[STEP] * 298, "cat first.txt"]
    async with long_running_worker(
        temporal_client,
        ScriptedModel(commands),
        workflows=[LongSandboxAgentWorkflow],
        host="long-runs-host",
    ) as (client, _):
        handle = await start_long(client, "Run the 300 commands.")
        answer = (await handle.result()).answer
        assert handle.first_execution_run_id is not None
        runs = await runs_of_chain(client, handle.id, handle.first_execution_run_id)
    return answer, runs


@ONE_CHAIN
async def test_a_300_step_run_finishes_in_one_workspace_through_runs_under_10_mb(
    long_chain: tuple[str, list[RunOfChain]],
) -> None:
    answer, runs = long_chain

    # The last step saw the file the first step wrote...
    assert "written-at-step-1" in answer
    # ...through a chain of runs, none of them near Temporal's limits...
    assert len(runs) > 1
    assert max(run.history_bytes for run in runs) < TEN_MB
    # ...that created one sandbox, resumed it in each later run and removed it at the end.
    assert operations(runs, "sandbox_client_create") == 1
    if project_service().approvals:
        # (The agent's run also resumes its sandbox after each approved command.)
        assert operations(runs, "sandbox_client_resume") == len(runs) - 1 + approvals_in(runs)
    else:
        assert operations(runs, "sandbox_client_resume") == len(runs) - 1
    assert operations(runs, "sandbox_client_delete") == 1
    # Every run sent the sandbox's operations where the first run's sandbox
    # lives: for its host when it lives on the worker's host (affinity.py).
    queues = {
        step.queue
        for run in runs
        for step in activities_in(run.history)
        if step.is_sandbox_operation
    }
    service = project_service()
    bound = sandbox_backends()[service.sandbox_provider].host_bound(SETTINGS)
    assert queues == {host_queue("long-runs-host") if bound else service.task_queue}


@ONE_CHAIN
async def test_every_run_of_a_chain_replays_without_nondeterminism(
    long_chain: tuple[str, list[RunOfChain]],
) -> None:
    _, runs = long_chain
    # The worker's workflow sandbox (workflow_runner()), which passes the
    # runtime through, its tests' workflows included.
    replayer = Replayer(
        workflows=[LongSandboxAgentWorkflow],
        plugins=[agents_plugin(SETTINGS, sandboxes=sandboxes_for_tests())],
        workflow_runner=workflow_runner(),
    )
    for run in runs:
        replayed = await replayer.replay_workflow(run.history, raise_on_replay_failure=False)
        assert replayed.replay_failure is None, run.run_id


async def test_the_turn_budget_counts_across_the_chain(temporal_client: Client) -> None:
    endless = ScriptedModel([BIG_STEP] * 200)
    async with long_running_worker(
        temporal_client, endless, workflows=[BudgetedSandboxAgentWorkflow]
    ) as (client, _):
        handle = await client.start_workflow(
            BudgetedSandboxAgentWorkflow.run,
            RunRequest("Keep going."),
            id=f"{project_service().task_queue}-budget-{uuid.uuid4()}",
            task_queue=project_service().task_queue,
            execution_timeout=project_service().workflow_execution_timeout,
        )
        assert handle.first_execution_run_id is not None
        reason = await failure_of(handle)
        runs = await runs_of_chain(client, handle.id, handle.first_execution_run_id)

    assert reason == "The agent could not finish: Max turns (30) exceeded"
    assert len(runs) > 1
    assert len(endless.input_sizes) == 30
    assert operations(runs, "sandbox_client_delete") == 1


async def test_a_5_mb_command_output_is_cut_and_the_run_completes(temporal_client: Client) -> None:
    model = ScriptedModel(["head -c 5000000 /dev/zero | tr '\\0' x"])
    async with long_running_worker(
        temporal_client, model, workflows=[LongSandboxAgentWorkflow]
    ) as (
        client,
        _,
    ):
        handle = await start_long(client, "Print 5 MB.")
        answer = (await handle.result()).answer

    cut = f"bytes of this command output were left out here to stay within {LONGEST_OUTPUT:,}"
    assert cut in answer
    assert len(answer) < 2 * LONGEST_OUTPUT
    assert "head -c" in answer and "grep" in answer  # how to read the rest


async def test_a_compaction_item_from_the_model_shrinks_what_the_next_call_carries(
    temporal_client: Client,
) -> None:
    model = ScriptedModel([STEP] * 20, compact_at=10)
    async with long_running_worker(
        temporal_client, model, workflows=[LongSandboxAgentWorkflow]
    ) as (
        client,
        _,
    ):
        handle = await start_long(client, "Run 20 commands.")
        await handle.result()

    # Call 11 (index 10) answered with the compaction; call 12 carries only
    # what came after it, while the conversation had kept growing until then.
    sizes = model.input_sizes
    assert sizes[10] > sizes[9] > sizes[1]
    assert sizes[11] < sizes[10] / 4


# What the model's endpoint keeps of a conversation, whatever the sandbox
# (the approved commands of a chain: the 300-step chain above).
@pytest.mark.default_stand_in
async def test_a_chain_runs_against_a_stateless_openai_compatible_endpoint(
    temporal_client: Client,
) -> None:
    # The scripted server keeps nothing between requests: every request
    # carries the conversation, through every run of the chain.
    # (20 kB a step: the conversation never reaches CONVERSATION_LIMIT, where
    # leaving out early items would lose this server its count of the steps.)
    step = "head -c 20000 /dev/zero | tr '\\0' x"
    commands = ["echo from-the-first-run > first.txt", *[step] * 40, "cat first.txt"]
    with scripted_openai_server(commands) as server:
        async with long_running_worker(
            temporal_client, openai_model(server.url), workflows=[LongSandboxAgentWorkflow]
        ) as (client, _):
            handle = await start_long(client, "Run the commands.")
            answer = (await handle.result()).answer
            assert handle.first_execution_run_id is not None
            runs = await runs_of_chain(client, handle.id, handle.first_execution_run_id)

    assert "from-the-first-run" in answer
    assert len(runs) > 1


async def test_cancelling_a_chain_cancels_its_latest_run_and_removes_the_sandbox(
    temporal_client: Client,
) -> None:
    model = ScriptedModel([BIG_STEP] * 200)
    async with long_running_worker(
        temporal_client, model, workflows=[LongSandboxAgentWorkflow]
    ) as (
        client,
        _,
    ):
        handle = await start_long(client, "Keep going.")
        assert handle.first_execution_run_id is not None
        latest = client.get_workflow_handle(handle.id)
        while (await latest.describe()).run_id == handle.first_execution_run_id:
            await asyncio.sleep(0.2)
        # The run that continued keeps the chain's execution timeout.
        config = (await latest.describe()).raw_description.execution_config
        timeout = config.workflow_execution_timeout.ToTimedelta()
        assert timeout == project_service().workflow_execution_timeout
        await latest.cancel()
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        runs = await runs_of_chain(client, handle.id, handle.first_execution_run_id)
        deletes = [
            attempt
            for attempt in await activities(client.get_workflow_handle(handle.id))
            if attempt.name.endswith("-sandbox_client_delete")
        ]

    assert isinstance(failed.value.cause, CancelledError)
    assert len(runs) > 1
    assert len(deletes) == 1


async def test_attach_follows_a_chain_from_its_first_run_to_the_answer(
    starter_env: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    commands = ["echo chained-answer > first.txt", *[BIG_STEP] * 25, "cat first.txt"]
    model = ScriptedModel(commands)
    async with long_running_worker(starter_env, model, workflows=[LongSandboxAgentWorkflow]) as (
        client,
        _,
    ):
        handle = await start_long(client, "Run the commands.")
        await handle.result()
    capsys.readouterr()

    status = await attach(handle.id, STARTER_SETTINGS)

    out = capsys.readouterr().out
    assert status == 0
    assert "run      2 of the chain, same sandbox" in out
    # Every turn of every run, numbered across the chain, then the answer.
    assert f"model    turn {len(commands) + 1}\n" in out
    assert "chained-answer" in out.split("Answer:")[1]
