{% set backends = cookiecutter | backends -%}
{% set primary = cookiecutter.sandbox_backend -%}
{% set remote = cookiecutter | remote_backends -%}
"""Helpers that run the service's real worker with a scripted model."""

import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, NoReturn

import pytest
from agents import Model, OpenAIResponsesModel
{%- if primary == "local" %}
from agents.sandbox.errors import ConfigurationError, ErrorCode
{%- endif %}
{%- if remote %}
from agents.sandbox.manifest import Manifest
{%- endif %}
from agents.sandbox.sandboxes.unix_local import UnixLocalSandboxClient
{%- if remote %}
from agents.sandbox.session import SandboxSession
{%- endif %}
from agents.sandbox.session.sandbox_client import BaseSandboxClient
{%- if primary == "daytona" %}
from daytona import DaytonaAuthenticationError
{%- elif primary == "e2b" %}
from e2b import AuthenticationException
{%- endif %}
from openai import AsyncOpenAI
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle, WorkflowHistory
from temporalio.common import RetryPolicy
from temporalio.openai_agents.testing import TestModelProvider
from temporalio.worker import Worker

{% if "local" in backends -%}
from {{ cookiecutter.package_name }}.backends import (
    local,
)
{% endif -%}
{% if primary == "docker" -%}
from {{ cookiecutter.package_name }}.backends.docker import (
    ImageUnavailable,
)
{% endif -%}
from {{ cookiecutter.package_name }}.shared import (
{%- for constant in ((cookiecutter | providers | map("first") | list) + ["MODEL"]) | sort %}
    {{ constant }},
{%- endfor %}
)
from {{ cookiecutter.package_name }}.starter import (
    chain_run,
    continued_as,
)
from {{ cookiecutter.package_name }}.worker import (
    MODEL_RETRY_POLICY,
    agents_plugin,
    build_worker,
)
from {{ cookiecutter.package_name }}.workflow import (
    SandboxAgentWorkflow,
)
{%- if primary == "local" %}

# Why the stand-in below refuses to create a sandbox.
REJECTION = "The sandbox configuration was rejected"
{%- elif primary == "docker" %}

# Why the stand-in below refuses to create a sandbox.
REJECTION = "The image 'no-such-image' is not on the Docker engine and could not be pulled"
{%- else %}

# What the {{ "Daytona" if primary == "daytona" else "E2B" }} API answers a worker whose key it does not accept.
REJECTION = "Invalid API key"
{%- endif %}
{%- if remote %}


class LocalStandIn(UnixLocalSandboxClient):
    """A local sandbox standing in for a remote backend, which tests cannot
    reach. It is registered under the same provider name, so everything but
    the remote service itself (names, activities, session state) is real. Its
    workspace is a fresh temporary directory wherever the remote backend
    would have put it."""

    async def create(self, *, manifest: Manifest | None = None, **kwargs: Any) -> SandboxSession:
        if manifest is not None:
            manifest = manifest.model_copy(update={"root": Manifest().root})
        return await super().create(manifest=manifest, **kwargs)


def local_stand_in() -> BaseSandboxClient[Any]:
    """A local stand-in for a remote backend's sandbox."""
    return LocalStandIn(inherit_host_environment=False)
{%- endif %}


# Each provider's sandbox in tests: the service's own local sandbox for the
# local backend (real commands in a real temp dir), a local stand-in for a
# remote one.
SANDBOXES_FOR_TESTS: dict[str, Callable[[], BaseSandboxClient[Any]]] = {
{%- for constant, backend in cookiecutter | providers %}
    {{ constant }}: {{ "local.sandbox_client" if backend == "local" else "local_stand_in" }},
{%- endfor %}
}


def sandboxes_for_tests(
    sandbox: BaseSandboxClient[Any] | None = None, provider: str = SANDBOX_PROVIDER
) -> dict[str, BaseSandboxClient[Any]]:
    """Every provider's sandbox in tests; ``sandbox``, if given, replaces ``provider``'s."""
    sandboxes = {name: build() for name, build in SANDBOXES_FOR_TESTS.items()}
    if sandbox is not None:
        sandboxes[provider] = sandbox
    return sandboxes


class RejectingSandbox(UnixLocalSandboxClient):
{%- if primary == "daytona" %}
    """A Daytona that rejects the worker's key: creating a sandbox raises the
    error the Daytona SDK raises for a bad ``DAYTONA_API_KEY``."""

    async def create(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise DaytonaAuthenticationError(REJECTION, status_code=401)
{%- elif primary == "e2b" %}
    """An E2B that rejects the worker's key: creating a sandbox raises the
    error the E2B SDK raises for a bad ``E2B_API_KEY``."""

    async def create(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise AuthenticationException(REJECTION)
{%- elif primary == "docker" %}
    """A Docker engine that cannot provide the image: creating a sandbox
    raises the error the backend raises for an image it cannot pull."""

    async def create(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise ImageUnavailable(REJECTION)
{%- else %}
    """A local sandbox that cannot be set up: creating one raises the error
    the SDK raises for a sandbox configuration that no retry can fix."""

    async def create(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise ConfigurationError(
            message=REJECTION,
            error_code=ErrorCode.SANDBOX_CONFIG_INVALID,
            op="start",
            context={},
            retryable=False,
        )
{%- endif %}


@asynccontextmanager
async def running_worker(
    client: Client,
    model: Model,
    sandbox: BaseSandboxClient[Any] | None = None,
    model_retry_policy: RetryPolicy = MODEL_RETRY_POLICY,
    provider: str = SANDBOX_PROVIDER,
    **worker_options: object,
) -> AsyncIterator[tuple[Client, Worker]]:
    """Run the service's worker with a scripted model; yield a client whose
    data converter matches the worker's. Every provider has the tests' own
    sandbox (``sandboxes_for_tests()``); ``sandbox`` replaces ``provider``'s."""
    plugin = agents_plugin(
        sandboxes=sandboxes_for_tests(sandbox, provider),
        model_provider=TestModelProvider(model),
        model_retry_policy=model_retry_policy,
    )
    config = client.config()
    config["plugins"] = [plugin]
    plugged = Client(**config)
    worker = build_worker(plugged, **worker_options)
    async with worker:
        yield plugged, worker


# The warning Python gives for each coroutine of a dropped run that the
# garbage collector closes (see `collect_dropped_runs` in conftest.py):
# expected, so filtered where runs are dropped on purpose.
DROPPED_RUNS_CLOSED = (
    "ignore:Exception ignored in. <coroutine object:pytest.PytestUnraisableExceptionWarning"
)


@dataclass
class CompletedRun:
    """A finished run, as the ``completed_run`` fixture (conftest.py) leaves it."""

    handle: WorkflowHandle[SandboxAgentWorkflow, str]
    answer: str
    worker_task_queue: str


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


def started_id(output: str) -> str:
    """The workflow id in the starter's "Started workflow ..." line."""
    found = re.search(r"^Started workflow (\S+)$", output, re.MULTILINE)
    assert found, output
    return found.group(1)


@dataclass
class RunOfChain:
    """One run of a workflow's chain, as Temporal recorded it."""

    run_id: str
    history_bytes: int
    events: int
    history: WorkflowHistory


async def runs_of_chain(client: Client, workflow_id: str, first_run_id: str) -> list[RunOfChain]:
    """Every run of a finished workflow's chain, first to last."""
    runs = []
    run_id: str | None = first_run_id
    while run_id is not None:
        handle = chain_run(client, workflow_id, run_id)
        info = (await handle.describe()).raw_description.workflow_execution_info
        history = await handle.fetch_history()
        runs.append(RunOfChain(run_id, info.history_size_bytes, info.history_length, history))
        run_id = continued_as(history.events[-1])
    return runs


async def failure_of(handle: WorkflowHandle[Any, Any]) -> str:
    """The reason the run failed, as the starter prints it."""
    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    return str(getattr(failed.value.cause, "message", failed.value.cause))


def openai_model(base_url: str) -> OpenAIResponsesModel:
    """The SDK's real default model, talking to a scripted server."""
    client = AsyncOpenAI(base_url=base_url, api_key="dummy", max_retries=0)
    return OpenAIResponsesModel(MODEL, client)
