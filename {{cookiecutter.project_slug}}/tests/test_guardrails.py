"""Guardrails (docs/guardrails.md): the page's example, given to the agent,
stops a prompt whose input holds a credential before the model sees it, and
an answer its reviewer (a model call, so a model activity) blocks; the
answer names the guardrail, the starter exits 7, a conversation goes on, and
the run's history replays. The page's example is tests/guardrails_example.py,
word for word."""

import json
import re
from pathlib import Path
from typing import Any

import pytest
from agents import ModelResponse
from temporalio.client import Client
from temporalio.openai_agents.testing import ResponseBuilders
from temporalio.worker import Replayer

from sandbox_agent_runtime import (
    EXIT_GUARDRAIL,
    FOLLOW_UP,
    FollowUp,
    RunRequest,
    agents_plugin,
    follow,
    start,
    workflow_runner,
)
from sandbox_agent_runtime.testing import (
    SETTINGS,
{%- if cookiecutter.approval != "none" %}
    STARTER_SETTINGS,
{%- endif %}
    ScriptedModel,
    activities,
    answered,
    running_worker,
    sandboxes_for_tests,
)

from tests.guarded_workflow import GuardedAgentWorkflow
from tests.guardrails_example import REVIEWER

PAGE = Path(__file__).resolve().parents[1] / "docs" / "guardrails.md"
EXAMPLE = Path(__file__).with_name("guardrails_example.py")
WORKFLOWS = [GuardedAgentWorkflow]
FOUND = '{"found": ["api key"]}'


class Reviewing(ScriptedModel):
    """Runs ``commands`` as the agent; as the reviewer, blocks a text that
    mentions a password. ``inputs``: what the agent's own calls were given."""

    def __init__(self, commands: list[str]) -> None:
        super().__init__(commands)
        self.reviewed = 0
        self.inputs: list[str] = []

    async def get_response(
        self, system_instructions: str | None, input: str | list[Any], *args: Any, **kwargs: Any
    ) -> ModelResponse:
        text = input if isinstance(input, str) else json.dumps(input, default=str)
        if system_instructions != REVIEWER.instructions:
            self.inputs.append(text)
            return await super().get_response(system_instructions, input, *args, **kwargs)
        self.reviewed += 1
        return ResponseBuilders.output_message(
            "BLOCK: it gives a password away" if "password" in text else "ALLOW"
        )


def test_the_page_shows_the_example_word_for_word() -> None:
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.DOTALL)
    assert blocks and blocks[0] == EXAMPLE.read_text()


async def test_an_answer_the_reviewer_blocks_stops_the_prompt_naming_it(
    temporal_client: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    model = Reviewing(["echo the password is swordfish"])
    async with running_worker(temporal_client, model, workflows=WORKFLOWS) as (client, _):
        handle = await start(client, "What does the note say?")
        answer = await handle.result()
        capsys.readouterr()
        status = await follow(client, handle{{ ", STARTER_SETTINGS.approver_key_file" if cookiecutter.approval != "none" }})
        printed = capsys.readouterr()

    reason = "output guardrail 'reviewed' tripped: BLOCK: it gives a password away"
    assert answer.guardrail == "reviewed" and answer.stopped == f"stopped: {reason}"
    assert status == EXIT_GUARDRAIL == 7
    assert f"Stopped: {reason}" in printed.err
    # The reviewer's call is a model activity, after the agent's two.
    assert [step.is_model_call for step in await activities(handle)].count(True) == 3
    assert model.reviewed == 1
    replayer = Replayer(
        workflows=WORKFLOWS,
        plugins=[agents_plugin(SETTINGS, sandboxes=sandboxes_for_tests())],
        workflow_runner=workflow_runner(),
    )
    replayed = await replayer.replay_workflow(
        await handle.fetch_history(), raise_on_replay_failure=False
    )
    assert replayed.replay_failure is None


async def test_a_prompt_with_a_credential_never_reaches_the_model_and_a_follow_up_is_answered(
    temporal_client: Client,
) -> None:
    model = Reviewing(["echo hello"])
    async with running_worker(temporal_client, model, workflows=WORKFLOWS) as (client, _):
        handle = await start(client, RunRequest("My API key is sk-123, keep it.", follow_ups=True))
        tripped = (await answered(handle, 1)).answer
        await handle.execute_update(FOLLOW_UP, FollowUp("Say hello."), result_type=int)
        after = (await answered(handle, 2)).answer

    assert tripped is not None and after is not None
    assert tripped.guardrail == "no_credentials"
    assert tripped.stopped == f"stopped: input guardrail 'no_credentials' tripped: {FOUND}"
    assert "hello" in str(after.answer) and after.guardrail == ""
    assert all("sk-123" not in given for given in model.inputs)
