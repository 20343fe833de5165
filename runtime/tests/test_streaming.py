"""A run streams: the model's text as it is written, each turn's and tool
call's start and end, in the run's Workflow Stream, read by
``read_run_stream()``; history grows by batches, not deltas; a worker with
STREAM_MODEL_TURNS=false runs new runs whole; both histories replay."""

import asyncio
import dataclasses
import gc
import itertools
import json
import re
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from types import AsyncGeneratorType, CoroutineType
from typing import Any

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle, WorkflowHistory, WorkflowUpdateFailedError
from temporalio.contrib.workflow_streams import PollInput, WorkflowStream
from temporalio.contrib.workflow_streams._stream import _POLL
from temporalio.contrib.workflow_streams._types import STREAM_DRAINING_ERROR_TYPE
from temporalio.openai_agents.testing import ResponseBuilders, TestModel
from temporalio.worker import Replayer, Worker

from sandbox_agent_runtime import END, RunRequest, StreamEvent, read_run_stream
from sandbox_agent_runtime.starter import start
from sandbox_agent_runtime.streaming import RunStream
from sandbox_agent_runtime.testing import answered, project
from sandbox_agent_runtime.testing.long_workflow import LongSandboxAgentWorkflow, start_long
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server
from sandbox_agent_runtime.testing.support import (
    RETRIED_AT_ONCE,
    SETTINGS,
    activities,
    running_worker,
    runs_of_chain,
    sandboxes_for_tests,
)
from sandbox_agent_runtime.worker import agents_plugin, streaming_line, streams

# About 900 characters of answer: over 100 deltas of 8, one each 10 ms.
LONG_ANSWER = ["seq 1 250"]


async def read_all(client: Client, workflow_id: str) -> list[StreamEvent]:
    return [event async for event in read_run_stream(client, workflow_id)]


async def streamed_run(
    client: Client, settings: object = SETTINGS, read: bool = True
) -> tuple[WorkflowHandle[object, object], str, list[StreamEvent]]:
    async with running_worker(
        client,
        ScriptedModel(LONG_ANSWER, delta_every=0.01),
        settings=settings,  # type: ignore[arg-type]
    ) as (worker_client, _):
        handle = await start(worker_client, "Count to 250.")
        if not read:
            return handle, str((await handle.result()).answer), []
        reading = asyncio.create_task(read_all(worker_client, handle.id))
        answer = str((await handle.result()).answer)
        events = await asyncio.wait_for(reading, 60)
    return handle, answer, events


def counted(history: WorkflowHistory, event_type: int) -> int:
    return sum(1 for event in history.events if event.event_type == event_type)


async def test_a_streamed_turns_deltas_concatenate_to_its_answer_between_its_start_and_end(
    temporal_client: Client,
) -> None:
    handle, answer, events = await streamed_run(temporal_client)

    kinds = [event.kind for event in events]
    # Each turn starts and ends; the command's tool call between them.
    assert kinds.count("turn_started") == kinds.count("turn_ended") == 2
    assert kinds.index("tool_started") < kinds.index("tool_ended")
    last_start = max(i for i, kind in enumerate(kinds) if kind == "turn_started")
    deltas = [e for e in events[last_start:] if e.kind == "delta"]
    # Written as the model wrote it (8 characters each 10 ms), the deltas
    # of each 50 ms joined: about 40 characters each...
    assert len(deltas) > 15
    assert max(len(delta.text) for delta in deltas) <= 56
    # ...which concatenate to the answer, and to the turn's end's text.
    assert "".join(delta.text for delta in deltas) == answer
    assert events[-1].kind == "turn_ended" and events[-1].text == answer
    # Each delta names its turn (the offset of its start) and agent.
    assert {delta.turn for delta in deltas} == {events[last_start].offset}
    assert {delta.agent for delta in deltas} == {events[last_start].agent} != {""}
    assert [a.name for a in await activities(handle)].count("invoke_model_activity_streaming") == 2


async def test_history_grows_by_batches_not_deltas_and_replays(temporal_client: Client) -> None:
    handle, answer, _ = await streamed_run(temporal_client)
    history = await handle.fetch_history()
    # The model wrote 8 characters a delta, one each 10 ms.
    deltas = len(answer) // 8
    signals = counted(history, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)
    # One signal per batch of 100 ms: a few per second of text, not one a delta.
    assert 0 < signals <= deltas // 4, (signals, deltas)

    replayer = Replayer(
        workflows=[project().workflow],
        plugins=[agents_plugin(SETTINGS, sandboxes=sandboxes_for_tests())],
    )
    replayed = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert replayed.replay_failure is None
    # A worker that streams no new run still replays (and goes on with) a streamed one.
    whole = dataclasses.replace(SETTINGS, stream_model_turns=False)
    replayer = Replayer(
        workflows=[project().workflow],
        plugins=[agents_plugin(whole, sandboxes=sandboxes_for_tests())],
    )
    replayed = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert replayed.replay_failure is None


async def test_a_worker_that_does_not_stream_runs_new_runs_whole_and_replays_them(
    temporal_client: Client,
) -> None:
    whole = dataclasses.replace(SETTINGS, stream_model_turns=False)
    handle, answer, events = await streamed_run(temporal_client, whole)

    names = [a.name for a in await activities(handle)]
    assert names.count("invoke_model_activity") == 2
    assert "invoke_model_activity_streaming" not in names
    assert events == []
    assert "\n250" in answer
    # A streaming worker replays it whole too (its history says it was whole).
    replayer = Replayer(
        workflows=[project().workflow],
        plugins=[agents_plugin(SETTINGS, sandboxes=sandboxes_for_tests())],
    )
    history = await handle.fetch_history()
    replayed = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert replayed.replay_failure is None
    print(json.dumps({"whole_events": len(history.events)}))


class StallsMidAnswer(ScriptedModel):
    """Streams half of its answer, then never the rest: its worker goes away
    mid-stream, as a crashed one would."""

    def __init__(self, commands: list[str]) -> None:
        super().__init__(commands, delta_every=0.01)
        self.stalled = asyncio.Event()

    async def stream_response(
        self, system_instructions: str | None, input: str | list[Any], *args: Any, **kwargs: Any
    ) -> AsyncIterator[Any]:
        events = super().stream_response(system_instructions, input, *args, **kwargs)
        written = 0
        async for event in events:
            yield event
            written += event.type == "response.output_text.delta"
            if written == 40:
                self.stalled.set()
                await asyncio.Future()  # until the worker stops and cancels it


# A run's coroutines (the workflow's, the streamed run's loop, the model
# stream's): none may be left suspended once its worker stopped.
RUN_COROUTINES = {
    "AgentWorkflow.run_agent",
    "AgentRunner.run_streamed.<locals>.run_loop",
    "_TemporalModelStub.stream_response",
    "stream_response_with_retry",
}


def left_for_the_collector() -> list[str]:
    """The run coroutines still suspended: the garbage collector would close
    them later, in whatever run's thread it runs (worker.evict_cached_runs)."""
    return [
        each.__qualname__
        for each in gc.get_objects()
        if isinstance(each, CoroutineType | AsyncGeneratorType)
        and each.__qualname__ in RUN_COROUTINES
        and (each.cr_frame if isinstance(each, CoroutineType) else each.ag_frame) is not None
    ]


async def test_a_worker_lost_mid_stream_redoes_that_turn_alone_and_says_so_on_the_stream(
    temporal_client: Client,
) -> None:
    stalling = StallsMidAnswer(LONG_ANSWER)
    async with running_worker(
        temporal_client,
        stalling,
        identity="first-worker",
        graceful_shutdown_timeout=timedelta(0),
        model_retry_policy=RETRIED_AT_ONCE,
    ) as (client, _):
        handle = await start(client, "Count to 250.")
        reading = asyncio.create_task(read_all(client, handle.id))
        await stalling.stalled.wait()
        # The stream's batches reach the run before the worker goes.
        await asyncio.sleep(0.5)
        assert set(left_for_the_collector()) == RUN_COROUTINES
    # The stopped worker ended the run it cached, as an eviction does.
    assert left_for_the_collector() == []
    async with running_worker(
        temporal_client, ScriptedModel(LONG_ANSWER, delta_every=0.01), identity="second-worker"
    ):
        answer = str((await handle.result()).answer)
        events = await asyncio.wait_for(reading, 60)

    kinds = [event.kind for event in events]
    # A client saw most of 40 deltas of the answer, then the turn restarted: it
    # drops them, and the deltas after concatenate to the answer.
    restart = kinds.index("turn_restarted")
    last_start = max(i for i, kind in enumerate(kinds) if kind == "turn_started")
    assert last_start < restart
    before = [e.text for e in events[last_start:restart] if e.kind == "delta"]
    assert len("".join(before)) >= 200
    after = [e.text for e in events[restart:] if e.kind == "delta"]
    assert "".join(after) == answer
    assert kinds.count("turn_started") == 2
    # The command ran once; the lost turn's model call alone was redone.
    attempts = [a.name for a in await activities(handle)]
    assert attempts.count("exec_command") <= 1
    commands = [a for a in attempts if a.endswith("sandbox_session_pty_exec_start")]
    assert len(commands) == 1, attempts


def test_a_worker_that_streams_no_new_run_says_so_in_one_line_at_its_start() -> None:
    assert streams(SETTINGS) and streaming_line(SETTINGS) == ""
    off = dataclasses.replace(SETTINGS, stream_model_turns=False)
    assert not streams(off)
    assert streaming_line(off) == (
        "Model turns come whole (STREAM_MODEL_TURNS=false): new runs do not stream."
    )
    chat = dataclasses.replace(SETTINGS, openai_api="chat_completions")
    assert not streams(chat)
    assert "OPENAI_API=chat_completions" in streaming_line(chat)


async def test_a_model_that_cannot_stream_answers_whole_through_the_stream(
    temporal_client: Client, capfd: pytest.CaptureFixture[str]
) -> None:
    whole = TestModel(lambda: ResponseBuilders.output_message("answered whole"))
    async with running_worker(temporal_client, whole) as (client, _):
        handle = await start(client, "Answer.")
        reading = asyncio.create_task(read_all(client, handle.id))
        answer = str((await handle.result()).answer)
        events = await asyncio.wait_for(reading, 60)

    assert answer == "answered whole"
    assert [(e.kind, e.text) for e in events] == [
        ("turn_started", ""),
        ("delta", "answered whole"),
        ("turn_ended", "answered whole"),
    ]
    said = [line for line in capfd.readouterr().err.splitlines() if "did not stream" in line]
    assert said == ["The model TestModel did not stream: its turns come whole."]


async def test_a_streamed_turn_adds_a_few_events_a_second_of_text_to_history(
    temporal_client: Client,
) -> None:
    read, answer, events = await streamed_run(temporal_client)
    unread, _, _ = await streamed_run(temporal_client, read=False)
    whole, _, _ = await streamed_run(
        temporal_client, dataclasses.replace(SETTINGS, stream_model_turns=False), read=False
    )
    figures = {}
    kinds = {}
    for name, handle in (("streamed, read", read), ("streamed", unread), ("whole", whole)):
        history = await handle.fetch_history()
        info = (await handle.describe()).raw_description.workflow_execution_info
        figures[name] = (len(history.events), info.history_size_bytes)
        kinds[name] = {
            EventType.Name(kind): counted(history, kind)
            for kind in (
                EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
                EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
                EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
            )
        }
    deltas = sum(1 for event in events if event.kind == "delta")
    # The answer's text took 10 ms each 8 characters to write.
    seconds = len(answer) / 8 * 0.01
    added = figures["streamed"][0] - figures["whole"][0]
    print(
        json.dumps(
            {
                "answer_chars": len(answer),
                "deltas": deltas,
                "seconds_of_text": seconds,
                "events_and_bytes": figures,
                "kinds": kinds,
                "events_added_per_second_of_text": round(added / seconds, 1),
            }
        )
    )
    # A signal per batch at most, one a second by default (each with its
    # workflow task's 3 events): a few events a second of text, not 4 a delta.
    batches = seconds / SETTINGS.stream_batch.total_seconds() + 2
    assert added <= 4 * batches + 8, figures


async def test_a_reader_waiting_when_the_run_ends_gets_the_end_and_the_run_completes(
    temporal_client: Client,
) -> None:
    async with running_worker(temporal_client, ScriptedModel(["echo hi"])) as (client, _):
        handle = await start(client, RunRequest("Say hi.", follow_ups=True))
        reading = asyncio.create_task(read_all(client, handle.id))
        await answered(handle, 1)
        # The reader has read the answer and waits for more (its poll an
        # update in flight) when the conversation is ended.
        await asyncio.sleep(1)
        assert not reading.done()
        await handle.execute_update(END)
        result = await asyncio.wait_for(handle.result(), 30)
        events = await asyncio.wait_for(reading, 30)
    assert events[-1].kind == "turn_ended" and events[-1].text == result.answer


@workflow.defn(sandboxed=False)
class ChoosesItsHost:
    """A run's stream while the run asks for its host, until ``chosen``."""

    @workflow.init
    def __init__(self) -> None:
        self.stream = RunStream(WorkflowStream())
        self.stream.choosing_host = True

    @workflow.signal
    def chosen(self) -> None:
        self.stream.choosing_host = False

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: not self.stream.choosing_host)
        self.stream.topic.publish({"kind": "tool_started", "agent": "", "tool": "chosen"})
        self.stream.stream.detach_pollers()
        await workflow.wait_condition(workflow.all_handlers_finished)


async def test_a_readers_poll_is_refused_while_the_run_chooses_its_host(
    temporal_client: Client,
) -> None:
    queue = f"chooses-its-host-{uuid.uuid4()}"
    async with Worker(temporal_client, task_queue=queue, workflows=[ChoosesItsHost]):
        handle = await temporal_client.start_workflow(
            ChoosesItsHost.run, id=f"chooses-{uuid.uuid4()}", task_queue=queue
        )
        # Refused, as a draining stream refuses it (its client polls again):
        # a poll accepted with the host's local activity result replays in
        # another order (RunStream._validate_poll).
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await asyncio.wait_for(
                handle.execute_update(_POLL, PollInput(topics=[], from_offset=0)), 10
            )
        assert getattr(refused.value.cause, "type", None) == STREAM_DRAINING_ERROR_TYPE
        reading = asyncio.create_task(read_all(temporal_client, handle.id))
        await asyncio.sleep(0.3)
        await handle.signal(ChoosesItsHost.chosen)
        events = await asyncio.wait_for(reading, 10)
    assert [(event.kind, event.tool) for event in events] == [("tool_started", "chosen")]


@pytest.mark.long
async def test_a_reader_follows_a_chain_of_runs_its_offsets_going_on_and_nothing_twice(
    temporal_client: Client,
) -> None:
    # About 60 kB each: a chain of runs in a dozen steps.
    big = "head -c 60000 /dev/zero | tr '\\0' x"
    commands = [big] * 14 + ["seq 1 100"]
    async with running_worker(
        temporal_client,
        ScriptedModel(commands),
        workflows=[LongSandboxAgentWorkflow],
        time_limit=timedelta(minutes=4),
    ) as (client, _):
        handle = await start_long(client, "Run the 15 commands.")
        reading = asyncio.create_task(read_all(client, handle.id))
        answer = str((await handle.result()).answer)
        events = await asyncio.wait_for(reading, 60)
        # A reader that comes once the chain has ended reads its last run's stream.
        late_events = await asyncio.wait_for(read_all(client, handle.id), 60)
        assert handle.first_execution_run_id is not None
        runs = await runs_of_chain(client, handle.id, handle.first_execution_run_id)

    assert len(runs) >= 2
    offsets = [event.offset for event in events]
    assert offsets == sorted(set(offsets))
    starts = [i for i, event in enumerate(events) if event.kind == "turn_started"]
    assert len(starts) == len(commands) + 1
    last = events[starts[-1] :]
    assert "".join(e.text for e in last if e.kind == "delta") == answer
    assert last[-1].kind == "turn_ended" and last[-1].text == answer
    # Every run handed on the turns it was handed and its own: the late
    # reader read them all.
    assert late_events == events


def test_the_scripted_endpoint_streams_stamps_each_written_as_it_is_sent() -> None:
    """With ``stamps``, each delta of a streamed answer is the time it was
    sent, one each ``delta_every``, and the completed answer is those
    deltas (a benchmark times each delta by it); unstreamed, the answer is
    as many stamps of the time it was answered."""
    stamps, every = 5, 0.05
    body = {"model": "scripted", "input": [{"role": "user", "content": "Hi"}]}
    with scripted_openai_server([]) as server:
        server.stamps, server.delta_every = stamps, every
        streamed = urllib.request.Request(
            f"{server.url}/responses", json.dumps({**body, "stream": True}).encode()
        )
        deltas: list[tuple[str, float]] = []
        with urllib.request.urlopen(streamed, timeout=30) as response:
            events = [json.loads(line[6:]) for line in response if line.startswith(b"data: ")]
            for event in events:
                if event["type"] == "response.output_text.delta":
                    deltas.append((event["delta"], time.time()))
        whole = urllib.request.Request(f"{server.url}/responses", json.dumps(body).encode())
        with urllib.request.urlopen(whole, timeout=30) as response:
            answered = json.load(response)["output"][0]["content"][0]["text"]
    # Read after the whole body came: each was sent no later than it was read.
    sent = [float(delta.removesuffix("|")) for delta, _ in deltas]
    texts = [delta for delta, _ in deltas]
    assert [re.fullmatch(r"\d{10}\.\d{3}\|", text) is not None for text in texts] == [True] * stamps
    assert all(when <= read + 0.001 for when, (_, read) in zip(sent, deltas, strict=True))
    assert all(later - earlier >= every - 0.001 for earlier, later in itertools.pairwise(sent))
    [completed] = [event for event in events if event["type"] == "response.completed"]
    assert completed["response"]["output"][0]["content"][0]["text"] == "".join(texts)
    assert re.fullmatch(r"(\d{10}\.\d{3}\|)" + r"\1" * (stamps - 1), answered)
