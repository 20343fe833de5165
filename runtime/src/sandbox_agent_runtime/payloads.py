"""How the worker reads a model call's input: the conversation as the JSON the
workflow wrote.

Every model call carries the whole conversation (up to the compaction
threshold, a few hundred kB in a long run). The plugin's converter validates
each item against the OpenAI input-item union, which costs about 55 ms of
worker CPU per call at 350 kB: a third of a 300-step run's CPU
(sandbox-agent-template's docs/benchmarks.md). The items are TypedDicts, which are
plain dicts at run time, so reading them as JSON gives the model the same
items, cheaply. Everything else in the input (settings, tools, tracing) is
still validated.
"""

import dataclasses
import json
from collections.abc import Sequence
from itertools import zip_longest
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.converter import DataConverter
from temporalio.openai_agents import OpenAIPayloadConverter

# Not exported by the plugin; if it moves, the worker fails at import and
# runtime/tests/test_payloads.py says so.
from temporalio.openai_agents._invoke_model_activity import ActivityModelInput


class AgentPayloadConverter(OpenAIPayloadConverter):
    """The plugin's converter, except for a model call's conversation."""

    def from_payloads(
        self, payloads: Sequence[Payload], type_hints: list[type] | None = None
    ) -> list[Any]:
        if not type_hints or ActivityModelInput not in type_hints:
            return super().from_payloads(payloads, type_hints)
        return [
            self.model_input(payload)
            if hint is ActivityModelInput
            else super().from_payloads([payload], [hint] if hint else None)[0]
            for payload, hint in zip_longest(payloads, type_hints)
        ]

    def model_input(self, payload: Payload) -> ActivityModelInput:
        fields = json.loads(payload.data)
        conversation = fields.pop("input")
        rest = Payload(metadata=payload.metadata, data=json.dumps({**fields, "input": ""}).encode())
        value: ActivityModelInput = super().from_payloads([rest], [ActivityModelInput])[0]
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
