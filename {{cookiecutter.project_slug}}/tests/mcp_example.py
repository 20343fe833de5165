"""The example of docs/mcp.md, which includes it verbatim (tests/test_mcp.py
checks that it does, and runs it): an MCP server's provider, as tools.py
declares it, and an agent that names it, as agent.py would."""

# Each block of the page keeps its own imports, as the page shows them.
# ruff: noqa: E402, I001

# No ``from __future__ import annotations``: Temporal compares the run
# method's annotations with those of the base's __init__ (@workflow.init).
from dataclasses import replace

from agents.sandbox import SandboxAgent
from temporalio import workflow

from sandbox_agent_runtime import WORKFLOW_TYPE, Carried, RunAnswer, RunRequest

from {{ cookiecutter.package_name }}.workflow import SandboxAgentWorkflow

# docs/mcp.md: tools.py
import os

from agents.mcp import MCPServerStreamableHttp
from temporalio.openai_agents import StatelessMCPServerProvider


def notes_server() -> MCPServerStreamableHttp:
    """The notes MCP server, built on the worker from its environment."""
    return MCPServerStreamableHttp(
        name="notes",
        params={
            "url": os.environ["NOTES_MCP_URL"],
            "headers": {"Authorization": f"Bearer {os.environ['NOTES_MCP_TOKEN']}"},
        },
    )


MCP_SERVERS = [StatelessMCPServerProvider("notes", notes_server)]
# docs/mcp.md: end

# docs/mcp.md: agent.py
from sandbox_agent_runtime import mcp_server

MCP = [mcp_server("notes")]
# docs/mcp.md: end


@workflow.defn(name=WORKFLOW_TYPE)
class NotesAgentWorkflow(SandboxAgentWorkflow):
    """The service's workflow, its agent given ``MCP`` as agent.py would
    (``mcp_servers=[mcp_server("notes")]`` in ``sandbox_agent()``)."""

    def agent(self) -> SandboxAgent[None]:
        return replace(super().agent(), mcp_servers=MCP)

    @workflow.run
    async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
        return await super().run(request, carried)
