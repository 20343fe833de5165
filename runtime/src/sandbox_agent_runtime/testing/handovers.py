"""Runs handed from one worker to the next in one test process: a run left
part-way by a worker that goes away, and what the run's history says each
worker did.

``STEPS`` and ``ALL_STEPS`` depend on the service's turn budget
(``Service.max_turns``): computed at their first use."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from agents import ModelResponse
from agents.sandbox.session.sandbox_client import BaseSandboxClient
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from sandbox_agent_runtime.run_request import RunAnswer, RunRequest
from sandbox_agent_runtime.settings import WorkerSettings
from sandbox_agent_runtime.starter import start
from sandbox_agent_runtime.testing.registration import project, project_service
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel, tool_outputs
from sandbox_agent_runtime.testing.support import RETRIED_AT_ONCE, activities, running_worker


def _adding() -> int:
    """Up to six steps, as many as the turn budget leaves room for (a turn
    each, and one for the answer): each adds to a file the steps before
    wrote, and the last prints it."""
    return max(1, min(5, project_service().max_turns - 2))


def _steps() -> list[str]:
    """The commands of a run handed over (``STEPS``)."""
    return [f"echo step-{step} >> steps.txt" for step in range(_adding())] + ["cat steps.txt"]


def _all_steps() -> str:
    """What the last of STEPS prints (``ALL_STEPS``)."""
    return "".join(f"step-{step}\n" for step in range(_adding()))


_LAZY: dict[str, Callable[[], Any]] = {"STEPS": _steps, "ALL_STEPS": _all_steps}

if TYPE_CHECKING:
    STEPS: list[str]
    ALL_STEPS: str


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        # The project made first, if one is registered: making it imports
        # its package, which configures the service.
        project_service()
        return _LAZY[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class StallsAfterTheFirstCommand(ScriptedModel):
    """Runs each run's first command, then never answers again: the worker
    goes away while it waits, as a crashed or redeployed worker would.
    ``stalled`` is set once ``runs`` runs wait so."""

    def __init__(self, commands: list[str], runs: int = 1) -> None:
        super().__init__(commands)
        self.runs = runs
        self.waiting = 0
        self.stalled = asyncio.Event()

    async def get_response(
        self, system_instructions: str | None, input: str | list[Any], *args: Any, **kwargs: Any
    ) -> ModelResponse:
        if tool_outputs(input):
            self.waiting += 1
            if self.waiting >= self.runs:
                self.stalled.set()
            await asyncio.Future()  # until the worker stops and cancels it
        return await super().get_response(system_instructions, input, *args, **kwargs)


async def start_as(
    client: Client,
    workflow_class: type[Any],
    provider: str,
    prompt: str = "Add to the file, then print it.",
) -> WorkflowHandle[Any, RunAnswer]:
    """Start a run of ``workflow_class`` (a test's variant of the service's
    workflow, registered under a name of its own) as the starter starts the
    service's own."""
    if workflow_class is project().workflow:
        return await start(client, prompt, provider=provider)
    service = project_service()
    handle: WorkflowHandle[Any, RunAnswer] = await client.start_workflow(
        workflow_class.run,
        RunRequest(prompt, provider),
        id=f"{service.task_queue}-{uuid.uuid4()}",
        task_queue=service.task_queue,
        execution_timeout=service.workflow_execution_timeout,
    )
    return handle


async def stalled_on(
    client: Client,
    host: str,
    provider: str,
    sandbox: BaseSandboxClient[Any] | None = None,
    workflow_class: type[Any] | None = None,
    settings: WorkerSettings | None = None,
) -> WorkflowHandle[Any, RunAnswer]:
    """A run of ``STEPS`` left part-way by a worker that ran its first command, in
    a sandbox it created, then stopped. For a service whose sandboxes may live
    on a worker's host, that is the worker of ``host``, which stops both its
    queues; for one without, ``host`` names the worker.

    Args:
        client: the Temporal client.
        host: the worker's host (or its name).
        provider: the provider ``sandbox`` replaces.
        sandbox: the worker's sandbox client; None for the tests' own.
        workflow_class: the workflow type; None for the project's.
        settings: the worker's settings; None for ``SETTINGS``.

    Returns:
        The run's handle.
    """
    workflow_class = project().workflow if workflow_class is None else workflow_class
    model = StallsAfterTheFirstCommand(_steps())
    async with running_worker(
        client,
        model,
        sandbox,
        provider=provider,
        host=host,  # running_worker reads it for a host-bound service alone
        settings=settings,
        identity=f"worker-of-{host}" if project_service().host_bound else host,
        workflows=[workflow_class],
        # Stop at once, cancelling the model call in flight, as a crash would.
        graceful_shutdown_timeout=timedelta(0),
        model_retry_policy=RETRIED_AT_ONCE,
    ) as (plugged, _):
        handle = await start_as(plugged, workflow_class, provider)
        async with asyncio.timeout(20):
            await model.stalled.wait()
    return handle


async def sandbox_workers(handle: WorkflowHandle[Any, RunAnswer]) -> tuple[set[str], set[str]]:
    """The workers that ran a run's sandbox operations, and the task queues the
    workflow sent them to (an operation offered on the run's own queue for a
    host counting as sent to that host's queue).

    Args:
        handle: the run.

    Returns:
        The workers' identities, and the task queues.
    """
    steps = [step for step in await activities(handle) if step.is_sandbox_operation]
    assert steps
    ran = {step.worker for step in steps if step.attempt and not step.refused}
    return ran, {step.queue for step in steps}


async def workspaces_used(handle: WorkflowHandle[Any, RunAnswer]) -> set[str]:
    """Every workspace a run's sandbox operations named.

    Args:
        handle: the run.

    Returns:
        The workspaces, from its history.
    """
    roots = set()
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            for payload in event.activity_task_scheduled_event_attributes.input.payloads:
                state = json.loads(payload.data).get("state") if payload.data[:1] == b"{" else None
                if isinstance(state, dict):
                    roots.add(str(state["manifest"]["root"]))
    return roots
