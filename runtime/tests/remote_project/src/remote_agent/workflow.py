"""The service's workflow type: the runtime's agent workflow, running this
service's agent (agent.py) under the name the starter starts runs by.

Everything a run does (its sandbox, model calls, chains, conversations,
limits, approvals) is the runtime's
(sandbox_agent_runtime.AgentWorkflow); its recorded histories
(tests/histories/) prove that a new runtime still replays this service's runs.
"""

from agents.sandbox import SandboxAgent
from temporalio import workflow

from sandbox_agent_runtime import WORKFLOW_TYPE, AgentWorkflow, Carried, RunAnswer, RunRequest

from remote_agent.agent import sandbox_agent


@workflow.defn(name=WORKFLOW_TYPE)
class SandboxAgentWorkflow(AgentWorkflow):
    def agent(self) -> SandboxAgent[None]:
        return sandbox_agent()

    @workflow.run
    async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
        """Run the agent on ``request``; a run that continues an earlier one
        of its chain gets what that one ``carried`` as well."""
        return await self.run_agent(request, carried)
