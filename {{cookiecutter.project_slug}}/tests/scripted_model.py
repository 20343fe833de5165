"""A scripted stand-in for the model, so the tests need no API key.

It runs a fixed list of shell commands through the sandbox's ``exec_command``
tool, one per turn, then answers with what the last command printed. It reads
its progress from the conversation it is given rather than from a counter of
its own, exactly as a real model would: a worker that restarts part-way
through a run picks up where the last one stopped.
"""

import json
from collections.abc import Sequence
from typing import Any

from agents import ModelResponse
from temporalio.openai_agents.testing import ResponseBuilders, TestModel


def tool_outputs(conversation: str | list[Any]) -> list[str]:
    if isinstance(conversation, str):
        return []
    return [
        str(item["output"])
        for item in conversation
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]


class ScriptedModel(TestModel):
    def __init__(self, commands: Sequence[str]) -> None:
        super().__init__(lambda: ResponseBuilders.output_message(""))
        self.commands = list(commands)

    async def get_response(
        self, system_instructions: str | None, input: str | list[Any], *args: Any, **kwargs: Any
    ) -> ModelResponse:
        outputs = tool_outputs(input)
        step = len(outputs)
        if step < len(self.commands):
            return ResponseBuilders.tool_call(
                json.dumps({"cmd": self.commands[step]}),
                "exec_command",
                call_id=f"call_{step}",
                item_id=f"fc_{step}",
            )
        return ResponseBuilders.output_message(outputs[-1] if outputs else "nothing to do")
