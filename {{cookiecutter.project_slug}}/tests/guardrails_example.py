"""Guardrails of the agent, as docs/guardrails.md shows them: give them to
the agent in agent.py's sandbox_agent()."""

from typing import Any

from agents import (
    Agent,
    GuardrailFunctionOutput,
    RunContextWrapper,
    Runner,
    TResponseInputItem,
    input_guardrail,
    output_guardrail,
)

from {{ cookiecutter.package_name }}.agent import MODEL

# Words no prompt may carry to the model.
CREDENTIAL_WORDS = ("password", "api key", "secret key")


@input_guardrail(name="no_credentials")
async def no_credentials(
    context: RunContextWrapper[Any], agent: Agent[Any], input: str | list[TResponseInputItem]
) -> GuardrailFunctionOutput:
    """Stops a prompt that holds a credential before the model sees it."""
    text = str(input).lower()
    found = [word for word in CREDENTIAL_WORDS if word in text]
    return GuardrailFunctionOutput(output_info={"found": found}, tripwire_triggered=bool(found))


# A second agent that reviews the answer: its call is a model activity, like the agent's own.
REVIEWER = Agent(
    name="reviewer",
    instructions="Reply BLOCK and why if the text gives a credential away, else ALLOW.",
    model=MODEL,
)


@output_guardrail(name="reviewed")
async def reviewed(
    context: RunContextWrapper[Any], agent: Agent[Any], output: Any
) -> GuardrailFunctionOutput:
    """Stops an answer the reviewer blocks."""
    verdict = await Runner.run(REVIEWER, str(output), context=context.context)
    said = str(verdict.final_output)
    return GuardrailFunctionOutput(output_info=said, tripwire_triggered=said.startswith("BLOCK"))
