"""Approvals and keys, for a service whose runs wait for a person's approval:
the requests that wait in a run, shown (and, on a terminal, decided) while
the starter follows it; the commands that list and decide them
(``--pending``, ``--approve``, ``--reject``); and the approver's key that
signs each decision (``--new-approver-key`` makes one)."""

import asyncio
import sys
from collections.abc import Awaitable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from sandbox_agent_runtime import approvers
from sandbox_agent_runtime.client import (
    ClientError,
    NoWorker,
    Refused,
    RunEnded,
    RunNotFound,
    StoppedAnswering,
    quiet_runtime,
    send_decision,
    waiting_requests,
)
from sandbox_agent_runtime.connection import ConnectionFailed, connect
from sandbox_agent_runtime.display import safe_line
from sandbox_agent_runtime.service import current
from sandbox_agent_runtime.settings import (
    BadSetting,
    StarterSettings,
    starter_settings,
)
from sandbox_agent_runtime.starter.reaching import no_such_workflow, stopped_answering
from sandbox_agent_runtime.starter.statuses import (
    EXIT_COMPLETED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    hint_command,
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

T = TypeVar("T")


class NoDecision(Exception):
    """A decision the starter could not send; its message says why, in one
    line, and ``status`` is the starter's exit status for it."""

    def __init__(self, message: str, status: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.status = status


async def asked(waiting: Awaitable[T]) -> T:
    """What ``waiting`` (a question about what waits in a run) answers;
    ``NoDecision`` for a run that has none to take: no such workflow, one
    that has ended, or one no worker answers for."""
    try:
        return await waiting
    except (RunNotFound, RunEnded) as e:
        ended = ": nothing in it waits for a decision." if isinstance(e, RunEnded) else ""
        raise NoDecision(f"{e}{ended}") from e
    except NoWorker as e:
        raise NoDecision(
            f"{e}: start one ({current().command('worker')}) and ask again.", EXIT_UNREACHABLE
        ) from e


def request_lines(request: dict[str, Any]) -> list[str]:
    """A request for approval, as the starter shows it: the run made its
    detail visible (approvals.py); each line goes through
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
        safe_line(f"           approve: {hint_command()} --approve {workflow_id} {call_id}"),
        safe_line(
            f'           reject:  {hint_command()} --reject {workflow_id} {call_id} --reason "..."'
        ),
    ]


def settings_key_file() -> Path:
    """The approver's key file APPROVER_KEY_FILE names;
    ``NoDecision`` for a setting the starter cannot use."""
    try:
        return starter_settings().approver_key_file
    except BadSetting as e:
        raise NoDecision(str(e)) from e


def signing_key(key_file: Path) -> Ed25519PrivateKey:
    """The approver's private key in ``key_file``;
    ``NoDecision`` if none."""
    try:
        return approvers.load_key(key_file)
    except approvers.BadKey as e:
        raise NoDecision(str(e)) from e


def key_file_of(settings: StarterSettings) -> Path | None:
    """The approver's key file a followed run's decisions are signed with:
    the settings' with approvals, None without."""
    return settings.approver_key_file if approvals() else None


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
        except (RPCError, ClientError):
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
            except Refused as e:
                print(safe_line(f"  ! the decision on {call_id} was refused: {e}"), flush=True)
            except (RPCError, ClientError) as e:
                print(safe_line(f"  ! the decision on {call_id} was not taken: {e}"), flush=True)


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
        run_id, requests = await asked(waiting_requests(client, workflow_id))
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
    except Refused as e:
        print(safe_line(f"ERROR: {e}"), file=sys.stderr)
        return EXIT_USAGE
    except RunNotFound as e:
        return no_such_workflow(e)
    except (NoWorker, RPCError) as e:
        if isinstance(e, RPCError) and e.status != RPCStatusCode.UNAVAILABLE:
            raise
        # Sent again, a decision that was taken would be refused.
        return stopped_answering(
            client,
            f"taking the decision on {call_id}: see whether it was taken "
            f"with --pending {workflow_id}",
        )
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
        _, requests = await asked(waiting_requests(client, workflow_id))
    except NoDecision as e:
        print(safe_line(f"ERROR: {e}"), file=sys.stderr)
        return e.status
    except StoppedAnswering:
        return stopped_answering(client, f"asking workflow {workflow_id} what waits for a person")
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
