"""One number, WORKER_RUNS_IN_FLIGHT, sizes the worker for runs that wait on the model."""

import asyncio
import json
import re
import resource
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from agents import ModelResponse, ModelSettings
from agents.models.interface import ModelTracing
from openai import BadRequestError
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client, WorkflowHandle
from temporalio.openai_agents.testing import ResponseBuilders, TestModel
from temporalio.testing import ActivityEnvironment
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput

from sandbox_agent_runtime import capacity
from sandbox_agent_runtime.capacity import (
    CONNECTIONS_PER_POOL,
    HEARTBEATS_PER_SECOND,
    HeartbeatAtStart,
    make_room_for_connections,
    model_heartbeat_timeout,
    model_provider,
    worker_options,
)
from sandbox_agent_runtime.settings import (
    MOST_RUNS_IN_FLIGHT,
    RUNS_IN_FLIGHT,
    BadSetting,
)
from sandbox_agent_runtime.starter import start
from sandbox_agent_runtime.testing.support import SETTINGS, running_worker, settings_with


def test_runs_in_flight_default_and_override() -> None:
    assert SETTINGS.runs_in_flight == RUNS_IN_FLIGHT == 1_000
    for value, runs in (("200", 200), ("10_000", 10_000), ("100000", MOST_RUNS_IN_FLIGHT)):
        assert settings_with({"WORKER_RUNS_IN_FLIGHT": value}).runs_in_flight == runs


def test_every_run_in_flight_has_an_activity_slot_and_stays_cached() -> None:
    options = worker_options(300)
    assert options["max_concurrent_activities"] == 300
    # Runs waiting for a slot stay cached too: no run is dropped and replayed.
    assert options["max_cached_workflows"] >= 2 * 300


def test_the_heartbeats_of_every_run_waiting_stay_within_the_budget() -> None:
    # 10 s up to 500 runs in flight, then growing with them: each model call
    # heartbeats every half timeout, every heartbeat reaches Temporal, and all
    # of a worker's together stay within HEARTBEATS_PER_SECOND.
    assert model_heartbeat_timeout(1) == model_heartbeat_timeout(500) == timedelta(seconds=10)
    assert model_heartbeat_timeout(RUNS_IN_FLIGHT) == timedelta(seconds=20)
    assert model_heartbeat_timeout(5_000) == timedelta(seconds=100)
    for runs in (1, 500, 1_000, 5_000, 100_000):
        every = worker_options(runs)["max_heartbeat_throttle_interval"]
        assert every == model_heartbeat_timeout(runs) / 2
        assert runs / every.total_seconds() <= HEARTBEATS_PER_SECOND


async def test_the_model_client_opens_a_connection_per_run_in_flight_and_no_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A model endpoint that holds every request until 3 or more are open at once
    # (or all 5 calls have come), then refuses each one and closes its
    # connection. With a pool of 3, the 4th and 5th calls wait for a
    # connection to close; with a larger one, their connections come in the
    # same turn of the event loop as the first 3, before any answer.
    opened = open_now = most_open = 0
    release = asyncio.Event()
    error = {"message": "refused by the test", "type": "invalid_request_error"}
    refusal = json.dumps({"error": error}).encode()

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal opened, open_now, most_open
        opened += 1
        open_now += 1
        most_open = max(most_open, open_now)
        head = await reader.readuntil(b"\r\n\r\n")
        length = re.search(rb"(?im)^content-length: *(\d+)", head)
        await reader.readexactly(int(length.group(1)) if length else 0)
        if open_now >= 3 or opened == 5:
            release.set()
        await release.wait()
        open_now -= 1  # answered: the pool may hand this slot on
        writer.write(
            b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nConnection: close\r\n"
            + f"Content-Length: {len(refusal)}\r\n\r\n".encode()
            + refusal
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    model = model_provider(3).get_model("gpt-test")

    async def call() -> object:
        return await model.get_response(
            None,
            "hi",
            ModelSettings(),
            [],
            None,
            [],
            ModelTracing.DISABLED,
            previous_response_id=None,
            conversation_id=None,
            prompt=None,
        )

    try:
        async with asyncio.timeout(20):
            # One call refused at once first: the client's first call also
            # looks up the platform it reports, in a thread.
            release.set()
            with pytest.raises(BadRequestError):
                await call()
            opened = most_open = 0
            release.clear()
            refused = await asyncio.gather(*(call() for _ in range(5)), return_exceptions=True)
    finally:
        server.close()

    assert [type(error) for error in refused] == [BadRequestError] * 5
    assert opened == 5
    assert most_open == 3


def test_model_calls_are_spread_over_pools_of_at_most_a_hundred_connections(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # httpx's pool goes through all its connections for every request: one
    # pool of 2,000 cost a worker with 2,000 calls in flight more event loop
    # than anything but its workflows. Each call takes the next client.
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    for runs, pools in ((3, 1), (100, 1), (101, 2), (2_000, 20)):
        provider = model_provider(runs)
        clients = [provider.get_model("gpt-test")._client for _ in range(2 * pools)]  # type: ignore[attr-defined]
        assert len({id(client) for client in clients}) == pools
        assert clients[:pools] == clients[pools:]
        assert -(-runs // pools) <= CONNECTIONS_PER_POOL


class _Recorded(ActivityInboundInterceptor):
    """The activity's own code: notes the heartbeats sent before it ran."""

    def __init__(self, heartbeats: list[object]) -> None:
        self.heartbeats = heartbeats
        self.before: int | None = None

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        self.before = len(self.heartbeats)
        return "answered"


@pytest.mark.parametrize(
    ("activity_type", "heartbeat_timeout", "at_start"),
    [
        ("invoke_model_activity", timedelta(seconds=40), 1),
        ("invoke_model_activity", None, 0),
        ("local-sandbox_session_start", timedelta(seconds=40), 0),
    ],
)
async def test_a_model_call_heartbeats_as_the_worker_begins_to_run_it(
    activity_type: str, heartbeat_timeout: timedelta | None, at_start: int
) -> None:
    # Temporal counts the heartbeat timeout from when it handed the call to
    # the worker; a call a busy worker began late still heartbeats in time.
    environment = ActivityEnvironment()
    environment.info = replace(
        environment.info, activity_type=activity_type, heartbeat_timeout=heartbeat_timeout
    )
    heartbeats: list[object] = []
    environment.on_heartbeat = lambda *details: heartbeats.append(details)
    inner = _Recorded(heartbeats)
    intercepted = HeartbeatAtStart().intercept_activity(inner)
    given = ExecuteActivityInput(fn=lambda: None, args=[], executor=None, headers={})

    async def run() -> Any:
        return await intercepted.execute_activity(given)

    assert await environment.run(run) == "answered"
    assert inner.before == at_start


@pytest.fixture
def open_file_limit(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, int]]]:
    """This process may open 1,024 files, and be allowed 4,096; records what
    the worker sets instead of setting it."""
    limits: list[tuple[int, int]] = []
    monkeypatch.setattr(resource, "getrlimit", lambda which: (1024, 4096))
    monkeypatch.setattr(resource, "setrlimit", lambda which, limit: limits.append(limit))
    yield limits


def test_the_worker_raises_its_open_file_limit_as_far_as_allowed(
    open_file_limit: list[tuple[int, int]],
) -> None:
    make_room_for_connections(2_000)
    assert open_file_limit == [(2_000 + capacity.OTHER_OPEN_FILES, 4096)]


def test_a_limit_of_open_files_too_low_is_one_clear_line(
    open_file_limit: list[tuple[int, int]],
) -> None:
    with pytest.raises(BadSetting) as bad:
        make_room_for_connections(5_000)
    assert str(bad.value) == (
        "WORKER_RUNS_IN_FLIGHT=5000 needs 6000 open files and this process may open "
        "at most 4096 (ulimit -Hn): raise that limit or set WORKER_RUNS_IN_FLIGHT "
        "to at most 3096."
    )
    assert open_file_limit == []


class HeldModel(TestModel):
    """Holds every model call until ``answer`` is set, then answers "done"."""

    def __init__(self) -> None:
        super().__init__(lambda: ResponseBuilders.output_message("done"))
        self.calls = 0
        self.answer = asyncio.Event()

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        self.calls += 1
        await self.answer.wait()
        return ResponseBuilders.output_message("done")


async def waits_for_a_slot(handle: WorkflowHandle[Any, Any]) -> bool:
    """The run's next step is scheduled, and no worker has started it."""
    description = await handle.describe()
    return any(
        step.state == PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED
        for step in description.raw_description.pending_activities
    )


async def test_runs_past_the_limit_wait_for_a_slot_and_none_fails(
    temporal_client: Client,
) -> None:
    model = HeldModel()
    async with running_worker(
        temporal_client, model, settings=replace(SETTINGS, runs_in_flight=1)
    ) as (
        client,
        _,
    ):
        runs = [await start(client, "first"), await start(client, "second")]
        # One run waits on the model in the only slot; the other's next step
        # waits on the task queue.
        async with asyncio.timeout(20):
            while not (model.calls == 1 and any([await waits_for_a_slot(r) for r in runs])):
                await asyncio.sleep(0.1)
        assert model.calls == 1

        model.answer.set()
        assert [(await run.result()).answer for run in runs] == ["done", "done"]
        assert model.calls == 2
