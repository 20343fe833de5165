"""Helpers that run the service's real worker with a scripted model."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from agents import Model
{%- if cookiecutter.sandbox_backend != "local" %}
from agents.sandbox.sandboxes.unix_local import UnixLocalSandboxClient
{%- endif %}
from agents.sandbox.session.sandbox_client import BaseSandboxClient
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.common import RetryPolicy
from temporalio.openai_agents.testing import TestModelProvider
from temporalio.worker import Worker

{% if cookiecutter.sandbox_backend == "local" -%}
from {{ cookiecutter.package_name }}.backends.local import (
    sandbox_client,
)
{% endif -%}
from {{ cookiecutter.package_name }}.worker import (
    MODEL_RETRY_POLICY,
    agents_plugin,
    build_worker,
)


def sandbox_for_tests() -> BaseSandboxClient:
{%- if cookiecutter.sandbox_backend == "local" %}
    """The service's own local sandbox: real commands in a real temp dir."""
    return sandbox_client()
{%- else %}
    """A local sandbox standing in for the remote backend, which tests cannot
    reach. It is registered under the same provider name, so everything but
    the remote service itself (names, activities, session state) is real."""
    return UnixLocalSandboxClient(inherit_host_environment=False)
{%- endif %}


@asynccontextmanager
async def running_worker(
    client: Client,
    model: Model,
    sandbox: BaseSandboxClient | None = None,
    model_retry_policy: RetryPolicy = MODEL_RETRY_POLICY,
    **worker_options: object,
) -> AsyncIterator[tuple[Client, Worker]]:
    """Run the service's worker with a scripted model; yield a client whose
    data converter matches the worker's."""
    plugin = agents_plugin(
        sandbox=sandbox if sandbox is not None else sandbox_for_tests(),
        model_provider=TestModelProvider(model),
        model_retry_policy=model_retry_policy,
    )
    config = client.config()
    config["plugins"] = [plugin]
    plugged = Client(**config)
    worker = build_worker(plugged, **worker_options)
    async with worker:
        yield plugged, worker


@dataclass
class ActivityAttempt:
    name: str
    attempt: int
    worker: str


async def activity_attempts(handle: WorkflowHandle[Any, Any]) -> list[ActivityAttempt]:
    """Each activity the run started, in order: its name, which attempt it
    was, and the identity of the worker that ran it."""
    names: dict[int, str] = {}
    attempts = []
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            names[event.event_id] = (
                event.activity_task_scheduled_event_attributes.activity_type.name
            )
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            started = event.activity_task_started_event_attributes
            attempts.append(
                ActivityAttempt(
                    names[started.scheduled_event_id], started.attempt, started.identity
                )
            )
    return attempts
