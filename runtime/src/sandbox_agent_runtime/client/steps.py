"""What a step looks like to a person: ``Progress`` turns the events of a
run's history into lines a person can follow (the sandbox's provider and
host, each model turn, tool call and sandbox operation, each failure), and
``why_not_completed`` says in words why a run ended without an answer. It
prints nothing: the starter prints the lines, the API sends them as events."""

import json
from typing import Any

from temporalio import exceptions
from temporalio.api.common.v1 import Payloads
from temporalio.api.enums.v1 import EventType, VersioningBehavior
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowFailureError

from sandbox_agent_runtime.archives import size_text
from sandbox_agent_runtime.display import visible
from sandbox_agent_runtime.encryption import UnknownKey, WrongKey
from sandbox_agent_runtime.run_request import RELEASED
from sandbox_agent_runtime.service import current
from sandbox_agent_runtime.shared import (
    CHECK,
    CHOOSING_THE_HOST,
    COLLECT,
    END,
    FOLLOW_UP,
    MCP_CALL,
    MODEL_ACTIVITIES,
    NOT_THIS_HOST,
    PLACE,
    RESTORE,
    SESSION_MEMO,
    SNAPSHOT,
    mcp_operation,
    sandbox_operation,
)

# What the sandbox activities do, in words. Activities not listed here (the
# "is the command still running?" polls, for instance) are not shown.
SANDBOX_STEPS = {
    "sandbox_client_create": "creating the sandbox",
    "sandbox_client_resume": "resuming the sandbox",
    "sandbox_session_start": "starting a session",
    "sandbox_session_read": "reading {path}",
    "sandbox_session_write": "writing {path}",
    "sandbox_session_pty_write_stdin": "typing into a running command",
    "sandbox_session_stop": "stopping the session",
    "sandbox_client_delete": "removing the sandbox",
}
# What an MCP server's other operations do, in words (a call of a tool is
# shown with its tool and arguments).
MCP_STEPS = {"list-tools": "listing its tools", "server-session": "session opened"}
SANDBOX_COMMANDS = ("sandbox_session_exec", "sandbox_session_pty_exec_start")
LONGEST_COMMAND_SHOWN = 120


def one_line(text: str) -> str:
    """``text`` on one line, in a form no terminal interprets,
    cut past LONGEST_COMMAND_SHOWN, saying how much more there was."""
    line = visible(text)
    if len(line) > LONGEST_COMMAND_SHOWN:
        line = f"{line[:LONGEST_COMMAND_SHOWN]}... ({len(line) - LONGEST_COMMAND_SHOWN:,} more characters)"
    return line


# The marker Temporal's core SDK records a local activity's result in (the
# choice of a sandbox's host, when the service has a host-bound backend).
LOCAL_ACTIVITY_MARKER = "core_local_activity"


class Progress:
    """Turns the events of a run's history into lines a person can follow."""

    def __init__(self, client: Client, conversation: bool = False) -> None:
        self.client = client
        # Whether the run is a conversation (its request's follow_ups), and
        # where it stands: its latest SESSION_MEMO ({} before the first).
        self.conversation = conversation
        self.session: dict[str, Any] = {}
        # The prompts seen so far (follow-ups taken), and the model turns of the latest.
        self.prompts = 1
        self.turns = 0
        self.steps: dict[int, str] = {}
        # Whether the service has a host-bound backend, whose runs choose a
        # host for their sandbox and keep its operations there.
        self.host_bound = current().host_bound
        # The steps a worker of another host refused (affinity.HostFirst),
        # which the run sends to their host's queue next: shown once.
        self.refused: list[str] = []
        # The scheduled events of the steps that collect the run's outputs.
        self.collections: set[int] = set()
        # Whether the build the current run is pinned to was shown.
        self.version_shown = False
        # The agent of the run's first model turn (agent.py's), and of its latest.
        self.first_agent = ""
        self.agent = ""

    async def describe(self, event: HistoryEvent) -> str | None:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            # On a versioned worker, each run is pinned to the
            # build of its first workflow task.
            task = event.workflow_task_completed_event_attributes
            pinned = task.versioning_behavior == VersioningBehavior.VERSIONING_BEHAVIOR_PINNED
            if self.version_shown or not pinned:
                return None
            self.version_shown = True
            version = task.deployment_version
            return f"version  build {version.build_id!r} of {version.deployment_name!r} (pinned)"
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            self.version_shown = False
            # The workflow's arguments: the request (its provider), and what
            # an earlier run of the chain handed on.
            arguments = await self._decode(event.workflow_execution_started_event_attributes.input)
            carried = arguments[1] if len(arguments) > 1 else None
            if isinstance(carried, dict):
                line = f"run      {carried.get('run', '?')} of the chain, same sandbox"
                if not self.host_bound:
                    return line
                host = carried.get("host")
                return line + (f" on host {host['id']!r}" if isinstance(host, dict) else "")
            request = arguments[0] if arguments and isinstance(arguments[0], dict) else {}
            self.conversation = self.conversation or bool(request.get("follow_ups"))
            # A request without a provider runs in the service's primary one.
            provider = request.get("provider") or current().sandbox_provider
            return f"sandbox  provider {provider!r}"
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            return "run      continues as new: its history is large"
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
            return await self.session_of(event)
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            name = event.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
            if name == FOLLOW_UP:
                self.prompts += 1
                self.turns = 0
                return f"prompt   {self.prompts}, a follow-up"
            if name == END:
                return "session  ended (--end): removing the sandbox"
            return None
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            step = await self._scheduled(event)
            if step is not None:
                self.steps[event.event_id] = step
                if self.host_bound and step in self.refused:
                    self.refused.remove(step)
                    return None
            return step
        if self.host_bound and event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            return await self._host_chosen(event)
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            completed = event.activity_task_completed_event_attributes
            if completed.scheduled_event_id in self.collections:
                [outputs] = await self._decode(completed.result) or [None]
                if not isinstance(outputs, dict):
                    return "sandbox  output (not readable here: is OBJECT_STORE_URL the worker's?)"
                files = outputs.get("files") or []
                size = sum(each.get("size", 0) for each in files)
                plural = "s" if len(files) != 1 else ""
                return f"sandbox  output {len(files)} file{plural} ({size_text(size)})"
            return None
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED:
            failed = event.activity_task_failed_event_attributes
            step = self.steps.get(failed.scheduled_event_id, "a step")
            if self.host_bound and failed.failure.application_failure_info.type == NOT_THIS_HOST:
                self.refused.append(step)
                return None
            return f"! {step}: failed: {one_line(failed.failure.message)}"
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
            timed_out = event.activity_task_timed_out_event_attributes
            return f"! {self.steps.get(timed_out.scheduled_event_id, 'a step')}: timed out"
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
            reason = event.workflow_execution_terminated_event_attributes.reason
            return f"! terminated: {one_line(reason) if reason else 'no reason given'}"
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            message = event.workflow_task_failed_event_attributes.failure.message
            return f"! the workflow code failed (Temporal retries it): {one_line(message)}"
        return None

    async def session_of(self, event: HistoryEvent) -> str | None:
        """Note where a conversation stands from a memo event (SESSION_MEMO,
        which the workflow rewrites at each change of state); the line for a
        change worth showing."""
        if event.event_type != EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
            return None
        memo = event.workflow_properties_modified_event_attributes.upserted_memo
        if SESSION_MEMO not in memo.fields:
            return None
        [session] = await self._decode(Payloads(payloads=[memo.fields[SESSION_MEMO]])) or [None]
        if not isinstance(session, dict):
            return None
        was, self.session = self.session, session
        if session.get("state") == RELEASED and was.get("state") != RELEASED:
            return "session  released the sandbox (workspace in a snapshot)"
        restored = session.get("restored")
        if restored and restored != was.get("restored"):
            # From which snapshot, and why (a host gone: what is redone).
            return f"session  {one_line(str(restored))}"
        return None

    def answered(self, prompt: int | None) -> bool:
        """Whether the conversation has answered ``prompt`` (None: never
        asked; a run without follow-ups is followed to its end)."""
        if prompt is None or not self.conversation:
            return False
        answered = self.session.get("answered")
        return isinstance(answered, int) and answered >= prompt

    async def _scheduled(self, event: HistoryEvent) -> str | None:
        attributes = event.activity_task_scheduled_event_attributes
        name = attributes.activity_type.name
        if name in MODEL_ACTIVITIES:
            self.turns += 1
            # The plugin names the agent that called the model in the
            # step's summary: the run's first is the agent's own (agent.py);
            # an agent it handed off to or called as a tool is named.
            [agent] = await self._decode(Payloads(payloads=[event.user_metadata.summary])) or [""]
            agent = agent if isinstance(agent, str) else ""
            self.first_agent = self.first_agent or agent
            self.agent = agent
            if agent and agent != self.first_agent:
                return f"model    turn {self.turns} ({one_line(agent)})"
            return f"model    turn {self.turns}"
        mcp = mcp_operation(name)
        if mcp is not None:
            return await self._mcp(*mcp, attributes.input)
        operation = sandbox_operation(name)
        if operation is None:
            # One of the agent's own tools (tools.py), with what the model asked.
            asked = " ".join(json.dumps(each) for each in await self._decode(attributes.input))
            return f"tool     {name} {one_line(asked)}".rstrip()
        if operation in (PLACE, SNAPSHOT, RESTORE, CHECK):
            # Its summary, written by the workflow: the inputs' names and
            # sizes; "snapshot"; which snapshot it restores, and why; how
            # many checks an evaluation makes.
            [summary] = await self._decode(Payloads(payloads=[event.user_metadata.summary])) or [""]
            return f"sandbox  {one_line(str(summary) or operation.rpartition('_')[2])}"
        if operation == COLLECT:
            self.collections.add(event.event_id)
            return None
        decoded = await self._decode(attributes.input)
        arguments = decoded[0] if decoded and isinstance(decoded[0], dict) else {}
        if operation in SANDBOX_COMMANDS:
            command = arguments.get("command") or ["?"]
            return f"sandbox  $ {one_line(' '.join(str(part) for part in command))}"
        step = SANDBOX_STEPS.get(operation)
        if step is None:
            return None
        return "sandbox  " + step.format(path=arguments.get("path", "a file"))

    async def _mcp(self, server: str, operation: str, given: Payloads) -> str | None:
        """An MCP server's step: a call of one of its tools, with what the
        model asked; its tools listed; its session opened (a stateful one)."""
        if operation == MCP_CALL:
            [call] = await self._decode(given) or [{}]
            call = call if isinstance(call, dict) else {}
            asked = json.dumps(call.get("arguments") or {})
            return f"mcp      {server} {call.get('tool_name', '?')} {one_line(asked)}"
        step = MCP_STEPS.get(operation)
        return f"mcp      {server}: {step}" if step else None

    async def _host_chosen(self, event: HistoryEvent) -> str | None:
        """Where the sandbox lives, from the marker of the local activity
        that chose its host (affinity.choose_host), when the service has a
        host-bound backend."""
        marker = event.marker_recorded_event_attributes
        data, result = marker.details.get("data"), marker.details.get("result")
        if marker.marker_name != LOCAL_ACTIVITY_MARKER or data is None or result is None:
            return None
        about = json.loads(data.payloads[0].data) if data.payloads else {}
        if sandbox_operation(str(about.get("activity_type", ""))) != CHOOSING_THE_HOST:
            return None
        [host] = await self._decode(result) or [None]
        if isinstance(host, dict):
            return f"sandbox  on host {host.get('id')!r}"
        return "sandbox  reachable from any worker"

    async def _decode(self, payloads: Payloads) -> list[Any]:
        try:
            return await self.client.data_converter.decode(payloads.payloads)
        except (UnknownKey, WrongKey):
            # The run's payloads are under a key this client lacks: the
            # command says so (the starter's main()), rather than following
            # it half blind.
            raise
        except Exception:
            # Progress is a convenience: a payload it cannot read (a custom
            # codec, a new SDK format) only makes the line less detailed.
            return []


def why_not_completed(error: WorkflowFailureError) -> str:
    """Why a run ended without an answer, in the words that follow
    "Workflow ID" in the line the starter prints: "timed out", "failed: ..."."""
    cause = error.cause
    if isinstance(cause, exceptions.TimeoutError):
        return "timed out"
    if isinstance(cause, exceptions.TerminatedError):
        return "was terminated"
    if isinstance(cause, exceptions.CancelledError):
        return "was cancelled"
    # The workflow's own failure says which step failed and why.
    return f"failed: {getattr(cause, 'message', None) or cause}"
