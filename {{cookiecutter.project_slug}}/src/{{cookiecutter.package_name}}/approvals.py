"""A person approves what the agent runs.

{% if cookiecutter.approval == "commands_and_writes" -%}
Every shell command the model asks for, every input to a running one, and
every file edit (``apply_patch``) waits for a person's decision.
{%- else -%}
Every shell command the model asks for, and every input to a running one,
waits for a person's decision.
{%- endif %} The run stops
before the call (the Agents SDK's tool approval: ``needs_approval``), lists
it in the workflow's ``pending`` query and its current details (the Web UI
shows them), and waits, durably: a worker that restarts meanwhile loses
nothing. The ``decide`` update approves or rejects it (with a reason the
model reads as the tool's result, so the agent can change course), or
approves the tool for the rest of the run (``always``). A request nobody
decides within ``APPROVAL_TIMEOUT`` is rejected, saying so, and the run goes
on. The starter asks on a terminal, or prints the commands that decide:

    {{ cookiecutter.project_slug }}-starter --pending WORKFLOW_ID
    {{ cookiecutter.project_slug }}-starter --approve WORKFLOW_ID CALL_ID [--always]
    {{ cookiecutter.project_slug }}-starter --reject WORKFLOW_ID CALL_ID --reason "..."

To make one of the agent's own tools wait too, give it ``needs_approval=True``
(agent.py shows how).
"""

import json
from dataclasses import dataclass, field
from datetime import timedelta

from agents.items import ToolApprovalItem
{%- if cookiecutter.approval == "commands_and_writes" %}
from agents.sandbox.capabilities.filesystem import FilesystemToolSet
{%- endif %}
from agents.sandbox.capabilities.shell import ShellToolSet

# How much of a command or a patch a request shows.
LONGEST_DETAIL = 2_000


@dataclass
class Request:
    """A tool call waiting for a person."""

    call_id: str
    tool: str
    # The command, the input to a running one, or the file and its diff.
    detail: str
    # When it was asked (ISO 8601, UTC).
    asked_at: str


@dataclass
class Decision:
    """A person's answer to a request (the ``decide`` update's argument)."""

    call_id: str
    approve: bool
    # Why, for a rejection: the model reads it as the tool's result.
    reason: str = ""
    # Approve this tool for the rest of the run.
    always: bool = False
    # Nobody decided within APPROVAL_TIMEOUT (set by the workflow).
    timed_out: bool = False


class UnknownRequest(ValueError):
    """A decision on a call that is not waiting (unknown, or decided)."""


def wait_for_commands(tools: ShellToolSet) -> None:
    """The shell's tools, each call waiting for a person (Shell's configure_tools)."""
    tools.exec_command.needs_approval = True
    if tools.write_stdin is not None:
        tools.write_stdin.needs_approval = True
{%- if cookiecutter.approval == "commands_and_writes" %}


def wait_for_writes(tools: FilesystemToolSet) -> None:
    """The filesystem's edits, each waiting for a person (Filesystem's configure_tools)."""
    tools.apply_patch.needs_approval = True
{%- endif %}


def detail_of(item: ToolApprovalItem) -> str:
    """What a person needs to see to decide: the command, or the file and diff."""
    try:
        arguments = json.loads(item.arguments or "{}")
    except json.JSONDecodeError:
        arguments = {"arguments": item.arguments}
    if not isinstance(arguments, dict):
        arguments = {"arguments": arguments}
    shown = (
        arguments.get("cmd")
        or arguments.get("chars")
        or arguments.get("patch")
        or arguments.get("input")
        or json.dumps(arguments)
    )
    text = str(shown)
    if len(text) > LONGEST_DETAIL:
        text = text[:LONGEST_DETAIL] + f"\n... ({len(text) - LONGEST_DETAIL:,} more characters)"
    return text


@dataclass
class Approvals:
    """The run's requests and decisions, in workflow memory (replay rebuilds
    them from the history's updates and timers)."""

    pending: dict[str, Request] = field(default_factory=dict)
    decided: dict[str, Decision] = field(default_factory=dict)
    # Tools approved for the rest of the run, carried to the next run of a chain.
    always: set[str] = field(default_factory=set)

    def check(self, decision: Decision) -> None:
        """Refuse a decision on a call that is not waiting (before it is
        written to history: the update's validator)."""
        if decision.call_id in self.decided:
            raise UnknownRequest(f"call {decision.call_id!r} was already decided")
        if decision.call_id not in self.pending:
            waiting = ", ".join(self.pending) or "none"
            raise UnknownRequest(
                f"no request {decision.call_id!r} waits in this run (waiting: {waiting})"
            )

    def record(self, decision: Decision) -> None:
        self.check(decision)
        self.decided[decision.call_id] = decision
        request = self.pending.pop(decision.call_id)
        if decision.approve and decision.always:
            self.always.add(request.tool)


def timed_out(call_id: str, wait: timedelta) -> Decision:
    """The decision a request nobody answered gets."""
    return Decision(
        call_id,
        approve=False,
        reason=f"Rejected: no one approved it within {wait.total_seconds():.0f} s.",
        timed_out=True,
    )
