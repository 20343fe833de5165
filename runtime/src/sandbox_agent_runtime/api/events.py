"""A run's live events, as Server-Sent Events: every step the starter shows
(client/steps.py), each request that waits for a person, the answer and the
end, in the order the run's history recorded them.

One ``Follower`` per run in an API process reads the run's history (through
every run of its chain) once, however many clients follow it, and keeps the
events it made; each client gets them from where it stands. When its last
client goes, the follower stops: a client that went away costs nothing.

An event's id names where it comes from: ``RUN_ID.EVENT_ID`` for a step of
a run's history (history event ids restart in each run of a chain) and for
the model's text as it is written (a ``delta``: deltas.py), and
``RUN_ID.EVENT_ID.N`` for what the API asked the run right after that event
(the requests that wait for a person; a conversation's answer). Any replica
makes the same ids from the same history, so a client that reconnects with
``Last-Event-ID``, to this replica or another, gets the events after that
one: nothing missed, nothing twice."""

import asyncio
import contextlib
import functools
import json
import logging
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from sandbox_agent_runtime.api.deltas import PUBLISH_SIGNAL, Turn, change, published
from sandbox_agent_runtime.api.metrics import ApiMetrics
from sandbox_agent_runtime.api.runs import approval_data
from sandbox_agent_runtime.client import (
    WORKER_ANSWERS_WITHIN,
    Progress,
    StoppedAnswering,
    chain_run,
    continued_as,
    history_of,
    pending_requests,
)
from sandbox_agent_runtime.service import current
from sandbox_agent_runtime.shared import CONVERSATION, MODEL_ACTIVITIES

log = logging.getLogger("api")

# The events' names (the SSE ``event:`` field) for the starter's lines, by
# the word a line starts with; a line starting with "!" is a failure.
STEP_NAMES = ("model", "sandbox", "tool", "run", "session", "prompt", "version")
# The answer of a conversation's prompt comes after the requests asked at
# the same event (an event id's last part).
ANSWER_AFTER_REQUESTS = 999
# A comment sent on a quiet stream this often, so proxies keep it open.
KEEP_ALIVE_SECONDS = 15.0

# The events that end a run's chain (its last run's last event).
CLOSED = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED: "completed",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED: "failed",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT: "timed out",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED: "terminated",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED: "cancelled",
}


# A number in an event id: ASCII digits ("²" is a digit to str.isdigit, not
# to int), no more than a history event's id (a 64-bit integer) takes.
EVENT_NUMBER = re.compile(r"[0-9]{1,19}")


class BadEventId(ValueError):
    """A ``Last-Event-ID`` that is not one of the API's."""


@dataclass(frozen=True, order=True)
class Position:
    """Where an event stands in a run's chain: the run (its place in the
    chain), the history event, and what was asked after it."""

    run: int
    event: int
    asked: int = 0


@dataclass(frozen=True)
class Event:
    id: str
    name: str
    data: dict[str, Any]
    position: Position = field(compare=False)
    # A delta's turn: what each client is sent of it depends on what it had.
    turn: Turn | None = field(default=None, compare=False)

    @functools.cached_property
    def sse(self) -> bytes:
        """The event as SSE, encoded once for every client."""
        data = json.dumps(self.data, ensure_ascii=False)
        # An event without an id has no "id:" line: an empty one would make
        # the client forget the last id, and a reconnect start over.
        head = f"id: {self.id}\n" if self.id else ""
        return f"{head}event: {self.name}\ndata: {data}\n\n".encode()


def event_id_parts(text: str) -> tuple[str, int, int]:
    """``Last-Event-ID`` as (run id, history event id, what was asked after
    it); ``BadEventId`` in one line for anything else."""
    parts = text.strip().split(".")
    if len(parts) in (2, 3) and parts[0] and all(EVENT_NUMBER.fullmatch(p) for p in parts[1:]):
        return parts[0], int(parts[1]), int(parts[2]) if len(parts) == 3 else 0
    raise BadEventId(
        f"Last-Event-ID {text[:80]!r} is not an event id of this API: send back the id of the "
        "last event received (RUN_ID.EVENT_ID or RUN_ID.EVENT_ID.N, each number at most 19 "
        "digits 0-9), or none to start over."
    )


def step_event(line: str) -> tuple[str, str]:
    """A starter's line as (the event's name, its text)."""
    if line.startswith("!"):
        return "failure", line[1:].strip()
    word, _, rest = line.partition(" ")
    return (word if word in STEP_NAMES else "step"), rest.strip()


def answer_data(answer: Any, prompt: int | None) -> dict[str, Any]:
    """A ``RunAnswer`` (as its JSON form) as an ``answer`` event's data."""
    answer = answer if isinstance(answer, dict) else {}
    value = answer.get("answer")
    structured = bool(answer.get("structured"))
    outputs = answer.get("outputs") if isinstance(answer.get("outputs"), dict) else {}
    return {
        "text": json.dumps(value, ensure_ascii=False) if structured else str(value or ""),
        "structured": structured,
        "prompt": prompt,
        "outputs": [
            {key: each.get(key) for key in ("path", "size", "sha256")}
            for each in outputs.get("files") or []
            if isinstance(each, dict)
        ],
        "patch": bool(outputs.get("patch")),
        # Why the prompt stopped before the agent's own answer (its budget,
        # or a guardrail that tripped: ``guardrail`` names it), or "".
        "stopped": str(answer.get("stopped") or ""),
        "guardrail": str(answer.get("guardrail") or ""),
    }


def model_response(result: Any) -> Any:
    """A model call's response (its result in history, as JSON): a streamed
    call's result is its stream's events, the last of them holding it."""
    if isinstance(result, list):
        for event in reversed(result):
            if isinstance(event, dict) and event.get("type") == "response.completed":
                return event.get("response")
        return None
    return result


def model_text(response: Any) -> str:
    """The text of a model call's response (its result in history, as JSON):
    what the agent answered when that call was its last."""
    response = model_response(response)
    if not isinstance(response, dict):
        return ""
    texts = []
    for item in response.get("output") or []:
        if isinstance(item, dict) and item.get("type") == "message":
            for part in item.get("content") or []:
                if isinstance(part, dict) and part.get("type") == "output_text":
                    texts.append(str(part.get("text", "")))
    return "".join(texts)


def call_ids(response: Any) -> set[str]:
    """The tool calls a model call's response (as JSON) asked for."""
    response = model_response(response)
    if not isinstance(response, dict):
        return set()
    return {
        str(item.get("call_id"))
        for item in response.get("output") or []
        if isinstance(item, dict) and item.get("call_id")
    }


def closed_activity(event: HistoryEvent) -> int | None:
    """The scheduled event of the activity ``event`` closes (None: it closes none)."""
    for kind, attributes in (
        (EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, "activity_task_completed_event_attributes"),
        (EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED, "activity_task_failed_event_attributes"),
        (EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT, "activity_task_timed_out_event_attributes"),
        (EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED, "activity_task_canceled_event_attributes"),
    ):
        if event.event_type == kind:
            return int(getattr(event, attributes).scheduled_event_id)
    return None


def delta_for(event: Event, had: dict[str, str], since: Position | None) -> Event | None:
    """What a client is sent of a ``delta`` event: the text it has not had of
    the event's turn, up to where the event stands (``had``: what it has of
    each turn, kept here; ``since``: where it resumed, None from the first);
    None when a later event of the turn is listed (that one sends it all) or
    it has it."""
    turn = event.turn
    assert turn is not None
    if turn.listed is not None and event.position < turn.listed:
        return None
    now = turn.text_at(event.position)
    before = had.get(turn.step)
    moved = change(turn.text_at(since) if before is None else before, now)
    had[turn.step] = now
    if moved is None:
        return None
    data = {**event.data, **moved}
    return event if data == event.data else Event(event.id, event.name, data, event.position)


class Follower:
    """Reads one run's chain once and keeps the events it made, for every
    client that follows it from this API process."""

    def __init__(
        self,
        client: Client,
        workflow_id: str,
        conversation: bool,
        metrics: ApiMetrics,
        page_size: int | None = None,
    ) -> None:
        self.client = client
        self.metrics = metrics
        self.page_size = page_size
        # Events recorded from now on are read as they happen: their delay is measured.
        self.since = time.time_ns()
        self.workflow_id = workflow_id
        self.events: list[Event] = []
        self.closed = False
        self.clients = 0
        self._grew = asyncio.Event()
        self._progress = Progress(client, conversation)
        self._runs: dict[str, int] = {}
        # The requests for approval already shown, and the prompts answered.
        self._asked: set[str] = set()
        self._answered = 0
        # The result of the latest model call (its answer when it was the last).
        self._model_scheduled: set[int] = set()
        self._last_model_result: Any = None
        # The tool calls the latest model call asked for: those a person may
        # be asked to approve.
        self._calls: set[str] = set()
        self._recorded = ""
        self._recorded_ns = 0
        # The model turn under way (its call's scheduled event), and the
        # latest batch of each publisher of the run's stream (deltas.py).
        self._turn: Turn | None = None
        self._turn_scheduled = 0
        self._published: dict[str, int] = {}
        # Whether the history read is the run's present (not what was
        # written before the follower began, up to where it stood then):
        # until then a turn's deltas are kept, and given in one.
        self.live = False
        self._present: tuple[str, int] | None = None
        # Whether the run being read may still have requests waiting for a
        # person: not a run of the chain closed before the follower began
        # (asking it would replay its whole history on a worker, at each of
        # its workflow tasks, to learn that nothing waits).
        self._may_wait = False
        self._closed_at_start = False
        self.task = asyncio.create_task(self._read(), name=f"follow {workflow_id}")

    def run_index(self, run_id: str) -> int | None:
        return self._runs.get(run_id)

    def _add(
        self,
        run_id: str,
        event: int,
        name: str,
        data: dict[str, Any],
        asked: int = 0,
        turn: Turn | None = None,
    ) -> None:
        position = Position(self._runs[run_id], event, asked)
        event_id = f"{run_id}.{event}" + (f".{asked}" if asked else "")
        # When the history event it comes from was recorded.
        data = {**data, "time": self._recorded}
        self.events.append(Event(event_id, name, data, position, turn))
        if turn is not None:
            turn.listed = position
        # From that time to now: the delay a client sees, for the events
        # recorded while the run is followed (the events a client is shown
        # are recorded as they happen: an activity's start, written only
        # once it ends, is never one of them).
        if self._recorded_ns > self.since:
            self.metrics.event_delay.observe(max(0, time.time_ns() - self._recorded_ns) / 1e9)
        self._grew.set()
        self._grew = asyncio.Event()

    async def _read(self) -> None:
        run: str | None = None
        # Counted while it reads: one reader of a run's history (and so of
        # its stream) per run, however many follow it.
        self.metrics.followed_runs.inc()
        try:
            # From the chain's first run: a client sees every step.
            run = await self._first_run()
            self._present = await self._where_now()
            self.live = self._present is None
            handle = chain_run(self.client, self.workflow_id, run)
            while run is not None:
                self._runs.setdefault(run, len(self._runs))
                # The runs before the latest one when the follower began have
                # closed, and so has that one if it had then: nothing of
                # them waits. That one, if open, and each after it may.
                if self._present is None or self._present[0] == run:
                    self._may_wait = not self._closed_at_start
                self._turn = None
                next_run = None
                async for event in history_of(handle, self.page_size):
                    await self._take(run, event)
                    self._caught_up(run, event.event_id)
                    next_run = continued_as(event)
                run = next_run
                if run is not None:
                    handle = chain_run(self.client, self.workflow_id, run)
        except StoppedAnswering:
            self._add_final("unavailable", "Temporal stopped answering; reconnect to go on")
        except RPCError as e:
            log.warning("following %s: %s", self.workflow_id, e)
            self._add_final(
                "unavailable", "Temporal refused to give the run's history; reconnect to go on"
            )
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("following %s", self.workflow_id)
            self._add_final("unavailable", "the API could not read the run's history")
        finally:
            self.metrics.followed_runs.dec()
            self.closed = True
            self._grew.set()

    def _add_final(self, name: str, text: str) -> None:
        # An event with no id: the stream stops here, and a client that
        # reconnects goes on from its last real event.
        self.events.append(Event("", name, {"text": text}, Position(1 << 30, 0)))

    async def _first_run(self) -> str:
        """The first run of the chain, which every run's first event names."""
        async for event in chain_run(self.client, self.workflow_id, None).fetch_history_events(
            page_size=1
        ):
            return str(event.workflow_execution_started_event_attributes.first_execution_run_id)
        raise RuntimeError(f"workflow {self.workflow_id} has no history")

    async def _where_now(self) -> tuple[str, int] | None:
        """The chain's latest run and its last event now (None: unknown);
        whether it had closed is kept."""
        try:
            now = await chain_run(self.client, self.workflow_id, None).describe()
        except RPCError:
            return None
        self._closed_at_start = now.status != WorkflowExecutionStatus.RUNNING
        return now.run_id, now.raw_description.workflow_execution_info.history_length

    def _caught_up(self, run_id: str, event_id: int) -> None:
        """Once the history read reaches where it stood when the follower
        began: the turn under way gives what it wrote so far in one delta,
        at its latest batch, and each batch from then on as it comes."""
        if self.live or self._present is None:
            return
        if run_id != self._present[0] or event_id < self._present[1]:
            return
        self.live = True
        turn = self._turn
        if turn is not None and turn.marks:
            data = {"text": turn.text, "at": 0, "turn": turn.step, "agent": turn.agent}
            self._add(run_id, turn.marks[-1].position.event, "delta", data, turn=turn)

    async def _signaled(self, run_id: str, event: HistoryEvent) -> None:
        """A batch the model call published on the run's stream: its text,
        as a delta of the turn under way (kept until the follower is live)."""
        signaled = event.workflow_execution_signaled_event_attributes
        turn = self._turn
        if signaled.signal_name != PUBLISH_SIGNAL or turn is None:
            return
        [batch] = await self._decode(signaled.input) or [None]
        converter = self.client.data_converter.payload_converter
        before = turn.text
        position = Position(self._runs[run_id], event.event_id)
        events = published(batch, converter, self._published)
        publisher = str(batch.get("publisher_id") or "") if isinstance(batch, dict) else ""
        if not turn.take(position, events, publisher):
            return
        if self.live:
            data = {**(change(before, turn.text) or {}), "turn": turn.step, "agent": turn.agent}
            self._add(run_id, event.event_id, "delta", data, turn=turn)

    def _turn_ended(self, run_id: str, event: HistoryEvent, completed: bool) -> None:
        """The model call of the turn under way closed: completed, its whole
        text, for a client that missed some of it (the rest, in one delta)."""
        turn, self._turn = self._turn, None
        if turn is not None and completed and turn.marks:
            data = {"text": turn.text, "at": 0, "turn": turn.step, "agent": turn.agent}
            self._add(run_id, event.event_id, "delta", data, turn=turn)

    async def _take(self, run_id: str, event: HistoryEvent) -> None:
        kind = event.event_type
        self._recorded_ns = event.event_time.ToNanoseconds()
        self._recorded = event.event_time.ToJsonString()
        if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            self._runs.setdefault(run_id, len(self._runs))
        was = self._progress.session.get("answered")
        line = await self._progress.describe(event)
        if line is not None:
            name, text = step_event(line)
            self._add(run_id, event.event_id, name, {"text": text, "line": line})
        if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            if (
                event.activity_task_scheduled_event_attributes.activity_type.name
                in MODEL_ACTIVITIES
            ):
                self._model_scheduled.add(event.event_id)
                step = f"{run_id}.{event.event_id}"
                self._turn = Turn(run_id, step, self._progress.agent)
                self._turn_scheduled = event.event_id
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            await self._signaled(run_id, event)
        elif closed_activity(event) == self._turn_scheduled and self._turn is not None:
            self._turn_ended(run_id, event, kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED)
        if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            completed = event.activity_task_completed_event_attributes
            if completed.scheduled_event_id in self._model_scheduled:
                self._last_model_result = completed.result
                if current().approvals:
                    decoded = await self._decode(completed.result)
                    self._calls = call_ids(decoded[0] if decoded else None)
        elif (
            kind == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
            and self._may_wait
            and self._calls - self._asked
        ):
            await self._ask_pending(run_id, event.event_id)
        answered = self._progress.session.get("answered")
        if isinstance(answered, int) and answered != was and answered > self._answered:
            self._answered = answered
            await self._conversation_answer(run_id, event.event_id, answered)
        if kind in CLOSED:
            await self._closed(run_id, event)

    async def _ask_pending(self, run_id: str, event_id: int) -> None:
        """The requests that wait for a person once this workflow task is
        done: asked of the run (a query), each shown once, at the first
        workflow task after the model call that asked for it. The run says
        what waits now, not what waited then: a request is placed by the
        model call it came from, so a replica that reads the history later
        places it where one that read it live did, and one already decided is
        not shown."""
        try:
            found = await pending_requests(self.client, self.workflow_id, run_id)
        except Exception as e:
            # The run moved on (closed, continued) or no worker answered: its
            # requests are asked again after its next workflow task.
            log.info("run %s did not say what waits for a person: %s", self.workflow_id, e)
            return
        asked = 0
        for request in found:
            call_id = str(request.get("call_id"))
            if call_id in self._asked or call_id not in self._calls:
                continue
            self._asked.add(call_id)
            asked += 1
            self._add(run_id, event_id, "approval", approval_data(run_id, request), asked=asked)

    async def _conversation_answer(self, run_id: str, event_id: int, prompt: int) -> None:
        """A conversation's answer to ``prompt``: the run's, when it still
        holds it (the CONVERSATION query); for an earlier prompt, the text of
        its last model call, which history keeps."""
        data: dict[str, Any] | None = None
        try:
            state = await chain_run(self.client, self.workflow_id, None).query(
                CONVERSATION, result_type=dict, rpc_timeout=WORKER_ANSWERS_WITHIN
            )
            if isinstance(state, dict) and state.get("answered") == prompt:
                data = answer_data(state.get("answer"), prompt)
        except Exception:
            data = None
        if data is None:
            decoded = await self._decode(self._last_model_result)
            data = {
                "text": model_text(decoded[0] if decoded else None),
                "structured": False,
                "prompt": prompt,
                "outputs": [],
                "patch": False,
                "stopped": "",
                "guardrail": "",
            }
        self._add(run_id, event_id, "answer", data, asked=ANSWER_AFTER_REQUESTS)

    async def _closed(self, run_id: str, event: HistoryEvent) -> None:
        kind = event.event_type
        how = CLOSED[kind]
        if (
            kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
            and not self._progress.conversation
        ):
            decoded = await self._decode(event.workflow_execution_completed_event_attributes.result)
            self._add(
                run_id,
                event.event_id,
                "answer",
                answer_data(decoded[0] if decoded else None, None),
                1,
            )
        data: dict[str, Any] = {"status": how}
        if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
            data["reason"] = event.workflow_execution_failed_event_attributes.failure.message
        self._add(run_id, event.event_id, "end", data, asked=2)

    async def _decode(self, payloads: Any) -> list[Any]:
        if payloads is None:
            return []
        try:
            return list(await self.client.data_converter.decode(payloads.payloads))
        except Exception:
            return []

    async def after(self, position: Position | None) -> AsyncIterator[Event | None]:
        """The events after ``position`` (None: all), then each as it comes;
        None when nothing came for KEEP_ALIVE_SECONDS. Ends with the chain."""
        index = 0
        while True:
            grew = self._grew
            while index < len(self.events):
                event = self.events[index]
                index += 1
                if position is None or event.position > position:
                    yield event
            if self.closed:
                return
            try:
                await asyncio.wait_for(grew.wait(), KEEP_ALIVE_SECONDS)
            except TimeoutError:
                yield None


class Followers:
    """The followers of this API process, one per run followed."""

    def __init__(self, client: Client, metrics: ApiMetrics, page_size: int | None = None) -> None:
        self.client = client
        self.metrics = metrics
        # The history events read at once (None: the server's page, some
        # thousand events; the tests read less, to read a turn in pages).
        self.page_size = page_size
        self.running: dict[str, Follower] = {}

    @property
    def streams(self) -> int:
        return sum(each.clients for each in self.running.values())

    async def stream(
        self, workflow_id: str, conversation: bool, last_event_id: str | None
    ) -> AsyncIterator[bytes]:
        """The run's events as SSE, after ``last_event_id`` (None: from the
        first). ``BadEventId`` before any event for an id not of this API."""
        wanted = event_id_parts(last_event_id) if last_event_id else None
        follower = self.running.get(workflow_id)
        if follower is None or (follower.closed and follower.events and not follower.events[-1].id):
            follower = Follower(
                self.client, workflow_id, conversation, self.metrics, self.page_size
            )
            self.running[workflow_id] = follower
        follower.clients += 1
        self.metrics.open_streams.inc()
        try:
            position: Position | None = None
            # What this client has of each turn's text (deltas.py).
            had: dict[str, str] = {}
            async for event in follower.after(None):
                if event is None:
                    yield b": still following\n\n"
                    continue
                if wanted is not None and position is None:
                    run = follower.run_index(wanted[0])
                    if run is None:
                        # Before the run the client last saw: it has them.
                        continue
                    position = Position(run, wanted[1], wanted[2])
                if position is not None and not event.position > position:
                    continue
                if event.turn is not None:
                    shown = delta_for(event, had, position)
                    if shown is None:
                        continue
                    event = shown
                yield event.sse
        finally:
            follower.clients -= 1
            self.metrics.open_streams.dec()
            if follower.clients == 0 and self.running.get(workflow_id) is follower:
                del self.running[workflow_id]
                follower.task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await follower.task

    async def close(self) -> None:
        for follower in list(self.running.values()):
            follower.task.cancel()
        self.running.clear()
