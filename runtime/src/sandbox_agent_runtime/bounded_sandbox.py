"""Sandbox results cut to a size Temporal can record (worker side).

Temporal refuses any payload over its limit: a command that printed too much
would fail its activity on every attempt, and the run with it. So every
backend's client is wrapped (``BoundedSandboxClient``): long output and reads
are cut with a note the agent sees and goes on from, and each command is
bounded in time. A file read cut is never written back whole, which would
lose what was cut (``RefusesCutWriteBack``, in the workflow, which rebuilds
its notes from history on any worker).
"""

import io
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from agents.sandbox.errors import ErrorCode, WorkspaceReadNotFoundError
from agents.sandbox.manifest import Manifest
from agents.sandbox.session.pty_types import PtyExecUpdate
from agents.sandbox.session.sandbox_client import BaseSandboxClient
from agents.sandbox.session.sandbox_session import SandboxSession
from agents.sandbox.session.sandbox_session_state import SandboxSessionState
from agents.sandbox.snapshot import SnapshotBase, SnapshotSpec
from agents.sandbox.types import ExecResult, User
from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

from sandbox_agent_runtime.shared import LONGEST_OUTPUT, LONGEST_READ

# Runs a command ("$@") under a time limit of $0 seconds, and says so when
# the command was killed (137: by the limit, or for want of memory).
_TIME_LIMITED = (
    'if command -v timeout >/dev/null 2>&1; then timeout -s KILL "$0" "$@"; else '
    'ulimit -t "$0"; "$@"; fi; status=$?; [ "$status" -ne 137 ] || echo "[killed: it '
    'ran past the sandbox\'s limit of $0 s per command, or out of memory]" >&2; exit "$status"'
)


def time_limited(shell: bool | list[str], seconds: int) -> bool | list[str]:
    """The shell to run a command with (``shell``: the SDK's, True for its
    login shell), so that it ends after ``seconds``; no shell stays none."""
    if shell is False:
        return shell
    inner = ["sh", "-lc"] if shell is True else shell
    return ["sh", "-c", _TIME_LIMITED, str(seconds), *inner]


# How every note about a cut begins.
CUT_MARK = b"[... cut: "


def cut(data: bytes, what: str, limit: int = LONGEST_OUTPUT) -> bytes:
    """``data`` if it is at most ``limit`` bytes; otherwise its beginning and
    its end around a note saying what was cut."""
    if len(data) <= limit:
        return data
    half = limit // 2
    return joined(data[:half], data[-half:], len(data), what, limit)


def joined(head: bytes, tail: bytes, size: int, what: str, limit: int) -> bytes:
    """The beginning and the end (``limit // 2`` bytes each) of ``size``
    bytes of ``what``, around the note saying what was cut between them."""
    half = limit // 2
    note = (
        f"\n{CUT_MARK.decode()}{size - 2 * half:,} of the {size:,} bytes of this "
        f"{what} were left out here to stay within {limit:,} bytes. To see the rest, read "
        "it in parts: `head -c`, `tail -c`, `sed -n 'A,Bp'`, or search it with `grep`. ...]\n"
    )
    return head + note.encode() + tail


def cut_read(handle: io.IOBase, what: str, limit: int = LONGEST_READ) -> bytes:
    """What ``cut()`` makes of all ``handle`` holds, read in chunks: at most
    ``limit`` bytes of it are ever held (a file of any size, a sparse one of
    a terabyte included), and the handle is closed."""
    half = limit // 2
    with handle:
        head: bytes = handle.read(limit + 1)
        if len(head) <= limit:
            return head
        if handle.seekable():
            size = handle.seek(0, io.SEEK_END)
            handle.seek(size - half)
            tail: bytes = handle.read(half)
            return joined(head[:half], tail, size, what, limit)
        # A stream: keep its latest ``half`` bytes as it goes by.
        size, latest = len(head), bytearray(head[-half:])
        while chunk := handle.read(1024 * 1024):
            size += len(chunk)
            latest += chunk
            del latest[:-half]
        return joined(head[:half], bytes(latest), size, what, limit)


def note_of_cut_read(data: bytes) -> bytes | None:
    """The note in a file read that ``cut()`` cut to ``LONGEST_READ``, or
    None for a read that came whole (at most ``LONGEST_READ`` bytes)."""
    if len(data) <= LONGEST_READ:
        return None
    half = LONGEST_READ // 2
    return data[half:-half]


class CutFileWriteRefused(Exception):
    """A write of a file as it was read, cut."""


def _cut_update(update: PtyExecUpdate) -> PtyExecUpdate:
    return PtyExecUpdate(
        process_id=update.process_id,
        output=cut(update.output, "command output"),
        exit_code=update.exit_code,
        original_token_count=update.original_token_count,
    )


class BoundedSession(SandboxSession):
    """A backend's session whose outputs and reads are cut to ``LONGEST_OUTPUT``,
    and whose shell commands end after ``time_limit`` seconds."""

    def __init__(self, session: SandboxSession, time_limit: int) -> None:
        super().__init__(session, dependencies=session.dependencies)
        self.unbounded = session
        self.time_limit = time_limit

    async def exec(
        self,
        *command: str | Path,
        timeout: float | None = None,
        shell: bool | list[str] = True,
        user: str | User | None = None,
    ) -> ExecResult:
        shell = time_limited(shell, self.time_limit)
        result = await super().exec(*command, timeout=timeout, shell=shell, user=user)
        return ExecResult(
            stdout=cut(result.stdout, "command output"),
            stderr=cut(result.stderr, "command's error output"),
            exit_code=result.exit_code,
        )

    async def pty_exec_start(self, *command: str | Path, **options: Any) -> PtyExecUpdate:
        options["shell"] = time_limited(options.get("shell", True), self.time_limit)
        return _cut_update(await super().pty_exec_start(*command, **options))

    async def pty_write_stdin(self, **options: Any) -> PtyExecUpdate:
        return _cut_update(await super().pty_write_stdin(**options))

    async def read(self, path: Path, *, user: str | User | None = None) -> io.IOBase:
        handle = await super().read(path, user=user)
        return io.BytesIO(cut_read(handle, f"file ({path})"))


class RefusesCutWriteBack(SandboxSession):
    """Workflow side: a session that refuses to write what one of its reads
    returned cut. Every file read passes through the workflow, so it keeps
    each cut read's note; ``apply_patch`` turns the refusal into its result."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cut_notes: list[bytes] = []

    async def read(self, path: Path, *, user: str | User | None = None) -> io.IOBase:
        try:
            data = (await super().read(path, user=user)).read()
        except ActivityError as e:
            # A file that is not there, as the SDK's own sessions say it
            # (the Memory capability reads its summary only if there is one).
            cause = e.cause
            if isinstance(cause, ApplicationError) and cause.type == str(
                ErrorCode.WORKSPACE_READ_NOT_FOUND
            ):
                raise WorkspaceReadNotFoundError(path=path, cause=e) from e
            raise
        note = note_of_cut_read(data)
        if note is not None and note not in self.cut_notes:
            self.cut_notes.append(note)
        return io.BytesIO(data)

    async def write(self, path: Path, data: io.IOBase, *, user: str | User | None = None) -> None:
        content = data.read()
        if any(note in content for note in self.cut_notes):
            raise CutFileWriteRefused(
                f"Refusing to write {path}: it holds a file as it was read, cut to "
                f"{LONGEST_READ:,} bytes, and writing it would lose what was cut. Nothing "
                "was written. Edit a file this large with shell commands (`sed -i`, `awk`, "
                "`patch`)."
            )
        await super().write(path, io.BytesIO(content), user=user)


class BoundedSandboxClient(BaseSandboxClient[Any]):
    """A backend's client whose sessions are ``BoundedSession``s: command
    output (stdout and stderr each) longer than ``LONGEST_OUTPUT`` bytes and
    file reads longer than ``LONGEST_READ`` are cut, with a note in their
    place saying how much was cut and how to read the rest; each command is
    killed (with every process it started, where the sandbox's ``timeout``
    does that: GNU coreutils, not busybox) once it has run ``time_limit``
    seconds (SANDBOX_COMMAND_TIME_LIMIT_SECONDS), and ends as a failed command
    the agent sees, exit code 137. Without a ``timeout`` in the sandbox, the
    shell's ``ulimit -t`` bounds its CPU time instead: the one bound the local
    backend has."""

    def __init__(self, client: BaseSandboxClient[Any], time_limit: int) -> None:
        self.client = client
        self.time_limit = time_limit
        self.backend_id = client.backend_id
        self.supports_default_options = client.supports_default_options

    async def create(
        self,
        *,
        snapshot: SnapshotSpec | SnapshotBase | None = None,
        manifest: Manifest | None = None,
        options: Any,
    ) -> SandboxSession:
        session = await self.client.create(snapshot=snapshot, manifest=manifest, options=options)
        return BoundedSession(session, self.time_limit)

    async def resume(self, state: SandboxSessionState) -> SandboxSession:
        return BoundedSession(await self.client.resume(state), self.time_limit)

    async def delete(self, session: SandboxSession) -> SandboxSession:
        unbounded = session.unbounded if isinstance(session, BoundedSession) else session
        return await self.client.delete(unbounded)

    def serialize_session_state(self, state: SandboxSessionState) -> dict[str, object]:
        return self.client.serialize_session_state(state)

    def deserialize_session_state(self, payload: dict[str, object]) -> SandboxSessionState:
        return self.client.deserialize_session_state(payload)


# How long a sandbox that has just answered one of the run's operations is
# taken to be running. The Agents SDK asks ``running()`` before every turn (an
# activity and a workflow task each, a quarter of an 8-step run's), right
# after the previous turn's last operation; a sandbox that answered moments
# ago is running. No backend stops a sandbox within a minute of its use
# (idle stops count whole idle minutes; lifetimes are at least the run's),
# so within this window the answer is known. A sandbox killed in
# between fails the next operation instead, as it does when killed after the
# check. The first turn of each ``Runner.run`` (a chain's next run, a
# follow-up, a restore) always asks.
RUNNING_WHILE_ANSWERING = timedelta(seconds=15)


class LastingSession(RefusesCutWriteBack):
    """A sandbox session that the runner's teardown leaves running (and
    that writes back no file it read cut), taken to be running while it
    answers the run's operations (RUNNING_WHILE_ANSWERING)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # When the sandbox last answered an operation, in workflow time.
        self.answered_at: datetime | None = None

    def _answered(self) -> None:
        self.answered_at = workflow.now()

    async def running(self) -> bool:
        if (
            self.answered_at is not None
            and workflow.now() - self.answered_at < RUNNING_WHILE_ANSWERING
        ):
            return True
        running = await super().running()
        if running:
            self._answered()
        return running

    async def start(self) -> None:
        await super().start()
        self._answered()

    async def exec(self, *command: Any, **options: Any) -> ExecResult:
        result = await super().exec(*command, **options)
        self._answered()
        return result

    async def pty_exec_start(self, *command: Any, **options: Any) -> PtyExecUpdate:
        update = await super().pty_exec_start(*command, **options)
        self._answered()
        return update

    async def pty_write_stdin(self, **options: Any) -> PtyExecUpdate:
        update = await super().pty_write_stdin(**options)
        self._answered()
        return update

    async def read(self, path: Path, *, user: str | User | None = None) -> io.IOBase:
        handle = await super().read(path, user=user)
        self._answered()
        return handle

    async def write(self, path: Path, data: io.IOBase, *, user: str | User | None = None) -> None:
        await super().write(path, data, user=user)
        self._answered()

    async def stop(self) -> None:
        """Left to the client's ``remove()`` (chain.LastingSandboxClient)."""

    async def shutdown(self) -> None:
        """Left to the client's ``remove()`` (chain.LastingSandboxClient)."""
