"""The model's text as it is written, for a run's live events: each
``delta`` event is read from the run's history, where the run's stream
(streaming.py) records what the model activity publishes, one signal a
batch. So the API's one reader of a run's history (events.py) is its one
reader of the stream too, it adds nothing to the run's history, and every
replica places each delta at the same history event.

A ``delta``'s id is that of a history event, as a step's is: the stream's
batch (``RUN_ID.EVENT_ID`` of its signal), or, for the rest of a turn that
has ended, the end of its model call (``RUN_ID.EVENT_ID`` of the call's
completion). Each says where in the turn's text a client stands after it,
so a client is sent only the text it has not had: at most one delta for
what it missed (the rest of an ended turn, or of a turn written while it
was away), then each batch as it comes. Its data: ``text``, ``at`` (where
``text`` goes in the turn's text: it is the text before it, but 0 after a
model call redone on another worker), ``turn`` (the id of the turn's
``model`` event) and ``agent``. A batch belongs to the model call under
way: a run's model calls come one at a time (the text of calls made at
once, by agents called as tools in parallel, would go to the latest)."""

import base64
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadConverter

from sandbox_agent_runtime.shared import MODEL_TOPIC

# The signal by which temporalio.contrib.workflow_streams publishes a batch
# (its _PUBLISH_SIGNAL), and its input: {"items": [{"topic", "data": base64
# of a Payload}], "publisher_id", "sequence"}.
PUBLISH_SIGNAL = "__temporal_workflow_stream_publish"


def published(batch: Any, converter: PayloadConverter, seen: dict[str, int]) -> list[Any]:
    """The model's stream events in a batch the run's stream received (the
    signal's input, decoded), or [] for a batch the stream dropped as a
    repeat (``seen``: the latest sequence of each publisher, kept here)."""
    if not isinstance(batch, dict):
        return []
    publisher, sequence = str(batch.get("publisher_id") or ""), batch.get("sequence")
    if publisher and isinstance(sequence, int):
        if sequence <= seen.get(publisher, -1):
            return []
        seen[publisher] = sequence
    events = []
    for item in batch.get("items") or []:
        if not isinstance(item, dict) or item.get("topic") != MODEL_TOPIC:
            continue
        payload = Payload()
        try:
            payload.ParseFromString(base64.b64decode(str(item.get("data", ""))))
            events.append(converter.from_payload(payload))
        except Exception:
            continue
    return events


@dataclass(frozen=True, order=True)
class Mark:
    """Where a turn's text stood after one of its history events: the
    event's position (events.Position), the model call's attempt, the
    length of that attempt's text."""

    position: Any
    attempt: int
    length: int


@dataclass
class Turn:
    """One model turn, as the run's stream wrote it: the id of its ``model``
    event, its agent, the text of each attempt of its model call (a call
    redone writes anew) and where its text stood after each batch."""

    run_id: str
    step: str
    agent: str
    attempts: list[str] = field(default_factory=lambda: [""])
    marks: list[Mark] = field(default_factory=list)
    # The publisher of the latest attempt (its stream client's id): an
    # attempt given up for lost (a heartbeat timed out) may still publish
    # while the next one writes, and its text is not the turn's.
    writer: str = ""
    # The position of its latest event listed for clients.
    listed: Any = None

    @property
    def text(self) -> str:
        return self.attempts[-1]

    def take(self, position: Any, events: list[Any], publisher: str = "") -> bool:
        """Take a batch's stream events, published by ``publisher``; whether
        the turn's text changed."""
        before = (len(self.attempts), len(self.text))
        for event in events:
            kind = event.get("type") if isinstance(event, dict) else None
            if kind == "response.created":
                if self.text:
                    # The model call begins again (its worker was lost).
                    self.attempts.append("")
                self.writer = publisher
            elif kind == "response.output_text.delta" and publisher == self.writer:
                self.attempts[-1] += str(event.get("delta", ""))
        if (len(self.attempts), len(self.text)) == before:
            return False
        self.marks.append(Mark(position, len(self.attempts) - 1, len(self.text)))
        return True

    def text_at(self, position: Any) -> str:
        """The turn's text as it stood at ``position`` (None: before it)."""
        if position is None:
            return ""
        index = bisect_right(self.marks, position, key=lambda mark: mark.position)
        if index == 0:
            return ""
        mark = self.marks[index - 1]
        return self.attempts[mark.attempt][: mark.length]


def common_start(one: str, other: str) -> int:
    """How many characters ``one`` and ``other`` begin with alike."""
    most = min(len(one), len(other))
    if one[:most] == other[:most]:
        return most
    return next(index for index in range(most) if one[index] != other[index])


def change(had: str, now: str) -> dict[str, Any] | None:
    """A delta's ``text`` and ``at`` that take a client from ``had`` to
    ``now`` (None: it has it)."""
    if had == now:
        return None
    at = common_start(had, now)
    return {"text": now[at:], "at": at}
