"""The worker reads a model call's input as the plugin would, without
validating each conversation item, and a streamed turn's events by their
type in any process (payloads.py)."""

import json
import subprocess
import sys
import textwrap
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


# A streamed turn as a Responses endpoint may send it: its usage without a
# field the installed openai requires (cache_write_tokens), so the events
# fail strict validation and are read leniently.
TURN = [
    {
        "type": "response.created",
        "sequence_number": 0,
        "response": {
            "id": "resp_1",
            "created_at": 0.0,
            "model": "m",
            "object": "response",
            "output": [],
            "parallel_tool_calls": False,
            "tool_choice": "auto",
            "tools": [],
            "status": "in_progress",
        },
    },
    {
        "type": "response.completed",
        "sequence_number": 1,
        "response": {
            "id": "resp_1",
            "created_at": 0.0,
            "model": "m",
            "object": "response",
            "output": [
                {
                    "type": "function_call",
                    "id": "fc_0",
                    "call_id": "call_0",
                    "name": "exec_command",
                    "arguments": '{"cmd": "ls"}',
                    "status": "completed",
                }
            ],
            "parallel_tool_calls": False,
            "tool_choice": "auto",
            "tools": [],
            "status": "completed",
            "usage": {
                "input_tokens": 10,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 5,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 15,
            },
        },
    },
]

# Read in a process of its own: one where the openai client has parsed no
# stream (a replayer, a worker just started), as the workflow asks for it.
READ_IN_A_FRESH_PROCESS = textwrap.dedent(
    """
    import json, sys, typing
    from temporalio.api.common.v1 import Payload
    from temporalio.openai_agents._invoke_model_activity import ModelActivity
    from sandbox_agent_runtime.payloads import AgentPayloadConverter
    asked = typing.get_type_hints(ModelActivity.invoke_model_activity_streaming)["return"]
    payload = Payload(metadata={"encoding": b"json/plain"}, data=sys.stdin.read().encode())
    [events] = AgentPayloadConverter().from_payloads([payload], [asked])
    print(json.dumps([
        [type(event).__name__, [item.type for item in getattr(event, "response").output]]
        for event in events
    ]))
    """
)


def test_a_streamed_turn_reads_by_its_events_types_in_a_fresh_process() -> None:
    """A replayer, or a worker that has not called the model yet, reads a
    streamed turn's events as the worker that ran it did: by their type, its
    tool call kept (before, the first type of the union: an audio delta)."""
    read = subprocess.run(
        [sys.executable, "-c", READ_IN_A_FRESH_PROCESS],
        input=json.dumps(TURN),
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(read.stdout) == [
        ["ResponseCreatedEvent", []],
        ["ResponseCompletedEvent", ["function_call"]],
    ]
