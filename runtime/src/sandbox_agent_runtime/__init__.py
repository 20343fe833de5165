"""The runtime of a durable sandbox-agent service: the workflow, worker,
starter, API and codec server that run an OpenAI Agents SDK ``SandboxAgent``
on Temporal, each sandbox operation an activity.

A service describes itself as a ``Service`` and calls ``configure()``; its
workflow type subclasses ``AgentWorkflow``; its commands call
``worker_cli()``, ``starter_cli()``, ``api_cli()``, ``codec_server_cli()``,
``histories_cli()``, ``sandboxes_cli()`` and ``evals_main()``.

This module and ``sandbox_agent_runtime.testing`` are the runtime's public
API: the names in their ``__all__``. Every other module is private, free to
change at any release; a service imports only these two. Importing this
package imports neither Temporal nor the Agents SDK: each name is imported
when it is first used.
"""

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sandbox_agent_runtime.agent_tools import agent_tool
    from sandbox_agent_runtime.api import cli as api_cli
    from sandbox_agent_runtime.api import main as api_main
    from sandbox_agent_runtime.approvals import wait_for_commands, wait_for_writes
    from sandbox_agent_runtime.approvers import default_key_file, load_key, signed_decision
    from sandbox_agent_runtime.chain import Carried
    from sandbox_agent_runtime.client.stream import StreamEvent, read_run_stream
    from sandbox_agent_runtime.codec_server import cli as codec_server_cli
    from sandbox_agent_runtime.encryption import EncryptionCodec, Keys
    from sandbox_agent_runtime.evals import main as evals_main
    from sandbox_agent_runtime.exits import exit_after
    from sandbox_agent_runtime.health import serving_health
    from sandbox_agent_runtime.histories import cli as histories_cli
    from sandbox_agent_runtime.mcp_servers import mcp_server
    from sandbox_agent_runtime.object_store import data_converter
    from sandbox_agent_runtime.run_request import Conversation, FollowUp, RunAnswer, RunRequest
    from sandbox_agent_runtime.sandbox_tools import careful_filesystem, plain_shell
    from sandbox_agent_runtime.sandboxes import cli as sandboxes_cli
    from sandbox_agent_runtime.sandboxes import main as sandboxes_main
    from sandbox_agent_runtime.service import Price, Service, configure, current
    from sandbox_agent_runtime.starter import cli as starter_cli
    from sandbox_agent_runtime.starter import main as starter_main
    from sandbox_agent_runtime.starter.following import follow
    from sandbox_agent_runtime.starter.start import start
    from sandbox_agent_runtime.worker import (
        BackendUnavailable,
        ServiceWorker,
        agents_plugin,
        build_worker,
        workflow_runner,
    )
    from sandbox_agent_runtime.worker import cli as worker_cli
    from sandbox_agent_runtime.worker import main as worker_main
    from sandbox_agent_runtime.workflow import AgentWorkflow

# The constants, as the type checker and the reference know them.

WORKFLOW_TYPE: str
"""The name the service's workflow type registers under
(``@workflow.defn(name=WORKFLOW_TYPE)``): the starter and the API start runs
by this name, without importing the workflow."""

CONVERSATION: str
"""The name of a run's query of where its conversation stands (a
``Conversation``)."""

FOLLOW_UP: str
"""The name of a conversation's update that sends a follow-up (a
``FollowUp``); it answers with the prompt's number."""

END: str
"""The name of a conversation's update that ends it."""

WORKING: str
"""A conversation's state (``Conversation.state``) while a prompt is worked on."""

RELEASED: str
"""A conversation's state once it has answered and released its sandbox (its
workspace is in a snapshot until the next follow-up)."""

COMPACTION_THRESHOLD: int
"""Tokens past which the model compacts the conversation (the Responses
API's compaction): about 400 kB of text."""

EXIT_COMPLETED: int
"""The starter's exit status when the run completed (0)."""

EXIT_UNREACHABLE: int
"""The starter's exit status when the Temporal service cannot be reached (2)."""

EXIT_USAGE: int
"""The starter's exit status for a bad argument or setting (3)."""

EXIT_GUARDRAIL: int
"""The starter's exit status when a guardrail of the agent tripped and
stopped the prompt (7); stderr names the guardrail."""

EXIT_CANNOT_SERVE: int
"""The exit status of the API and the codec server when they cannot serve:
a bad setting, or an address they cannot bind (1)."""

READY_PATH: str
"""The health endpoint's readiness path: 200 once the worker polls, 503
before and while it drains."""

LIVE_PATH: str
"""The health endpoint's liveness path: 200 while the worker's event loop turns."""

# Each public name, and where it lives: "module" (the same name there) or
# "module:name". The module imports only when the name is first used.
_PUBLIC = {
    # The service, as it describes itself.
    "Service": "service",
    "Price": "service",
    "configure": "service",
    "current": "service",
    # Its workflow type, and what a run is given and answers.
    "AgentWorkflow": "workflow",
    "WORKFLOW_TYPE": "shared",
    "Carried": "chain",
    "RunRequest": "run_request",
    "StreamEvent": "client.stream",
    "read_run_stream": "client.stream",
    "RunAnswer": "run_request",
    "FollowUp": "run_request",
    "Conversation": "run_request",
    "WORKING": "run_request",
    "RELEASED": "run_request",
    "CONVERSATION": "shared",
    "FOLLOW_UP": "shared",
    "END": "shared",
    # Its agent: tools, compaction, approvals.
    "agent_tool": "agent_tools",
    "COMPACTION_THRESHOLD": "shared",
    "plain_shell": "sandbox_tools",
    "careful_filesystem": "sandbox_tools",
    "wait_for_commands": "approvals",
    "wait_for_writes": "approvals",
    "mcp_server": "mcp_servers",
    # Its commands, and their exit statuses.
    "worker_main": "worker:main",
    "worker_cli": "worker:cli",
    "starter_main": "starter:main",
    "starter_cli": "starter:cli",
    "api_main": "api:main",
    "api_cli": "api:cli",
    "codec_server_cli": "codec_server:cli",
    "histories_cli": "histories:cli",
    "sandboxes_cli": "sandboxes:cli",
    "sandboxes_main": "sandboxes:main",
    "evals_main": "evals:main",
    "exit_after": "exits",
    "EXIT_COMPLETED": "starter.statuses",
    "EXIT_UNREACHABLE": "starter.statuses",
    "EXIT_USAGE": "starter.statuses",
    "EXIT_GUARDRAIL": "starter.statuses",
    "EXIT_CANNOT_SERVE": "codec_server",
    # Starting and following a run; a person's signed decision on an approval.
    "start": "starter.start",
    "follow": "starter.following",
    "signed_decision": "approvers",
    "load_key": "approvers",
    "default_key_file": "approvers",
    # A worker built by hand, its health and its payloads.
    "agents_plugin": "worker",
    "build_worker": "worker",
    "workflow_runner": "worker",
    "ServiceWorker": "worker",
    "BackendUnavailable": "worker",
    "serving_health": "health",
    "READY_PATH": "health",
    "LIVE_PATH": "health",
    "data_converter": "object_store",
    "EncryptionCodec": "encryption",
    "Keys": "encryption",
}

__all__ = [
    "AgentWorkflow",
    "BackendUnavailable",
    "COMPACTION_THRESHOLD",
    "CONVERSATION",
    "Carried",
    "Conversation",
    "END",
    "EXIT_CANNOT_SERVE",
    "EXIT_COMPLETED",
    "EXIT_GUARDRAIL",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "EncryptionCodec",
    "FOLLOW_UP",
    "FollowUp",
    "Keys",
    "LIVE_PATH",
    "Price",
    "READY_PATH",
    "RELEASED",
    "RunAnswer",
    "RunRequest",
    "Service",
    "ServiceWorker",
    "StreamEvent",
    "WORKFLOW_TYPE",
    "WORKING",
    "agent_tool",
    "agents_plugin",
    "api_cli",
    "api_main",
    "build_worker",
    "careful_filesystem",
    "codec_server_cli",
    "configure",
    "current",
    "data_converter",
    "default_key_file",
    "evals_main",
    "exit_after",
    "follow",
    "histories_cli",
    "load_key",
    "mcp_server",
    "plain_shell",
    "read_run_stream",
    "sandboxes_cli",
    "sandboxes_main",
    "serving_health",
    "signed_decision",
    "start",
    "starter_cli",
    "starter_main",
    "wait_for_commands",
    "wait_for_writes",
    "worker_cli",
    "worker_main",
    "workflow_runner",
]


def __getattr__(name: str) -> object:
    """A public name, imported at its first use."""
    where = _PUBLIC.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, _, attribute = where.partition(":")
    return getattr(import_module(f"{__name__}.{module}"), attribute or name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
