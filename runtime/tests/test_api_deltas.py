"""The model's text through the API as it is written: ``event: delta``
between the steps of ``GET /v1/runs/{id}/events``, two API processes
(replicas) beside a real dev server, the service's worker (in the test) and
a scripted model that streams at a fixed rate (8 characters each 10 ms),
read by a real HTTP client.

The deltas come before the answer and concatenate to its text; a client
that reconnects with ``Last-Event-ID`` in the middle of a turn, to either
replica, gets the rest once; one that comes after the turn ended gets its
text in one delta, the same on both replicas; one API process reads a run
once however many follow it, and never through the stream's polls (which
would write to the run's history); a run that does not stream has no delta."""

import asyncio
import dataclasses
import json
import statistics
import time
from collections.abc import AsyncIterator
from datetime import datetime, timedelta

import httpx2 as httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from sandbox_agent_runtime.api.deltas import Turn, change
from sandbox_agent_runtime.api.events import Followers, event_id_parts
from sandbox_agent_runtime.api.metrics import ApiMetrics
from sandbox_agent_runtime.settings_types import WorkerSettings
from sandbox_agent_runtime.starter import start
from sandbox_agent_runtime.testing.api_client import ApiProcess, Event, api_process, read_events
from sandbox_agent_runtime.testing.processes import service_environment
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
from sandbox_agent_runtime.testing.support import SETTINGS, running_worker

pytestmark = pytest.mark.process

# About 2,300 characters of answer: some 290 deltas of 8, one each 10 ms
# (about 3 s of text, sent on in batches of 100 ms).
COMMANDS = ["seq 1 600"]


@dataclasses.dataclass
class Replicas:
    a: ApiProcess
    b: ApiProcess


@pytest.fixture(scope="module")
async def replicas(temporal_client: Client) -> AsyncIterator[Replicas]:
    environment = service_environment(
        temporal_client.service_client.config.target_host, "http://127.0.0.1:9"
    )
    async with api_process(environment) as a, api_process(environment) as b:
        yield Replicas(a, b)


def streaming_model() -> ScriptedModel:
    return ScriptedModel(COMMANDS, delta_every=0.01)


def batches_of_100_ms() -> WorkerSettings:
    """The worker's settings with its streams sent on each 100 ms
    (STREAM_BATCH_MILLISECONDS): a turn of a few seconds in some 30 batches,
    where the default (1 s) would send it in 3."""
    return dataclasses.replace(SETTINGS, stream_batch=timedelta(milliseconds=100))


async def start_run(client: httpx.AsyncClient) -> str:
    started = await client.post("/v1/runs", json={"prompt": "Count to 600."})
    assert started.status_code == 201, started.text
    return str(started.json()["id"])


async def read_timed(
    client: httpx.AsyncClient, workflow_id: str, until_deltas: int | None = None
) -> list[tuple[float, Event]]:
    """The run's events as they come, each with when it came, to the end (or
    until ``until_deltas`` deltas came: then the connection is dropped)."""
    found: list[tuple[float, Event]] = []
    async with client.stream("GET", f"/v1/runs/{workflow_id}/events") as response:
        assert response.status_code == 200
        fields: dict[str, str] = {}
        async for line in response.aiter_lines():
            if line.startswith(":"):
                continue
            if line:
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")
                continue
            event = Event(fields.get("id", ""), fields.get("event", ""), json.loads(fields["data"]))
            fields = {}
            found.append((time.time(), event))
            deltas = sum(1 for _, each in found if each.name == "delta")
            if until_deltas is not None and deltas >= until_deltas:
                break
    return found


def deltas(events: list[Event]) -> list[Event]:
    return [event for event in events if event.name == "delta"]


def text_of(events: list[Event]) -> str:
    """The text the deltas make, each put where its ``at`` says."""
    text = ""
    for delta in deltas(events):
        assert delta.data["at"] == len(text), (delta, text)
        text += delta.data["text"]
    return text


def answer_of(events: list[Event]) -> str:
    [answer] = [event.data["text"] for event in events if event.name == "answer"]
    return str(answer)


def positions(events: list[Event]) -> list[tuple[str, int, int]]:
    return [event_id_parts(event.id) for event in events]


async def test_deltas_come_between_the_steps_before_the_answer_and_make_its_text(
    temporal_client: Client, replicas: Replicas
) -> None:
    async with (
        running_worker(temporal_client, streaming_model(), settings=batches_of_100_ms()),
        replicas.a.client() as on_a,
    ):
        workflow_id = await start_run(on_a)
        timed = await read_timed(on_a, workflow_id)
    events = [event for _, event in timed]
    names = [event.name for event in events]
    answer = answer_of(events)

    assert "\n600" in answer
    # Written as the model wrote it: many deltas, in batches of about 100 ms...
    assert len(deltas(events)) >= 10, names
    # ...each after its turn's model step, before the answer, which they make.
    last_model = max(i for i, name in enumerate(names) if name == "model")
    assert names.index("delta") > last_model
    assert max(i for i, name in enumerate(names) if name == "delta") < names.index("answer")
    assert text_of(events) == answer
    assert {delta.data["turn"] for delta in deltas(events)} == {events[last_model].id}
    assert {delta.data["agent"] for delta in deltas(events)} != {""}
    # Every event has its own id, in the order of the run's history.
    assert len({event.id for event in events}) == len(events)
    assert positions(events) == sorted(positions(events), key=lambda p: (p[1], p[2]))
    # The first delta came while the model was writing: seconds before the answer.
    first = next(at for at, event in timed if event.name == "delta")
    answered = next(at for at, event in timed if event.name == "answer")
    assert answered - first > 1.0, answered - first
    # From each batch's signal recorded in history to this client reading it.
    delays = sorted(
        at - datetime.fromisoformat(event.data["time"]).timestamp()
        for at, event in timed
        if event.name == "delta"
    )
    print(
        json.dumps(
            {
                "deltas": len(delays),
                "delay_median_s": round(statistics.median(delays), 3),
                "delay_max_s": round(delays[-1], 3),
            }
        )
    )


async def test_a_client_that_reconnects_mid_turn_gets_the_rest_once_on_either_replica(
    temporal_client: Client, replicas: Replicas
) -> None:
    async with (
        running_worker(temporal_client, streaming_model(), settings=batches_of_100_ms()),
        replicas.a.client() as on_a,
        replicas.b.client() as on_b,
    ):
        workflow_id = await start_run(on_a)

        async def cut_then_resume(
            first: httpx.AsyncClient, then: httpx.AsyncClient, after: int
        ) -> tuple[list[Event], list[Event]]:
            before = [event for _, event in await read_timed(first, workflow_id, after)]
            rest = await read_events(then, workflow_id, before[-1].id)
            return before, rest

        (a_before, b_rest), (b_before, a_rest) = await asyncio.gather(
            cut_then_resume(on_a, on_b, 3), cut_then_resume(on_b, on_a, 8)
        )
        # After the turn ended: the rest of it in one delta.
        ended_rest = await read_events(on_b, workflow_id, a_before[-1].id)

    answer = answer_of(a_rest)
    for before, rest in ((a_before, b_rest), (b_before, a_rest)):
        # Cut while the model was writing: the later deltas, each once...
        assert before[-1].name == "delta" and rest[0].name == "delta"
        assert len(deltas(rest)) > 1
        # ...so that nothing is missed and nothing comes twice.
        assert text_of(before + rest) == answer
        assert not {event.id for event in before} & {event.id for event in rest}
        assert [event.name for event in rest][-2:] == ["answer", "end"]
    [rest_in_one] = deltas(ended_rest)
    assert rest_in_one.data["at"] == len(text_of(a_before)) > 0
    assert text_of(a_before + ended_rest) == answer


async def test_after_a_turn_ended_its_text_comes_in_one_delta_the_same_on_both_replicas(
    temporal_client: Client, replicas: Replicas
) -> None:
    async with (
        running_worker(temporal_client, streaming_model(), settings=batches_of_100_ms()),
        replicas.a.client() as on_a,
        replicas.b.client() as on_b,
    ):
        workflow_id = await start_run(on_a)
        # Both follow it live as it is written...
        live = await asyncio.gather(read_events(on_a, workflow_id), read_events(on_b, workflow_id))
        # ...then, once it ended, afresh.
        after = await asyncio.gather(read_events(on_a, workflow_id), read_events(on_b, workflow_id))
        history = await temporal_client.get_workflow_handle(workflow_id).fetch_history()

    answer = answer_of(after[0])
    assert after[0] == after[1]
    [whole] = deltas(after[0])
    assert whole.data["text"] == answer and whole.data["at"] == 0
    # Its id is the end of the turn's model call in the run's history.
    ended = {
        event.event_id: event.event_type
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
    }
    assert event_id_parts(whole.id)[1] in ended
    # Live, each replica names each batch by its history event: the same
    # ids, with the same text up to each.
    so_far: list[dict[str, str]] = []
    for events in live:
        text, upto = "", {}
        for delta in deltas(events):
            text = text[: delta.data["at"]] + delta.data["text"]
            upto[delta.id] = text
        assert text == answer
        so_far.append(upto)
    signaled = {
        event.event_id
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
    }
    assert {event_id_parts(each)[1] for each in so_far[0]} <= signaled | set(ended)
    both = so_far[0].keys() & so_far[1].keys()
    assert len(both) >= 10
    assert {each: so_far[0][each] for each in both} == {each: so_far[1][each] for each in both}
    # The steps around them are the same on both.
    steps = [[event for event in events if event.name != "delta"] for events in live]
    assert steps[0] == steps[1]


async def sse(chunks: AsyncIterator[bytes]) -> list[Event]:
    """The events of an API's stream, as bytes, parsed."""
    found = []
    async for chunk in chunks:
        fields = dict(
            line.partition(": ")[::2] for line in chunk.decode().splitlines() if line[:1] != ":"
        )
        if fields:
            found.append(Event(fields.get("id", ""), fields["event"], json.loads(fields["data"])))
    return found


async def test_a_turn_read_in_many_pages_of_history_comes_in_one_delta_once_it_ended(
    temporal_client: Client,
) -> None:
    async with running_worker(temporal_client, streaming_model(), settings=batches_of_100_ms()) as (
        client,
        _,
    ):
        handle = await start(client, "Count to 600.")
        answer = str((await handle.result()).answer)
        history = await handle.fetch_history()
        # The API's reader of runs, reading 8 history events a page: the
        # turn's batches (some 30 signals, 4 events each) span many pages.
        followers = Followers(client, ApiMetrics(), page_size=8)
        events = await sse(followers.stream(handle.id, False, None))
        signals = [
            event.event_id
            for event in history.events
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
        ]
        run_id = (await handle.describe()).run_id
        middle = f"{run_id}.{signals[len(signals) // 2]}"
        rest = await sse(followers.stream(handle.id, False, middle))
        await followers.close()

    [whole] = deltas(events)
    assert whole.data == {**whole.data, "text": answer, "at": 0}
    # From the middle of the turn: the rest of it in one delta.
    [rest_in_one] = deltas(rest)
    assert 0 < rest_in_one.data["at"] < len(answer)
    assert answer[rest_in_one.data["at"] :] == rest_in_one.data["text"]
    assert [event.name for event in rest][-2:] == ["answer", "end"]


def metrics(text: str) -> dict[str, float]:
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if not sample.labels
    }


async def test_one_api_process_reads_a_run_once_however_many_follow_it(
    temporal_client: Client, replicas: Replicas
) -> None:
    async with (
        running_worker(temporal_client, streaming_model(), settings=batches_of_100_ms()),
        replicas.a.client() as on_a,
    ):
        workflow_id = await start_run(on_a)
        reading = [asyncio.create_task(read_events(on_a, workflow_id)) for _ in range(3)]
        seen: dict[str, float] = {}
        deadline = time.monotonic() + 30
        while seen.get("agent_api_open_streams") != 3 and time.monotonic() < deadline:
            seen = metrics((await on_a.get("/metrics")).text)
            await asyncio.sleep(0.05)
        followed = seen.get("agent_api_followed_runs")
        read = await asyncio.gather(*reading)
        history = await temporal_client.get_workflow_handle(workflow_id).fetch_history()

    assert seen.get("agent_api_open_streams") == 3
    # Three streams, one reader of the run in this process...
    assert followed == 1
    # Each stream had it all (a stream that fell behind may have had two
    # batches in one delta).
    for events in read:
        assert [e for e in events if e.name != "delta"] == [e for e in read[0] if e.name != "delta"]
        assert text_of(events) == answer_of(events) != ""
    # ...which reads the stream's batches in the run's history: no poll of
    # the stream (an update each, written to the run's history) is asked.
    polls = [
        event
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    ]
    assert polls == []


async def test_a_run_that_does_not_stream_gives_no_delta(
    temporal_client: Client, replicas: Replicas
) -> None:
    whole = dataclasses.replace(SETTINGS, stream_model_turns=False)
    async with (
        running_worker(temporal_client, streaming_model(), settings=whole),
        replicas.a.client() as on_a,
    ):
        workflow_id = await start_run(on_a)
        events = await read_events(on_a, workflow_id)
    assert deltas(events) == []
    assert "\n600" in answer_of(events) and events[-1].name == "end"


def test_a_model_call_given_up_for_lost_that_still_writes_adds_nothing_to_the_turn() -> None:
    """A streamed model call retried after its heartbeat timed out: the
    first attempt may go on publishing while the second writes. The turn's
    text is the latest attempt's alone, placed from 0 (found by
    benchmarks/project/streaming.py at 200 runs at once: a turn's deltas
    came to more than its answer)."""
    turn = Turn("run", "run.7", "Sandbox Agent")

    def delta(text: str) -> dict[str, str]:
        return {"type": "response.output_text.delta", "delta": text}

    created = {"type": "response.created"}
    assert turn.take(1, [created, delta("Hel")], "first")
    assert turn.take(2, [created, delta("Hello")], "second")
    assert not turn.take(3, [delta("lo, w")], "first")
    assert turn.take(4, [delta(", world")], "second")
    assert turn.text == "Hello, world"
    assert change("Hel", turn.text_at(2)) == {"text": "lo", "at": 3}
    assert turn.text_at(3) == "Hello" and turn.text_at(4) == "Hello, world"
