"""The worker reads a model call's input as the plugin would, without
validating each conversation item (payloads.py)."""

import json
from collections.abc import Iterator
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.openai_agents import OpenAIPayloadConverter
from temporalio.openai_agents._invoke_model_activity import ActivityModelInput

from sandbox_agent_runtime.payloads import AgentPayloadConverter
from sandbox_agent_runtime.shared import MODEL_ACTIVITIES
from sandbox_agent_runtime.testing.support import (
    DATA_CONVERTER,
    SETTINGS,
    CompletedRun,
    sandboxes_for_tests,
    with_plugins,
)
from sandbox_agent_runtime.worker import agents_plugin


def plain(value: Any) -> Any:
    """``value`` with every iterable the validator made lazy read into a list."""
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple | Iterator):
        return [plain(item) for item in value]
    return value


async def last_model_input(run: CompletedRun) -> Payload:
    history = await run.handle.fetch_history()
    inputs = [
        event.activity_task_scheduled_event_attributes.input.payloads[0]
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and event.activity_task_scheduled_event_attributes.activity_type.name in MODEL_ACTIVITIES
    ]
    return inputs[-1]


async def test_a_model_input_reads_as_the_plugins_converter_reads_it(
    completed_run: CompletedRun,
) -> None:
    # The run's last model call carries its whole conversation: the prompt,
    # the agent's commands and their outputs.
    payload = await last_model_input(completed_run)
    ours = AgentPayloadConverter().from_payloads([payload], [ActivityModelInput])[0]
    theirs = OpenAIPayloadConverter().from_payloads([payload], [ActivityModelInput])[0]

    assert len(ours["input"]) >= 5
    assert ours["input"] == json.loads(payload.data)["input"]
    assert plain(ours) == plain(theirs)
    # The rest is still validated into the SDK's types.
    assert type(ours["model_settings"]) is type(theirs["model_settings"])


def test_the_worker_and_its_tests_use_it(temporal_client: Client) -> None:
    config = temporal_client.config()
    config["plugins"] = [agents_plugin(SETTINGS, sandboxes=sandboxes_for_tests())]
    assert Client(**config).data_converter.payload_converter_class is AgentPayloadConverter
    # A client that has one keeps it: the tests' clients share one converter.
    shared = with_plugins(temporal_client, agents_plugin(SETTINGS, sandboxes=sandboxes_for_tests()))
    assert shared.data_converter is DATA_CONVERTER
