"""The fleet's rate of model calls (MODEL_CALLS_PER_SECOND, model_queue.py),
held by Temporal's server across worker processes, as on two hosts.

Two real workers, each set to the fleet's rate of RATE calls a second, each
calling its own scripted endpoint (so each call's endpoint says which
worker made it, and both log each call's time on one clock), share runs
that make more calls at once than the rate allows. Stated up front: over
any WINDOW seconds, the two together made at most BURST + RATE x (WINDOW +
1) calls. BURST: the server splits the queue's rate among its partitions (4
here, the server's default) and each one's bucket lets at least one call
through at once. The 1: a call reaches the endpoint a little after the
server hands it out (the worker's own latency, well under a second), so
calls handed out WINDOW + 1 s apart may arrive within WINDOW. Without the
rate the same load makes its forty calls in under two seconds, all within one
window (break it by hand: drop the worker's
max_task_queue_activities_per_second). The waiting shows: in the worker's
metric of the calls' wait, and in the starter's progress, which names the
rate."""

import asyncio
import re
import urllib.request
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from sandbox_agent_runtime.observability import MODEL_CALL_WAIT
from sandbox_agent_runtime.run_request import RunRequest
from sandbox_agent_runtime.shared import MODEL_ACTIVITIES
from sandbox_agent_runtime.starter import start
from sandbox_agent_runtime.testing import project_service
from sandbox_agent_runtime.testing.processes import STARTER, WORKER, service, service_environment
from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server
from sandbox_agent_runtime.testing.support import free_address, with_plugins

pytestmark = pytest.mark.process

RATE = 4.0
WINDOW = 5.0
BURST = 4
# Each run: four commands, then its answer: five model calls. Eight runs at
# once: forty calls, ten seconds at RATE, under two without it.
RUNS = 8
COMMANDS = ["echo one", "echo two", "echo three", "echo four"]


def most_in_a_window(times: list[float], window: float) -> int:
    """The most of ``times`` (seconds, any order) within any ``window`` seconds."""
    times = sorted(times)
    most, first = 0, 0
    for last, at in enumerate(times):
        while at - times[first] > window:
            first += 1
        most = max(most, last - first + 1)
    return most


def metric_sum(text: str, name: str) -> tuple[float, float]:
    """The count and sum of histogram ``name`` in a /metrics page."""
    count = re.search(rf"^{name}_count(?:{{[^}}]*}})? ([0-9.e+]+)$", text, re.MULTILINE)
    total = re.search(rf"^{name}_sum(?:{{[^}}]*}})? ([0-9.e+]+)$", text, re.MULTILINE)
    assert count and total, f"no {name} in /metrics"
    return float(count.group(1)), float(total.group(1))


async def test_two_workers_together_keep_to_the_fleets_rate(temporal_client: Client) -> None:
    address = temporal_client.service_client.config.target_host
    metrics = free_address()
    with (
        scripted_openai_server(COMMANDS) as first,
        scripted_openai_server(COMMANDS) as second,
    ):
        rate = {"MODEL_CALLS_PER_SECOND": f"{RATE:g}"}
        one = {
            **service_environment(address, first.url),
            **rate,
            "PROMETHEUS_BIND_ADDRESS": metrics,
        }
        other = {**service_environment(address, second.url), **rate}
        async with service(WORKER, one) as worker, service(WORKER, other) as another:
            await worker.wait_for("Worker polling")
            await another.wait_for("Worker polling")
            client = with_plugins(temporal_client)
            handles = [await start(client, RunRequest(f"Count, {n}.")) for n in range(RUNS)]
            async with asyncio.timeout(180):
                answers = await asyncio.gather(*(handle.result() for handle in handles))
            page = urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10).read().decode()

    assert all("four" in str(answer.answer) for answer in answers), answers
    times = [at for at, status in [*first.answered, *second.answered] if status == 200]
    assert len(times) == RUNS * (len(COMMANDS) + 1)
    # Both workers made calls: the rate is the fleet's, not each one's.
    assert first.answered and second.answered, (len(first.answered), len(second.answered))
    most = most_in_a_window(times, WINDOW)
    assert most <= BURST + RATE * (WINDOW + 1), (most, sorted(times))
    # The calls were held back, not merely slow to come: the whole took
    # about as long as the rate makes it.
    assert max(times) - min(times) >= (len(times) - RATE) / RATE - WINDOW
    # The first worker's metric says how long each of its calls waited on
    # the queue: the waits its runs' histories record (from each call's
    # scheduling to its start, by the worker that started it).
    count, waited = metric_sum(page, MODEL_CALL_WAIT)
    assert count == len(first.answered)
    by_worker = await model_call_waits(handles)
    assert any(n == count and abs(total - waited) < 0.01 * n for total, n in by_worker.values()), (
        count,
        waited,
        by_worker,
    )


async def model_call_waits(handles: list[Any]) -> dict[str, tuple[float, int]]:
    """For each worker (its identity), the seconds its model calls waited
    between their scheduling and their start, in all, and how many: from the
    runs' histories."""
    found: dict[str, tuple[float, int]] = {}
    for handle in handles:
        scheduled: dict[int, float] = {}
        async for event in handle.fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                name = event.activity_task_scheduled_event_attributes.activity_type.name
                if name in MODEL_ACTIVITIES:
                    scheduled[event.event_id] = event.event_time.ToNanoseconds() / 1e9
            elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                started = event.activity_task_started_event_attributes
                if started.scheduled_event_id in scheduled:
                    assert started.attempt == 1, "a model call was retried"
                    wait = (
                        event.event_time.ToNanoseconds() / 1e9
                        - scheduled[started.scheduled_event_id]
                    )
                    total, n = found.get(started.identity, (0.0, 0))
                    found[started.identity] = (total + max(0.0, wait), n + 1)
    return found


def test_most_in_a_window_counts_the_busiest_stretch() -> None:
    assert most_in_a_window([], 5) == 0
    assert most_in_a_window([0, 1, 2, 10, 10.5, 11, 11.2], 1) == 3
    assert most_in_a_window([3, 0, 5, 1], 5) == 4
    assert most_in_a_window([0, 5.01], 5) == 1


@pytest.mark.long  # waits for the starter's notice (10 s)
async def test_the_starter_shows_a_model_call_waiting_for_the_fleets_rate(
    temporal_client: Client,
) -> None:
    address = temporal_client.service_client.config.target_host
    with scripted_openai_server(["echo one", "echo two"]) as model:
        # One call every 25 s: the run's second call waits past the notice (10 s).
        environment = {**service_environment(address, model.url), "MODEL_CALLS_PER_SECOND": "0.04"}
        async with service(WORKER, environment) as worker:
            await worker.wait_for("Worker polling")
            async with service([*STARTER, "Count."], environment) as asking:
                await asking.wait_for("  waiting", timeout=60)

    [line] = [line for line in asking.output if line.startswith("  waiting")]
    queue = f"{project_service().task_queue}-model-calls"
    assert re.fullmatch(
        r"  waiting  1[0-9] s for a worker to take its model call: the service's model calls "
        rf"\(task queue '{queue}'\) are held to 0\.04 a second across the fleet "
        r"\(MODEL_CALLS_PER_SECOND\), or every worker is busy, or none is running; the run "
        r"waits, nothing is lost",
        line,
    ), line
