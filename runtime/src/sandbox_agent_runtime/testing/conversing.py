"""A scripted model for conversations: each prompt has its own commands.

Like ``ScriptedModel`` it reads its progress from the conversation it is
given (the number of the latest tool call), so a worker that restarts, or a
prompt redone after a restore, picks up where the conversation stands; the
prompt it is on is the number of user messages in the conversation (a note
the workflow adds after a restore counts as one: give that prompt's
commands again in ``redo``). Its answer to prompt N is
``"prompt N: <what the last command printed>"``.

And a conversation as the tests drive it: start one, follow up, wait for
its state, read what its history and its answers say.
"""

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from agents import ModelResponse
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.openai_agents.testing import ResponseBuilders

from sandbox_agent_runtime.run_request import WORKING, Conversation, FollowUp, RunAnswer, RunRequest
from sandbox_agent_runtime.shared import CONVERSATION, FOLLOW_UP, SESSION_MEMO
from sandbox_agent_runtime.starter import start
from sandbox_agent_runtime.testing.scripted_model import (
    ScriptedModel,
    steps_done,
    tool_outputs,
    user_messages,
)
from sandbox_agent_runtime.testing.support import DATA_CONVERTER


class Conversing(ScriptedModel):
    """Runs ``prompts[i]``'s commands for the conversation's (i+1)-th user
    message, then answers."""

    def __init__(self, prompts: Sequence[Sequence[str]]) -> None:
        super().__init__([command for prompt in prompts for command in prompt])
        self.ends: list[int] = []
        for prompt in prompts:
            self.ends.append((self.ends[-1] if self.ends else 0) + len(prompt))
        # Every input it was given, in order.
        self.inputs: list[Any] = []

    async def get_response(
        self, system_instructions: str | None, input: str | list[Any], *args: Any, **kwargs: Any
    ) -> ModelResponse:
        self.inputs.append(input)
        return await super().get_response(system_instructions, input, *args, **kwargs)

    def _respond(self, input: str | list[Any]) -> ModelResponse:
        prompt = len(user_messages(input))
        end = self.ends[min(prompt, len(self.ends)) - 1]
        if steps_done(input) >= end:
            outputs = tool_outputs(input)
            printed = outputs[-1].split("Output:\n", 1)[-1] if outputs else ""
            return ResponseBuilders.output_message(f"prompt {prompt}: {printed}")
        return super()._respond(input)


async def conversation(client: Client, prompt: str) -> WorkflowHandle[Any, RunAnswer]:
    """Start a conversation (a run with follow-ups), as the starter does.

    Args:
        client: the Temporal client.
        prompt: its first prompt.

    Returns:
        The conversation's handle.
    """
    return await start(client, RunRequest(prompt, follow_ups=True))


async def until(
    handle: WorkflowHandle[Any, Any], reached: Callable[[Conversation], bool]
) -> Conversation:
    """The conversation's state (the ``CONVERSATION`` query) once ``reached``
    holds; the worker's time limit fails the test if it never does.

    Args:
        handle: the conversation.
        reached: what its state must show.

    Returns:
        The first state that shows it.
    """
    while True:
        state: Conversation = await handle.query(CONVERSATION, result_type=Conversation)
        if reached(state):
            return state
        await asyncio.sleep(0.05)


async def answered(handle: WorkflowHandle[Any, Any], prompt: int) -> Conversation:
    """The conversation's state once it has answered a prompt.

    Args:
        handle: the conversation.
        prompt: the prompt's number (the first is 1).

    Returns:
        Its state then.
    """
    return await until(handle, lambda state: state.answered >= prompt and state.state != WORKING)


async def follow_up(handle: WorkflowHandle[Any, Any], prompt: str) -> int:
    """Send a follow-up; the number the run gives its prompt."""
    number: int = await handle.execute_update(FOLLOW_UP, FollowUp(prompt), result_type=int)
    return number


async def session_memos(handle: WorkflowHandle[Any, Any]) -> list[dict[str, Any]]:
    """Each SESSION_MEMO the run wrote, in order, as its history records them."""
    converter = DATA_CONVERTER.payload_converter
    memos = []
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
            fields = event.workflow_properties_modified_event_attributes.upserted_memo.fields
            if SESSION_MEMO in fields:
                memos.append(converter.from_payload(fields[SESSION_MEMO], dict))
    return memos


def printed(answer: RunAnswer) -> list[str]:
    """The lines the last command of the prompt printed (Conversing's answer)."""
    text = str(answer.answer)
    assert text.startswith("prompt "), text
    return text.split(": ", 1)[1].splitlines()
