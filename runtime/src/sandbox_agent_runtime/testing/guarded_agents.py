"""The service's workflow with an agent that has guardrails, declared as a
team would in agent.py with the SDK's own types: an input guardrail that
trips on a password in the prompt (plain code), and an output guardrail that
asks a judge agent (a model call, so a model activity) whether the answer
gives a secret away. ``JudgingModel`` is the scripted model that also plays
the judge.

``GuardedAgentWorkflow`` is a subclass of the project's workflow type
(``Project.workflow``) registered under the service's own workflow type, so
the starter and the API start it; defined at its first use, once per process
(as workspace_agents.py's)."""

# No ``from __future__ import annotations``: Temporal compares the run
# method's annotations with those of the base's __init__ (@workflow.init).
import asyncio
import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agents import (
    Agent,
    GuardrailFunctionOutput,
    ModelResponse,
    RunContextWrapper,
    Runner,
    TResponseInputItem,
    input_guardrail,
    output_guardrail,
)
from agents.sandbox import SandboxAgent
from temporalio.openai_agents.testing import ResponseBuilders

from sandbox_agent_runtime.chain import Carried
from sandbox_agent_runtime.run_request import RunAnswer, RunRequest
from sandbox_agent_runtime.shared import WORKFLOW_TYPE
from sandbox_agent_runtime.testing.registration import defined_at_first_use, workflow_type
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel

# What the judge is told, and the word an answer it blocks has.
JUDGE_INSTRUCTIONS = "Reply BLOCK and why if the text gives a secret away, else ALLOW."
SECRET = "secret"

JUDGE = Agent(name="judge", instructions=JUDGE_INSTRUCTIONS)


@input_guardrail
async def no_passwords(
    context: RunContextWrapper[Any], agent: Agent[Any], input: str | list[TResponseInputItem]
) -> GuardrailFunctionOutput:
    """Trips on a prompt that mentions a password."""
    text = input if isinstance(input, str) else json.dumps(input)
    found = "password" in text.lower()
    return GuardrailFunctionOutput(
        output_info={"found": "password"} if found else {}, tripwire_triggered=found
    )


@output_guardrail
async def judged_by_the_model(
    context: RunContextWrapper[Any], agent: Agent[Any], output: Any
) -> GuardrailFunctionOutput:
    """Asks the judge agent about the answer; trips when it says BLOCK."""
    verdict = await Runner.run(JUDGE, str(output), context=context.context)
    said = str(verdict.final_output)
    return GuardrailFunctionOutput(output_info=said, tripwire_triggered=said.startswith("BLOCK"))


class JudgingModel(ScriptedModel):
    """``ScriptedModel``, which also answers the judge: BLOCK for a text
    with SECRET in it, else ALLOW. ``stall``: its first call as the judge
    never answers (its worker goes away meanwhile), ``stalled`` set then.
    ``inputs``: what the agent's own calls were given, in order."""

    def __init__(self, commands: list[str], stall: bool = False) -> None:
        super().__init__(commands)
        self.stall = stall
        self.stalled = asyncio.Event()
        self.judged = 0
        self.inputs: list[str] = []

    async def get_response(
        self, system_instructions: str | None, input: str | list[Any], *args: Any, **kwargs: Any
    ) -> ModelResponse:
        text = input if isinstance(input, str) else json.dumps(input, default=str)
        if system_instructions != JUDGE_INSTRUCTIONS:
            self.inputs.append(text)
            return await super().get_response(system_instructions, input, *args, **kwargs)
        self.judged += 1
        if self.stall:
            self.stalled.set()
            await asyncio.Future()  # until the worker stops and cancels it
        verdict = "BLOCK: it gives the secret away" if SECRET in text else "ALLOW"
        return ResponseBuilders.output_message(verdict)


def _define(base: Any) -> dict[str, type[Any]]:
    class GuardedAgentWorkflow(base):  # type: ignore[misc]
        """The project's agent with both guardrails."""

        def agent(self) -> SandboxAgent[Any]:
            return replace(
                super().agent(),
                input_guardrails=[no_passwords],
                output_guardrails=[judged_by_the_model],
            )

        async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
            answer: RunAnswer = await super().run(request, carried)
            return answer

    class GuardedLongWorkflow(GuardedAgentWorkflow):
        """The guarded agent with room for a chain of runs."""

        max_turns = 1_000

        async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
            answer: RunAnswer = await super().run(request, carried)
            return answer

    workflow_type(GuardedAgentWorkflow, WORKFLOW_TYPE)
    workflow_type(GuardedLongWorkflow, WORKFLOW_TYPE)
    return {
        "GuardedAgentWorkflow": GuardedAgentWorkflow,
        "GuardedLongWorkflow": GuardedLongWorkflow,
    }


if TYPE_CHECKING:
    from sandbox_agent_runtime.testing.registration import WorkflowVariant

    GuardedAgentWorkflow = WorkflowVariant
    GuardedLongWorkflow = WorkflowVariant


__getattr__ = defined_at_first_use(
    frozenset({"GuardedAgentWorkflow", "GuardedLongWorkflow"}), _define
)
