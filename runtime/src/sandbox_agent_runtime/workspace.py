"""What goes into a run's workspace and what comes out of it (worker side).

Two sandbox operations beside the SDK's own, registered with them under each
provider's name (``WorkspaceProvider``), so they run wherever that provider's
sandboxes are reached (on their host, for a host-bound one), are retried and
show in history like every other sandbox operation:

- ``<provider>-sandbox_workspace_place``, before the agent's first turn: the
  run's inputs (archives from the starter) and its git repository (cloned
  here, on the worker, at its ref: the sandbox needs neither git nor a
  network) go into the workspace, beside the files of the agent's own
  ``default_manifest``. It returns what every file then holds (a checksum
  each): the baseline the outputs are measured against. Placing again (a
  retry) gives the same workspace.
- ``<provider>-sandbox_workspace_collect``, after the answer: every file
  that is new or changed since the baseline, in one archive, and for a
  repository its changes as a patch ``git apply`` takes on the ref. Links,
  devices, FIFOs and names that climb out of the workspace are left out,
  saying so.

And two for conversations (workflow.py), whose workspace outlives its
sandbox:

- ``<provider>-sandbox_workspace_snapshot``, after each answer and before a
  run continues as new: the whole workspace, gzipped, into the object store
  under ``snapshots/`` (``SnapshotStore``; without a store, a host-bound
  backend keeps it on its host's disk). It answers with the worker's
  SESSION_IDLE_TIMEOUT and SESSION_LIFETIME, so the workflow waits by the
  settings of the worker that holds the sandbox, the same on every replay.
- ``<provider>-sandbox_workspace_restore``, in a fresh sandbox: the
  snapshot's files, in place of what the sandbox started with.

A snapshot is bound to what it is: the snapshot operation answers with the
SHA-256 of exactly what it stored, which the workflow keeps in its own state
(history, and what a run of the chain carries to the next), and restore
refuses an object whose digest differs (replaced or altered in the store:
another conversation's snapshot, an older one of this conversation, any
other archive) before anything of it reaches the workspace, failing the
follow-up at once. With PAYLOAD_ENCRYPTION_KEYS, the ciphertext also names
its conversation and its object (AES-GCM's associated data), so a copy does
not decrypt anywhere else. A snapshot recorded before this (its record has
no ``format``) is restored as it was then: unchecked.

Each snapshot replaces the one before (which is deleted), and
``<provider>-sandbox_workspace_forget`` deletes the last once the
conversation ends.

Every git process runs in a process group of its own, under a time limit
(GIT_TIMEOUT_MINUTES): when the limit passes, or the attempt ends any other
way (cancelled, timed out, failed), the whole group is killed. On Linux the
group also dies with the worker, however the worker dies (a parent-death
signal to the shell git runs under, which kills the group: ``_GUARD``). And
git's transport gives up on a server that stops answering (``STALLED``), a
bound on its helpers (``git-remote-http``, ``ssh``) wherever that signal is
not to be had.

Place and collect move whole files through the activity's input or result: the data
converter keeps any payload over the threshold in the object store
(object_store.py), and a run's files are refused over the limits in
shared.py, in bytes and in number. Before reading a workspace, each of
place, collect and snapshot counts its files and bytes in the sandbox
(``census``: one command), and reads nothing of one over the limits; then
it reads the workspace's archive as a stream (files checksummed in chunks,
archives built in temporary files), so the worker's memory is bounded
whatever the workspace holds. Git runs only on the worker's own clone: the
workspace's ``.git`` (which the agent could have changed, hooks and config
included) is never run here, nor any other ``.git`` in the repository's
directory (``repo_tree``), which could lead git elsewhere on the host.
"""

import asyncio
import contextlib
import ctypes
import functools
import gzip
import hashlib
import io
import json
import os
import shlex
import shutil
import signal
import sys
import tarfile
import tempfile
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any, TypeVar

from agents.sandbox.session.sandbox_client import BaseSandboxClient
from google.protobuf.message import DecodeError
from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.api.common.v1 import Payload
from temporalio.exceptions import ApplicationError
from temporalio.openai_agents import SandboxClientProvider
from temporalio.openai_agents._temporal_worker_env_ref import AllowAllWorkerEnvVars

# Not exported by the plugin: the base of its activity arguments, which
# reads a session's state the way its own activities do.
from temporalio.openai_agents.sandbox._temporal_activity_models import _HasState

# Nor is the scope in which its operations resolve the worker's variables a
# session's manifest names (TemporalWorkerEnvValue).
from temporalio.openai_agents.sandbox._temporal_worker_env_value import (
    _resolvable_worker_env_vars_scope,
)

from sandbox_agent_runtime import archives
from sandbox_agent_runtime.object_store import (
    BucketObjects,
    DirectoryObjects,
    ObjectStore,
    objects_of,
)
from sandbox_agent_runtime.observability import SNAPSHOT_BYTES, SNAPSHOT_SECONDS
from sandbox_agent_runtime.run_request import Input, Outputs, Repo
from sandbox_agent_runtime.service import current
from sandbox_agent_runtime.shared import (
    COLLECT,
    FORGET,
    GIT_TIMEOUT,
    INLINE_FILES_LIMIT,
    LONGEST_LISTING,
    MOST_FILES,
    PLACE,
    RESTORE,
    SESSION_IDLE_TIMEOUT,
    SESSION_LIFETIME,
    SNAPSHOT,
    STORED_FILES_LIMIT,
)

# The workflow imports this module in its sandbox, which would load
# cryptography's native module a second time (it loads once a process):
# the codec's module is passed through.
with workflow.unsafe.imports_passed_through():
    from sandbox_agent_runtime.encryption import (
        KEY_ID,
        KEYS_VARIABLE,
        EncryptionCodec,
        UnknownKey,
        WrongKey,
    )

# Where a snapshot lives: the object store (a worker of any host restores
# it) or the disk of the host that took it (only that host's workers can).
IN_STORE, ON_HOST = "store", "host"

# The encoding of a snapshot's bytes inside the payload that encrypts them.
SNAPSHOT_ENCODING = b"binary/workspace-snapshot"

# The format of the snapshots this worker takes, in their record (Snapshot):
# 0, a snapshot taken before there were formats (no digest, its ciphertext
# bound to nothing but its key id); 1, its digest recorded and its
# ciphertext bound to its conversation and object (snapshot_context).
SNAPSHOT_FORMAT = 1


def clones() -> Path:
    """Where the worker keeps its clones of the runs' repositories, one per
    repository and commit: the collect step diffs against it. (A function:
    the workflow imports this module, and may not ask for a directory.)"""
    return Path(tempfile.gettempdir()) / f"{current().name}-clones"


# An operation's argument and result (WorkspaceProvider's ``scoped``).
A = TypeVar("A")
R = TypeVar("R")


class PlaceArgs(_HasState):
    inputs: list[Input] = []
    repo: Repo | None = None


class Placed(BaseModel):
    # Every file of the workspace once placed (but the repository's): path
    # -> SHA-256. At most MOST_FILES, their paths at most LONGEST_LISTING.
    baseline: dict[str, str] = {}
    # The commit the repository was cloned at ("" without one).
    commit: str = ""
    # What the whole workspace then held (``census``): its files (and
    # links), and their bytes.
    files: int = 0
    size: int = 0


class CollectArgs(_HasState):
    baseline: dict[str, str] = {}
    repo: Repo | None = None
    commit: str = ""
    # The workspace's census once placed (Placed.files, Placed.size).
    files: int = 0
    size: int = 0


class SnapshotArgs(_HasState):
    # The object to write: chosen by the workflow, one per snapshot.
    key: str
    # The conversation's snapshot before this one, which this one replaces.
    previous: str = ""


class ForgetArgs(BaseModel):
    # The snapshot of a conversation that ended.
    key: str


class Snapshot(BaseModel):
    """A snapshot of a workspace, or why none was taken, with the settings
    of the worker that took it."""

    # The object's key, or "" when none was taken (``why_not`` says why).
    key: str = ""
    where: str = ""
    # Its size (gzipped), its files, and when it was taken (ISO 8601, UTC).
    size: int = 0
    files: int = 0
    taken: str = ""
    why_not: str = ""
    # The key id that encrypted it (PAYLOAD_ENCRYPTION_KEYS), "" for none.
    encrypted: str = ""
    # The worker's SESSION_IDLE_TIMEOUT and SESSION_LIFETIME, in seconds.
    idle_timeout: float = SESSION_IDLE_TIMEOUT.total_seconds()
    lifetime: float = SESSION_LIFETIME.total_seconds()
    # Its format (SNAPSHOT_FORMAT; 0 in the record of a snapshot taken
    # before formats) and the SHA-256 of the object as stored ("" for 0).
    format: int = 0
    digest: str = ""


class RestoreArgs(_HasState):
    key: str
    # The key id that encrypted the snapshot ("" for one in plain bytes): a
    # snapshot taken encrypted is restored only if it decrypts.
    encrypted: str = ""
    # The snapshot's format and digest, as its record holds them: from
    # format 1, restored only if the object is exactly the one recorded.
    format: int = 0
    digest: str = ""


class Restored(BaseModel):
    size: int = 0
    files: int = 0


@dataclass(frozen=True)
class SnapshotStore:
    """Where a worker writes its workspaces' snapshots (IN_STORE or ON_HOST)."""

    objects: DirectoryObjects | BucketObjects
    bucket: str
    where: str
    # The worker's payload codec: snapshots are encrypted as payloads are.
    codec: EncryptionCodec | None = None

    def sealed(self, data: bytes, context: bytes = b"") -> tuple[bytes, str]:
        """``data`` as it is written, and the key id that encrypted it; its
        ciphertext bound to ``context`` (snapshot_context)."""
        if self.codec is None:
            return data, ""
        payload = self.codec.encrypt(
            Payload(metadata={"encoding": SNAPSHOT_ENCODING}, data=data), context
        )
        return payload.SerializeToString(), payload.metadata[KEY_ID].decode()

    def opened(self, stored: bytes, encrypted: str, context: bytes = b"") -> bytes:
        """The snapshot's bytes from what was written (``encrypted``: the
        key id its record names; ``context``: what it was sealed with);
        ``UnknownKey``/``WrongKey`` if they do not decrypt, ``ValueError``
        if a snapshot taken encrypted is not."""
        if not encrypted:
            return stored
        payload = Payload()
        payload.ParseFromString(stored)
        if payload.metadata.get(KEY_ID, b"").decode(errors="replace") != encrypted:
            raise ValueError(f"it is not encrypted with the key {encrypted!r} it was taken with")
        if self.codec is None:
            raise UnknownKey(
                f"it is encrypted with the key {encrypted!r}, and this worker has no "
                f"{KEYS_VARIABLE}"
            )
        return self.codec.decrypt(payload, context).data


def snapshot_context(workflow_id: str, key: str, format: int) -> bytes:
    """What a snapshot's ciphertext is bound to (AES-GCM's associated data):
    its conversation, its object and its format. Format 0 is bound to
    nothing more than its key id."""
    if format == 0:
        return b""
    return json.dumps(["workspace-snapshot", format, workflow_id, key]).encode()


def snapshots_on_host() -> Path:
    """Where a worker without an object store keeps its host's snapshots
    (one directory per service)."""
    return Path(tempfile.gettempdir()) / f"{current().name}-snapshots"


def snapshot_store(
    store: ObjectStore | None, on_this_host: bool, codec: EncryptionCodec | None = None
) -> SnapshotStore | None:
    """Where a provider's snapshots go: the object store when the worker has
    one; else, for sandboxes bound to this host, the host's disk (an idle
    sandbox is still released, but a host gone takes its snapshots along);
    else none (a remote sandbox is then kept while its conversation waits)."""
    if store is not None:
        return SnapshotStore(objects_of(store), store.bucket, IN_STORE, codec)
    if on_this_host:
        return SnapshotStore(DirectoryObjects(snapshots_on_host()), "", ON_HOST, codec)
    return None


async def forget(store: SnapshotStore, key: str) -> None:
    """Delete a snapshot nothing will restore any more (one already gone is
    no error: a retried forget, say)."""
    await store.objects.delete_object(bucket=store.bucket, key=key)


def members(archive: bytes | IO[bytes]) -> int:
    """The files (and links) in a tar archive (bytes, or a file read from
    where it stands)."""
    fileobj = io.BytesIO(archive) if isinstance(archive, bytes) else archive
    with tarfile.open(fileobj=fileobj, mode="r:*") as tar:
        return sum(1 for member in tar if not member.isdir())


# Where a snapshot is, in words.
PLACES = {IN_STORE: "the object store", ON_HOST: "this host's disk"}


def unrestorable(args: RestoreArgs, where: str, why: str, kind: str) -> ApplicationError:
    """The one line a snapshot that cannot be restored fails its follow-up with."""
    return ApplicationError(
        f"The snapshot {args.key!r} in {PLACES.get(where, where)} cannot be restored: {why}; "
        "nothing of it was put in the workspace",
        type=kind,
        non_retryable=True,
    )


def gzipped(stream: IO[bytes]) -> bytes:
    """What ``stream`` holds, gzipped (level 6) through a temporary file:
    only the result is held whole."""
    with tempfile.TemporaryFile() as out:
        with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=6) as packing:
            shutil.copyfileobj(stream, packing, archives.CHUNK)
        out.seek(0)
        return out.read()


def too_large(what: str, size: int) -> ApplicationError:
    """The place step's refusal of a workspace the worker would not read whole."""
    return ApplicationError(
        f"{what} weighs {archives.size_text(size)}, over "
        f"{archives.size_text(LARGEST_WORKSPACE)}, the most a workspace may hold",
        type="WorkspaceTooLarge",
        non_retryable=True,
    )


async def verified(
    store: "SnapshotStore", args: RestoreArgs, workspace: IO[bytes]
) -> tuple[int, int]:
    """The snapshot ``args`` names, its tar written into ``workspace`` (a
    temporary file), once it is exactly the object its record names (from
    format 1: its SHA-256, and its ciphertext's conversation and key): its
    size (gzipped) and its files. Anything else fails, non-retryable, in
    one line (``unrestorable``). Streamed through temporary files: only an
    encrypted snapshot is held whole, to decrypt it."""
    if args.format > SNAPSHOT_FORMAT:
        # Taken by a newer build: retried, for a worker of that build.
        raise ApplicationError(
            f"The snapshot {args.key!r} is in format {args.format}, which this worker "
            f"(format {SNAPSHOT_FORMAT}) cannot read: a worker of the build that took it can",
            type="SnapshotFormatUnknown",
        )
    if args.format >= 1 and not args.digest:
        raise unrestorable(args, store.where, "its record holds no digest", "SnapshotMismatch")
    with tempfile.TemporaryFile(prefix="snapshot-") as stored:
        try:
            digest = await store.objects.read_into(bucket=store.bucket, key=args.key, into=stored)
        except FileNotFoundError:
            raise unrestorable(args, store.where, "it is gone", "SnapshotUnavailable") from None
        if args.format >= 1 and digest != args.digest:
            raise unrestorable(
                args,
                store.where,
                f"it is not the snapshot this conversation took (SHA-256 {digest[:16]}…, "
                f"recorded {args.digest[:16]}…), it was replaced or altered there",
                "SnapshotMismatch",
            )
        stored.seek(0)
        try:
            if args.encrypted:
                context = snapshot_context(activity.info().workflow_id or "", args.key, args.format)
                packed: IO[bytes] = io.BytesIO(store.opened(stored.read(), args.encrypted, context))
            else:
                packed = stored
            size = await asyncio.to_thread(unpacked, packed, workspace)
            files = await asyncio.to_thread(members, workspace)
        except (UnknownKey, WrongKey, ValueError, DecodeError) as e:
            raise unrestorable(args, store.where, str(e), "SnapshotUnavailable") from None
        except (OSError, EOFError, tarfile.TarError) as e:
            raise unrestorable(
                args, store.where, f"it is not a gzipped tar archive ({e})", "SnapshotUnavailable"
            ) from None
    workspace.seek(0)
    return size, files


def unpacked(packed: IO[bytes], into: IO[bytes]) -> int:
    """``packed`` (gzipped) uncompressed into ``into``, a piece at a time; its size."""
    with gzip.GzipFile(fileobj=packed, mode="rb") as archive:
        shutil.copyfileobj(archive, into, archives.CHUNK)
    size = packed.tell()
    into.seek(0)
    return size


def too_many(files: int, paths: int = 0) -> ApplicationError:
    """The place step's refusal of a workspace whose list of files (the
    baseline of its outputs: ``files``, their paths ``paths`` bytes; a
    repository's aside) would not fit in one payload."""
    over = (
        f"{files:,} files, over {MOST_FILES:,} (MOST_FILES)"
        if files > MOST_FILES
        else f"files whose paths weigh {archives.size_text(paths)}, over "
        f"{archives.size_text(LONGEST_LISTING)} (LONGEST_LISTING)"
    )
    return ApplicationError(
        f"Once its inputs are placed, the workspace holds {over}",
        type="WorkspaceTooLarge",
        non_retryable=True,
    )


def record_snapshot(operation: str, size: int, started: float) -> None:
    """A snapshot's or a restore's size and time, into the worker's metrics."""
    meter = activity.metric_meter()
    labels = {"operation": operation}
    meter.create_histogram(SNAPSHOT_BYTES, "Size of workspace snapshots", unit="By").record(
        size, labels
    )
    meter.create_histogram_float(
        SNAPSHOT_SECONDS, "Time to take or restore a workspace snapshot", unit="s"
    ).record(time.monotonic() - started, labels)


# The most a workspace may hold (its files' apparent sizes, a sparse file
# at its full size, its repository included) for the worker to read it whole:
# placing inputs beside more is refused, and a larger workspace is not
# snapshotted. Its outputs may weigh the run's limit more than it held once
# placed (STORED_FILES_LIMIT or INLINE_FILES_LIMIT, shared.py).
LARGEST_WORKSPACE = 4 * STORED_FILES_LIMIT

# Counts the files (and links, FIFOs, ...) under the workspace and their
# sizes as the file system gives them (``ls -ln``: a sparse file at its full
# size), without reading one; POSIX find, ls, awk and wc alone, so it runs in
# every backend's sandbox (GNU, busybox, macOS). A line per entry would be
# split by a name holding a newline: only sizes of digits alone are added
# (a split line can only add to the count, never take from it).
_CENSUS = (
    "find . ! -type d -exec ls -ldn {} + "
    "| awk '$5 ~ /^[0-9]+$/ { size += $5 } END { printf \"%.0f\\n\", size }'"
    " && find . ! -type d | wc -l"
)


@dataclass(frozen=True)
class Census:
    """What a workspace holds, counted in its sandbox: entries that are not
    directories, and their bytes."""

    files: int
    size: int


async def census(session: Any) -> Census:
    """Count the workspace's files and bytes in its sandbox (one command,
    run in a plain ``sh -c``: no profile of the workspace's runs), before
    anything reads it; a workspace that cannot be counted fails for good."""
    root = shlex.quote(str(session.state.manifest.root))
    result = await session.exec(f"cd {root} && {_CENSUS}", shell=["sh", "-c"])
    # A directory find cannot read is not counted: any complaint fails it.
    complaint = result.stderr.decode(errors="replace").strip()
    try:
        if result.exit_code != 0 or complaint:
            raise ValueError(complaint or f"exit {result.exit_code}")
        size, files = (int(line) for line in result.stdout.decode().split())
    except ValueError as e:
        reason = (str(e).strip().splitlines() or ["no count"])[-1]
        raise ApplicationError(
            f"The workspace's files could not be counted: {reason}",
            type="WorkspaceUncounted",
            non_retryable=True,
        ) from None
    return Census(files=files, size=size)


def tree_size(directory: Path) -> Census:
    """The files of ``directory`` on the worker (links included, none
    followed) and their apparent bytes: what placing it adds."""
    files = size = 0
    for root, _, names in os.walk(directory):
        for name in names:
            files += 1
            size += os.lstat(os.path.join(root, name)).st_size
    return Census(files=files, size=size)


def outputs_over(count: int, paths: int, size: int, limit: int, has_store: bool) -> str:
    """Why outputs of ``count`` files, ``paths`` bytes of paths and ``size``
    bytes do not travel, or "" when they may."""
    if count > MOST_FILES:
        return f"the run's outputs are {count:,} files, over {MOST_FILES:,} (MOST_FILES)"
    if paths > LONGEST_LISTING:
        return (
            f"the paths of the run's outputs weigh {archives.size_text(paths)}, over "
            f"{archives.size_text(LONGEST_LISTING)} (LONGEST_LISTING)"
        )
    if size > limit:
        return (
            f"the run's outputs weigh {archives.size_text(size)}, over "
            f"{archives.size_text(limit)}, {which_limit(has_store)}"
        )
    return ""


def grown_over(held: Census, placed: Census, limit: int, has_store: bool) -> str:
    """Why the outputs of a workspace that holds ``held`` and held
    ``placed`` once its inputs were placed are not read at all, or "" when
    they are read (and perhaps withheld then, listed: ``outputs_over``).
    Its outputs hold at least what it gained, in files and in bytes; the
    worker reads at most STORED_FILES_LIMIT more than it placed."""
    if held.files - placed.files > MOST_FILES:
        return (
            f"the run left {held.files - placed.files:,} more files in the workspace than it "
            f"was given, over {MOST_FILES:,} (MOST_FILES)"
        )
    if held.size - placed.size > max(limit, STORED_FILES_LIMIT):
        return (
            f"the workspace grew by {archives.size_text(held.size - placed.size)} since its "
            f"inputs were placed, over {archives.size_text(limit)}, {which_limit(has_store)}"
        )
    return ""


def which_limit(has_store: bool) -> str:
    return (
        "the object store's limit"
        if has_store
        else "the limit without an object store: set OBJECT_STORE_URL"
    )


class GitFailed(Exception):
    pass


class GitTimedOut(GitFailed):
    pass


# A transport that stops answering gives up after this long below this
# rate, whatever git's own limit: a hung server fails the clone in seconds,
# and git's helpers (``git-remote-http``, ``ssh``) end by themselves even
# where nothing kills them.
STALL_SECONDS = 30
STALLED = (
    "-c",
    "http.lowSpeedLimit=1000",
    "-c",
    f"http.lowSpeedTime={STALL_SECONDS}",
    "-c",
    "core.sshCommand="
    + shlex.join(
        [
            "ssh",
            "-o",
            "BatchMode=yes",
            "-o",
            f"ConnectTimeout={STALL_SECONDS}",
            "-o",
            "ServerAliveInterval=10",
            "-o",
            f"ServerAliveCountMax={STALL_SECONDS // 10}",
        ]
    ),
)

# How often a sandbox operation waiting on git tells Temporal it is alive:
# a run terminated meanwhile has its operation cancelled at the answer (the
# worker sends one at most every 30 s without a heartbeat timeout), and git
# killed with it.
HEARTBEAT_SECONDS = 5

# prctl(2): the signal a process gets when its parent dies.
_PR_SET_PDEATHSIG = 1

# git runs under this shell, the worker's own child: told its worker died
# (SIGTERM, its parent-death signal), it kills its whole process group, git
# and the helpers git started (which no parent-death signal reaches),
# whatever they are waiting on. Otherwise it ends as git ends, with git's
# status.
_GUARD = ("sh", "-c", 'trap "kill -s KILL 0" TERM; "$@" & wait $!', "git", "git")


@functools.cache
def _prctl() -> Any:
    """libc's prctl on Linux (None elsewhere); looked up once, before any fork."""
    if not sys.platform.startswith("linux"):
        return None
    return ctypes.CDLL(None, use_errno=True).prctl


def _dies_with_this_process() -> Any:
    """What the child runs before it execs ``_GUARD``: on Linux, a
    parent-death signal (SIGTERM), so that a worker killed outright
    (SIGKILL, out of memory) takes its git along; the child ends at once if
    its parent is already gone."""
    prctl, parent = _prctl(), os.getpid()
    if prctl is None:
        return None

    def die_with_parent() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:
            os._exit(1)

    return die_with_parent


def minutes(limit: timedelta) -> str:
    """A time limit in words: "5 minutes", "1 minute", "30 seconds"."""
    seconds = int(limit.total_seconds())
    if seconds % 60:
        return f"{seconds} second{'s' if seconds != 1 else ''}"
    return f"{seconds // 60} minute{'s' if seconds != 60 else ''}"


async def git(*arguments: str, cwd: Path | None = None, timeout: timedelta = GIT_TIMEOUT) -> bytes:
    """Run git; its output, or ``GitFailed`` with the last line it printed
    (``GitTimedOut`` once ``timeout`` has passed). In a session of its own,
    so it has no terminal to ask a password on (a repository that needs one
    fails instead of waiting) and its process group holds git and every
    helper it starts: the group is killed however this ends (the limit, the
    activity cancelled or timed out, an error), and, on Linux, with the
    worker (``_GUARD``, ``_dies_with_this_process``)."""
    process = await asyncio.create_subprocess_exec(
        *_GUARD,
        *STALLED,
        *arguments,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
        preexec_fn=_dies_with_this_process(),
    )
    try:
        async with asyncio.timeout(timeout.total_seconds()):
            out, err = await _communicate(process)
    except TimeoutError:
        raise GitTimedOut(
            f"git did not finish within {minutes(timeout)} (GIT_TIMEOUT_MINUTES) and was stopped"
        ) from None
    finally:
        # git and its helpers: whatever is left of the group, even when git
        # itself has exited.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        if process.returncode is None:
            await asyncio.shield(process.wait())
    if process.returncode != 0:
        lines = err.decode(errors="replace").strip().splitlines() or [f"exit {process.returncode}"]
        raise GitFailed(lines[-1])
    return out


async def _communicate(process: asyncio.subprocess.Process) -> tuple[bytes, bytes]:
    """``process``'s output once it exits, heartbeating meanwhile when in an
    activity (``HEARTBEAT_SECONDS``)."""
    talking = asyncio.ensure_future(process.communicate())
    try:
        while True:
            done, _ = await asyncio.wait({talking}, timeout=HEARTBEAT_SECONDS)
            if done:
                return talking.result()
            if activity.in_activity():
                activity.heartbeat()
    finally:
        talking.cancel()


def clone_dir(repo: Repo, commit: str) -> Path:
    key = hashlib.sha256(f"{repo.url}\0{commit}".encode()).hexdigest()[:24]
    return clones() / key


async def clone(repo: Repo, timeout: timedelta = GIT_TIMEOUT) -> tuple[Path, str]:
    """The worker's clone of ``repo`` checked out at its ref, and the commit.
    A repository or a ref that does not exist fails for good, naming it, as
    does one that git cannot clone within ``timeout``."""
    if shutil.which("git") is None:
        raise ApplicationError(
            "--repo needs git on the worker, and this worker has none: install git",
            type="GitMissing",
            non_retryable=True,
        )
    clones().mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(prefix="clone-", dir=clones()))
    try:
        try:
            await git(
                "clone", "--quiet", "--no-checkout", "--", repo.url, str(fresh), timeout=timeout
            )
        except GitFailed as e:
            # No cause: the run's failure names the innermost one alone
            # (workflow.describe), which would drop the URL.
            raise ApplicationError(
                f"Cannot clone {repo.url}: {e}", type="RepoUnavailable", non_retryable=True
            ) from None
        commit = await resolve(fresh, repo, timeout)
        await git("checkout", "--quiet", "--detach", commit, cwd=fresh, timeout=timeout)
        target = clone_dir(repo, commit)
        if target.exists():
            shutil.rmtree(fresh)
        else:
            os.replace(fresh, target)
        return target, commit
    except BaseException:
        shutil.rmtree(fresh, ignore_errors=True)
        raise


async def resolve(clone: Path, repo: Repo, timeout: timedelta = GIT_TIMEOUT) -> str:
    """The commit ``repo.ref`` names in ``clone`` (a commit, a tag, a branch)."""
    ref = repo.ref or "HEAD"
    for candidate in (ref, f"origin/{ref}"):
        try:
            out = await git(
                "rev-parse",
                "--verify",
                "--quiet",
                candidate + "^{commit}",
                cwd=clone,
                timeout=timeout,
            )
        except GitTimedOut:
            raise
        except GitFailed:
            continue
        return out.decode().strip()
    raise ApplicationError(
        f"{repo.url} has no branch, tag or commit {ref!r}",
        type="RepoRefNotFound",
        non_retryable=True,
    )


def plain_tar(archive: bytes) -> io.IOBase:
    """``archive`` uncompressed, as ``hydrate_workspace`` takes it: remote
    backends and Docker pipe it into the sandbox's ``tar -x``, which refuses
    a compressed archive on a pipe (the local backend alone, reading it with
    Python's tarfile, would take one). An input's archive travels gzipped;
    it is uncompressed into a temporary file, never whole in memory."""
    if archive[:2] != b"\x1f\x8b":
        return io.BytesIO(archive)
    plain = tempfile.TemporaryFile()  # noqa: SIM115 (returned)
    assert isinstance(plain, io.BufferedRandom)
    with gzip.GzipFile(fileobj=io.BytesIO(archive)) as unzipped:
        shutil.copyfileobj(unzipped, plain, archives.CHUNK)
    plain.seek(0)
    return plain


def repo_archive(clone: Path, name: str) -> io.IOBase:
    """The clone (its ``.git`` included, so the agent can use git) as an
    archive whose members are under ``name`` (uncompressed: ``plain_tar``),
    in a temporary file."""
    out = tempfile.TemporaryFile()  # noqa: SIM115 (returned)
    assert isinstance(out, io.BufferedRandom)
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(clone, arcname=name)
    out.seek(0)
    return out


# Git run on the workspace's copy of a repository: no hook, no filter, no
# external diff, no fsmonitor, no submodule, and no transport but to the
# worker's own clone on its disk, whatever any configuration says (these
# override the worker's own). Its repository is always named (--git-dir,
# --work-tree), so git never looks for one in or above the workspace's files.
UNSTEERED = (
    *("-c", "core.hooksPath=/dev/null"),
    *("-c", "core.fsmonitor=false"),
    *("-c", "core.attributesFile=/dev/null"),
    *("-c", "core.excludesFile=/dev/null"),
    *("-c", "diff.external="),
    *("-c", "submodule.recurse=false"),
    *("-c", "protocol.allow=never"),
    *("-c", "protocol.file.allow=always"),
)


async def patch_of(
    clone: Path,
    commit: str,
    archive: IO[bytes],
    name: str,
    timeout: timedelta = GIT_TIMEOUT,
) -> tuple[bytes, list[str], dict[str, archives.Member], list[str]]:
    """The workspace's copy of the repository (the directory ``name`` of the
    workspace ``archive``) against ``commit``: the patch, the paths added or
    changed, its files (by their path in it), and what was left out. Git reads the worker's own repository,
    and the workspace's files only as a work tree (``repo_tree``: no ``.git``
    of theirs)."""
    with tempfile.TemporaryDirectory(prefix="worktree-") as scratch:
        # A clone sharing the worker's objects (nothing copied), whose work
        # tree then becomes the workspace's copy.
        work = Path(scratch) / "tree"
        await git(
            *UNSTEERED,
            "clone",
            "--quiet",
            "--shared",
            "--no-checkout",
            str(clone),
            str(work),
            timeout=timeout,
        )
        tree, skipped = await asyncio.to_thread(repo_tree, archive, name, work)
        named = (*UNSTEERED, f"--git-dir={work / '.git'}", f"--work-tree={work}")
        await git(*named, "read-tree", commit, cwd=work, timeout=timeout)
        await git(*named, "add", "--all", cwd=work, timeout=timeout)
        patch = await git(
            *named,
            "diff",
            "--cached",
            "--binary",
            "--no-renames",
            "--no-ext-diff",
            "--no-textconv",
            commit,
            cwd=work,
            timeout=timeout,
        )
        names = await git(
            *named,
            "diff",
            "--cached",
            "--name-only",
            "--no-renames",
            "--diff-filter=AM",
            "-z",
            commit,
            cwd=work,
            timeout=timeout,
        )
    return patch, [name for name in names.decode().split("\0") if name], tree, skipped


def repo_tree(
    archive: IO[bytes], name: str, work: Path
) -> tuple[dict[str, archives.Member], list[str]]:
    """Write the files and links of the repository directory ``name`` of a
    workspace archive into ``work`` (a clone without a checkout), member by
    member; its files (checksummed as they are written) and what was left
    out. Every path with a part named ``.git`` is left
    out: git would follow a ``.git`` file (``gitdir: ...``) or directory of
    the workspace's to another repository, on the worker's host."""
    files: dict[str, archives.Member] = {}
    skipped: list[str] = []
    nested_git: set[str] = set()
    links: set[str] = set()
    archive.seek(0)
    with tarfile.open(fileobj=archive, mode="r:*") as tar:
        for member in tar:
            try:
                path = archives.safe_name(member.name)
            except archives.UnsafeName:
                continue
            top, _, inside = path.partition("/")
            if top != name or not inside or inside.split("/", 1)[0] == ".git":
                continue
            parts = inside.split("/")
            if ".git" in parts:
                nested_git.add("/".join(parts[: parts.index(".git") + 1]))
                continue
            if member.isdir():
                continue
            # A file under a link would be written through it: leave it out.
            if any("/".join(parts[: i + 1]) in links for i in range(len(parts) - 1)):
                skipped.append(f"{path}: under a symbolic link")
                continue
            if not (member.issym() or member.isfile()):
                skipped.append(f"{path}: a special file or a hard link, not a file")
                continue
            target = work / inside
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                if member.issym():
                    target.symlink_to(member.linkname)
                    links.add(inside)
                    continue
                executable = bool(member.mode & 0o100)
                with open(target, "xb") as out:
                    digest = archives.digest_of(tar.extractfile(member), out)
                target.chmod(0o755 if executable else 0o644)
                files[inside] = archives.Member(digest, member.size, executable)
            except OSError as e:
                skipped.append(f"{path}: cannot be written beside the others ({e.strerror})")
    skipped += [
        f"{name}/{path}: a .git inside the repository, left out of its patch"
        for path in sorted(nested_git)
    ]
    return files, skipped


class WorkspaceProvider(SandboxClientProvider):
    """The SDK's provider, with the two workspace operations beside its own.
    ``has_store``: the worker keeps large payloads in an object store, so a
    run's outputs may weigh STORED_FILES_LIMIT rather than INLINE_FILES_LIMIT.
    ``git_timeout``: the longest one of its git processes may run."""

    def __init__(
        self,
        name: str,
        client: BaseSandboxClient[Any],
        has_store: bool,
        snapshots: SnapshotStore | None = None,
        idle_timeout: timedelta = SESSION_IDLE_TIMEOUT,
        lifetime: timedelta = SESSION_LIFETIME,
        git_timeout: timedelta = GIT_TIMEOUT,
    ) -> None:
        super().__init__(name, client)
        self.limit = STORED_FILES_LIMIT if has_store else INLINE_FILES_LIMIT
        self.has_store = has_store
        self.snapshots = snapshots
        self.idle_timeout = idle_timeout
        self.lifetime = lifetime
        self.git_timeout = git_timeout

    def _get_activities(
        self, resolvable_worker_env_vars: Collection[str] | AllowAllWorkerEnvVars
    ) -> Sequence[Callable[..., Any]]:
        return [
            *super()._get_activities(resolvable_worker_env_vars),
            *self._workspace_activities(resolvable_worker_env_vars),
        ]

    def _workspace_activities(
        self, resolvable_worker_env_vars: Collection[str] | AllowAllWorkerEnvVars
    ) -> list[Callable[..., Any]]:
        def scoped(operation: Callable[[A], Awaitable[R]]) -> Callable[[A], Awaitable[R]]:
            """``operation`` with the worker's variables that a session's
            manifest may name (TemporalWorkerEnvValue: the sandbox's secrets)
            resolvable, as in the SDK's own operations: the census runs a
            command in the session."""

            @functools.wraps(operation)
            async def in_scope(args: A) -> R:
                with _resolvable_worker_env_vars_scope(resolvable_worker_env_vars):
                    return await operation(args)

            return in_scope

        @activity.defn(name=f"{self.name}-{PLACE}")
        @scoped
        async def place(args: PlaceArgs) -> Placed:
            session = await self._session(args)
            try:
                archives_in = [archives.input_archive(item) for item in args.inputs]
            except archives.UnsafeName as e:
                raise ApplicationError(str(e), type="UnsafeInput", non_retryable=True) from e
            for data in archives_in:
                with plain_tar(data) as plain:
                    await session.hydrate_workspace(plain)
            commit = ""
            repo = Census(files=0, size=0)
            if args.repo is not None:
                clone_path, commit = await clone(args.repo, self.git_timeout)
                repo = await asyncio.to_thread(tree_size, clone_path)
                if repo.size > LARGEST_WORKSPACE:
                    raise too_large(f"The repository {args.repo.url}", repo.size)
                with await asyncio.to_thread(repo_archive, clone_path, args.repo.name) as tree:
                    await session.hydrate_workspace(tree)
            # Counted before it is read: what the worker holds is bounded.
            held = await census(session)
            if held.size > LARGEST_WORKSPACE:
                raise too_large("The workspace", held.size)
            if held.files - repo.files > MOST_FILES:
                raise too_many(held.files - repo.files)
            skip = {args.repo.name} if args.repo else set()
            workspace = archives.spooled(await session.persist_workspace())
            with workspace:
                files, _ = await asyncio.to_thread(archives.workspace_files, workspace, skip)
            paths = archives.listing_size(files)
            if len(files) > MOST_FILES or paths > LONGEST_LISTING:
                raise too_many(len(files), paths)
            return Placed(
                baseline={path: file.sha256 for path, file in files.items()},
                commit=commit,
                files=held.files,
                size=held.size,
            )

        @activity.defn(name=f"{self.name}-{COLLECT}")
        @scoped
        async def collect(args: CollectArgs) -> Outputs:
            session = await self._session(args)
            # Counted before it is read: what the run added to the workspace
            # (at least what its outputs hold) over the limits is withheld
            # before the worker reads a byte of it.
            held = await census(session)
            placed = Census(files=args.files, size=args.size)
            grown = grown_over(held, placed, self.limit, self.has_store)
            if grown:
                return Outputs(commit=args.commit, withheld=grown)
            skip = {args.repo.name} if args.repo else set()
            workspace = archives.spooled(await session.persist_workspace())
            with workspace:
                files, skipped = await asyncio.to_thread(archives.workspace_files, workspace, skip)
                changed = {
                    path: file
                    for path, file in files.items()
                    if args.baseline.get(path) != file.sha256
                }
                del files
                patch = b""
                if args.repo is not None and args.commit:
                    clone_path = clone_dir(args.repo, args.commit)
                    if not clone_path.exists():
                        clone_path, _ = await clone(
                            Repo(args.repo.url, args.commit, args.repo.name), self.git_timeout
                        )
                    patch, paths, tree, left_out = await patch_of(
                        clone_path, args.commit, workspace, args.repo.name, self.git_timeout
                    )
                    skipped += left_out
                    for path in paths:
                        if path in tree:
                            changed[f"{args.repo.name}/{path}"] = tree[path]
                size = sum(file.size for file in changed.values()) + len(patch)
                paths_size = archives.listing_size(changed)
                why = outputs_over(len(changed), paths_size, size, self.limit, self.has_store)
                if why:
                    # Listed when the list itself may travel.
                    fits = len(changed) <= MOST_FILES and paths_size <= LONGEST_LISTING
                    return Outputs(
                        files=archives.listing(changed) if fits else [],
                        commit=args.commit,
                        skipped=archives.bounded(skipped),
                        withheld=why,
                    )
                archive = (
                    await asyncio.to_thread(archives.output_archive, workspace, set(changed))
                    if changed
                    else b""
                )
            return Outputs(
                files=archives.listing(changed),
                archive=archives.encoded(archive) if archive else "",
                patch=archives.encoded(patch) if patch else "",
                commit=args.commit,
                skipped=archives.bounded(skipped),
            )

        @activity.defn(name=f"{self.name}-{SNAPSHOT}")
        @scoped
        async def snapshot(args: SnapshotArgs) -> Snapshot:
            settings = Snapshot(
                idle_timeout=self.idle_timeout.total_seconds(),
                lifetime=self.lifetime.total_seconds(),
            )
            if self.snapshots is None:
                return settings.model_copy(update={"why_not": "no object store (OBJECT_STORE_URL)"})
            started = time.monotonic()
            session = await self._session(args)
            # Counted before it is read, and gzipped through a temporary file.
            held = await census(session)
            if held.size > LARGEST_WORKSPACE:
                why_not = (
                    f"the workspace weighs {archives.size_text(held.size)}, over "
                    f"{archives.size_text(LARGEST_WORKSPACE)}"
                )
                return settings.model_copy(update={"why_not": why_not})
            with archives.spooled(await session.persist_workspace()) as workspace:
                data = await asyncio.to_thread(gzipped, workspace)
                if len(data) > STORED_FILES_LIMIT:
                    why_not = (
                        f"the workspace weighs {archives.size_text(len(data))} gzipped, over "
                        f"{archives.size_text(STORED_FILES_LIMIT)}"
                    )
                    return settings.model_copy(update={"why_not": why_not})
                files = await asyncio.to_thread(members, archives.spooled(workspace))
            store = self.snapshots
            context = snapshot_context(activity.info().workflow_id or "", args.key, SNAPSHOT_FORMAT)
            stored, encrypted = store.sealed(data, context)
            await store.objects.put_object(bucket=store.bucket, key=args.key, data=stored)
            if args.previous:
                await forget(store, args.previous)
            record_snapshot("snapshot", len(data), started)
            return settings.model_copy(
                update={
                    "key": args.key,
                    "where": store.where,
                    "size": len(data),
                    "files": files,
                    "taken": datetime.now(UTC).isoformat(timespec="seconds"),
                    "encrypted": encrypted,
                    "format": SNAPSHOT_FORMAT,
                    "digest": hashlib.sha256(stored).hexdigest(),
                }
            )

        @activity.defn(name=f"{self.name}-{RESTORE}")
        @scoped
        async def restore(args: RestoreArgs) -> Restored:
            if self.snapshots is None:
                raise ApplicationError(
                    "This worker has no snapshots to restore from: it has no object store "
                    "(OBJECT_STORE_URL), and the snapshot is not on its host",
                    type="SnapshotUnavailable",
                    non_retryable=True,
                )
            started = time.monotonic()
            with tempfile.TemporaryFile(prefix="workspace-") as workspace:
                # Verified whole before the sandbox sees a byte of it.
                size, files = await verified(self.snapshots, args, workspace)
                session = await self._session(args)
                await session.hydrate_workspace(workspace)
            record_snapshot("restore", size, started)
            return Restored(size=size, files=files)

        @activity.defn(name=f"{self.name}-{FORGET}")
        @scoped
        async def forget_snapshot(args: ForgetArgs) -> None:
            if self.snapshots is not None:
                await forget(self.snapshots, args.key)

        return [place, collect, snapshot, restore, forget_snapshot]
