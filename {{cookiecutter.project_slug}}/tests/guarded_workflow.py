"""The service's workflow with docs/guardrails.md's guardrails given to its
agent, as a team gives them in agent.py's sandbox_agent()."""

from dataclasses import replace

from agents.sandbox import SandboxAgent
from temporalio import workflow

from sandbox_agent_runtime import WORKFLOW_TYPE, Carried, RunAnswer, RunRequest

from {{ cookiecutter.package_name }}.workflow import SandboxAgentWorkflow

import tests.guardrails_example as example


@workflow.defn(name=WORKFLOW_TYPE)
class GuardedAgentWorkflow(SandboxAgentWorkflow):
    def agent(self) -> SandboxAgent[None]:
        return replace(
            super().agent(),
            input_guardrails=[example.no_credentials],
            output_guardrails=[example.reviewed],
        )

    @workflow.run
    async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
        return await self.run_agent(request, carried)
