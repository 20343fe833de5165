"""The agent does real work in a real sandbox, through Temporal activities."""

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from {{ cookiecutter.package_name }}.machinery.backends import SANDBOX_BACKENDS
from {{ cookiecutter.package_name }}.machinery.run_request import RunRequest
from {{ cookiecutter.package_name }}.machinery.shared import SANDBOX_PROVIDER, TASK_QUEUE
from {{ cookiecutter.package_name }}.machinery.workflow import SandboxAgentWorkflow

from .support import CompletedRun, activities


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
    assert request.provider in SANDBOX_BACKENDS
