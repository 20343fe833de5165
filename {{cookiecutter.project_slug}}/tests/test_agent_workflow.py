"""The agent does real work in a real sandbox, through Temporal activities."""

import uuid
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from {{ cookiecutter.package_name }}.shared import (
    SANDBOX_PROVIDER,
    TASK_QUEUE,
)
from {{ cookiecutter.package_name }}.starter import (
    start,
)
from {{ cookiecutter.package_name }}.workflow import (
    SandboxAgentWorkflow,
)

from .scripted_model import ScriptedModel
from .support import running_worker


async def activity_types(handle: WorkflowHandle[Any, Any]) -> list[str]:
    return [
        event.activity_task_scheduled_event_attributes.activity_type.name
        async for event in handle.fetch_history_events()
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]


async def test_agent_writes_a_file_in_the_sandbox_and_reads_it_back(
    temporal_client: Client,
) -> None:
    model = ScriptedModel(
        [
            "printf 'written by the agent\\n' > note.txt",
            "cat note.txt && wc -l < note.txt",
        ]
    )
    async with running_worker(temporal_client, model) as (client, _):
        handle = await start(client, "Write a note, then read it back.")
        answer = await handle.result()

    assert "written by the agent" in answer
    assert "1" in answer.split("written by the agent", 1)[1]


async def test_every_sandbox_operation_is_an_activity_named_after_the_provider(
    temporal_client: Client,
) -> None:
    model = ScriptedModel(["echo $((6 * 7))"])
    async with running_worker(temporal_client, model) as (client, _):
        handle = await start(client, "Multiply six by seven in the shell.")
        answer = await handle.result()

    assert "42" in answer
    sandbox_activities = [name for name in await activity_types(handle) if "sandbox_" in name]
    assert f"{SANDBOX_PROVIDER}-sandbox_client_create" in sandbox_activities
    assert f"{SANDBOX_PROVIDER}-sandbox_client_delete" in sandbox_activities
    assert any(
        name.startswith(f"{SANDBOX_PROVIDER}-sandbox_session_") for name in sandbox_activities
    )
    assert all(name.startswith(f"{SANDBOX_PROVIDER}-") for name in sandbox_activities)


async def test_worker_and_starter_use_the_same_task_queue_and_provider(
    temporal_client: Client,
) -> None:
    model = ScriptedModel(["true"])
    async with running_worker(temporal_client, model) as (client, worker):
        assert worker.task_queue == TASK_QUEUE
        handle = await start(client, "Do nothing.", workflow_id=f"names-{uuid.uuid4()}")
        description = await handle.describe()
        await handle.result()

    assert description.task_queue == TASK_QUEUE
    assert description.workflow_type == SandboxAgentWorkflow.__name__
