"""A run outlives the worker that started it: it resumes on another worker,
against the same sandbox session, and its history replays step for step.

It runs against both stand-ins (conftest.py): the default one (the local
backend, its sandbox on the worker's host, no approvals) and the remote one
(a Daytona sandbox, approved by a stand-in person), where the sandbox of
each remote backend also goes on on another host when the worker that
created it is gone (a test defined only where the service has a backend
whose sandbox is not bound to a host: none in the default one)."""

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Replayer

from sandbox_agent_runtime.backends import sandbox_backends
from sandbox_agent_runtime.capacity import model_heartbeat_timeout
from sandbox_agent_runtime.settings import RUNS_IN_FLIGHT
from sandbox_agent_runtime.shared import MODEL_ACTIVITY_TIMEOUT
from sandbox_agent_runtime.starter import start
from sandbox_agent_runtime.testing import project, project_service
from sandbox_agent_runtime.testing.handovers import (
    ALL_STEPS,
    STEPS,
    StallsAfterTheFirstCommand,
    sandbox_workers,
    stalled_on,
    start_as,
    workspaces_used,
)
from sandbox_agent_runtime.testing.long_workflow import BuggyWorkflow, FixedWorkflow
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
from sandbox_agent_runtime.testing.support import (
    DROPPED_RUNS_CLOSED,
    RETRIED_AT_ONCE,
    SETTINGS,
    CompletedRun,
    activities,
    running_worker,
    sandboxes_for_tests,
)
from sandbox_agent_runtime.worker import agents_plugin

# Workers here drop runs part-way: see `collect_dropped_runs` (conftest.py).
pytestmark = [
    pytest.mark.usefixtures("collect_dropped_runs"),
    pytest.mark.filterwarnings(DROPPED_RUNS_CLOSED),
]

WRITE_THEN_READ = [
    "printf 'written before the restart\\n' > note.txt",
    "cat note.txt",
]
COMMAND = f"{project_service().sandbox_provider}-sandbox_session_pty_exec_start"

# The providers whose sandbox any worker reaches, wherever it was created
# (the remote stand-in's remote backends; none in the default one's).
REMOTE_PROVIDERS = [
    provider for provider, backend in sandbox_backends().items() if not backend.host_bound(SETTINGS)
]


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
        model_retry_policy=RETRIED_AT_ONCE,
    ) as (client, _):
        handle = await start(client, "Write a note, then read it back.")
        await stalling.stalled.wait()

    # A fresh worker with a fresh model: nothing carried over in memory.
    async with running_worker(
        temporal_client, ScriptedModel(WRITE_THEN_READ), identity="second-worker"
    ):
        answer = (await handle.result()).answer

    # The second command saw the file the first one wrote...
    assert "written before the restart" in answer
    attempts = await activities(handle)
    commands = [a.worker for a in attempts if a.name == COMMAND]
    # ...even though each ran on a different worker...
    assert commands == ["first-worker", "second-worker"]
    # ...because the sandbox session was created once and resumed.
    creates = [
        a
        for a in attempts
        if a.name == f"{project_service().sandbox_provider}-sandbox_client_create"
    ]
    assert len(creates) == 1


# About 10 s: Temporal retries a failed workflow task after its backoff.
@pytest.mark.long
async def test_a_bug_in_workflow_code_waits_for_its_fix_with_the_sandbox_intact(
    temporal_client: Client,
) -> None:
    # A bug (a KeyError, not a Temporal failure) fails only the workflow task,
    # which Temporal retries: the run waits for fixed code, sandbox and all.
    async with running_worker(
        temporal_client, ScriptedModel(WRITE_THEN_READ), workflows=[BuggyWorkflow]
    ) as (client, _):
        handle = await start_as(
            client,
            BuggyWorkflow,
            project_service().sandbox_provider,
            "Write a note, then read it back.",
        )
        failure = await workflow_task_failure(handle)
    assert "a bug in workflow code" in failure
    # Nothing removed the sandbox: its workspace is still there.
    removals = ("sandbox_session_stop", "sandbox_session_shutdown", "sandbox_client_delete")
    assert not [a.name for a in await activities(handle) if a.name.endswith(removals)]
    [workspace] = await workspaces_used(handle)
    assert Path(workspace).is_dir()

    # The fix is deployed (a worker restarted with fixed code): the run
    # replays to where it failed and goes on, in the same sandbox.
    async with running_worker(
        temporal_client, ScriptedModel(WRITE_THEN_READ), workflows=[FixedWorkflow]
    ):
        answer = (await handle.result()).answer

    assert "written before the restart" in answer
    names = [a.name for a in await activities(handle)]
    assert names.count(f"{project_service().sandbox_provider}-sandbox_client_create") == 1
    assert not Path(workspace).exists()


async def workflow_task_failure(handle: WorkflowHandle[Any, Any]) -> str:
    """The message of the run's first failed workflow task, once there is one."""
    async with asyncio.timeout(20):
        while True:
            async for event in handle.fetch_history_events():
                if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                    return event.workflow_task_failed_event_attributes.failure.message
            await asyncio.sleep(0.2)


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
            assert step.start_to_close_timeout == project_service().sandbox_activity_timeout
            assert step.heartbeat_timeout == timedelta(0)
        elif step.is_model_call:
            assert step.start_to_close_timeout == MODEL_ACTIVITY_TIMEOUT
            assert step.heartbeat_timeout == model_heartbeat_timeout(RUNS_IN_FLIGHT)


@pytest.mark.long  # every step replayed
async def test_a_run_completes_when_every_step_is_replayed_from_history(
    temporal_client: Client,
) -> None:
    # With no workflow cache, the worker rebuilds the workflow from its
    # history before every step: any non-determinism would fail the run.
    async with running_worker(
        temporal_client, ScriptedModel(WRITE_THEN_READ), max_cached_workflows=0
    ) as (client, _):
        handle = await start(client, "Write a note, then read it back.")
        answer = (await handle.result()).answer

    assert "written before the restart" in answer


async def test_the_history_of_a_completed_run_replays_without_nondeterminism(
    completed_run: CompletedRun,
) -> None:
    history = await completed_run.handle.fetch_history()

    replayer = Replayer(
        workflows=[project().workflow],
        plugins=[agents_plugin(SETTINGS, sandboxes=sandboxes_for_tests())],
    )
    replayed = await replayer.replay_workflow(history, raise_on_replay_failure=False)

    assert replayed.replay_failure is None
    assert len(history.events) > 10


# Only where the service has a remote backend (the remote stand-in): with
# none, there is no such sandbox, and no test to skip.
if REMOTE_PROVIDERS:

    @pytest.mark.parametrize("provider", REMOTE_PROVIDERS)
    async def test_a_remote_sandbox_goes_on_on_another_host_when_its_creator_is_gone(
        temporal_client: Client, provider: str
    ) -> None:
        assert not sandbox_backends()[provider].host_bound(SETTINGS)
        run = await stalled_on(temporal_client, "host-a", provider, settings=SETTINGS)
        async with running_worker(
            temporal_client,
            ScriptedModel(STEPS),
            provider=provider,
            host="host-b",
            identity="worker-b",
            settings=SETTINGS,
        ):
            answer = (await run.result()).answer

        assert answer.endswith(ALL_STEPS)
        # The sandbox's operations went to the shared queue, and ran on both hosts.
        assert await sandbox_workers(run) == (
            {"worker-of-host-a", "worker-b"},
            {project_service().task_queue},
        )
