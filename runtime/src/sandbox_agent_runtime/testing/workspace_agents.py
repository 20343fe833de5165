"""The service's workflow with another agent than agent.py's, as a team
would write it there: one that brings files of its own (``default_manifest``)
one that answers in a structure (``output_type``), and one whose model has a
price in the service's PRICES (its runs cost money, and may have a money
budget). Everything else is the
service's code; the tests of inputs and outputs register them on test workers.

Each is a subclass of the project's workflow type (``Project.workflow``),
defined at its first use, once per process (as long_workflow.py's)."""

# No ``from __future__ import annotations``: Temporal compares the run
# method's annotations with those of the base's __init__ (@workflow.init).
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.sandbox import SandboxAgent
from agents.sandbox.capabilities import Memory, Skills
from agents.sandbox.entries import File, LocalDir
from agents.sandbox.manifest import Manifest
from pydantic import BaseModel

from sandbox_agent_runtime.chain import Carried
from sandbox_agent_runtime.run_request import RunAnswer, RunRequest
from sandbox_agent_runtime.shared import WORKFLOW_TYPE
from sandbox_agent_runtime.testing.registration import defined_at_first_use, workflow_type

# What the agent's own file holds.
NOTES = b"notes the agent brings with it\n"
# A model the service's PRICES (runs.py) holds.
PRICED_MODEL = "gpt-5-mini"
# The skills the remembering agent brings: a directory per skill, each with
# its SKILL.md, read on the worker (a LocalDir: only its path travels).
SKILLS = Path(__file__).parent / "skills"


class Summary(BaseModel):
    """What the structured agent answers with."""

    rows: int
    columns: list[str]


def _define(base: Any) -> dict[str, type[Any]]:
    """The variants of ``base``, the project's workflow type, by name."""

    class AgentWithFilesWorkflow(base):  # type: ignore[misc]
        """An agent whose workspace starts with ``notes.txt`` (its default_manifest)."""

        def agent(self) -> SandboxAgent[Any]:
            own = Manifest(entries={"notes.txt": File(content=NOTES)})
            return replace(super().agent(), default_manifest=own)

        async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
            answer: RunAnswer = await super().run(request, carried)
            return answer

    class StructuredAnswerWorkflow(base):  # type: ignore[misc]
        """An agent whose answer is a ``Summary`` (its output_type), registered
        under the service's own workflow type, so the starter starts it."""

        def agent(self) -> SandboxAgent[Any]:
            return replace(super().agent(), output_type=Summary)

        async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
            answer: RunAnswer = await super().run(request, carried)
            return answer

    class PricedAgentWorkflow(base):  # type: ignore[misc]
        """An agent of PRICED_MODEL, registered under the service's own
        workflow type, so the starter starts it."""

        def agent(self) -> SandboxAgent[Any]:
            return replace(super().agent(), model=PRICED_MODEL)

        async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
            answer: RunAnswer = await super().run(request, carried)
            return answer

    class RemembersWorkflow(base):  # type: ignore[misc]
        """An agent with skills (SKILLS) and a memory the agent keeps itself
        (Memory without generation), kept across one caller's conversations."""

        memory_across_conversations = True

        def agent(self) -> SandboxAgent[Any]:
            own = super().agent()
            capabilities = [
                *own.capabilities,
                Skills(from_=LocalDir(src=SKILLS)),
                Memory(generate=None),
            ]
            return replace(own, capabilities=capabilities)

        async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
            answer: RunAnswer = await super().run(request, carried)
            return answer

    class RemembersAcrossRunsWorkflow(RemembersWorkflow):
        """RemembersWorkflow, its first run's history taken for full once the
        first prompt is answered (as long_workflow.py's
        ContinuesBetweenPromptsWorkflow): the next prompt is the next run's."""

        def history_full(self) -> bool:
            return bool(self.run_of_chain == 1)

        async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
            answer: RunAnswer = await super().run(request, carried)
            return answer

    class SkillsAcrossRunsWorkflow(base):  # type: ignore[misc]
        """The service's workflow, its first run's history taken for full
        once a prompt whose inputs carried skills is answered: the next
        prompt is the next run's."""

        def history_full(self) -> bool:
            return bool(self.run_of_chain == 1 and self.input_skills)

        async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
            answer: RunAnswer = await super().run(request, carried)
            return answer

    workflow_type(SkillsAcrossRunsWorkflow, "SkillsAcrossRunsWorkflow")
    workflow_type(AgentWithFilesWorkflow, "AgentWithFilesWorkflow")
    workflow_type(RemembersAcrossRunsWorkflow, "RemembersAcrossRunsWorkflow")
    workflow_type(RemembersWorkflow, "RemembersWorkflow")
    workflow_type(StructuredAnswerWorkflow, WORKFLOW_TYPE)
    workflow_type(PricedAgentWorkflow, WORKFLOW_TYPE)
    defined: dict[str, type[Any]] = {
        "AgentWithFilesWorkflow": AgentWithFilesWorkflow,
        "StructuredAnswerWorkflow": StructuredAnswerWorkflow,
        "PricedAgentWorkflow": PricedAgentWorkflow,
        "RemembersWorkflow": RemembersWorkflow,
        "RemembersAcrossRunsWorkflow": RemembersAcrossRunsWorkflow,
        "SkillsAcrossRunsWorkflow": SkillsAcrossRunsWorkflow,
    }
    return defined


if TYPE_CHECKING:
    from sandbox_agent_runtime.testing.registration import WorkflowVariant

    AgentWithFilesWorkflow = WorkflowVariant
    StructuredAnswerWorkflow = WorkflowVariant
    PricedAgentWorkflow = WorkflowVariant
    RemembersWorkflow = WorkflowVariant
    RemembersAcrossRunsWorkflow = WorkflowVariant
    SkillsAcrossRunsWorkflow = WorkflowVariant


__getattr__ = defined_at_first_use(
    frozenset(
        {
            "AgentWithFilesWorkflow",
            "StructuredAnswerWorkflow",
            "PricedAgentWorkflow",
            "RemembersWorkflow",
            "RemembersAcrossRunsWorkflow",
            "SkillsAcrossRunsWorkflow",
        }
    ),
    _define,
)
