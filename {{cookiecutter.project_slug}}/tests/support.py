{% set backends = cookiecutter | backends -%}
{% set primary = cookiecutter.sandbox_backend -%}
{% set remote = cookiecutter | remote_backends -%}
"""Helpers that run the service's real worker with a scripted model."""

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
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
from temporalio.api.enums.v1 import EventType, PendingWorkflowTaskState
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle, WorkflowHistory
from temporalio.common import RetryPolicy
from temporalio.openai_agents.testing import TestModelProvider
from temporalio.service import RPCError
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
    sandbox_operation,
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

# The longest a test may keep its worker running. A run of the scripted agent
# takes a second or two; one still open after this long is stuck (sent to a
# task queue no worker polls, a step retried for ever, workflow code that
# keeps failing), and the test fails saying which instead of hanging.
RUN_TIME_LIMIT = timedelta(seconds=30)
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
    time_limit: timedelta = RUN_TIME_LIMIT,
    **worker_options: object,
) -> AsyncIterator[tuple[Client, Worker]]:
    """Run the service's worker with a scripted model; yield a client whose
    data converter matches the worker's. Every provider has the tests' own
    sandbox (``sandboxes_for_tests()``); ``sandbox`` replaces ``provider``'s.
    The test fails if it is still waiting after ``time_limit``, with what each
    open run waits for."""
    plugin = agents_plugin(
        sandboxes=sandboxes_for_tests(sandbox, provider),
        model_provider=TestModelProvider(model),
        model_retry_policy=model_retry_policy,
    )
    config = client.config()
    config["plugins"] = [plugin]
    plugged = Client(**config)
    worker = build_worker(plugged, **worker_options)
    async with worker, run_time_limit(plugged, worker.task_queue, time_limit):
        yield plugged, worker


@asynccontextmanager
async def run_time_limit(client: Client, task_queue: str, limit: timedelta) -> AsyncIterator[None]:
    """Fail the test after ``limit``, or at once when one of its runs
    waits on another task queue than ``task_queue`` (the worker's), saying
    what each of its open runs waits for; then end those runs, so that none
    runs into the next test."""
    # A test may start a run just before its worker, to show that it waits.
    since = datetime.now(UTC) - timedelta(seconds=5)
    loop = asyncio.get_running_loop()
    started = loop.time()
    deadline = asyncio.timeout(limit.total_seconds())
    watch = asyncio.create_task(expire_if_misrouted(client, task_queue, since, deadline))
    try:
        async with deadline:
            yield
    except TimeoutError:
        if not deadline.expired():
            raise
        lines = [f"Gave up after {loop.time() - started:.0f} s."]
        async for run in client.list_workflows(open_since(since)):
            handle = client.get_workflow_handle(run.id, run_id=run.run_id)
            lines.append(f"Run {run.id}: {await what_it_waits_for(handle, task_queue)}")
            with suppress(RPCError):
                await handle.terminate(reason="the test gave up on it")
        if len(lines) == 1:
            lines.append("No run of this test is open: the test waited for something else.")
        pytest.fail("\n".join(lines))
    finally:
        watch.cancel()


def open_since(since: datetime) -> str:
    """The runs still open that started after ``since``, as a visibility query."""
    return f'ExecutionStatus = "Running" AND StartTime >= "{since.isoformat()}"'


async def expire_if_misrouted(
    client: Client, task_queue: str, since: datetime, deadline: asyncio.Timeout
) -> None:
    """No worker ever picks up a run sent to another task queue: expire the
    deadline as soon as one is seen, instead of waiting it out."""
    while True:
        await asyncio.sleep(1)
        async for run in client.list_workflows(open_since(since)):
            if run.task_queue != task_queue:
                deadline.reschedule(asyncio.get_running_loop().time())
                return


async def what_it_waits_for(handle: WorkflowHandle[Any, Any], task_queue: str) -> str:
    description = await handle.describe()
    queue = description.task_queue
    if queue != task_queue:
        return f"it waits on task queue {queue!r}; the worker polls {task_queue!r}."
    failures = [
        event.workflow_task_failed_event_attributes.failure.message
        async for event in handle.fetch_history_events()
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    ]
    if failures:
        return f"its workflow code keeps failing, and Temporal retries it for ever: {failures[-1]}"
    steps = [
        f"{step.activity_type.name} is on attempt {step.attempt}"
        + (f" after {step.last_failure.message!r}" if step.last_failure.message else "")
        for step in description.raw_description.pending_activities
    ]
    if steps:
        return f"{'; '.join(steps)}."
    task = description.raw_description.pending_workflow_task
    if task.state == PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_SCHEDULED:
        return f"no worker has picked it up from task queue {task_queue!r}."
    return "nothing is scheduled."


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


@dataclass
class ScheduledStep:
    """One activity as the workflow scheduled it, with the limits Temporal
    recorded for it in the run's history."""

    name: str
    start_to_close_timeout: timedelta
    heartbeat_timeout: timedelta  # zero: the step does not heartbeat
    retry_policy: RetryPolicy

    @property
    def is_sandbox_operation(self) -> bool:
        return sandbox_operation(self.name) is not None


async def scheduled_steps(handle: WorkflowHandle[Any, Any]) -> list[ScheduledStep]:
    """Each activity the run scheduled, in order."""
    return [
        ScheduledStep(
            scheduled.activity_type.name,
            scheduled.start_to_close_timeout.ToTimedelta(),
            scheduled.heartbeat_timeout.ToTimedelta(),
            RetryPolicy.from_proto(scheduled.retry_policy),
        )
        async for event in handle.fetch_history_events()
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        for scheduled in [event.activity_task_scheduled_event_attributes]
    ]


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
