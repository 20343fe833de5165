"""The agent does real work in a real sandbox, through Temporal activities."""

from datetime import timedelta

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from sandbox_agent_runtime import RunRequest, start
from sandbox_agent_runtime.testing import (
    CompletedRun,
    ScriptedModel,
    activities,
    answering_window,
    running_worker,
    sandbox_backends,
)

from {{ cookiecutter.package_name }}.service import SANDBOX_PROVIDER, TASK_QUEUE
from {{ cookiecutter.package_name }}.workflow import SandboxAgentWorkflow

RUNNING = f"{SANDBOX_PROVIDER}-sandbox_session_running"
COMMAND = f"{SANDBOX_PROVIDER}-sandbox_session_pty_exec_start"


async def test_agent_writes_a_file_in_the_sandbox_and_reads_it_back(
    completed_run: CompletedRun,
) -> None:
    # The scripted model answers with what its last command printed: the
    # note the first command wrote, then its line count.
    assert completed_run.answer.splitlines()[-2:] == ["written by the agent", "1"]


async def test_every_sandbox_operation_is_an_activity_named_after_the_provider(
    completed_run: CompletedRun,
) -> None:
    sandbox_activities = [
        a.name for a in await activities(completed_run.handle) if a.is_sandbox_operation
    ]
    assert f"{SANDBOX_PROVIDER}-sandbox_client_create" in sandbox_activities
    assert f"{SANDBOX_PROVIDER}-sandbox_session_pty_exec_start" in sandbox_activities
    assert f"{SANDBOX_PROVIDER}-sandbox_client_delete" in sandbox_activities
    # The run's outputs, collected from the workspace before it is removed.
    collect = sandbox_activities.index(f"{SANDBOX_PROVIDER}-sandbox_workspace_collect")
    assert collect < sandbox_activities.index(f"{SANDBOX_PROVIDER}-sandbox_client_delete")
    assert all(name.startswith(f"{SANDBOX_PROVIDER}-") for name in sandbox_activities)


async def test_a_sandbox_that_has_just_answered_is_not_asked_whether_it_runs(
    completed_run: CompletedRun,
) -> None:
    # The Agents SDK asks before every turn whether the sandbox runs, each
    # time an activity and a workflow task; the sandbox answered the turn
    # before moments earlier (answering_window), so none asks.
    names = [step.name for step in await activities(completed_run.handle)]
    assert names.count(COMMAND) == 2
    assert RUNNING not in names


async def test_a_sandbox_that_has_not_answered_lately_is_asked_whether_it_runs(
    temporal_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Past the window (here at once), each turn after the first asks again,
    # and a sandbox stopped meanwhile (one a provider stopped for idleness
    # while a model call was retried, say) is started again by the SDK.
    answering_window(monkeypatch, timedelta(0))
    model = ScriptedModel(["printf 'one\\n' > note.txt", "cat note.txt", "wc -l < note.txt"])
    async with running_worker(temporal_client, model) as (client, _):
        handle = await start(client, "Write a note, then read it twice.")
        assert (await handle.result()).answer.splitlines()[-1] == "1"
    names = [step.name for step in await activities(handle)]
    model_calls = len([step for step in await activities(handle) if step.is_model_call])
    assert names.count(COMMAND) == 3
    assert names.count(RUNNING) == model_calls - 1 == 3


async def test_worker_and_starter_use_the_same_task_queue_and_provider(
    completed_run: CompletedRun, temporal_client: Client
) -> None:
    description = await completed_run.handle.describe()
    assert completed_run.worker_task_queue == TASK_QUEUE
    assert description.task_queue == TASK_QUEUE
    assert description.workflow_type == SandboxAgentWorkflow.__name__

    # The starter names the provider the worker registers the backend under.
    history = await completed_run.handle.fetch_history()
    [started] = [
        event.workflow_execution_started_event_attributes
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
    ]
    [request] = await temporal_client.data_converter.decode(started.input.payloads, [RunRequest])
    assert request == RunRequest("Write a note, then read it back.", SANDBOX_PROVIDER)
    assert request.provider in sandbox_backends()
