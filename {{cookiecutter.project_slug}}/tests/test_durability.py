"""A run outlives the worker that started it: it resumes on another worker,
against the same sandbox session, and its history replays step for step."""

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from agents import ModelResponse
from temporalio.client import Client
from temporalio.worker import Replayer

from {{ cookiecutter.package_name }}.capacity import RUNS_IN_FLIGHT, model_heartbeat_timeout
from {{ cookiecutter.package_name }}.shared import (
    MODEL_ACTIVITY_TIMEOUT,
    SANDBOX_ACTIVITY_TIMEOUT,
    SANDBOX_PROVIDER,
)
from {{ cookiecutter.package_name }}.starter import start
from {{ cookiecutter.package_name }}.worker import agents_plugin
from {{ cookiecutter.package_name }}.workflow import SandboxAgentWorkflow

from .scripted_model import ScriptedModel, tool_outputs
from .support import (
    DROPPED_RUNS_CLOSED,
    CompletedRun,
    activities,
    running_worker,
    sandboxes_for_tests,
)

# Workers here drop runs part-way: see `collect_dropped_runs` (conftest.py).
pytestmark = [
    pytest.mark.usefixtures("collect_dropped_runs"),
    pytest.mark.filterwarnings(DROPPED_RUNS_CLOSED),
]

WRITE_THEN_READ = [
    "printf 'written before the restart\\n' > note.txt",
    "cat note.txt",
]
COMMAND = f"{SANDBOX_PROVIDER}-sandbox_session_pty_exec_start"


class StallsAfterTheFirstCommand(ScriptedModel):
    """Runs the first command, then never answers again: the worker it runs
    on goes away while it waits, as a crashed or redeployed worker would."""

    def __init__(self, commands: list[str]) -> None:
        super().__init__(commands)
        self.first_command_done = asyncio.Event()

    async def get_response(
        self, system_instructions: str | None, input: str | list[Any], *args: Any, **kwargs: Any
    ) -> ModelResponse:
        if tool_outputs(input):
            self.first_command_done.set()
            await asyncio.Future()  # until the worker stops and cancels it
        return await super().get_response(system_instructions, input, *args, **kwargs)


async def test_a_run_whose_worker_stops_resumes_on_another_worker_in_the_same_sandbox(
    temporal_client: Client,
) -> None:
    stalling = StallsAfterTheFirstCommand(WRITE_THEN_READ)
    async with running_worker(
        temporal_client,
        stalling,
        identity="first-worker",
        # Stop at once, cancelling the model call in flight, as a crash would.
        graceful_shutdown_timeout=timedelta(0),
    ) as (client, _):
        handle = await start(client, "Write a note, then read it back.")
        await stalling.first_command_done.wait()

    # A fresh worker with a fresh model: nothing carried over in memory.
    async with running_worker(
        temporal_client, ScriptedModel(WRITE_THEN_READ), identity="second-worker"
    ):
        answer = await handle.result()

    # The second command saw the file the first one wrote...
    assert "written before the restart" in answer
    attempts = await activities(handle)
    commands = [a.worker for a in attempts if a.name == COMMAND]
    # ...even though each ran on a different worker...
    assert commands == ["first-worker", "second-worker"]
    # ...because the sandbox session was created once and resumed.
    creates = [a for a in attempts if a.name == f"{SANDBOX_PROVIDER}-sandbox_client_create"]
    assert len(creates) == 1


async def test_a_step_lost_with_its_worker_is_retried_after_a_missed_heartbeat_or_its_timeout(
    completed_run: CompletedRun,
) -> None:
    # A model call heartbeats: one whose worker died is retried on another
    # worker 20 s after its last heartbeat (at the default capacity). A
    # sandbox operation does not (a heartbeat timeout would cut long commands
    # off and run them again): one in flight is retried once its own timeout
    # passes.
    steps = await activities(completed_run.handle)
    assert {step.is_sandbox_operation for step in steps} == {True, False}
    for step in steps:
        if step.is_sandbox_operation:
            assert step.start_to_close_timeout == SANDBOX_ACTIVITY_TIMEOUT
            assert step.heartbeat_timeout == timedelta(0)
        else:
            assert step.start_to_close_timeout == MODEL_ACTIVITY_TIMEOUT
            assert step.heartbeat_timeout == model_heartbeat_timeout(RUNS_IN_FLIGHT)


async def test_a_run_completes_when_every_step_is_replayed_from_history(
    temporal_client: Client,
) -> None:
    # With no workflow cache, the worker rebuilds the workflow from its
    # history before every step: any non-determinism would fail the run.
    async with running_worker(
        temporal_client, ScriptedModel(WRITE_THEN_READ), max_cached_workflows=0
    ) as (client, _):
        handle = await start(client, "Write a note, then read it back.")
        answer = await handle.result()

    assert "written before the restart" in answer


async def test_the_history_of_a_completed_run_replays_without_nondeterminism(
    completed_run: CompletedRun,
) -> None:
    history = await completed_run.handle.fetch_history()

    replayer = Replayer(
        workflows=[SandboxAgentWorkflow],
        plugins=[agents_plugin(sandboxes=sandboxes_for_tests())],
    )
    replayed = await replayer.replay_workflow(history, raise_on_replay_failure=False)

    assert replayed.replay_failure is None
    assert len(history.events) > 10
