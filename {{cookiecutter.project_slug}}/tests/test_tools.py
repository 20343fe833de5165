"""The agent's own tools (tools.py, agent.py): the model's call reaches the
tool's activity on a worker, its result reaches the model, and the call is
retried, recorded, shown and counted as that tool."""

import json
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from agents import ModelResponse
from temporalio.client import Client
from temporalio.openai_agents.testing import ResponseBuilders, TestModel

from sandbox_agent_runtime import EXIT_COMPLETED, follow, start
from sandbox_agent_runtime.testing import (
{%- if cookiecutter.approval != "none" %}
    STARTER_SETTINGS,
{%- endif %}
    TOOL_CALLS,
    activities,
    metered_client,
    running_worker,
    step_name,
    tool_of,
    tool_outputs,
)

from {{ cookiecutter.package_name }} import tools


class AsksTheTime(TestModel):
    """Calls ``current_time`` for ``zone``, then answers with what it
    returned; keeps every input it was given."""

    def __init__(self, zone: str) -> None:
        super().__init__(lambda: ResponseBuilders.output_message(""))
        self.zone = zone
        self.inputs: list[Any] = []

    async def get_response(
        self, system_instructions: str | None, input: str | list[Any], *args: Any, **kwargs: Any
    ) -> ModelResponse:
        self.inputs.append(input)
        outputs = tool_outputs(input)
        if outputs:
            return ResponseBuilders.output_message(f"It is {outputs[-1]}")
        return ResponseBuilders.tool_call(
            json.dumps({"zone": self.zone}), "current_time", call_id="call_time", item_id="fc_time"
        )


def tool_calls(steps: list[Any]) -> list[Any]:
    return [step for step in steps if step.is_tool_call]


async def test_the_models_call_reaches_the_tool_and_its_result_reaches_the_model(
    temporal_client: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    model = AsksTheTime("UTC")
    async with (
        metered_client(temporal_client) as (client, metrics),
        running_worker(client, model) as (plugged, _),
    ):
        handle = await start(plugged, "What time is it in UTC?")
        answer = (await handle.result()).answer
        # The result the tool returned, an ISO time in UTC, reached the model.
        assert answer.startswith("It is ") and answer.endswith("+00:00"), answer
        assert tool_outputs(model.inputs[-1]) == [answer.removeprefix("It is ")]
        # It ran as the tool's activity, on the worker, once.
        [call] = tool_calls(await activities(handle))
        assert (call.name, call.attempt, call.failed) == ("current_time", 1, False)
        assert await metrics.total(TOOL_CALLS, tool="current_time", outcome="ok") == 1
        # The starter shows the call as the tool's, with what the model asked.
        capsys.readouterr()
        assert await follow(plugged, handle{{ ", STARTER_SETTINGS.approver_key_file" if cookiecutter.approval != "none" }}) == EXIT_COMPLETED
        shown = [line.strip() for line in capsys.readouterr().out.splitlines()]
        assert 'tool     current_time "UTC"' in shown, shown


# A real retry's back-off (a second): under -m faults, out of the first run.
@pytest.mark.faults
async def test_a_tool_call_that_fails_is_retried_like_any_activity(
    temporal_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts = []

    def flaky_zone(name: str) -> ZoneInfo:
        attempts.append(name)
        if len(attempts) == 1:
            raise OSError("the zone database is being updated")
        return ZoneInfo(name)

    # The worker runs in this process: its first lookup fails.
    monkeypatch.setattr(tools, "ZoneInfo", flaky_zone)
    async with running_worker(temporal_client, AsksTheTime("Europe/Paris")) as (client, _):
        handle = await start(client, "What time is it in Paris?")
        answer = (await handle.result()).answer
    assert answer.startswith("It is "), answer
    [call] = tool_calls(await activities(handle))
    assert (call.attempt, call.failed) == (2, False)
    assert attempts == ["Europe/Paris", "Europe/Paris"]


async def test_an_error_no_retry_fixes_reaches_the_model_at_once(temporal_client: Client) -> None:
    model = AsksTheTime("Mars/Olympus_Mons")
    async with running_worker(temporal_client, model) as (client, _):
        handle = await start(client, "What time is it on Mars?")
        answer = (await handle.result()).answer
    [call] = tool_calls(await activities(handle))
    assert (call.attempt, call.failed) == (1, True)
    # The model was told why, as the tool's result, and the run went on.
    assert answer == (
        "It is The tool current_time failed: Unknown time zone 'Mars/Olympus_Mons': "
        "use an IANA name such as 'Europe/Paris' or 'UTC'."
    ), answer


def test_a_tools_activity_is_named_as_the_tool() -> None:
    assert tool_of("current_time") == "current_time"
    assert tool_of("invoke_model_activity") is None
    assert tool_of("{{ cookiecutter.sandbox_provider_name }}-sandbox_session_exec") is None
    assert step_name("current_time") == "the tool current_time"
    assert step_name("invoke_model_activity") == "the model call"
