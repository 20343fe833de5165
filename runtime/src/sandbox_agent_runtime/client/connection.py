"""Connecting to the Temporal service (with the object store's external
storage and the payloads' keys), riding out an outage of it (``answered``,
SERVICE_OUTAGE_LIMIT), a run of a workflow's chain and its history, and a
run's link in the Temporal Web UI."""

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any
from urllib.parse import quote

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHandle
from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter
from temporalio.service import RPCError, RPCStatusCode

from sandbox_agent_runtime.client.errors import StoppedAnswering
from sandbox_agent_runtime.connection import connect
from sandbox_agent_runtime.encryption import codec_of
from sandbox_agent_runtime.object_store import (
    check_reachable,
    data_converter,
    external_storage,
)
from sandbox_agent_runtime.run_request import RunAnswer
from sandbox_agent_runtime.settings import StarterSettings

# How long a client waits for a worker to answer a query (where a
# conversation stands, what waits for a person) or, with approvals, to take a
# decision (an update): a run with no worker running answers neither.
WORKER_ANSWERS_WITHIN = timedelta(seconds=10)

DEV_SERVER_UI = "http://localhost:8233"
CLOUD_UI = "https://cloud.temporal.io"
CLOUD_HOST_SUFFIXES = (".tmprl.cloud", ".api.temporal.io")

# How long a client keeps asking a Temporal service that does not answer.
# The SDK's client retries each call for up to 10 s by itself (RetryConfig in
# temporalio.service: 10 retries, 10 s in all); the client then asks again,
# every ASK_AGAIN_EVERY, until SERVICE_OUTAGE_LIMIT has passed: a service that
# restarts within about half a minute goes unnoticed, one that is gone ends
# the call with ``StoppedAnswering`` instead of a hang.
SERVICE_OUTAGE_LIMIT = timedelta(seconds=20)
ASK_AGAIN_EVERY = timedelta(seconds=1)


async def answered(ask: Callable[[], Awaitable[Any]]) -> Any:
    """What ``ask()`` returns, asked again while the service is unavailable,
    until SERVICE_OUTAGE_LIMIT has passed since it first failed."""
    give_up = None
    while True:
        try:
            return await ask()
        except RPCError as e:
            if e.status != RPCStatusCode.UNAVAILABLE:
                raise
            now = time.monotonic()
            give_up = give_up or now + SERVICE_OUTAGE_LIMIT.total_seconds()
            if now >= give_up:
                raise StoppedAnswering from e
        await asyncio.sleep(ASK_AGAIN_EVERY.total_seconds())


async def history_of(
    run: WorkflowHandle[Any, RunAnswer], page_size: int | None = None
) -> AsyncIterator[HistoryEvent]:
    """Each event of ``run``'s history as it is recorded, through an outage
    of the service shorter than SERVICE_OUTAGE_LIMIT: the SDK's iterator keeps
    its place when a page fails, so asking again goes on from there.
    ``page_size``: the events a page holds at most (None: the server's)."""
    events = run.fetch_history_events(page_size=page_size, wait_new_event=True)
    while True:
        try:
            event = await answered(events.__anext__)
        except StopAsyncIteration:
            return
        yield event


@functools.cache
def quiet_runtime() -> Runtime:
    """The Temporal runtime of a command's client, which logs only the
    SDK's errors: the command says itself, in one line, when the service
    stops answering, instead of the SDK's warning at every retry."""
    quiet = TelemetryFilter(core_level="ERROR", other_level="ERROR")
    return Runtime(telemetry=TelemetryConfig(logging=LoggingConfig(filter=quiet)))


async def connected(settings: StarterSettings) -> Client:
    """A command's client of the Temporal service, with the object store's
    external storage when OBJECT_STORE_URL sets one: the store is checked
    first (``ObjectStoreUnreachable``; ``ConnectionFailed`` for Temporal), and
    each call to it opens and closes a client of its own
    (object_store.BucketObjects): a command makes few."""
    store = settings.object_store
    if store is not None:
        await check_reachable(store)
    storage = external_storage(store) if store is not None else None
    converter = data_converter(storage, codec=codec_of(settings.keys))
    return await connect(runtime=quiet_runtime(), data_converter=converter)


def chain_run(
    client: Client, workflow_id: str, run_id: str | None
) -> WorkflowHandle[Any, RunAnswer]:
    """One run of a workflow's chain (``run_id`` None: its latest run)."""
    return client.get_workflow_handle(workflow_id, run_id=run_id, result_type=RunAnswer)


def continued_as(event: HistoryEvent) -> str | None:
    """The run that a run's last event hands its work to, if it continued as new."""
    if event.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
        return None
    return event.workflow_execution_continued_as_new_event_attributes.new_execution_run_id


def web_ui_link(client: Client, workflow_id: str, ui_url: str | None) -> str:
    """The run's page in the Temporal Web UI, under ``ui_url``
    (``TEMPORAL_UI_URL``) or, when that is None, the UI the address implies."""
    base = ui_url
    if base is None:
        host = client.service_client.config.target_host.rsplit(":", 1)[0]
        base = CLOUD_UI if host.endswith(CLOUD_HOST_SUFFIXES) else DEV_SERVER_UI
    namespace = quote(client.namespace, safe="")
    return f"{base.rstrip('/')}/namespaces/{namespace}/workflows/{quote(workflow_id, safe='')}"
