"""The starter: asks the agent to do something, shows each step as it happens, and prints the answer.

The command is ``command.main`` (``cli`` as installed); the other names are
what a project's commands, tests and benchmarks take from it.
"""

from sandbox_agent_runtime.client import (
    LOCAL_ACTIVITY_MARKER,
    SERVICE_OUTAGE_LIMIT,
    chain_run,
    connected,
    continued_as,
    web_ui_link,
)
from sandbox_agent_runtime.starter.approving import decide, list_pending, new_approver_key
from sandbox_agent_runtime.starter.arguments import parse_arguments, prompt_of
from sandbox_agent_runtime.starter.attach import attach
from sandbox_agent_runtime.starter.command import cli, main
from sandbox_agent_runtime.starter.conversation import continue_conversation, end_conversation
from sandbox_agent_runtime.starter.following import follow
from sandbox_agent_runtime.starter.outputs import usage_line
from sandbox_agent_runtime.starter.start import run, start
from sandbox_agent_runtime.starter.statuses import (
    EXIT_BROKEN_PIPE,
    EXIT_COMPLETED,
    EXIT_FILES_NOT_WRITTEN,
    EXIT_GUARDRAIL,
    EXIT_INTERRUPTED,
    EXIT_NOT_COMPLETED,
    EXIT_REFUSED,
    EXIT_UNDECRYPTABLE,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    exit_statuses,
)

# A constant a test changes (following.WAIT_NOTICE, approving.ASK_SOON) is
# not among these: it is changed in its own module, where the starter reads it.
__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_COMPLETED",
    "EXIT_FILES_NOT_WRITTEN",
    "EXIT_GUARDRAIL",
    "EXIT_INTERRUPTED",
    "EXIT_NOT_COMPLETED",
    "EXIT_REFUSED",
    "EXIT_UNDECRYPTABLE",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "LOCAL_ACTIVITY_MARKER",
    "SERVICE_OUTAGE_LIMIT",
    "attach",
    "chain_run",
    "cli",
    "connected",
    "continue_conversation",
    "continued_as",
    "decide",
    "end_conversation",
    "exit_statuses",
    "follow",
    "list_pending",
    "main",
    "new_approver_key",
    "parse_arguments",
    "prompt_of",
    "run",
    "start",
    "usage_line",
    "web_ui_link",
]
