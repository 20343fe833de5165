"""Runs handed from one worker to the next in one test process: a run left
part-way by a worker that goes away, and what the run's history says each
worker did."""

import asyncio
import json
import uuid
from datetime import timedelta
from typing import Any

from agents import ModelResponse
from agents.sandbox.session.sandbox_client import BaseSandboxClient
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from sandbox_agent_runtime.run_request import RunAnswer, RunRequest
{% if cookiecutter | host_bound_backends -%}
from sandbox_agent_runtime.settings import WorkerSettings
{% endif -%}
from sandbox_agent_runtime.starter import start

from {{ cookiecutter.package_name }}.runs import MAX_TURNS, WORKFLOW_EXECUTION_TIMEOUT
from {{ cookiecutter.package_name }}.service import TASK_QUEUE
from {{ cookiecutter.package_name }}.workflow import SandboxAgentWorkflow

from .scripted_model import ScriptedModel, tool_outputs
from .support import RETRIED_AT_ONCE, {{ "SETTINGS, " if cookiecutter | host_bound_backends }}activities, running_worker

# Up to six steps, as many as the turn budget leaves room for (a turn each,
# and one for the answer): each adds to a file the steps before wrote, and the
# last prints it.
ADDING = max(1, min(5, MAX_TURNS - 2))
STEPS = [f"echo step-{step} >> steps.txt" for step in range(ADDING)] + ["cat steps.txt"]
ALL_STEPS = "".join(f"step-{step}\n" for step in range(ADDING))


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
    workflow_class: type[SandboxAgentWorkflow],
    provider: str,
    prompt: str = "Add to the file, then print it.",
) -> WorkflowHandle[Any, RunAnswer]:
    """Start a run of ``workflow_class`` (a test's variant of the service's
    workflow, registered under a name of its own) as the starter starts the
    service's own."""
    if workflow_class is SandboxAgentWorkflow:
        return await start(client, prompt, provider=provider)
    return await client.start_workflow(
        workflow_class.run,
        RunRequest(prompt, provider),
        id=f"{TASK_QUEUE}-{uuid.uuid4()}",
        task_queue=TASK_QUEUE,
        execution_timeout=WORKFLOW_EXECUTION_TIMEOUT,
    )


{% if cookiecutter | host_bound_backends -%}
async def stalled_on(
    client: Client,
    host: str,
    provider: str,
    sandbox: BaseSandboxClient[Any] | None = None,
    workflow_class: type[SandboxAgentWorkflow] = SandboxAgentWorkflow,
    settings: WorkerSettings = SETTINGS,
) -> WorkflowHandle[Any, RunAnswer]:
    """A run of STEPS left part-way by the worker of ``host`` (its worker
    ``worker-of-<host>`` ran its first command, in a sandbox it created, then
    stopped: both its queues), with the worker's ``settings``."""
    model = StallsAfterTheFirstCommand(STEPS)
    async with running_worker(
        client,
        model,
        sandbox,
        provider=provider,
        host=host,
        settings=settings,
        identity=f"worker-of-{host}",
{%- else -%}
async def stalled_on(
    client: Client,
    worker: str,
    provider: str,
    sandbox: BaseSandboxClient[Any] | None = None,
    workflow_class: type[SandboxAgentWorkflow] = SandboxAgentWorkflow,
) -> WorkflowHandle[Any, RunAnswer]:
    """A run of STEPS left part-way by the worker ``worker``: it ran the
    run's first command, in a sandbox it created, then stopped."""
    model = StallsAfterTheFirstCommand(STEPS)
    async with running_worker(
        client,
        model,
        sandbox,
        provider=provider,
        identity=worker,
{%- endif %}
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
{%- if cookiecutter | host_bound_backends %}
    """The workers that ran a run's sandbox operations (not those of another
    host that refused one: affinity.HostFirst), and the task queues the
    workflow sent them to (an operation no worker took among them), an
    operation offered on the run's own queue for a host counting as sent to
    that host's queue."""
    steps = [step for step in await activities(handle) if step.is_sandbox_operation]
    assert steps
    ran = {step.worker for step in steps if step.attempt and not step.refused}
    return ran, {step.queue for step in steps}
{%- else %}
    """The workers that ran a run's sandbox operations, and the task queues
    the workflow sent them to (an operation no worker took among them)."""
    steps = [step for step in await activities(handle) if step.is_sandbox_operation]
    assert steps
    return {step.worker for step in steps if step.attempt}, {step.task_queue for step in steps}
{%- endif %}


async def workspaces_used(handle: WorkflowHandle[Any, RunAnswer]) -> set[str]:
    """Every workspace a run's sandbox operations named, from its history."""
    roots = set()
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            for payload in event.activity_task_scheduled_event_attributes.input.payloads:
                state = json.loads(payload.data).get("state") if payload.data[:1] == b"{" else None
                if isinstance(state, dict):
                    roots.add(str(state["manifest"]["root"]))
    return roots
