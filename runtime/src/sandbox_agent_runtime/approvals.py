"""A person approves what the agent runs.

With approvals, every shell command the model asks for (and, with
"commands_and_writes", every file edit) waits, durably, for a person's
decision: a worker that restarts meanwhile loses nothing, a rejection's
reason reaches the model as the tool's result so the agent can change course,
and a request nobody decides within ``approval_timeout`` is rejected, saying
so. What a person is shown is what runs, whole and in a form no terminal
interprets; a decision counts only when one of the worker's approvers signed
it. A render's docs/approvals.md is the guide.
"""

import json
import re
from dataclasses import dataclass, field
from datetime import timedelta

from agents.sandbox.capabilities.filesystem import FilesystemToolSet
from agents.sandbox.capabilities.shell import ShellToolSet
from agents.sandbox.capabilities.tools.apply_patch_tool import _parse_custom_tool_input
from agents.sandbox.capabilities.tools.shell_tool import WriteStdinArgs
from pydantic import ValidationError

from sandbox_agent_runtime import sandbox_tools
from sandbox_agent_runtime.display import holds_hidden, visible
from sandbox_agent_runtime.service import current


@dataclass
class Request:
    """A tool call waiting for a person."""

    call_id: str
    tool: str
    # What the person is shown: every argument of the call, whole, in a form
    # no terminal interprets (detail_of()).
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
    # Nobody decided within the service's approval_timeout (set by the
    # workflow only).
    timed_out: bool = False
    # The approver's public key and signature (base64): approvers.py.
    approver: str = ""
    signature: str = ""


class UnknownRequest(ValueError):
    """A decision on a call that is not waiting (unknown, or decided)."""


class NotAPerson(ValueError):
    """A decision that no approver signed."""


def wait_for_commands(tools: ShellToolSet) -> None:
    """Shell's ``configure_tools`` for a service with approvals: the shell's
    tools, in a plain shell, each call waiting for a person.

    Args:
        tools: the shell's tools, as the Agents SDK hands them.
    """
    sandbox_tools.plain_shell(tools)
    tools.exec_command.needs_approval = True
    if tools.write_stdin is not None:
        tools.write_stdin.needs_approval = True


def wait_for_writes(tools: FilesystemToolSet) -> None:
    """Filesystem's ``configure_tools`` for a service whose approval is
    "commands_and_writes": each edit waits for a person.

    Args:
        tools: the filesystem's tools, as the Agents SDK hands them.
    """
    sandbox_tools.careful_filesystem(tools)
    tools.apply_patch.needs_approval = True


def detail_of(tool: str, arguments: str, mcp_server: str | None = None) -> str:
    """What a person needs to see to decide on a call of ``tool`` with
    ``arguments`` (the model's, as the SDK will run them): the command and
    every argument it runs with, the input to a running command, the files a
    patch touches and its diff (a service whose approval is
    "commands_and_writes"), or another tool's arguments (an MCP server's
    tool: its server's and its own name first). Whole, and in a form no
    terminal interprets."""
    if mcp_server is not None:
        named = f"MCP server {visible(repr(mcp_server))}, tool {visible(repr(tool))}"
        return named + "\n" + shown_call(arguments)
    if tool == "exec_command":
        return shown_command(arguments)
    if tool == "write_stdin":
        return shown_input(arguments)
    if tool == "apply_patch" and current().approval == "commands_and_writes":
        return shown_patch(arguments)
    return shown_call(arguments)


def runs_nothing(reason: object, arguments: str) -> str:
    return (
        f"runs nothing: the call is malformed ({visible(str(reason))}); the model is told so\n"
        f"arguments: {visible(arguments)}"
    )


# Each command line starts with one of these; every other line of a request
# says something about the command, so no line of a command can pass for one.
FIRST_LINE, NEXT_LINE = "$ ", "> "
HIDDEN_NOTE = (
    "note: it holds characters a terminal would not show as they are, shown here as ⟨names⟩"
)


def shown_command(arguments: str) -> str:
    """A command, as it will run (sandbox_tools.command_of)."""
    try:
        command = sandbox_tools.command_of(arguments)
    except sandbox_tools.BadCall as e:
        return runs_nothing(e, arguments)
    args = command.arguments
    lines = visible(args.cmd, keep_lines=True).split("\n")
    shown = [FIRST_LINE + lines[0], *(NEXT_LINE + line for line in lines[1:])]
    shown.append(
        "runs in: sh -c (not a login shell), in "
        + (f"{visible(args.workdir)} (of the workspace)" if args.workdir else "the workspace")
    )
    if args.tty:
        shown.append("on a terminal (tty: true)")
    given = args.model_fields_set & {"yield_time_ms", "max_output_tokens"}
    for name in sorted(given):
        shown.append(f"{name}: {getattr(args, name)}")
    if command.asked_for_login:
        shown.append("login: asked for, not given (no command runs in a login shell)")
    if holds_hidden(args.cmd) or (args.workdir and holds_hidden(args.workdir)):
        shown.append(HIDDEN_NOTE)
    return "\n".join(shown)


def shown_input(arguments: str) -> str:
    """Characters typed into a running command."""
    try:
        args = WriteStdinArgs.model_validate_json(arguments or "{}")
    except ValidationError as e:
        return runs_nothing(sandbox_tools.one_line(e), arguments)
    shown = [f"types into running command {args.session_id}: {visible(args.chars)}"]
    if holds_hidden(args.chars):
        shown.append(HIDDEN_NOTE)
    return "\n".join(shown)


# How each kind of edit is named.
EDITS = {"create_file": "add", "update_file": "update", "delete_file": "delete"}


def shown_patch(arguments: str) -> str:
    """A patch, as the SDK will apply it (its own parser, which reads the
    patch text and its JSON forms alike): each file it adds, updates, moves
    or deletes, flush left, and each file's diff indented under it."""
    try:
        operations = _parse_custom_tool_input(arguments)
    except ValueError as e:
        return runs_nothing(e, arguments)
    shown = []
    for operation in operations:
        line = f"{EDITS.get(operation.type, operation.type)} {visible(operation.path)}"
        if operation.move_to:
            line += f" (moved to {visible(operation.move_to)})"
        shown.append(line)
        for diff_line in (operation.diff or "").splitlines():
            shown.append("    " + visible(diff_line))
    if holds_hidden(arguments):
        shown.append(HIDDEN_NOTE)
    return "\n".join(shown)


def shown_call(arguments: str) -> str:
    """Another tool's arguments, one per line."""
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return "arguments (not JSON): " + visible(arguments)
    text = json.dumps(parsed, indent=2, ensure_ascii=False, sort_keys=True)
    shown = visible(text, keep_lines=True)
    return shown + ("\n" + HIDDEN_NOTE if holds_hidden(text) else "")


# The most of a request the run's current details hold (the Web UI shows
# them); the starter's --pending shows every request whole.
LONGEST_DETAILS = 16_000


def current_details(workflow_id: str, request: Request) -> str:
    """What the Web UI shows of a waiting request: the request in a code
    block (whose fence no backticks inside can close), cut only past
    LONGEST_DETAILS, saying so and where to see all of it."""
    detail = request.detail
    rest = ""
    if len(detail) > LONGEST_DETAILS:
        rest = (
            f"\n... and {len(detail) - LONGEST_DETAILS:,} more characters, not shown here: "
            f"see all of it with `{current().command('starter')} --pending {workflow_id}` "
            "before you decide."
        )
        detail = detail[:LONGEST_DETAILS]
    fence = "`" * max(3, 1 + max(map(len, re.findall("`+", detail)), default=0))
    return (
        f"Waiting for a person to approve {request.tool} (call {request.call_id}):\n"
        f"{fence}\n{detail}\n{fence}{rest}"
    )


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
