"""The starter: asks the agent to do something, shows each step as it happens, and prints the answer.

    <service>-starter "Count the files in /etc"      # start, follow, print the answer
    <service>-starter --no-wait "Count the files"    # start, print id and link, exit
    <service>-starter --attach WORKFLOW_ID           # follow a run started earlier
    <service>-starter --prompt-file task.md          # the prompt from a file (- for stdin)
    <service>-starter --input data.csv --output out/ "Summarise data.csv into summary.txt"
    <service>-starter --repo https://github.com/org/repo@v1.2 --output out/ "Fix the typo"
    <service>-starter --attach WORKFLOW_ID --output out/  # a finished run's files
    <service>-starter --continue WORKFLOW_ID "Now plot it by month"  # a follow-up
    <service>-starter --end WORKFLOW_ID              # end a conversation, free its sandbox
    <service>-starter --provider NAME "Count the files"  # with several sandbox providers

(``<service>-starter`` is the command a project installs, and ``python -m
<package>.starter`` the same: the runtime's starter, for the service the
project's package configures, service.py.) It prints the workflow id and a
link to the run in the Temporal Web UI. The link starts with
``TEMPORAL_UI_URL`` when that is set; otherwise with https://cloud.temporal.io
for a Temporal Cloud address, and with the dev server's http://localhost:8233
for anything else.

``--input PATH`` (repeatable) puts a file or a directory at the top of the
workspace under its own name, ``--repo URL[@REF]`` a git repository cloned
at a branch, tag or commit (by the worker). ``--output DIR`` writes every
file the run created or changed under DIR (and, with ``--repo``, the run's
changes as ``DIR/changes.patch``), keeping each relative path, and never
anything outside DIR (archives.py). An agent with an ``output_type`` (agent.py)
answers in JSON, printed as JSON. docs/inputs-and-outputs.md has the rest.

After the answer, one line says what the run used of the model (calls,
input and output tokens, across its chain), and one how to follow up.
Progress is read from the run's history, so it shows what Temporal recorded:
the sandbox provider the run uses (and, when the service has a host-bound backend, the
host its sandbox lives on, or that any worker reaches it), the build a versioned worker
pinned it to, then one line per model turn and per
sandbox operation (each shell command with the command itself, each snapshot
and restore of the workspace), in the order the workflow scheduled them. A
long run continues as new runs of the same workflow (same id, same sandbox);
progress follows it from run to run, and ``--attach`` reads it from the
first run of the chain.

Every run the starter starts is a conversation (``RunRequest.follow_ups``):
after its answer it waits for a follow-up in the same workspace, until it is
ended or SESSION_LIFETIME (shared.py) passes without one, so it is started
without a workflow execution timeout (the service's max_turns bounds each prompt). The
starter follows it to its answer and exits. ``--continue ID "PROMPT"`` (with
``--input`` and ``--output`` as for a first prompt) sends the next prompt
(the FOLLOW_UP update) and follows it, from the moment the run took it, to
its answer: right after the last answer or days later. A run that is still
working, was started without follow-ups or has ended refuses it in one
line (EXIT_REFUSED). ``--end ID`` ends a conversation (the END update) and
waits until its sandbox is removed. ``--attach ID`` follows the prompt a
conversation works on to its answer or, when it waits for a follow-up
(holding its sandbox, or released, its workspace in a snapshot), says so and
prints the latest answer.

While it follows a run, the starter rides out a restart of the Temporal
service (SERVICE_OUTAGE_LIMIT); a service that stays gone ends it with one
line, saying how to follow the run again.

What it prints of a run (steps, failures and, with approvals, requests for approval) goes through
display.py first, so no byte the model or a command chose reaches the
terminal as a control sequence; the answer is printed as the model wrote it.

Its exit status tells a script how the run ended: exit_statuses() below says
what each one means, and ``--help`` lists them.
"""

import argparse
import asyncio
import functools
import json
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import quote

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from temporalio import exceptions
from temporalio.api.common.v1 import Payloads
from temporalio.api.enums.v1 import (
    EventType,
    PendingActivityState,
    PendingWorkflowTaskState,
    VersioningBehavior,
)
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateHandle,
    WorkflowUpdateRPCTimeoutOrCancelledError,
    WorkflowUpdateStage,
)
from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter
from temporalio.service import RPCError, RPCStatusCode

from sandbox_agent_runtime import approvers
from sandbox_agent_runtime.archives import (
    BadInput,
    inputs_of,
    outputs_lines,
    repo_of,
    size_text,
    write_outputs,
)
from sandbox_agent_runtime.connection import ConnectionFailed, connect
from sandbox_agent_runtime.display import (
    safe_line,
    visible,
    without_credentials,
)
from sandbox_agent_runtime.encryption import (
    UnknownKey,
    WrongKey,
    codec_of,
)
from sandbox_agent_runtime.exits import EXIT_BROKEN_PIPE as EXIT_BROKEN_PIPE
from sandbox_agent_runtime.exits import EXIT_INTERRUPTED as EXIT_INTERRUPTED
from sandbox_agent_runtime.exits import exit_after
from sandbox_agent_runtime.object_store import (
    ObjectStoreUnreachable,
    check_reachable,
    data_converter,
    external_storage,
)
from sandbox_agent_runtime.run_request import (
    ENDED,
    RELEASED,
    WAITING,
    Conversation,
    FollowUp,
    Outputs,
    RunAnswer,
    RunRequest,
)
from sandbox_agent_runtime.service import current
from sandbox_agent_runtime.settings import (
    BadSetting,
    StarterSettings,
    starter_settings,
)
from sandbox_agent_runtime.shared import (
    CHOOSING_THE_HOST,
    COLLECT,
    CONVERSATION,
    DECIDE,
    END,
    FOLLOW_UP,
    LONGEST_PROMPT,
    MODEL_ACTIVITIES,
    NOT_THIS_HOST,
    PENDING,
    PLACE,
    RESTORE,
    SESSION_MEMO,
    SNAPSHOT,
    USAGE_MEMO,
    WORKFLOW_TYPE,
    sandbox_operation,
    step_name,
)

DEFAULT_PROMPT = (
    "Write a file holding the first 20 Fibonacci numbers, one per line, "
    "then tell me how many lines it has and what the last one is."
)

EXIT_COMPLETED = 0
EXIT_NOT_COMPLETED = 1
EXIT_UNREACHABLE = 2
EXIT_USAGE = 3
EXIT_REFUSED = 4
EXIT_UNDECRYPTABLE = 5
EXIT_FILES_NOT_WRITTEN = 6


def exit_statuses() -> dict[int, str]:
    """What each exit status means, for scripts (--help lists them): the
    service's own, with approvals and with several sandbox providers."""
    with_approvals = current().approvals
    several = len(current().providers) > 1
    return {
        EXIT_COMPLETED: "the run (or the follow-up) answered and its answer was printed (with "
        "--no-wait: the run was started; with --end: the conversation ended, its sandbox removed)",
        EXIT_NOT_COMPLETED: "the run ended without an answer: it failed, timed out, was "
        "terminated or cancelled",
        EXIT_UNREACHABLE: "the Temporal service could not be reached, is misconfigured "
        "(TEMPORAL_*), has no such namespace, or stopped answering (the run itself may go on); "
        "or the object store (OBJECT_STORE_URL) does not answer or refuses it"
        + ("; or no worker answered for the run within 10 s" if with_approvals else ""),
        EXIT_USAGE: "bad usage: an unknown option"
        + (" or provider" if several else "")
        + ", a prompt that is empty, unreadable or too long, "
        "an --input, --repo or --output it cannot use (docs/inputs-and-outputs.md), "
        "a setting it cannot use (TEMPORAL_UI_URL, OBJECT_STORE_URL, PAYLOAD_ENCRYPTION_KEYS"
        + (", APPROVER_KEY_FILE" if with_approvals else "")
        + "), or no workflow with the id given to --attach, --continue or --end"
        + (" (or to --pending, --approve, --reject)" if with_approvals else "")
        + ", or one that is not this service's (neither its workflow type nor its task queue)"
        + (
            "; a decision on a call that does not wait, in a run that has ended, or without the "
            "approver's key"
            if with_approvals
            else ""
        ),
        EXIT_REFUSED: "refused: a follow-up (--continue) to a run that is still working on a "
        "prompt, was started without follow-ups or has ended; or --end of a run that has ended "
        "or was started without follow-ups",
        EXIT_UNDECRYPTABLE: "the run's payloads do not decrypt: encrypted with a key that "
        "PAYLOAD_ENCRYPTION_KEYS here does not hold, or another key under the same id",
        EXIT_FILES_NOT_WRITTEN: "the run answered and its answer was printed, but not every file "
        "it made reached --output DIR: some (or all) were refused there, each named on stderr, "
        "the rest written; DIR could not be written; or the files did not travel (over the limit)",
        EXIT_INTERRUPTED: "interrupted (Ctrl+C) while following; the run itself goes on",
        EXIT_BROKEN_PIPE: "its output went to a pipe that closed early (| head)",
    }


def starter_command() -> str:
    """The starter's own command, as the user runs it ("<service>-starter"),
    in the lines it prints."""
    return current().command("starter")


# Why a conversation refuses a follow-up or the end (the ApplicationError
# type its FOLLOW_UP or END update's validator raises), and what to do
# instead, in the line the starter prints ({id}: the workflow's id; {then}:
# what to do once it has answered).
REFUSALS = {
    "StillWorking": "workflow {id} is still working on a prompt: follow it to its answer "
    "(--attach {id}), then {then}",
    "NoFollowUps": "workflow {id} was started without follow-ups (RunRequest.follow_ups): "
    "start a new run",
    "ConversationEnded": "the conversation {id} has ended: start a new run",
}

# The line after a conversation's answer.
FOLLOW_UP_LINE = 'Follow up: {command} --continue {id} "..."   End: --end {id}'

# How long the starter waits for a worker to answer a query (where a
# conversation stands, what waits for a person) or, with approvals, to take a
# decision (an update): a run with no worker running answers neither.
WORKER_ANSWERS_WITHIN = timedelta(seconds=10)

DEV_SERVER_UI = "http://localhost:8233"
CLOUD_UI = "https://cloud.temporal.io"
CLOUD_HOST_SUFFIXES = (".tmprl.cloud", ".api.temporal.io")

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
SANDBOX_COMMANDS = ("sandbox_session_exec", "sandbox_session_pty_exec_start")
LONGEST_COMMAND_SHOWN = 120

# A step that no worker has taken for this long is shown as waiting. Past a
# worker's capacity (capacity.py), or with no worker running, a run's next
# step waits on the task queue until a worker is free: nothing fails.
WAIT_NOTICE = timedelta(seconds=10)

# How long the starter keeps asking a Temporal service that does not answer.
# The SDK's client retries each call for up to 10 s by itself (RetryConfig in
# temporalio.service: 10 retries, 10 s in all); the starter then asks again,
# every ASK_AGAIN_EVERY, until SERVICE_OUTAGE_LIMIT has passed: a service that
# restarts within about half a minute goes unnoticed, one that is gone ends
# the starter with EXIT_UNREACHABLE instead of a hang.
SERVICE_OUTAGE_LIMIT = timedelta(seconds=20)
ASK_AGAIN_EVERY = timedelta(seconds=1)


class StoppedAnswering(Exception):
    """The Temporal service did not answer for SERVICE_OUTAGE_LIMIT."""


async def answered(ask: Callable[[], Awaitable[Any]]) -> Any:
    """What ``ask()`` returns, asked again while the service is unavailable,
    until SERVICE_OUTAGE_LIMIT has passed since it first failed."""
    give_up = None
    while True:
        try:
            return await ask()
        except RPCError as e:
            if e.status != RPCStatusCode.UNAVAILABLE:
                raise
            now = time.monotonic()
            give_up = give_up or now + SERVICE_OUTAGE_LIMIT.total_seconds()
            if now >= give_up:
                raise StoppedAnswering from e
        await asyncio.sleep(ASK_AGAIN_EVERY.total_seconds())


async def history_of(run: WorkflowHandle[Any, RunAnswer]) -> AsyncIterator[HistoryEvent]:
    """Each event of ``run``'s history as it is recorded, through an outage
    of the service shorter than SERVICE_OUTAGE_LIMIT: the SDK's iterator keeps
    its place when a page fails, so asking again goes on from there."""
    events = run.fetch_history_events(wait_new_event=True)
    while True:
        try:
            event = await answered(events.__anext__)
        except StopAsyncIteration:
            return
        yield event


def stopped_answering(client: Client, doing: str) -> int:
    """Say, in one line, that the service stopped answering while the
    starter was ``doing`` something; the status for it."""
    address = without_credentials(client.service_client.config.target_host)
    print(f"Temporal at {address} stopped answering while {doing}.", file=sys.stderr)
    return EXIT_UNREACHABLE


@functools.cache
def quiet_runtime() -> Runtime:
    """The Temporal runtime of the starter's client, which logs only the
    SDK's errors: the starter says itself, in one line, when the service
    stops answering, instead of the SDK's warning at every retry."""
    quiet = TelemetryFilter(core_level="ERROR", other_level="ERROR")
    return Runtime(telemetry=TelemetryConfig(logging=LoggingConfig(filter=quiet)))


async def start(
    client: Client,
    request: RunRequest | str,
    workflow_id: str | None = None,
    provider: str = "",
) -> WorkflowHandle[Any, RunAnswer]:
    """Start one run of the agent on the worker's task queue: ``request``,
    or a prompt alone (in a sandbox of ``provider``, by default the
    service's primary provider; no follow-ups). The
    workflow is named, not imported: the starter needs only Temporal's
    client to start and follow a run. A conversation (``follow_ups``) has
    no execution timeout: it waits for follow-ups until it is ended or
    SESSION_LIFETIME passes, and the service's max_turns bounds each prompt."""
    service = current()
    if isinstance(request, str):
        request = RunRequest(prompt=request, provider=provider or service.sandbox_provider)
    return await client.start_workflow(
        WORKFLOW_TYPE,
        request,
        id=workflow_id or f"{service.task_queue}-{uuid.uuid4()}",
        task_queue=service.task_queue,
        execution_timeout=None if request.follow_ups else service.workflow_execution_timeout,
        result_type=RunAnswer,
    )


def web_ui_link(client: Client, workflow_id: str, ui_url: str | None) -> str:
    """The run's page in the Temporal Web UI, under ``ui_url``
    (``TEMPORAL_UI_URL``) or, when that is None, the UI the address implies."""
    base = ui_url
    if base is None:
        host = client.service_client.config.target_host.rsplit(":", 1)[0]
        base = CLOUD_UI if host.endswith(CLOUD_HOST_SUFFIXES) else DEV_SERVER_UI
    namespace = quote(client.namespace, safe="")
    return f"{base.rstrip('/')}/namespaces/{namespace}/workflows/{quote(workflow_id, safe='')}"


def _one_line(text: str) -> str:
    """``text`` on one line, in a form no terminal interprets (display.py),
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
        # host for their sandbox and keep its operations there (affinity.py).
        self.host_bound = current().host_bound
        # The steps a worker of another host refused (affinity.HostFirst),
        # which the run sends to their host's queue next: shown once.
        self.refused: list[str] = []
        # The scheduled events of the steps that collect the run's outputs.
        self.collections: set[int] = set()
        # Whether the build the current run is pinned to was shown.
        self.version_shown = False

    async def describe(self, event: HistoryEvent) -> str | None:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            # On a versioned worker (versioning.py), each run is pinned to the
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
            return f"! {step}: failed: {_one_line(failed.failure.message)}"
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
            timed_out = event.activity_task_timed_out_event_attributes
            return f"! {self.steps.get(timed_out.scheduled_event_id, 'a step')}: timed out"
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
            reason = event.workflow_execution_terminated_event_attributes.reason
            return f"! terminated: {_one_line(reason) if reason else 'no reason given'}"
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            message = event.workflow_task_failed_event_attributes.failure.message
            return f"! the workflow code failed (Temporal retries it): {_one_line(message)}"
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
            return f"session  {_one_line(str(restored))}"
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
            return f"model    turn {self.turns}"
        operation = sandbox_operation(name)
        if operation is None:
            # One of the agent's own tools (tools.py), with what the model asked.
            asked = " ".join(json.dumps(each) for each in await self._decode(attributes.input))
            return f"tool     {name} {_one_line(asked)}".rstrip()
        if operation in (PLACE, SNAPSHOT, RESTORE):
            # Its summary, written by the workflow: the inputs' names and
            # sizes; "snapshot"; which snapshot it restores, and why.
            [summary] = await self._decode(Payloads(payloads=[event.user_metadata.summary])) or [""]
            return f"sandbox  {_one_line(str(summary) or operation.rpartition('_')[2])}"
        if operation == COLLECT:
            self.collections.add(event.event_id)
            return None
        decoded = await self._decode(attributes.input)
        arguments = decoded[0] if decoded and isinstance(decoded[0], dict) else {}
        if operation in SANDBOX_COMMANDS:
            command = arguments.get("command") or ["?"]
            return f"sandbox  $ {_one_line(' '.join(str(part) for part in command))}"
        step = SANDBOX_STEPS.get(operation)
        if step is None:
            return None
        return "sandbox  " + step.format(path=arguments.get("path", "a file"))

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
            # The run's payloads are under a key this starter lacks: it says
            # so (main()), rather than following it half blind.
            raise
        except Exception:
            # Progress is a convenience: a payload it cannot read (a custom
            # codec, a new SDK format) only makes the line less detailed.
            return []


def chain_run(
    client: Client, workflow_id: str, run_id: str | None
) -> WorkflowHandle[Any, RunAnswer]:
    """One run of a workflow's chain (``run_id`` None: its latest run)."""
    return client.get_workflow_handle(workflow_id, run_id=run_id, result_type=RunAnswer)


def _why_not_completed(error: WorkflowFailureError) -> str:
    cause = error.cause
    if isinstance(cause, exceptions.TimeoutError):
        return "timed out"
    if isinstance(cause, exceptions.TerminatedError):
        return "was terminated"
    if isinstance(cause, exceptions.CancelledError):
        return "was cancelled"
    # The workflow's own failure says which step failed and why.
    return f"failed: {getattr(cause, 'message', None) or cause}"


def continued_as(event: HistoryEvent) -> str | None:
    """The run that a run's last event hands its work to, if it continued as new."""
    if event.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
        return None
    return event.workflow_execution_continued_as_new_event_attributes.new_execution_run_id


async def queued_step(run: WorkflowHandle[Any, RunAnswer]) -> tuple[object, str] | None:
    """The step of a run that waits for a worker to take it, if any: a key
    that tells one wait from the next, and the step in words."""
    description = (await run.describe()).raw_description
    task = description.pending_workflow_task
    if task.state == PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_SCHEDULED:
        key = ("workflow task", task.scheduled_time.ToNanoseconds())
        return key, "the run's next workflow task"
    scheduled = PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED
    for activity in description.pending_activities:
        backing_off = activity.next_attempt_schedule_time.ToNanoseconds() > time.time_ns()
        if activity.state == scheduled and not backing_off:
            step = step_name(activity.activity_type.name).replace("the ", "its ", 1)
            return (activity.activity_id, activity.attempt), step
    return None


async def show_waits(following: Callable[[], WorkflowHandle[Any, RunAnswer]]) -> None:
    """Say so when the run being followed (``following()``) has a step that
    no worker has taken for WAIT_NOTICE."""
    first_seen: dict[object, float] = {}
    shown: set[object] = set()
    while True:
        await asyncio.sleep(WAIT_NOTICE.total_seconds() / 5)
        try:
            queued = await queued_step(following())
        except RPCError:
            continue
        if queued is None or queued[0] in shown:
            continue
        key, step = queued
        waited = time.monotonic() - first_seen.setdefault(key, time.monotonic())
        if waited >= WAIT_NOTICE.total_seconds():
            shown.add(key)
            print(
                f"  waiting  {waited:.0f} s for a worker to take {step}: every worker on task "
                f"queue {current().task_queue!r} is busy, or none is running; the run waits, nothing is lost",
                flush=True,
            )


async def follow(
    client: Client,
    handle: WorkflowHandle[Any, RunAnswer],
    key_file: Path | None = None,
    output: Path | None = None,
    *,
    prompt: int | None = 1,
    after: Callable[[HistoryEvent], bool] | None = None,
    conversation: bool = False,
) -> int:
    """Print each step of the run, through every run of its chain, as it
    happens, then its answer, and write its files under ``output``; return
    the exit status. With approvals, a decision asked on the terminal is
    signed with the approver's key in ``key_file`` (None: the one
    APPROVER_KEY_FILE names, settings.py); without, ``key_file`` is unused.

    A conversation (``conversation``, or a request with follow_ups) is
    followed until it has answered ``prompt``, not to its end, which may be
    days away (``prompt`` None: to its end). With ``after``, steps are shown only
    after the first event it is true of (the follow-up being taken): the
    events before are only read for where the conversation stands."""
    progress = Progress(client, conversation)
    current: WorkflowHandle[Any, RunAnswer] | None = handle
    waits = asyncio.create_task(show_waits(lambda: current or handle))
    # With approvals, set on each event of the run's history: ask_for_decisions asks again soon.
    moved = asyncio.Event()
    asking = (
        asyncio.create_task(ask_for_decisions(client, handle.id, key_file, moved))
        if approvals()
        else None
    )
    showing = after is None
    try:
        while current is not None:
            next_run = None
            async for event in history_of(current):
                moved.set()
                if showing:
                    line = await progress.describe(event)
                    if line is not None:
                        print(f"  {line}", flush=True)
                elif after is not None:
                    await progress.session_of(event)
                    showing = after(event)
                if progress.answered(prompt):
                    break
                next_run = continued_as(event)
            current = None if next_run is None else chain_run(client, handle.id, next_run)
        waiting = progress.answered(prompt)
        if waiting:
            # It waits for a follow-up: its answer is in its state.
            answer = await answered(lambda: latest_answer(client, handle.id))
        else:
            answer = await answered(handle.result)
    except WorkflowFailureError as e:
        print(f"Workflow {handle.id} {_why_not_completed(e)}", file=sys.stderr)
        return EXIT_NOT_COMPLETED
    except Refused as e:
        print(visible(f"ERROR: {e}"), file=sys.stderr)
        return e.status
    except StoppedAnswering:
        following = f"following workflow {handle.id}; the run itself may go on"
        return stopped_answering(client, f"{following}. Follow it again with --attach {handle.id}")
    except asyncio.CancelledError:
        print(
            f"\nStopped following. The run goes on; follow it again with --attach {handle.id}",
            file=sys.stderr,
        )
        raise
    finally:
        waits.cancel()
        if asking is not None:
            asking.cancel()
    return await show_answer(client, handle.id, answer, output, waiting)


class Refused(Exception):
    """What the starter asked of a run was refused, or cannot be done now;
    the message says why and what to do, in one line, and ``status`` is the
    starter's exit status for it."""

    def __init__(self, message: str, status: int = EXIT_REFUSED) -> None:
        super().__init__(message)
        self.status = status


async def latest_answer(client: Client, workflow_id: str) -> RunAnswer:
    """A conversation's latest answer (from the CONVERSATION query, which a
    worker answers); ``Refused`` when no worker answers within
    WORKER_ANSWERS_WITHIN, or the run has no answer to give."""
    try:
        found = await chain_run(client, workflow_id, None).query(
            CONVERSATION, result_type=Conversation, rpc_timeout=WORKER_ANSWERS_WITHIN
        )
    except RPCError as e:
        if e.status not in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED):
            raise
        raise Refused(
            f"no worker answered for workflow {workflow_id} within "
            f"{WORKER_ANSWERS_WITHIN.total_seconds():.0f} s: start one "
            f"({current().command('worker')}) and ask again with --attach {workflow_id}",
            EXIT_UNREACHABLE,
        ) from e
    except WorkflowQueryFailedError as e:
        raise Refused(
            f"workflow {workflow_id} did not say where it stands: {e}", EXIT_NOT_COMPLETED
        ) from e
    if not isinstance(found, Conversation) or found.answer is None:
        raise Refused(f"workflow {workflow_id} has no answer yet", EXIT_NOT_COMPLETED)
    return found.answer


async def show_answer(
    client: Client, workflow_id: str, answer: RunAnswer, output: Path | None, waiting: bool
) -> int:
    """Print a run's answer, write its files under ``output``, say (when
    ``waiting`` for a follow-up) how to follow up, and what it used; the
    exit status."""
    print("Answer:")
    if answer.structured:
        print(json.dumps(answer.answer, indent=2, ensure_ascii=False))
    else:
        print(str(answer.answer).rstrip("\n"))
    status = deliver(answer.outputs, output, workflow_id)
    if waiting:
        print(FOLLOW_UP_LINE.format(command=starter_command(), id=workflow_id), flush=True)
    try:
        print(await answered(lambda: usage_line(client, workflow_id)), flush=True)
    except StoppedAnswering:
        print("Usage: unknown (Temporal stopped answering)", flush=True)
    return status


def deliver(outputs: Outputs, output: Path | None, workflow_id: str) -> int:
    """Say what the run's outputs hold and write them under ``output``
    (when given); the exit status: EXIT_FILES_NOT_WRITTEN when any file
    asked for was not written (each refused one named, the rest written)."""
    for line in outputs_lines(outputs):
        print(visible(line), flush=True)
    if output is None:
        if outputs.files or outputs.patch:
            print(
                f"Fetch them with: {starter_command()} --attach {workflow_id} --output DIR",
                flush=True,
            )
        return EXIT_COMPLETED
    if outputs.withheld:
        print(f"Nothing written to {output}: the files did not travel", file=sys.stderr)
        return EXIT_FILES_NOT_WRITTEN
    try:
        written, refused = write_outputs(outputs, output)
    except OSError as e:
        print(f"ERROR: --output {output}: cannot write there ({e.strerror})", file=sys.stderr)
        return EXIT_FILES_NOT_WRITTEN
    print(f"Wrote {len(written)} file{'s' if len(written) != 1 else ''} to {output}:")
    for path in written:
        print(f"  {visible(path)}")
    for entry in refused:
        print(f"  refused  {visible(entry)}", file=sys.stderr)
    return EXIT_FILES_NOT_WRITTEN if refused else EXIT_COMPLETED


async def usage_line(client: Client, workflow_id: str) -> str:
    """What the whole chain used of the model, from its latest run's memo
    (the worker keeps it there: observability.py)."""
    description = await chain_run(client, workflow_id, None).describe()
    usage = (await description.memo()).get(USAGE_MEMO)
    if not isinstance(usage, dict):
        return "Usage: not recorded"
    return (
        f"Usage: {usage.get('model_calls', 0):,} model calls, "
        f"{usage.get('input_tokens', 0):,} input tokens, "
        f"{usage.get('output_tokens', 0):,} output tokens"
    )


def approvals() -> bool:
    """Whether the service's runs wait for a person's approval: only then
    does the starter offer, ask for and send decisions (what follows)."""
    return current().approvals


# When a followed run is asked for requests that wait for a person. A
# request is made by a workflow task, which the run's history records: the
# run is asked ASK_SOON after its history moves and, while it stays quiet (a
# run waiting a day for a person), at twice the last wait, up to
# ASK_AT_LEAST_EVERY: about 3,000 queries a day instead of 170,000.
ASK_SOON = timedelta(seconds=0.5)
ASK_AT_LEAST_EVERY = timedelta(seconds=30)


class NoDecision(Exception):
    """A decision the starter could not send; its message says why, in one
    line, and ``status`` is the starter's exit status for it."""

    def __init__(self, message: str, status: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.status = status


def request_lines(request: dict[str, Any]) -> list[str]:
    """A request for approval, as the starter shows it: the run made its
    detail visible (approvals.py, display.py); each line goes through
    display.safe_line all the same, so nothing from the run can reach the
    terminal as a control sequence."""
    call, tool = request.get("call_id", "?"), request.get("tool", "?")
    detail = str(request.get("detail", ""))
    return [
        safe_line(f"approval {tool} waits for a person (call {call}):"),
        *(f"           {safe_line(line)}" for line in detail.split("\n")),
    ]


def decide_lines(workflow_id: str, call_id: str) -> list[str]:
    """The commands that decide a request later, or from elsewhere."""
    return [
        safe_line(f"           approve: {starter_command()} --approve {workflow_id} {call_id}"),
        safe_line(
            f'           reject:  {starter_command()} --reject {workflow_id} {call_id} --reason "..."'
        ),
    ]


async def pending_requests(
    client: Client, workflow_id: str, run_id: str | None = None
) -> list[dict[str, Any]]:
    """The requests of a run of the chain (None: its latest) that wait for a person."""
    found = await chain_run(client, workflow_id, run_id).query(
        PENDING, result_type=list, rpc_timeout=WORKER_ANSWERS_WITHIN
    )
    return [request for request in found if isinstance(request, dict)]


async def running_run(client: Client, workflow_id: str) -> str:
    """The latest run of ``workflow_id``; ``NoDecision`` unless it is running
    (an ``RPCError`` NOT_FOUND for no such workflow)."""
    description = await answered(chain_run(client, workflow_id, None).describe)
    if description.status != WorkflowExecutionStatus.RUNNING:
        status = (
            description.status.name.lower().replace("_", " ") if description.status else "ended"
        )
        raise NoDecision(
            f"workflow {workflow_id} has ended ({status}): nothing in it waits for a decision."
        )
    return str(description.run_id)


async def waiting_requests(client: Client, workflow_id: str) -> tuple[str, list[dict[str, Any]]]:
    """The running run of ``workflow_id`` and what waits in it for a person;
    ``NoDecision`` if it has ended or no worker answered within
    WORKER_ANSWERS_WITHIN."""
    run_id = await running_run(client, workflow_id)
    try:
        return run_id, await pending_requests(client, workflow_id, run_id)
    except RPCError as e:
        if e.status in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED):
            raise NoDecision(
                f"no worker answered for workflow {workflow_id} within "
                f"{WORKER_ANSWERS_WITHIN.total_seconds():.0f} s: start one "
                f"({current().command('worker')}) and ask again.",
                EXIT_UNREACHABLE,
            ) from e
        raise


def settings_key_file() -> Path:
    """The approver's key file APPROVER_KEY_FILE names (settings.py);
    ``NoDecision`` for a setting the starter cannot use."""
    try:
        return starter_settings().approver_key_file
    except BadSetting as e:
        raise NoDecision(str(e)) from e


def signing_key(key_file: Path) -> Ed25519PrivateKey:
    """The approver's private key in ``key_file`` (approvers.py);
    ``NoDecision`` if none."""
    try:
        return approvers.load_key(key_file)
    except approvers.BadKey as e:
        raise NoDecision(str(e)) from e


async def send_decision(
    client: Client,
    workflow_id: str,
    run_id: str,
    request: dict[str, Any],
    approve: bool,
    reason: str,
    always: bool,
    key: Ed25519PrivateKey,
) -> str:
    """Sign a person's decision on ``request`` (as it was shown) in run
    ``run_id`` with the approver's ``key`` and send it; what the run answered."""
    decision = approvers.signed_decision(key, workflow_id, run_id, request, approve, reason, always)
    answer = await chain_run(client, workflow_id, run_id).execute_update(
        DECIDE, decision, result_type=str, rpc_timeout=WORKER_ANSWERS_WITHIN
    )
    return str(answer)


def answer_on_the_terminal(prompt: str) -> tuple[bool, str, bool] | None:
    """Ask a person: (approve, reason, always), or None for "not now"
    (Ctrl-D, or no terminal left to read)."""
    try:
        while True:
            answer = input(prompt).strip().lower()
            if answer in ("y", "yes"):
                return True, "", False
            if answer in ("a", "always"):
                return True, "", True
            if answer in ("", "n", "no"):
                return False, "Rejected by a person.", False
            if answer in ("r", "reason"):
                return False, input("           reason: ").strip() or "Rejected by a person.", False
    except EOFError:
        return None


async def next_ask(moved: asyncio.Event, wait: timedelta) -> timedelta:
    """Wait until the run is to be asked again: ASK_SOON after its history
    ``moved``, or ``wait`` if it stays quiet that long. Returns the wait after this one."""
    try:
        await asyncio.wait_for(moved.wait(), timeout=wait.total_seconds())
    except TimeoutError:
        return min(wait * 2, ASK_AT_LEAST_EVERY)
    # What moves meanwhile is asked about with it: a busy run is asked at
    # most once each ASK_SOON.
    await asyncio.sleep(ASK_SOON.total_seconds())
    moved.clear()
    return ASK_SOON


async def ask_for_decisions(
    client: Client, workflow_id: str, key_file: Path | None, moved: asyncio.Event
) -> None:
    """While a run is followed: show each request that waits for a person
    and, on a terminal, ask for the decision and send it, signed with the
    key in ``key_file`` (None: the one APPROVER_KEY_FILE names); elsewhere,
    print the commands that decide it."""
    shown: set[str] = set()
    key: Ed25519PrivateKey | None = None
    # Asked again soon after the run's history moves (``moved``), seldom while it is quiet.
    wait = ASK_SOON
    while True:
        wait = await next_ask(moved, wait)
        try:
            run_id, requests = await waiting_requests(client, workflow_id)
        except (RPCError, NoDecision, StoppedAnswering):
            continue  # no worker to answer just now, or the run ends: ask again
        for request in requests:
            call_id = str(request.get("call_id"))
            if call_id in shown:
                continue
            shown.add(call_id)
            for line in request_lines(request):
                print(f"  {line}", flush=True)
            if not sys.stdin.isatty():
                for line in decide_lines(workflow_id, call_id):
                    print(f"  {line}", flush=True)
                continue
            answer = await asyncio.to_thread(
                answer_on_the_terminal, "           Run this? [y/N/a(lways)/r(eason)] "
            )
            if answer is None:
                print("\n  not now: the call waits; decide it later with", flush=True)
                for line in decide_lines(workflow_id, call_id):
                    print(f"  {line}", flush=True)
                continue
            approve, reason, always = answer
            try:
                key = key or signing_key(key_file or settings_key_file())
                await send_decision(
                    client, workflow_id, run_id, request, approve, reason, always, key
                )
            except NoDecision as e:
                print(f"  ! the decision on {call_id} was not sent: {e}", flush=True)
            except WorkflowUpdateFailedError as e:
                why = getattr(e.cause, "message", e.cause)
                print(safe_line(f"  ! the decision on {call_id} was refused: {why}"), flush=True)
            except RPCError as e:
                print(safe_line(f"  ! the decision on {call_id} was not taken: {e}"), flush=True)


def no_such_workflow(error: RPCError, client: Client, workflow_id: str) -> int:
    """The status for a workflow id that names no workflow; any other
    error goes on up."""
    if error.status != RPCStatusCode.NOT_FOUND:
        raise error
    print(
        safe_line(f"ERROR: no such workflow {workflow_id!r} in namespace {client.namespace!r}."),
        file=sys.stderr,
    )
    return EXIT_USAGE


async def decide(
    workflow_id: str, call_id: str, approve: bool, reason: str, always: bool, key_file: Path
) -> int:
    """--approve / --reject: sign and send one decision on a call that
    waits, with the approver's key in ``key_file``."""
    try:
        key = signing_key(key_file)
    except NoDecision as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        client = await connect(runtime=quiet_runtime())
    except ConnectionFailed as e:
        print(e, file=sys.stderr)
        return EXIT_UNREACHABLE
    try:
        run_id, requests = await waiting_requests(client, workflow_id)
        waiting = {str(request.get("call_id")): request for request in requests}
        request = waiting.get(call_id)
        if request is None:
            raise NoDecision(
                f"no request {call_id!r} waits in workflow {workflow_id} "
                f"(waiting: {', '.join(waiting) or 'none'})"
            )
        answer = await send_decision(
            client, workflow_id, run_id, request, approve, reason, always, key
        )
    except NoDecision as e:
        print(safe_line(f"ERROR: {e}"), file=sys.stderr)
        return e.status
    except StoppedAnswering:
        return stopped_answering(client, f"looking for workflow {workflow_id}")
    except WorkflowUpdateFailedError as e:
        print(safe_line(f"ERROR: {getattr(e.cause, 'message', e.cause)}"), file=sys.stderr)
        return EXIT_USAGE
    except RPCError as e:
        if e.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED):
            # Sent again, a decision that was taken would be refused.
            return stopped_answering(
                client,
                f"taking the decision on {call_id}: see whether it was taken "
                f"with --pending {workflow_id}",
            )
        return no_such_workflow(e, client, workflow_id)
    print(safe_line(f"Call {call_id} of workflow {workflow_id}: {answer}."))
    return EXIT_COMPLETED


async def list_pending(workflow_id: str) -> int:
    """--pending: the requests of a run that wait for a person, each whole."""
    try:
        client = await connect(runtime=quiet_runtime())
    except ConnectionFailed as e:
        print(e, file=sys.stderr)
        return EXIT_UNREACHABLE
    try:
        _, requests = await waiting_requests(client, workflow_id)
    except NoDecision as e:
        print(safe_line(f"ERROR: {e}"), file=sys.stderr)
        return e.status
    except StoppedAnswering:
        return stopped_answering(client, f"asking workflow {workflow_id} what waits for a person")
    except RPCError as e:
        return no_such_workflow(e, client, workflow_id)
    if not requests:
        print(safe_line(f"No request of workflow {workflow_id} waits for a person."))
    for request in requests:
        lines = request_lines(request) + decide_lines(workflow_id, str(request.get("call_id")))
        print("\n".join(lines))
    return EXIT_COMPLETED


def new_approver_key(name: str, path: Path) -> int:
    """--new-approver-key: a key pair for one approver, its private key in
    ``path``; the line the workers' APPROVERS takes."""
    if not name.strip() or any(c in name for c in ",= ") or not name.isprintable():
        print(
            f"ERROR: --new-approver-key {name!r}: a name without spaces, commas or '=' "
            "(it names the approver in APPROVERS).",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        public = approvers.new_key(path)
    except FileExistsError:
        print(
            f"ERROR: {path} exists already: it is kept. Set {approvers.KEY_FILE_VARIABLE} "
            "to another path for a second key.",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except OSError as e:
        print(f"ERROR: cannot write {path}: {e.strerror}.", file=sys.stderr)
        return EXIT_USAGE
    print(f"The approver's private key is in {path} (only you can read it; keep it so).")
    print("Give every worker this approver (comma-separate several):")
    print(f"{approvers.APPROVERS_VARIABLE}={name}={approvers.public_text(public)}")
    return EXIT_COMPLETED


async def connected(settings: StarterSettings) -> Client:
    """The starter's client of the Temporal service, with the object store's
    external storage when OBJECT_STORE_URL sets one: the store is checked
    first (``ObjectStoreUnreachable``), and each call to it opens and closes
    a client of its own (object_store.BucketObjects): the starter makes few."""
    store = settings.object_store
    if store is not None:
        await check_reachable(store)
    storage = external_storage(store) if store is not None else None
    converter = data_converter(storage, codec=codec_of(settings.keys))
    return await connect(runtime=quiet_runtime(), data_converter=converter)


def key_file_of(settings: StarterSettings) -> Path | None:
    """The approver's key file a followed run's decisions are signed with:
    the settings' with approvals, None without."""
    return settings.approver_key_file if approvals() else None


async def run(
    request: RunRequest,
    settings: StarterSettings,
    wait: bool = True,
    output: Path | None = None,
) -> int:
    """Start a run, print its id and Web UI link, then (unless ``wait`` is
    false) follow it to its answer and write its files under ``output``.
    Returns the exit status."""
    try:
        client = await connected(settings)
    except (ConnectionFailed, ObjectStoreUnreachable) as e:
        print(e, file=sys.stderr)
        return EXIT_UNREACHABLE
    try:
        handle = await start(client, request)
    except RPCError as e:
        if e.status != RPCStatusCode.UNAVAILABLE:
            raise
        return stopped_answering(client, "starting the run: it may or may not have started")
    print(f"Started workflow {handle.id}")
    print(f"Web UI: {web_ui_link(client, handle.id, settings.ui_url)}", flush=True)
    if not wait:
        if approvals():
            print(f"Requests for approval: {starter_command()} --pending {handle.id}")
        return EXIT_COMPLETED
    return await follow(client, handle, key_file_of(settings), output)


async def attach(workflow_id: str, settings: StarterSettings, output: Path | None = None) -> int:
    """Follow a run that was started earlier to its answer, and write its
    files under ``output``: a run without follow-ups, or one that has
    ended, from its first step to its end; a conversation from the prompt
    it works on to that prompt's answer or, when it waits for a follow-up,
    where it stands and its latest answer."""
    try:
        client = await connected(settings)
    except (ConnectionFailed, ObjectStoreUnreachable) as e:
        print(e, file=sys.stderr)
        return EXIT_UNREACHABLE
    try:
        description = await described(client, workflow_id, "--attach")
        running = description.status == WorkflowExecutionStatus.RUNNING
        session = await session_memo(description) if running else {}
    except Refused as e:
        print(visible(f"ERROR: {e}"), file=sys.stderr)
        return e.status
    except StoppedAnswering:
        return stopped_answering(client, f"looking for workflow {workflow_id}")
    # From the first run of the chain, which a long run continued from.
    first_run = description.raw_description.workflow_execution_info.first_run_id
    handle = chain_run(client, workflow_id, first_run or None)
    print(f"Following workflow {handle.id}")
    print(f"Web UI: {web_ui_link(client, handle.id, settings.ui_url)}", flush=True)
    state = session.get("state")
    if state in (WAITING, RELEASED, ENDED):
        print(visible(state_line(workflow_id, session)), flush=True)
        try:
            answer = await answered(lambda: latest_answer(client, workflow_id))
        except Refused as e:
            print(visible(f"ERROR: {e}"), file=sys.stderr)
            return e.status
        except StoppedAnswering:
            return stopped_answering(client, f"asking workflow {workflow_id} for its answer")
        return await show_answer(client, workflow_id, answer, output, state != ENDED)
    # A conversation working on prompt N (follow-up N - 1): shown from there.
    prompts = session.get("prompts")
    prompt = prompts if isinstance(prompts, int) else 1
    return await follow(
        client,
        handle,
        key_file_of(settings),
        output,
        prompt=prompt if running else None,
        after=prompt_started(prompt) if running and prompt > 1 else None,
        conversation=bool(session),
    )


async def described(client: Client, workflow_id: str, option: str) -> WorkflowExecutionDescription:
    """The latest run of ``workflow_id``, described; ``Refused`` (EXIT_USAGE)
    when there is no such workflow, or it is another service's: neither of
    this service's workflow type nor on its task queue (whose history and
    updates this one cannot read, and whose queue its workers do not poll).
    A run of this service's type on another queue, or of a type of its own
    on this service's queue (a subclass of the workflow registered under
    another name), is followed."""
    try:
        description: WorkflowExecutionDescription = await answered(
            chain_run(client, workflow_id, None).describe
        )
    except RPCError as e:
        if e.status != RPCStatusCode.NOT_FOUND:
            raise
        raise Refused(
            f"{option} {workflow_id!r}: no such workflow in namespace {client.namespace!r}.",
            EXIT_USAGE,
        ) from e
    kind, queue = description.workflow_type, description.task_queue
    if kind != WORKFLOW_TYPE and queue != current().task_queue:
        raise Refused(
            f"{option} {workflow_id!r}: it is a {kind} (on task queue {queue!r}), not a run of "
            f"this service (a {WORKFLOW_TYPE}): {option} takes the id of one.",
            EXIT_USAGE,
        )
    return description


async def running_conversation(client: Client, workflow_id: str, option: str, closed: str) -> None:
    """``Refused`` unless the latest run of ``workflow_id`` is a running
    conversation: a closed workflow takes no update (EXIT_REFUSED: the line
    says ``closed``, what to do), nor does a run started without follow-ups
    (EXIT_REFUSED, said here at once: its validator would say it only once a
    worker takes the update); there may be no such workflow, or one of
    another type (EXIT_USAGE)."""
    description = await described(client, workflow_id, option)
    if description.status != WorkflowExecutionStatus.RUNNING:
        status = description.status.name.lower().replace("_", " ") if description.status else "?"
        raise Refused(f"workflow {workflow_id} has ended ({status}): {closed}.")
    if not await session_memo(description) and not await takes_follow_ups(client, description):
        # Refused here, not by the run's validator: that needs a worker.
        raise Refused(REFUSALS["NoFollowUps"].format(id=workflow_id) + ".")


async def takes_follow_ups(client: Client, description: WorkflowExecutionDescription) -> bool:
    """Whether the run ``description`` describes was asked for follow-ups
    (its request's ``follow_ups``, in the first event of its history); True
    when its request cannot be read here (the run's validator decides)."""
    run = chain_run(client, description.id, description.run_id)
    async for event in run.fetch_history_events(page_size=1):
        started = event.workflow_execution_started_event_attributes
        try:
            [request, *_] = await client.data_converter.decode(started.input.payloads)
        except (UnknownKey, WrongKey):
            raise
        except Exception:
            return True
        return not isinstance(request, dict) or request.get("follow_ups") is True
    return True


async def session_memo(description: WorkflowExecutionDescription) -> dict[str, Any]:
    """Where a conversation stands, from its latest run's memo
    (SESSION_MEMO); {} for a run without follow-ups, or one whose first
    workflow task has not run yet."""
    session = (await description.memo()).get(SESSION_MEMO)
    return session if isinstance(session, dict) else {}


def state_line(workflow_id: str, session: dict[str, Any]) -> str:
    """A conversation that waits for a follow-up, or has ended, in words."""
    state, since = session.get("state"), session.get("since") or "?"
    answered = session.get("answered", "?")
    if state == WAITING:
        return (
            f"Conversation {workflow_id} is waiting for a follow-up after prompt {answered} "
            f"(sandbox held since {since})"
        )
    if state == RELEASED:
        return (
            f"Conversation {workflow_id} is waiting for a follow-up after prompt {answered}, "
            f"released: its workspace is in a snapshot (since {since})"
        )
    return f"Conversation {workflow_id} has ended (since {since}): it closes once its sandbox is removed"


def prompt_started(prompt: int) -> Callable[[HistoryEvent], bool]:
    """True from the event where a conversation took ``prompt``: its
    follow-up ``prompt - 1`` (a validator refuses the others, so only
    follow-ups taken are in history)."""
    taken = 0

    def started(event: HistoryEvent) -> bool:
        nonlocal taken
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            accepted = event.workflow_execution_update_accepted_event_attributes.accepted_request
            taken += accepted.input.name == FOLLOW_UP
        return taken >= prompt - 1

    return started


def update_taken(update_id: str) -> Callable[[HistoryEvent], bool]:
    """True of the event where a run took the update ``update_id``."""

    def taken(event: HistoryEvent) -> bool:
        if event.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            return False
        accepted = event.workflow_execution_update_accepted_event_attributes.accepted_request
        return accepted.meta.update_id == update_id

    return taken


async def send(
    client: Client, workflow_id: str, update: str, *args: Any, result_type: type
) -> WorkflowUpdateHandle[Any]:
    """Send ``update`` to the latest run of ``workflow_id`` once a worker
    takes it (saying so when none does for WAIT_NOTICE), through an outage
    of the service: it is sent again with the same id, which a run takes
    only once. ``WorkflowUpdateFailedError`` when the run refuses it."""
    latest = chain_run(client, workflow_id, None)
    waits = asyncio.create_task(show_waits(lambda: latest))
    update_id = str(uuid.uuid4())
    try:
        sent: WorkflowUpdateHandle[Any] = await answered(
            lambda: latest.start_update(
                update,
                args=args,
                id=update_id,
                wait_for_stage=WorkflowUpdateStage.ACCEPTED,
                result_type=result_type,
            )
        )
        return sent
    except WorkflowUpdateRPCTimeoutOrCancelledError as e:
        # The SDK's word for a cancelled wait (Ctrl+C): cancelled it stays.
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            print(
                f"\nStopped before workflow {workflow_id} took it: it may still; "
                f"see with --attach {workflow_id}",
                file=sys.stderr,
            )
            raise asyncio.CancelledError from e
        raise StoppedAnswering from e
    finally:
        waits.cancel()


def refusal(error: WorkflowUpdateFailedError, workflow_id: str, then: str) -> str:
    """Why a run refused an update, and what to do (``then``, once it has
    answered), in one line."""
    kind = getattr(error.cause, "type", None)
    if kind in REFUSALS:
        return REFUSALS[kind].format(id=workflow_id, then=then)
    return f"workflow {workflow_id} refused it: {getattr(error.cause, 'message', error.cause)}"


async def continue_conversation(
    workflow_id: str, follow_up: FollowUp, settings: StarterSettings, output: Path | None = None
) -> int:
    """--continue: send a follow-up to a conversation that has answered
    (the FOLLOW_UP update), then follow it, from the event where the run
    took it, to its answer, and write its files under ``output``."""
    try:
        client = await connected(settings)
    except (ConnectionFailed, ObjectStoreUnreachable) as e:
        print(e, file=sys.stderr)
        return EXIT_UNREACHABLE
    try:
        await running_conversation(client, workflow_id, "--continue", "start a new run")
        update = await send(client, workflow_id, FOLLOW_UP, follow_up, result_type=int)
        # The run answers at once with the prompt's number (or refuses).
        number = int(await update.result())
    except Refused as e:
        print(visible(f"ERROR: {e}"), file=sys.stderr)
        return e.status
    except WorkflowUpdateFailedError as e:
        print(visible(f"ERROR: {refusal(e, workflow_id, 'send it')}."), file=sys.stderr)
        return EXIT_REFUSED
    except StoppedAnswering:
        return stopped_answering(
            client,
            f"sending the follow-up to workflow {workflow_id}: it may or may not have "
            f"been taken; see with --attach {workflow_id}",
        )
    except RPCError as e:
        # The run closed after it was described: a closed run takes no update.
        if e.status != RPCStatusCode.NOT_FOUND:
            raise
        print(
            visible(f"ERROR: workflow {workflow_id} has ended: start a new run."), file=sys.stderr
        )
        return EXIT_REFUSED
    print(f"Follow-up {number} taken by workflow {workflow_id}")
    print(f"Web UI: {web_ui_link(client, workflow_id, settings.ui_url)}", flush=True)
    return await follow(
        client,
        chain_run(client, workflow_id, update.workflow_run_id),
        key_file_of(settings),
        output,
        prompt=number,
        after=update_taken(update.id),
        conversation=True,
    )


async def end_conversation(workflow_id: str, settings: StarterSettings) -> int:
    """--end: end a conversation (the END update), and wait until the run
    has removed its sandbox and closed."""
    try:
        client = await connected(settings)
    except (ConnectionFailed, ObjectStoreUnreachable) as e:
        print(e, file=sys.stderr)
        return EXIT_UNREACHABLE
    try:
        await running_conversation(client, workflow_id, "--end", "nothing to end")
        update = await send(client, workflow_id, END, result_type=str)
        await update.result()
        # The run removes its sandbox, then closes with its last answer.
        await answered(chain_run(client, workflow_id, None).result)
    except Refused as e:
        print(visible(f"ERROR: {e}"), file=sys.stderr)
        return e.status
    except WorkflowUpdateFailedError as e:
        print(visible(f"ERROR: {refusal(e, workflow_id, 'end it')}."), file=sys.stderr)
        return EXIT_REFUSED
    except WorkflowFailureError as e:
        print(f"Workflow {workflow_id} {_why_not_completed(e)}", file=sys.stderr)
        return EXIT_NOT_COMPLETED
    except StoppedAnswering:
        return stopped_answering(
            client,
            f"ending workflow {workflow_id}: see whether it ended with --attach {workflow_id}",
        )
    except RPCError as e:
        if e.status != RPCStatusCode.NOT_FOUND:
            raise
        print(visible(f"ERROR: workflow {workflow_id} has ended already."), file=sys.stderr)
        return EXIT_REFUSED
    print(visible(f"Ended the conversation {workflow_id}: its sandbox is removed"))
    return EXIT_COMPLETED


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # argparse's own status for bad usage (2) would collide with
        # "cannot reach Temporal".
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def add_approval_arguments(
    parser: argparse.ArgumentParser, mode: argparse._MutuallyExclusiveGroup
) -> None:
    """The options that list and decide requests for approval (with approvals)."""
    mode.add_argument(
        "--pending", metavar="WORKFLOW_ID", help="list the run's requests that wait for a person"
    )
    mode.add_argument(
        "--approve",
        nargs=2,
        metavar=("WORKFLOW_ID", "CALL_ID"),
        help="approve a call that waits for a person",
    )
    mode.add_argument(
        "--reject", nargs=2, metavar=("WORKFLOW_ID", "CALL_ID"), help="reject a call that waits"
    )
    parser.add_argument("--reason", default="", help="with --reject: why (the agent reads it)")
    parser.add_argument(
        "--always", action="store_true", help="with --approve: that tool for the rest of the run"
    )
    mode.add_argument(
        "--new-approver-key",
        metavar="NAME",
        help=f"make an approver's key pair (the private key in {approvers.KEY_FILE_VARIABLE}, "
        f"default {approvers.default_key_file()}) and print the line for the workers' APPROVERS",
    )


def parse_arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The starter's arguments: the approval options only with approvals,
    --provider only with several sandbox providers."""
    service = current()
    several = len(service.providers) > 1
    statuses = "".join(f"    {status:<5}{meaning}\n" for status, meaning in exit_statuses().items())
    parser = _ArgumentParser(
        prog=starter_command(),
        description=(__doc__ or "").partition("\n")[0],
        epilog=f"Exit status:\n\n{statuses}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("prompt", nargs="?", help="what to ask the agent (default: a small task)")
    parser.add_argument(
        "--prompt-file",
        metavar="PATH",
        help="read the prompt from PATH (UTF-8; - for standard input) instead",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--no-wait",
        action="store_true",
        help="start the run, print its id and Web UI link, and exit",
    )
    mode.add_argument(
        "--attach",
        metavar="WORKFLOW_ID",
        help="follow a run started earlier instead of starting one (a conversation: its "
        "latest prompt, or where it stands)",
    )
    mode.add_argument(
        "--continue",
        dest="follow_up",
        metavar="WORKFLOW_ID",
        help="send the prompt to a run that has answered, as a follow-up in the same workspace "
        '(--continue ID "PROMPT"; --input and --output as for a first prompt)',
    )
    mode.add_argument(
        "--end",
        metavar="WORKFLOW_ID",
        help="end a conversation: its run removes its sandbox and closes with its last answer",
    )
    if service.approvals:
        add_approval_arguments(parser, mode)
    parser.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="PATH",
        help="a file or a directory the workspace starts with, under its own name (repeatable)",
    )
    parser.add_argument(
        "--repo",
        metavar="URL[@REF]",
        help="a git repository the workspace starts with, at a branch, tag or commit",
    )
    parser.add_argument(
        "--output",
        metavar="DIR",
        type=Path,
        help="write every file the run created or changed under DIR (made if missing)",
    )
    if several:
        parser.add_argument(
            "--provider",
            choices=tuple(service.providers),
            help=f"the sandbox provider the run uses (default: {service.sandbox_provider})",
        )
    args = parser.parse_args(argv)
    if args.prompt is not None and args.prompt_file is not None:
        parser.error("give the prompt as an argument or with --prompt-file, not both")
    asked = args.prompt is not None or args.prompt_file is not None
    if args.attach is not None and (asked or args.input or args.repo):
        parser.error("--attach follows an existing run; it takes no prompt, --input or --repo")
    if args.follow_up is not None and not asked:
        parser.error('--continue needs the prompt: --continue ID "PROMPT" (or --prompt-file PATH)')
    if args.follow_up is not None and args.repo:
        parser.error(
            "--continue: a repository is cloned at a run's start; a follow-up takes --input"
        )
    if args.end is not None and (asked or args.input or args.repo or args.output):
        parser.error("--end ends a conversation; it takes no prompt, --input, --repo or --output")
    if args.no_wait and args.output is not None:
        parser.error(
            "--no-wait does not wait for the files: fetch them later with --attach ID --output DIR"
        )
    if args.output is not None and args.output.exists() and not args.output.is_dir():
        parser.error(f"--output {args.output}: it exists and is not a directory")
    if service.approvals:
        deciding = args.pending or args.approve or args.reject or args.new_approver_key
        if deciding and (asked or args.input or args.repo or args.output):
            parser.error(
                "--pending, --approve, --reject and --new-approver-key take no prompt, "
                "--input, --repo or --output"
            )
        if args.reason and not args.reject:
            parser.error("--reason goes with --reject")
        if args.always and not args.approve:
            parser.error("--always goes with --approve")
    if several and (args.attach or args.follow_up or args.end) and args.provider is not None:
        parser.error(
            "--provider goes with a new run: an existing one keeps the provider it started with"
        )
    return args


class BadPrompt(Exception):
    """A prompt the starter cannot send; its message says why, in one line."""


def prompt_of(args: argparse.Namespace) -> str:
    """The prompt: the argument, the file (- for standard input) or the
    default; ``BadPrompt`` for one that is empty, unreadable or over
    LONGEST_PROMPT."""
    if args.prompt_file is None:
        prompt = args.prompt or DEFAULT_PROMPT
    else:
        where = "standard input" if args.prompt_file == "-" else repr(args.prompt_file)
        try:
            if args.prompt_file == "-":
                prompt = sys.stdin.buffer.read().decode()
            else:
                with open(args.prompt_file, "rb") as file:
                    prompt = file.read(LONGEST_PROMPT + 1).decode()
        except OSError as e:
            raise BadPrompt(f"--prompt-file {where}: cannot read it ({e.strerror})") from e
        except UnicodeDecodeError as e:
            raise BadPrompt(f"--prompt-file {where}: not UTF-8 text (byte {e.start})") from e
        if not prompt.strip():
            raise BadPrompt(f"--prompt-file {where}: the prompt is empty")
    size = len(prompt.encode())
    if size > LONGEST_PROMPT:
        # A file is read only that far.
        read_whole = args.prompt_file is None or args.prompt_file == "-"
        raise BadPrompt(
            f"the prompt is over {LONGEST_PROMPT:,} bytes{f' ({size:,})' if read_whole else ''}, "
            "the most a run takes (LONGEST_PROMPT): put the material in the workspace and "
            "ask about it instead"
        )
    return prompt


def main(argv: Sequence[str] | None = None) -> None:
    """Start or follow a run; exit with one of exit_statuses()."""
    args = parse_arguments(argv)
    try:
        settings = starter_settings()
        if args.attach is not None:
            status = asyncio.run(attach(args.attach, settings, args.output))
        elif args.follow_up is not None:
            inputs = inputs_of(args.input, has_store=settings.object_store is not None)
            follow_up = FollowUp(prompt=prompt_of(args), inputs=inputs)
            status = asyncio.run(
                continue_conversation(args.follow_up, follow_up, settings, args.output)
            )
        elif args.end is not None:
            status = asyncio.run(end_conversation(args.end, settings))
        elif approvals() and args.pending is not None:
            status = asyncio.run(list_pending(args.pending))
        elif approvals() and (args.approve or args.reject):
            workflow_id, call_id = args.approve or args.reject
            approve = bool(args.approve)
            reason = "" if approve else args.reason or "Rejected by a person."
            key_file = settings.approver_key_file
            status = asyncio.run(
                decide(workflow_id, call_id, approve, reason, args.always, key_file)
            )
        elif approvals() and args.new_approver_key is not None:
            status = new_approver_key(args.new_approver_key, settings.approver_key_file)
        else:
            repo = repo_of(args.repo) if args.repo else None
            inputs = inputs_of(args.input, has_store=settings.object_store is not None)
            if repo is not None and repo.name in {item.name for item in inputs}:
                raise BadInput(
                    f"--repo {args.repo}: its directory {repo.name!r} is the name of an --input "
                    "too; each must have its own name"
                )
            request = RunRequest(
                prompt=prompt_of(args),
                # --provider, with several providers; else the primary one.
                provider=getattr(args, "provider", None) or current().sandbox_provider,
                inputs=inputs,
                repo=repo,
                follow_ups=True,
            )
            status = asyncio.run(run(request, settings, not args.no_wait, args.output))
    except (BadPrompt, BadInput) as e:
        print(f"ERROR: {e}.", file=sys.stderr)
        status = EXIT_USAGE
    except BadSetting as e:
        print(f"ERROR: {e}", file=sys.stderr)
        status = EXIT_USAGE
    except (UnknownKey, WrongKey) as e:
        print(f"ERROR: {e}.", file=sys.stderr)
        status = EXIT_UNDECRYPTABLE
    except KeyboardInterrupt:
        status = EXIT_INTERRUPTED
    sys.exit(status)


def cli() -> NoReturn:
    """The installed command: ``main()``, then exit with its status without
    the interpreter's shutdown, which the Temporal SDK can crash (exits.py)."""
    exit_after(main)


if __name__ == "__main__":
    cli()
