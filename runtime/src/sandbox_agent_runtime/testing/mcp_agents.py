"""The service's workflow with an agent that has MCP servers, as a team
would write it in agent.py: ``NOTEBOOK`` (stateless; its ``write_note``
waits for a person in a service with approvals) and ``COUNTER`` (stateful).
The workers of the MCP tests register the providers of those names
(``mcp_providers()``), which start ``mcp_server.py`` on loopback or over stdio.

Each workflow is a subclass of the project's workflow type
(``Project.workflow``), defined at its first use, once per process."""

# No ``from __future__ import annotations``: Temporal compares the run
# method's annotations with those of the base's __init__ (@workflow.init).
import os
import sys
import warnings
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.sandbox import SandboxAgent

from sandbox_agent_runtime.chain import Carried
from sandbox_agent_runtime.mcp_servers import McpServerProvider, mcp_server
from sandbox_agent_runtime.run_request import RunAnswer, RunRequest
from sandbox_agent_runtime.shared import WORKFLOW_TYPE
from sandbox_agent_runtime.testing.mcp_server import WRITE_NOTE
from sandbox_agent_runtime.testing.registration import defined_at_first_use, workflow_type

# The servers' names, as the providers and the agent give them.
NOTEBOOK, COUNTER = "notebook", "counter"
# The worker's environment variable that holds the notebook's token.
NOTEBOOK_TOKEN = "NOTEBOOK_MCP_TOKEN"


def mcp_providers(url: str, notes: Path) -> list[McpServerProvider]:
    """The worker's providers: NOTEBOOK at ``url`` (streamable HTTP, its
    token from the worker's NOTEBOOK_TOKEN), COUNTER a stdio process of
    mcp_server.py writing to ``notes``."""
    from agents.mcp import MCPServerStdio, MCPServerStreamableHttp
    from temporalio.openai_agents import StatefulMCPServerProvider, StatelessMCPServerProvider

    def notebook() -> MCPServerStreamableHttp:
        token = os.environ[NOTEBOOK_TOKEN]
        return MCPServerStreamableHttp(
            name=NOTEBOOK,
            params={"url": url, "headers": {"Authorization": f"Bearer {token}"}, "timeout": 5},
        )

    def counter(_: Any = None) -> MCPServerStdio:
        module = "sandbox_agent_runtime.testing.mcp_server"
        return MCPServerStdio(
            name=COUNTER,
            params={
                "command": sys.executable,
                "args": ["-m", module, "--stdio", "--notes", str(notes)],
            },
        )

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return [
            StatelessMCPServerProvider(NOTEBOOK, notebook),
            StatefulMCPServerProvider(COUNTER, counter),
        ]


def _define(base: Any) -> dict[str, type[Any]]:
    """The variants of ``base``, the project's workflow type, by name."""

    class NotebookAgentWorkflow(base):  # type: ignore[misc]
        """An agent with the NOTEBOOK server, whose write_note waits for a
        person in a service with approvals."""

        def agent(self) -> SandboxAgent[Any]:
            notebook = mcp_server(
                NOTEBOOK, require_approval={"always": {"tool_names": [WRITE_NOTE]}}
            )
            return replace(super().agent(), mcp_servers=[notebook])

        async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
            answer: RunAnswer = await super().run(request, carried)
            return answer

    class CounterAgentWorkflow(base):  # type: ignore[misc]
        """An agent with the stateful COUNTER server."""

        def agent(self) -> SandboxAgent[Any]:
            return replace(super().agent(), mcp_servers=[mcp_server(COUNTER, stateful=True)])

        async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
            answer: RunAnswer = await super().run(request, carried)
            return answer

    workflow_type(NotebookAgentWorkflow, WORKFLOW_TYPE)
    workflow_type(CounterAgentWorkflow, WORKFLOW_TYPE)
    return {
        "NotebookAgentWorkflow": NotebookAgentWorkflow,
        "CounterAgentWorkflow": CounterAgentWorkflow,
    }


if TYPE_CHECKING:
    from sandbox_agent_runtime.testing.registration import WorkflowVariant

    NotebookAgentWorkflow = WorkflowVariant
    CounterAgentWorkflow = WorkflowVariant


__getattr__ = defined_at_first_use(
    frozenset({"NotebookAgentWorkflow", "CounterAgentWorkflow"}), _define
)
