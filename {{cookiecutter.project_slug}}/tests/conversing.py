"""A scripted model for conversations: each prompt has its own commands.

Like ``ScriptedModel`` it reads its progress from the conversation it is
given (the number of the latest tool call), so a worker that restarts, or a
prompt redone after a restore, picks up where the conversation stands; the
prompt it is on is the number of user messages in the conversation (a note
the workflow adds after a restore counts as one: give that prompt's
commands again in ``redo``). Its answer to prompt N is
``"prompt N: <what the last command printed>"``.
"""

from collections.abc import Sequence
from typing import Any

from agents import ModelResponse
from temporalio.openai_agents.testing import ResponseBuilders

from .scripted_model import ScriptedModel, steps_done, tool_outputs


def user_messages(conversation: str | list[Any]) -> list[str]:
    """The text of every user message of the conversation, in order."""
    if isinstance(conversation, str):
        return [conversation]
    return [
        str(item.get("content"))
        for item in conversation
        if isinstance(item, dict) and item.get("role") == "user"
    ]


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
