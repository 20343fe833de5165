"""The service's workflow with a turn budget long enough for the long-run
tests and the benchmark (the service's own is MAX_TURNS), {{ "with a short
wait for a sandbox's host, " if cookiecutter | host_bound_backends }}with a bug then its fix, continuing as new between two prompts of a
conversation (a build before snapshot formats among them), and as a next
build might change it. Everything else is
the service's code: registered on a test worker, it continues as new, carries
the conversation and the sandbox, and cuts outputs exactly as the service
does."""

from datetime import timedelta
from typing import Any

from agents import RunContextWrapper, TResponseInputItem
from agents.agent import Agent
from temporalio import workflow

from sandbox_agent_runtime.chain import Carried, HistoryBudget
from sandbox_agent_runtime.observability import Usage
from sandbox_agent_runtime.run_request import RunAnswer, RunRequest
from sandbox_agent_runtime.shared import WORKFLOW_TYPE
from sandbox_agent_runtime.workspace import Snapshot

from {{ cookiecutter.package_name }}.workflow import SandboxAgentWorkflow


@workflow.defn(name="LongSandboxAgentWorkflow")
class LongSandboxAgentWorkflow(SandboxAgentWorkflow):
    max_turns = 1_000

    @workflow.run
    async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
        return await super().run(request, carried)


@workflow.defn(name="BudgetedSandboxAgentWorkflow")
class BudgetedSandboxAgentWorkflow(SandboxAgentWorkflow):
    """A budget of 30 turns: enough for a chain of several runs when each
    step prints 60 kB, too few for the endless task the test gives it."""

    max_turns = 30

    @workflow.run
    async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
        return await super().run(request, carried)

{%- if cookiecutter | host_bound_backends %}


@workflow.defn(name="ImpatientSandboxAgentWorkflow")
class ImpatientSandboxAgentWorkflow(SandboxAgentWorkflow):
    """The service's workflow, waiting 2 s for a sandbox's host instead of
    SANDBOX_HOST_WAIT."""

    host_wait = timedelta(seconds=2)

    @workflow.run
    async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
        return await super().run(request, carried)
{%- endif %}


@workflow.defn(name="ContinuesBetweenPromptsWorkflow")
class ContinuesBetweenPromptsWorkflow(SandboxAgentWorkflow):
    """The service's workflow, its first run's history taken for full once
    the first prompt is answered: the conversation goes on in the next run
    of its chain, which waits for the follow-up."""

    def history_full(self) -> bool:
        return self.run_of_chain == 1

    @workflow.run
    async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
        return await super().run(request, carried)


@workflow.defn(name="SnapshotsBeforeFormatsWorkflow")
class SnapshotsBeforeFormatsWorkflow(ContinuesBetweenPromptsWorkflow):
    """The service's workflow, keeping each snapshot's record as a build
    before snapshot formats did (no ``format``, no ``digest``: the fields
    its snapshot operation did not return), and carrying it so to the next
    run of its chain."""

    async def _snapshot(self) -> None:
        await super()._snapshot()
        if self.snapshot is not None:
            record = self.snapshot.model_dump(exclude={"format", "digest"})
            self.snapshot = Snapshot(**record)

    @workflow.run
    async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
        return await super().run(request, carried)


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


@workflow.defn(name="BugThenFixWorkflow")
class BuggyWorkflow(SandboxAgentWorkflow):
    """The service's workflow with a bug at its second model turn."""

    def run_hooks(self, usage: Usage) -> HistoryBudget:
        return BugAtTheSecondTurn(usage=usage)

    @workflow.run
    async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
        return await super().run(request, carried)


@workflow.defn(name="BugThenFixWorkflow")
class FixedWorkflow(SandboxAgentWorkflow):
    """The same workflow with its bug fixed: the service's own, under the
    buggy one's name, as a deploy of the fix would register it."""

    @workflow.run
    async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
        return await super().run(request, carried)


# A step the next build adds before the agent.
NEXT_BUILDS_STEP = timedelta(milliseconds=10)


@workflow.defn(name=WORKFLOW_TYPE)
class NextBuildWorkflow(SandboxAgentWorkflow):
    """The service's workflow as the next build changes it: a step (a short
    timer) before the agent, so it cannot replay a run the service's own
    workflow started. Registered under the service's own workflow type."""

    @workflow.run
    async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
        await workflow.sleep(NEXT_BUILDS_STEP)
        return await super().run(request, carried)
{%- if cookiecutter.approval != "none" %}


@workflow.defn(name="ImpatientApprovalWorkflow")
class ImpatientApprovalWorkflow(SandboxAgentWorkflow):
    """The service's workflow, rejecting a request for approval nobody
    answers in 1 s."""

    approval_timeout = timedelta(seconds=1)

    @workflow.run
    async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
        return await super().run(request, carried)
{%- endif %}
