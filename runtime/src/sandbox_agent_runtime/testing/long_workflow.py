"""The service's workflow with a turn budget long enough for the long-run
tests and the benchmark (the service's own is its max_turns), with a short
wait for a sandbox's host (for a service whose sandboxes may live on a
worker's host), with a bug then its fix, continuing as new between two
prompts of a conversation (a build before snapshot formats among them), and
as a next build might change it, and rejecting a request for approval
nobody answers in 1 s (for a service with approvals). Everything else is
the service's code: registered on a test worker, it continues as new,
carries the conversation and the sandbox, and cuts outputs exactly as the
service does. ``start_long`` starts a run of the first, as the starter
starts one.

Each is a subclass of the project's workflow type (``Project.workflow``),
defined at its first use (``from ...long_workflow import
LongSandboxAgentWorkflow`` in a test module, once the project is
registered), once per process: the workflow sandbox finds the same classes
here, this package being passed through it (worker.PASSED_THROUGH)."""

# No ``from __future__ import annotations``: Temporal compares the run
# method's annotations with those of the base's __init__ (@workflow.init).
import uuid
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from agents import RunContextWrapper, TResponseInputItem
from agents.agent import Agent
from temporalio import workflow
from temporalio.client import Client, WorkflowHandle

from sandbox_agent_runtime.chain import Carried, HistoryBudget
from sandbox_agent_runtime.observability import Usage
from sandbox_agent_runtime.run_request import RunAnswer, RunRequest
from sandbox_agent_runtime.shared import WORKFLOW_TYPE
from sandbox_agent_runtime.testing.registration import (
    defined_at_first_use,
    project_service,
    workflow_type,
)
from sandbox_agent_runtime.workspace import Snapshot
from sandbox_agent_runtime.workspace.steps import Snapshots

# A step the next build adds before the agent.
NEXT_BUILDS_STEP = timedelta(milliseconds=10)


class BugAtTheSecondTurn(HistoryBudget):
    """The run's hooks, with a bug: a KeyError before the second model turn."""

    async def on_llm_start(
        self,
        context: RunContextWrapper[Any],
        agent: Agent[Any],
        system_prompt: str | None,
        input_items: list[TResponseInputItem],
    ) -> None:
        if self.turns == 1:
            raise KeyError("a bug in workflow code")
        await super().on_llm_start(context, agent, system_prompt, input_items)


def _define(base: Any) -> dict[str, type[Any]]:
    """The variants of ``base``, the project's workflow type, by name."""

    class LongSandboxAgentWorkflow(base):  # type: ignore[misc]
        """The project's workflow type with room for a thousand turns."""

        max_turns = 1_000

        async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
            answer: RunAnswer = await super().run(request, carried)
            return answer

    class BudgetedSandboxAgentWorkflow(base):  # type: ignore[misc]
        """A budget of 30 turns: enough for a chain of several runs when each
        step prints 60 kB, too few for the endless task the test gives it."""

        max_turns = 30

        async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
            answer: RunAnswer = await super().run(request, carried)
            return answer

    class ImpatientSandboxAgentWorkflow(base):  # type: ignore[misc]
        """The service's workflow, waiting 2 s for a sandbox's host instead of
        SANDBOX_HOST_WAIT (a service whose sandboxes may live on a worker's
        host; another never waits for one)."""

        host_wait = timedelta(seconds=2)

        async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
            answer: RunAnswer = await super().run(request, carried)
            return answer

    class ContinuesBetweenPromptsWorkflow(base):  # type: ignore[misc]
        """The service's workflow, its first run's history taken for full once
        the first prompt is answered: the conversation goes on in the next run
        of its chain, which waits for the follow-up."""

        def history_full(self) -> bool:
            return bool(self.run_of_chain == 1)

        async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
            answer: RunAnswer = await super().run(request, carried)
            return answer

    class SnapshotsBeforeFormatsWorkflow(ContinuesBetweenPromptsWorkflow):
        """The service's workflow, keeping each snapshot's record as a build
        before snapshot formats did (no ``format``, no ``digest``: the fields
        its snapshot operation did not return), and carrying it so to the next
        run of its chain."""

        snapshots: Snapshots  # the base's (AgentWorkflow's), typed for mypy

        async def _snapshot(self) -> None:
            await super()._snapshot()
            if self.snapshots.latest is not None:
                record = self.snapshots.latest.model_dump(exclude={"format", "digest"})
                self.snapshots.latest = Snapshot(**record)

        async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
            return await super().run(request, carried)

    class BuggyWorkflow(base):  # type: ignore[misc]
        """The service's workflow with a bug at its second model turn."""

        def run_hooks(self, usage: Usage) -> HistoryBudget:
            return BugAtTheSecondTurn(usage=usage)

        async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
            answer: RunAnswer = await super().run(request, carried)
            return answer

    class FixedWorkflow(base):  # type: ignore[misc]
        """The same workflow with its bug fixed: the service's own, under the
        buggy one's name, as a deploy of the fix would register it."""

        async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
            answer: RunAnswer = await super().run(request, carried)
            return answer

    class NextBuildWorkflow(base):  # type: ignore[misc]
        """The service's workflow as the next build changes it: a step (a short
        timer) before the agent, so it cannot replay a run the service's own
        workflow started. Registered under the service's own workflow type."""

        async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
            await workflow.sleep(NEXT_BUILDS_STEP)
            answer: RunAnswer = await super().run(request, carried)
            return answer

    class ImpatientApprovalWorkflow(base):  # type: ignore[misc]
        """The service's workflow, rejecting a request for approval nobody
        answers in 1 s (a service with approvals; another asks for none)."""

        approval_timeout = timedelta(seconds=1)

        async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
            answer: RunAnswer = await super().run(request, carried)
            return answer

    workflow_type(LongSandboxAgentWorkflow, "LongSandboxAgentWorkflow")
    workflow_type(BudgetedSandboxAgentWorkflow, "BudgetedSandboxAgentWorkflow")
    workflow_type(ImpatientSandboxAgentWorkflow, "ImpatientSandboxAgentWorkflow")
    workflow_type(ContinuesBetweenPromptsWorkflow, "ContinuesBetweenPromptsWorkflow")
    workflow_type(SnapshotsBeforeFormatsWorkflow, "SnapshotsBeforeFormatsWorkflow")
    workflow_type(BuggyWorkflow, "BugThenFixWorkflow")
    workflow_type(FixedWorkflow, "BugThenFixWorkflow")
    workflow_type(NextBuildWorkflow, WORKFLOW_TYPE)
    workflow_type(ImpatientApprovalWorkflow, "ImpatientApprovalWorkflow")
    defined: dict[str, type[Any]] = {
        "LongSandboxAgentWorkflow": LongSandboxAgentWorkflow,
        "BudgetedSandboxAgentWorkflow": BudgetedSandboxAgentWorkflow,
        "ImpatientSandboxAgentWorkflow": ImpatientSandboxAgentWorkflow,
        "ContinuesBetweenPromptsWorkflow": ContinuesBetweenPromptsWorkflow,
        "SnapshotsBeforeFormatsWorkflow": SnapshotsBeforeFormatsWorkflow,
        "BuggyWorkflow": BuggyWorkflow,
        "FixedWorkflow": FixedWorkflow,
        "NextBuildWorkflow": NextBuildWorkflow,
        "ImpatientApprovalWorkflow": ImpatientApprovalWorkflow,
    }
    return defined


if TYPE_CHECKING:
    from sandbox_agent_runtime.testing.registration import WorkflowVariant

    LongSandboxAgentWorkflow = WorkflowVariant
    BudgetedSandboxAgentWorkflow = WorkflowVariant
    ImpatientSandboxAgentWorkflow = WorkflowVariant
    ContinuesBetweenPromptsWorkflow = WorkflowVariant
    SnapshotsBeforeFormatsWorkflow = WorkflowVariant
    BuggyWorkflow = WorkflowVariant
    FixedWorkflow = WorkflowVariant
    NextBuildWorkflow = WorkflowVariant
    ImpatientApprovalWorkflow = WorkflowVariant


__getattr__ = defined_at_first_use(
    frozenset(
        {
            "LongSandboxAgentWorkflow",
            "BudgetedSandboxAgentWorkflow",
            "ImpatientSandboxAgentWorkflow",
            "ContinuesBetweenPromptsWorkflow",
            "SnapshotsBeforeFormatsWorkflow",
            "BuggyWorkflow",
            "FixedWorkflow",
            "NextBuildWorkflow",
            "ImpatientApprovalWorkflow",
        }
    ),
    _define,
)


async def start_long(
    client: Client, prompt: str, token_budget: int | None = None
) -> "WorkflowHandle[LongSandboxAgentWorkflow, RunAnswer]":
    """Start a run of the service's workflow with a turn budget of 1,000
    (LongSandboxAgentWorkflow), as the starter starts one: on the service's
    task queue, with its workflow execution timeout (and the prompt's own
    ``token_budget``, if given)."""
    service = project_service()
    long_workflow = __getattr__("LongSandboxAgentWorkflow")
    handle: WorkflowHandle[LongSandboxAgentWorkflow, RunAnswer] = await client.start_workflow(
        long_workflow.run,
        RunRequest(prompt, token_budget=token_budget),
        id=f"{service.task_queue}-long-{uuid.uuid4()}",
        task_queue=service.task_queue,
        execution_timeout=service.workflow_execution_timeout,
    )
    return handle
