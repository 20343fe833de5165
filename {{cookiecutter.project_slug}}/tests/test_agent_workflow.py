"""The agent does real work in a real sandbox, through Temporal activities."""

from {{ cookiecutter.package_name }}.shared import SANDBOX_PROVIDER, TASK_QUEUE
from {{ cookiecutter.package_name }}.workflow import SandboxAgentWorkflow

from .support import CompletedRun, activities


async def test_agent_writes_a_file_in_the_sandbox_and_reads_it_back(
    completed_run: CompletedRun,
) -> None:
    assert "written by the agent" in completed_run.answer
    assert "1" in completed_run.answer.split("written by the agent", 1)[1]


async def test_every_sandbox_operation_is_an_activity_named_after_the_provider(
    completed_run: CompletedRun,
) -> None:
    sandbox_activities = [
        a.name for a in await activities(completed_run.handle) if a.is_sandbox_operation
    ]
    assert f"{SANDBOX_PROVIDER}-sandbox_client_create" in sandbox_activities
    assert f"{SANDBOX_PROVIDER}-sandbox_session_pty_exec_start" in sandbox_activities
    assert f"{SANDBOX_PROVIDER}-sandbox_client_delete" in sandbox_activities
    assert all(name.startswith(f"{SANDBOX_PROVIDER}-") for name in sandbox_activities)


async def test_worker_and_starter_use_the_same_task_queue_and_provider(
    completed_run: CompletedRun,
) -> None:
    description = await completed_run.handle.describe()

    assert completed_run.worker_task_queue == TASK_QUEUE
    assert description.task_queue == TASK_QUEUE
    assert description.workflow_type == SandboxAgentWorkflow.__name__
