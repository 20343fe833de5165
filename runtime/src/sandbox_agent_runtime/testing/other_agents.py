"""The service's workflow with other agents beside agent.py's, as a team
would declare them there with the Agents SDK's own types: a reviewer the
agent hands off to (``handoffs=[...]``), and a helper it calls as a tool
(``Agent.as_tool``). Each is the project's agent (its sandbox capabilities,
so its approvals) with instructions and a model of its own, so a test
scripts each one apart (``ScriptedAgents``, keyed by model name).

Defined at its first use, once per process (as workspace_agents.py's).
``workflow_with_agent`` makes another such variant from any agent a test
(or a doc's example) builds from agent.py's."""

# No ``from __future__ import annotations``: Temporal compares the run
# method's annotations with those of the base's __init__ (@workflow.init).
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from agents import RunContextWrapper, TResponseInputItem
from agents.agent import Agent
from agents.sandbox import SandboxAgent

from sandbox_agent_runtime.chain import Carried, HistoryBudget, HistoryFull
from sandbox_agent_runtime.observability import Usage
from sandbox_agent_runtime.run_request import RunAnswer, RunRequest
from sandbox_agent_runtime.shared import WORKFLOW_TYPE
from sandbox_agent_runtime.testing.registration import (
    defined_at_first_use,
    project,
    workflow_type,
)

# The other agents' names and models (their scripts' keys), each priced in
# the service's PRICES (runs.py), unlike the agent's own.
REVIEWER = "Reviewer"
REVIEWER_MODEL = "gpt-5-mini"
HELPER = "Helper"
HELPER_MODEL = "gpt-5"
# The tools the agent is given for them: the SDK's handoff tool, and the helper as a tool.
TO_REVIEWER = "transfer_to_reviewer"
ASK_HELPER = "ask_helper"


# The model turn (from 1) before which the first run of the
# OtherAgentsChainWorkflow's chain takes its history for full.
FULL_BEFORE_TURN = 5


@dataclass
class FullBeforeTurn(HistoryBudget):
    """The run's hooks, taking the history for full before turn ``full_before``
    (0: never), as a run that grew large would."""

    full_before: int = 0

    async def on_llm_start(
        self,
        context: RunContextWrapper[Any],
        agent: Agent[Any],
        system_prompt: str | None,
        input_items: list[TResponseInputItem],
    ) -> None:
        if self.turns + 1 == self.full_before:
            raise HistoryFull(f"taken for full before turn {self.full_before}")
        await super().on_llm_start(context, agent, system_prompt, input_items)


def _define(base: Any) -> dict[str, type[Any]]:
    """The variants of ``base``, the project's workflow type."""

    class OtherAgentsWorkflow(base):  # type: ignore[misc]
        """The project's agent, handing off to a reviewer and calling a
        helper; registered under the service's own workflow type, so the
        starter starts it."""

        def agent(self) -> SandboxAgent[Any]:
            own = super().agent()
            reviewer = replace(
                super().agent(),
                name=REVIEWER,
                instructions="Review the work in the workspace and report what you find.",
                model=REVIEWER_MODEL,
                tools=[],
            )
            helper = replace(
                super().agent(),
                name=HELPER,
                instructions="Do what you are asked in the workspace.",
                model=HELPER_MODEL,
                tools=[],
            )
            ask_helper = helper.as_tool(ASK_HELPER, "Ask the helper to do a step in the workspace.")
            return replace(own, handoffs=[reviewer], tools=[*own.tools, ask_helper])

        async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
            answer: RunAnswer = await super().run(request, carried)
            return answer

    class OtherAgentsChainWorkflow(OtherAgentsWorkflow):
        """The same, its chain's first run continued as new before its
        FULL_BEFORE_TURN-th model turn."""

        def run_hooks(self, usage: Usage) -> HistoryBudget:
            full_before = FULL_BEFORE_TURN if self.run_of_chain == 1 else 0
            return FullBeforeTurn(usage=usage, full_before=full_before)

        async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
            answer: RunAnswer = await super().run(request, carried)
            return answer

    workflow_type(OtherAgentsWorkflow, WORKFLOW_TYPE)
    workflow_type(OtherAgentsChainWorkflow, WORKFLOW_TYPE)
    return {
        "OtherAgentsWorkflow": OtherAgentsWorkflow,
        "OtherAgentsChainWorkflow": OtherAgentsChainWorkflow,
    }


# The variants workflow_with_agent made, by class name: the workflow
# sandbox imports each by name from this module (passed through it).
_MADE: dict[str, type[Any]] = {}


def workflow_with_agent(
    make: Callable[[SandboxAgent[Any]], SandboxAgent[Any]],
) -> type[Any]:
    """The service's workflow whose agent is ``make(agent)``, ``agent``
    being agent.py's: for a test of an agent built from it (other agents
    it hands off to or calls as tools, say). Registered under the service's
    own workflow type, so the starter starts it.

    Args:
        make: the agent of every run, from agent.py's.

    Returns:
        The workflow type, for ``running_worker(..., workflows=[...])``.
    """
    base: Any = project().workflow

    class MadeAgentWorkflow(base):  # type: ignore[misc]
        def agent(self) -> SandboxAgent[Any]:
            return make(super().agent())

        async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
            answer: RunAnswer = await super().run(request, carried)
            return answer

    name = f"MadeAgentWorkflow{len(_MADE)}"
    MadeAgentWorkflow.__name__ = MadeAgentWorkflow.__qualname__ = name
    _MADE[name] = workflow_type(MadeAgentWorkflow, WORKFLOW_TYPE)
    return _MADE[name]


if TYPE_CHECKING:
    from sandbox_agent_runtime.testing.registration import WorkflowVariant

    OtherAgentsWorkflow = WorkflowVariant
    OtherAgentsChainWorkflow = WorkflowVariant


_defined = defined_at_first_use(
    frozenset({"OtherAgentsWorkflow", "OtherAgentsChainWorkflow"}), _define
)


def __getattr__(name: str) -> type[Any]:
    return _MADE[name] if name in _MADE else _defined(name)
