"""A scripted stand-in for the model, so the tests need no API key.

It runs a fixed list of shell commands through the sandbox's ``exec_command``
tool, one per turn (a step that is a patch, ``*** Begin Patch ...``, goes to
the filesystem's ``apply_patch`` tool instead, and a ``Call`` calls any tool
with any arguments, as a confused or hostile model would), then answers with
what the last step returned. It reads
its progress from the conversation it is given rather than from a counter of
its own, exactly as a real model would: a worker that restarts part-way
through a run picks up where the last one stopped. Asked to, it compacts the
conversation as the Responses API does: a ``compaction`` item, after which
the SDK sends only what follows it. Each response reports a token count of
its own (``reported``), so the tests can compare what the service counted.
Streamed, it writes its text at a fixed rate (``stream_response``).
"""

import json
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agents import Model, ModelProvider, ModelResponse, Usage
from openai.types.responses import ResponseCompactionItem, ResponseCustomToolCall
from temporalio.openai_agents.testing import ResponseBuilders, TestModel

from sandbox_agent_runtime.streaming import stream_of

# Streamed, the scripted model writes its text 8 characters at a time, at
# once (a test that needs a fixed rate sets delta_every: 0.01 is a delta each
# 10 ms).
DELTA_CHARS = 8
DELTA_EVERY = 0.0


def tool_outputs(conversation: str | list[Any]) -> list[str]:
    """What the tools gave the model so far.

    Args:
        conversation: the model's input, as the Agents SDK passes it.

    Returns:
        Each tool call's output, in order; none for a bare prompt.
    """
    if isinstance(conversation, str):
        return []
    return [
        str(item["output"])
        for item in conversation
        if isinstance(item, dict)
        and item.get("type") in ("function_call_output", "custom_tool_call_output")
    ]


def call_id(step: int, agent: str = "") -> str:
    """The id of the scripted model's call for ``step`` (from 0): ``call_<step>``,
    or ``call_<agent>_<step>`` for the script of one agent of several."""
    return f"call_{agent}_{step}" if agent else f"call_{step}"


def steps_done(conversation: str | list[Any], agent: str = "") -> int:
    """How many commands the conversation shows asked for: one more than the
    number in the latest tool call's id (``call_<step>``), so the count
    survives a compaction.

    Args:
        conversation: the model's input, as the Agents SDK passes it.
        agent: whose calls to count (``call_<agent>_<step>``): a conversation
            handed off from another agent holds that agent's calls too.

    Returns:
        The number of commands.
    """
    if isinstance(conversation, str):
        return 0
    own = re.compile(re.escape(call_id(0, agent)).removesuffix("0") + r"(\d+)")
    for item in reversed(conversation):
        if isinstance(item, dict) and item.get("type") in ("function_call", "custom_tool_call"):
            found = own.fullmatch(str(item["call_id"]))
            if found:
                return int(found[1]) + 1
    return 0


@dataclass(frozen=True)
class Call:
    """A step that calls ``tool`` with ``arguments`` exactly as written (not
    necessarily JSON, not necessarily a tool the agent has); ``custom``: as a
    freeform call, the way the model calls ``apply_patch``."""

    tool: str
    arguments: str
    custom: bool = False


class ScriptedModel(TestModel):
    """A model that runs ``commands`` one per turn through the sandbox's
    tools, reading its progress from the conversation (so a worker that
    restarts part-way picks up where the last stopped), then answers with
    what the last one returned.

    Args:
        commands: shell commands, patches (``*** Begin Patch ...``) or
            ``Call``s, in order.
        compact_at: the step (from 0) whose response also compacts the
            conversation, as the Responses API does; None for none.
        agent: a name for its calls' ids (``call_<agent>_<step>``), when it
            is the model of one agent of several (``ScriptedAgents``).
        delta_chars: streamed, the characters of each text delta.
        delta_every: streamed, the seconds between two deltas (a fixed rate).
    """

    def __init__(
        self,
        commands: Sequence[str | Call],
        compact_at: int | None = None,
        agent: str = "",
        delta_chars: int = DELTA_CHARS,
        delta_every: float = DELTA_EVERY,
    ) -> None:
        super().__init__(lambda: ResponseBuilders.output_message(""))
        self.commands = list(commands)
        self.agent = agent
        # Compact the conversation in the response to this step.
        self.compact_at = compact_at
        # The size of each call's input (bytes of JSON), in order.
        self.input_sizes: list[int] = []
        # The usage each response reported, in order.
        self.reported: list[Usage] = []
        # What each step returned, as the latest call carried it.
        self.results: list[str] = []
        self.delta_chars, self.delta_every = delta_chars, delta_every

    async def get_response(
        self, system_instructions: str | None, input: str | list[Any], *args: Any, **kwargs: Any
    ) -> ModelResponse:
        self.input_sizes.append(len(json.dumps(input, default=str)))
        self.results = tool_outputs(input)
        response = self._respond(input)
        # About four bytes a token, as for English text.
        response.usage = Usage(
            requests=1,
            input_tokens=self.input_sizes[-1] // 4,
            output_tokens=len(json.dumps([item.model_dump() for item in response.output])) // 4,
        )
        self.reported.append(response.usage)
        return response

    async def stream_response(
        self, system_instructions: str | None, input: str | list[Any], *args: Any, **kwargs: Any
    ) -> AsyncIterator[Any]:
        """The response ``get_response`` gives, streamed as the Responses API
        does: its text in deltas of ``delta_chars``, one each ``delta_every``."""
        response = await self.get_response(system_instructions, input, *args, **kwargs)
        async for event in stream_of(response, self.delta_chars, self.delta_every):
            yield event

    def _respond(self, input: str | list[Any]) -> ModelResponse:
        outputs = tool_outputs(input)
        step = steps_done(input, self.agent)
        if step >= len(self.commands):
            return ResponseBuilders.output_message(outputs[-1] if outputs else "nothing to do")
        command = self.commands[step]
        if isinstance(command, str) and command.startswith("*** Begin Patch"):
            command = Call("apply_patch", command, custom=True)
        if isinstance(command, Call) and command.custom:
            return ResponseBuilders.model_response(
                ResponseCustomToolCall(
                    call_id=call_id(step, self.agent),
                    input=command.arguments,
                    name=command.tool,
                    type="custom_tool_call",
                    id=f"ctc_{step}",
                )
            )
        if isinstance(command, Call):
            return ResponseBuilders.tool_call(
                command.arguments,
                command.tool,
                call_id=call_id(step, self.agent),
                item_id=call_id(step, self.agent).replace("call_", "fc_", 1),
            )
        response = ResponseBuilders.tool_call(
            json.dumps({"cmd": command}),
            "exec_command",
            call_id=call_id(step, self.agent),
            item_id=call_id(step, self.agent).replace("call_", "fc_", 1),
        )
        if step == self.compact_at:
            compaction = ResponseCompactionItem(
                id=f"cmp_{step}", type="compaction", encrypted_content=f"compacted at {step}"
            )
            response.output.insert(0, compaction)
        return response


class KeepsInputs(ScriptedModel):
    """The scripted model, keeping every input it was given."""

    def __init__(self, commands: Sequence[str | Call]) -> None:
        super().__init__(commands)
        self.inputs: list[Any] = []

    async def get_response(
        self, system_instructions: str | None, input: str | list[Any], *args: Any, **kwargs: Any
    ) -> ModelResponse:
        self.inputs.append(input)
        return await super().get_response(system_instructions, input, *args, **kwargs)


def user_messages(conversation: str | list[Any]) -> list[str]:
    """The text of every user message of the conversation, in order."""
    if isinstance(conversation, str):
        return [conversation]
    return [
        str(item.get("content"))
        for item in conversation
        if isinstance(item, dict) and item.get("role") == "user"
    ]


class ScriptedAgents(ModelProvider):
    """The scripted models of several agents (handoffs, agents as tools),
    one script per agent, keyed by the agent's model name: each agent
    declares a model of its own, and the model activity is given that name.
    Each script's call ids carry its key, so each agent counts its own
    steps in a conversation another agent handed on.

    Args:
        scripts: each agent's model name, and its commands (as
            ``ScriptedModel`` takes them).
    """

    def __init__(self, scripts: Mapping[str, Sequence[str | Call]]) -> None:
        self.models = {
            name: ScriptedModel(commands, agent=re.sub(r"\W", "_", name))
            for name, commands in scripts.items()
        }
        # The model name of each call, in order.
        self.calls: list[str] = []

    def get_model(self, model_name: str | None) -> Model:
        """The scripted model of the agent whose model is ``model_name``.

        Args:
            model_name: the model the agent declares.

        Returns:
            Its ``ScriptedModel``; a KeyError names a model without a script.
        """
        if model_name not in self.models:
            raise KeyError(
                f"No script for the model {model_name!r}: ScriptedAgents has scripts for "
                f"{sorted(self.models)}"
            )
        self.calls.append(model_name)
        return self.models[model_name]
