"""How the worker reads a model call's input: the conversation as the JSON the
workflow wrote.

Every model call carries the whole conversation. The plugin's converter
validates each item against the OpenAI input-item union, which took a third
of a long run's worker CPU (the template's docs/benchmarks.md, "The
worker's CPU in a long run"). The items are TypedDicts, plain dicts at run
time, so reading them as JSON gives the model the same items, cheaply.
Everything else in the input (settings, tools, tracing) is still validated.

A streamed model turn's events are read by their ``type``, in every process
alike. The plugin's streaming activity returns them as
``list[TResponseStreamEvent]``, but the workflow learns that type from the
activity's annotations with their ``Annotated`` metadata stripped: the bare
union of some sixty event types, without the discriminator. Events a
Responses endpoint sent without a field the installed ``openai`` requires
(``cache_write_tokens``) fail strict validation, and the plugin's lenient
reading of the bare union then gave the first member (an audio delta), unless
the ``openai`` client had parsed such events in the same process before (its
discriminator cache): a worker that had called the model read the turn, a
replayer or a fresh worker lost its tool calls (TMPRL1100). The events are
read with the discriminator here.

A payload no code could read (a lone surrogate in a run's request, which
JSON escapes but the plugin's JSON reader refuses) is an
``UndecodablePayload``, a failure retrying cannot fix: such a request fails
its run at once in one line naming the field, instead of failing its
workflow task for ever (issue 61).
"""

import dataclasses
import json
import typing
from collections.abc import Sequence
from itertools import zip_longest
from typing import Any

from agents.items import TResponseStreamEvent
from temporalio.api.common.v1 import Payload
from temporalio.converter import DataConverter
from temporalio.exceptions import ApplicationError
from temporalio.openai_agents import OpenAIPayloadConverter

# Not exported by the plugin; if it moves, the worker fails at import and
# runtime/tests/test_payloads.py says so.
from temporalio.openai_agents._invoke_model_activity import (
    ActivityModelInput,
    ModelActivity,
    StreamingActivityModelInput,
)

# The model activities' inputs (whole, streamed): their conversation read as JSON.
MODEL_INPUTS = (ActivityModelInput, StreamingActivityModelInput)

# A streamed turn's events as the workflow asks for them (the bare union),
# and as they are read (the union with its discriminator).
STREAM_EVENTS_ASKED: Any = typing.get_type_hints(ModelActivity.invoke_model_activity_streaming)[
    "return"
]
STREAM_EVENTS_READ: Any = list[TResponseStreamEvent]


class UndecodablePayload(ApplicationError, ValueError):
    """A payload no code could read, in one line: a failure (the
    workflow's, where its input is read), never retried."""

    def __init__(self, message: str) -> None:
        super().__init__(message, type="UndecodablePayload", non_retryable=True)


def not_text(value: Any, where: str = "") -> str | None:
    """The first string in ``value`` (JSON: objects, lists, strings) that
    UTF-8 cannot carry (a lone surrogate), by its path ("repo.url"); None."""
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return where or "value"
        return None
    if not isinstance(value, dict | list):
        return None
    items: Any = value.items() if isinstance(value, dict) else enumerate(value)
    for key, each in items:
        path = f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}" if where else key
        found = not_text(each, str(path))
        if found:
            return found
    return None


def unreadable(payloads: Sequence[Payload]) -> str | None:
    """Why ``payloads`` can never be read, whatever code reads them, in a
    line: a field holding a lone surrogate; None when none does."""
    for payload in payloads:
        try:
            where = not_text(json.loads(payload.data))
        except ValueError:
            continue
        if where:
            return (
                f"A payload cannot be read: its {where} holds a lone surrogate (a character "
                "UTF-8 cannot carry); send UTF-8 text."
            )
    return None


class AgentPayloadConverter(OpenAIPayloadConverter):
    """The plugin's converter, except for a model call's conversation; a
    payload no code could read is an ``UndecodablePayload``."""

    def from_payloads(
        self, payloads: Sequence[Payload], type_hints: list[type] | None = None
    ) -> list[Any]:
        try:
            return self._read(payloads, type_hints)
        except ValueError:
            # Any other error may be the reading code's, which a deploy can
            # fix: it fails the workflow task, which waits for the fix.
            why = unreadable(payloads)
            if why is None:
                raise
            raise UndecodablePayload(why) from None

    def _read(self, payloads: Sequence[Payload], type_hints: list[type] | None) -> list[Any]:
        if type_hints and STREAM_EVENTS_ASKED in type_hints:
            type_hints = [
                STREAM_EVENTS_READ if hint == STREAM_EVENTS_ASKED else hint for hint in type_hints
            ]
        if not type_hints or not any(hint in MODEL_INPUTS for hint in type_hints):
            return super().from_payloads(payloads, type_hints)
        return [
            self.model_input(payload, hint)
            if hint in MODEL_INPUTS
            else super().from_payloads([payload], [hint] if hint else None)[0]
            for payload, hint in zip_longest(payloads, type_hints)
        ]

    def model_input(self, payload: Payload, hint: Any = ActivityModelInput) -> ActivityModelInput:
        fields = json.loads(payload.data)
        conversation = fields.pop("input")
        rest = Payload(metadata=payload.metadata, data=json.dumps({**fields, "input": ""}).encode())
        value: ActivityModelInput = super().from_payloads([rest], [hint])[0]
        value["input"] = conversation
        return value


def with_agent_payloads(converter: DataConverter | None) -> DataConverter:
    """``converter`` (keeping its codec, if any) with AgentPayloadConverter;
    ``converter`` itself if it has it already, so clients can share one (and
    the pydantic schemas it has built)."""
    if converter is not None and converter.payload_converter_class is AgentPayloadConverter:
        return converter
    return dataclasses.replace(
        converter or DataConverter.default, payload_converter_class=AgentPayloadConverter
    )
