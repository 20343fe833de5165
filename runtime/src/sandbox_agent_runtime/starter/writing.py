"""The model's text as it is written, when the starter's output is a
terminal: each model turn's text, read from the run's stream
(client/stream.py), indented under the step lines; a step line printed
while a turn is being written goes on a line of its own. Piped, none of
this: the answer is printed whole, as scripts read it today.

A turn shown from its start to its end is the answer when its text is the
run's answer; it is then not printed again (``shown_whole``)."""

import asyncio
import re
import sys
from contextlib import suppress

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from sandbox_agent_runtime.client.stream import StreamEvent, read_run_stream, stream_offset
from sandbox_agent_runtime.display import visible
from sandbox_agent_runtime.shared import MODEL_ACTIVITIES

# Under the step lines' text ("  model    turn 2").
INDENT = " " * 11
# How long the end of a run's answer may take to come through its stream
# once its history has it (one read of the stream each 100 ms).
CATCH_UP = 5.0


def writes_as_it_comes() -> bool:
    """Whether to print the model's text as it is written: on a terminal."""
    return sys.stdout.isatty()


async def offset_now(client: Client, workflow_id: str) -> int | None:
    """Where the run's stream ends now (what it writes from here on is new);
    None when it has none to read (a run from before streams) or no worker
    answers."""
    try:
        return await asyncio.wait_for(stream_offset(client, workflow_id), CATCH_UP)
    except Exception:  # noqa: BLE001 (no stream, no worker answering: whole answers then)
        return None


class Writing:
    """What of the model's text is on the screen.

    Args:
        from_start: the stream is read from its start, as the history is:
            the k-th model turn the stream starts is the k-th ``model`` step
            line, and a turn's text waits for its line (the stream may be
            read ahead of the history, whose reader waits at a prompt or
            lags under load). Read from elsewhere (``--attach``, a
            follow-up), the text is shown as it comes.
    """

    def __init__(self, from_start: bool = False) -> None:
        # Whether the next character begins a line.
        self.at_line_start = True
        # The turn being shown (its start's offset), whether its text was
        # read from its start, and its text shown so far.
        self.turn = -1
        self.read_whole = False
        self.text = ""
        # The text of the latest turn shown from its start to its end.
        self.whole: str | None = None
        # The latest offset read, and set when it moves.
        self.offset = -1
        self.moved = asyncio.Event()
        # The model calls scheduled in the history read, by event id.
        self.model_calls: set[int] = set()
        # Read from the start: the model step lines printed, the turns
        # whose text was begun, and the events read ahead of their line.
        self.from_start = from_start
        self.model_lines = 0
        self.turns_begun = 0
        self.begun_at = -1
        self.held: list[StreamEvent] = []

    def ends_a_model_call(self, event: HistoryEvent) -> bool:
        """Whether ``event`` (of the run's history, read in order) ends a
        model call: its text then comes through the stream before the steps
        after it are printed (the history is read apart, and may be ahead)."""
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attributes = event.activity_task_scheduled_event_attributes
            if attributes.activity_type.name in MODEL_ACTIVITIES:
                self.model_calls.add(event.event_id)
            return False
        ended = {
            EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: "activity_task_completed_event_attributes",
            EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: "activity_task_failed_event_attributes",
            EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: "activity_task_timed_out_event_attributes",
        }.get(event.event_type)
        if ended is None:
            return False
        return getattr(event, ended).scheduled_event_id in self.model_calls

    def line(self, text: str) -> None:
        """Print a line of the steps (after the text being written, if any);
        after a ``model`` step line, its turn's text read ahead of it."""
        self._end_line()
        print(text, flush=True)
        if text.lstrip().startswith("model    turn "):
            self.model_lines += 1
            self._release()

    def _release(self, every: bool = False) -> None:
        """Show the events held, up to the first of a turn whose line is
        not printed yet (``every``: all of them)."""
        while self.held and (every or self._may_show(self.held[0])):
            self._show(self.held.pop(0))

    def shown_whole(self, answer: str) -> bool:
        """Whether ``answer`` is the text of the latest turn, shown whole."""
        return self.whole is not None and self.whole.rstrip("\n") == answer.rstrip("\n")

    def take(self, event: StreamEvent) -> None:
        """Show one event of the run's stream, or hold it until its turn's
        step line is printed (``from_start``)."""
        if self.held or not self._may_show(event):
            self.held.append(event)
        else:
            self._show(event)
        # Read (held or shown): the text of the turns before it is shown.
        self.offset = event.offset
        self.moved.set()

    def _may_show(self, event: StreamEvent) -> bool:
        return (
            not self.from_start
            or event.kind != "turn_started"
            or event.offset <= self.begun_at  # read again (a chain's stream handed on)
            or self.turns_begun < self.model_lines
        )

    def _show(self, event: StreamEvent) -> None:
        if event.kind == "turn_started" and event.offset > self.begun_at:
            self.turns_begun, self.begun_at = self.turns_begun + 1, event.offset
        if event.kind == "turn_started":
            self._end_line()
            self.turn, self.read_whole, self.text, self.whole = event.offset, True, "", None
        elif event.kind == "delta":
            if event.turn != self.turn:
                # Read from inside a turn whose start was not read.
                self._end_line()
                self.turn, self.read_whole, self.text, self.whole = event.turn, False, "", None
            self._write(event.text)
        elif event.kind == "turn_restarted":
            # The model call was made again (its worker was lost): its text comes again.
            self._end_line()
            print(f"{INDENT}(the model call was made again; its text again:)", flush=True)
            self.text = ""
        elif event.kind == "turn_ended":
            self._end_line()
            shown = self.read_whole and event.turn == self.turn and self.text == event.text
            self.whole = event.text if shown else None

    async def read(self, client: Client, workflow_id: str, from_offset: int) -> None:
        """Show the run's stream from ``from_offset`` until the run ends (or
        the reading is cancelled). A stream that cannot be read shows
        nothing: the answer is then printed whole."""
        with suppress(Exception):  # whole answers then
            async for event in read_run_stream(client, workflow_id, from_offset):
                self.take(event)

    async def caught_up(
        self, client: Client, workflow_id: str, reading: "asyncio.Task[None]", last: bool = False
    ) -> None:
        """Wait, for CATCH_UP at most, until what the run's stream holds now
        is read, the turns before shown (the run ended: until the reading
        ends; ``last``: every turn shown). The run's worker answers where its
        stream ends after the history read so far."""
        offset = await offset_now(client, workflow_id)
        try:
            async with asyncio.timeout(CATCH_UP):
                if offset is None:
                    await asyncio.shield(reading)
                    return
                while self.offset < offset - 1 and not reading.done():
                    self.moved.clear()
                    await self.moved.wait()
        except TimeoutError:
            pass
        finally:
            if last:
                self._release(every=True)
            self._end_line()

    def _write(self, text: str) -> None:
        shown: list[str] = []
        for piece in re.split(r"(\n)", visible(text, keep_lines=True)):
            if piece == "\n":
                shown.append("\n")
                self.at_line_start = True
            elif piece:
                if self.at_line_start:
                    shown.append(INDENT)
                    self.at_line_start = False
                shown.append(piece)
        sys.stdout.write("".join(shown))
        sys.stdout.flush()
        self.text += text

    def _end_line(self) -> None:
        if not self.at_line_start:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self.at_line_start = True
