"""MCP servers as the agent's tools, through the Temporal plugin's providers:
every operation an activity named after its server, bounded in time and
attempts, so a server that is down fails the call in about a minute, in one
line naming it, instead of being retried for ever.

The worker registers the service's providers (the plugin's
``StatelessMCPServerProvider`` / ``StatefulMCPServerProvider``, declared in
the project's tools.py): each builds its server on the worker, from the
worker's environment, so a server's credentials never travel with a run.
The agent names each server with ``mcp_server()``: the workflow's side of
the provider of that name.

A stateless server is connected for each operation (``<name>-stateless-*``
activities, on the service's queue; any worker can take each one). A
stateful one is connected once per prompt, by a long activity
(``<name>-stateful-server-session``) on one worker, which serves the
prompt's calls from a queue of the run's own. The plugin keeps no server
state but that connection: when its worker dies, the session activity
misses its heartbeat and Temporal starts it again on another worker, which
connects afresh (the server's state of the session is gone; the call in
flight is made again there). temporalio-openai-agents 1.1.0 marks these
providers deprecated for ``OpenAIAgentsPlugin(mcp_servers=...)``, which
needs ``temporalio.mcp`` (not in temporalio 1.35): the warnings are silenced
here and in the project's tests.
"""

import warnings
from collections.abc import Sequence
from contextlib import AsyncExitStack
from datetime import timedelta
from typing import Any

from agents import Agent
from agents.mcp import MCPServer
from agents.mcp.server import RequireApprovalSetting
from temporalio.common import RetryPolicy
from temporalio.openai_agents import StatefulMCPServerProvider, StatelessMCPServerProvider
from temporalio.openai_agents import workflow as agents_workflow
from temporalio.workflow import ActivityConfig

# What the service's tools.py declares: the providers the worker registers.
McpServerProvider = StatelessMCPServerProvider | StatefulMCPServerProvider
McpServers = Sequence[McpServerProvider]

# One attempt of an MCP operation; a failed one is tried again twice, a
# second apart, then the call fails (a minute and a half at most).
MCP_TIMEOUT = timedelta(seconds=30)
MCP_RETRY_POLICY = RetryPolicy(
    initial_interval=timedelta(seconds=1), backoff_coefficient=1.0, maximum_attempts=3
)
# A stateful server's session: its worker heartbeats every 30 seconds (the
# plugin's), so a dead one is noticed after SESSION_HEARTBEAT and its
# session started again on another worker; a call waits for it that long.
SESSION_HEARTBEAT = timedelta(seconds=45)
SESSION_LIFETIME = timedelta(hours=1)
SESSION_WAIT = timedelta(minutes=2)


def mcp_server(
    name: str,
    *,
    stateful: bool = False,
    require_approval: RequireApprovalSetting = None,
    timeout: timedelta = MCP_TIMEOUT,
) -> MCPServer:
    """The MCP server ``name`` of the worker's (its provider in tools.py's
    MCP_SERVERS), for the agent's ``mcp_servers``.

    Args:
        name: the provider's name.
        stateful: whether it is a ``StatefulMCPServerProvider``.
        require_approval: which of its tools wait for a person, as the Agents
            SDK's ``MCPServer`` takes it ("always", {"always": {"tool_names":
            [...]}}, ...); a service with approvals decides them like commands.
        timeout: the longest one attempt of an operation may take.

    Returns:
        The server, for the agent's ``mcp_servers``.
    """
    config = ActivityConfig(start_to_close_timeout=timeout, retry_policy=MCP_RETRY_POLICY)
    server: Any
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        if stateful:
            config["schedule_to_start_timeout"] = SESSION_WAIT
            server = agents_workflow.stateful_mcp_server(
                name,
                config=config,
                server_session_config=ActivityConfig(
                    start_to_close_timeout=SESSION_LIFETIME,
                    heartbeat_timeout=SESSION_HEARTBEAT,
                    retry_policy=RetryPolicy(maximum_attempts=5),
                ),
            )
        else:
            server = agents_workflow.stateless_mcp_server(
                name, config=config, cache_tools_list=True
            )
    # The plugin's references take no approval policy: set as MCPServer does.
    server._needs_approval_policy = server._normalize_needs_approval(
        require_approval=require_approval
    )
    assert isinstance(server, MCPServer)
    return server


def servers_of(agent: Agent[Any]) -> list[MCPServer]:
    """The MCP servers of ``agent`` and of every agent it may hand off to,
    each once: a prompt's turn may pass to any of them."""
    found: list[MCPServer] = []
    seen: set[int] = set()
    todo = [agent]
    while todo:
        each = todo.pop()
        if id(each) in seen:
            continue
        seen.add(id(each))
        found += [server for server in each.mcp_servers if all(server is not f for f in found)]
        todo += [other for other in each.handoffs if isinstance(other, Agent)]
    return found


async def connected(servers: Sequence[MCPServer], stack: AsyncExitStack) -> None:
    """Connect the agent's ``servers`` for a prompt, each cleaned up when
    ``stack`` closes (a stateful one's session ends; a stateless one's are
    no-ops)."""
    for server in servers:
        await server.connect()  # type: ignore[no-untyped-call]
        stack.push_async_callback(server.cleanup)
