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
(object_store.py), and a run's files are refused over the limit in
shared.py. Git runs only on the worker's own clone: the workspace's ``.git``
(which the agent could have changed, hooks and config included) is never
run here.
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
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

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

from {{ cookiecutter.package_name }}.machinery import archives
from {{ cookiecutter.package_name }}.machinery.object_store import (
    PIECE,
    BucketObjects,
    DirectoryObjects,
    ObjectStore,
    objects_of,
)
from {{ cookiecutter.package_name }}.machinery.observability import SNAPSHOT_BYTES, SNAPSHOT_SECONDS
from {{ cookiecutter.package_name }}.machinery.run_request import Input, Outputs, Repo
from {{ cookiecutter.package_name }}.machinery.shared import (
    COLLECT,
    FORGET,
    GIT_TIMEOUT,
    INLINE_FILES_LIMIT,
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
    from {{ cookiecutter.package_name }}.machinery.encryption import (
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
    return Path(tempfile.gettempdir()) / "{{ cookiecutter.package_name }}-clones"


class PlaceArgs(_HasState):
    inputs: list[Input] = []
    repo: Repo | None = None


class Placed(BaseModel):
    # Every file of the workspace once placed: path -> SHA-256.
    baseline: dict[str, str] = {}
    # The commit the repository was cloned at ("" without one).
    commit: str = ""


class CollectArgs(_HasState):
    baseline: dict[str, str] = {}
    repo: Repo | None = None
    commit: str = ""


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
    """Where a worker without an object store keeps its host's snapshots."""
    return Path(tempfile.gettempdir()) / "{{ cookiecutter.package_name }}-snapshots"


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
                gzipped: IO[bytes] = io.BytesIO(
                    store.opened(stored.read(), args.encrypted, context)
                )
            else:
                gzipped = stored
            size = await asyncio.to_thread(unpacked, gzipped, workspace)
            files = await asyncio.to_thread(members, workspace)
        except (UnknownKey, WrongKey, ValueError, DecodeError) as e:
            raise unrestorable(args, store.where, str(e), "SnapshotUnavailable") from None
        except (OSError, EOFError, tarfile.TarError) as e:
            raise unrestorable(
                args, store.where, f"it is not a gzipped tar archive ({e})", "SnapshotUnavailable"
            ) from None
    workspace.seek(0)
    return size, files


def unpacked(gzipped: IO[bytes], into: IO[bytes]) -> int:
    """``gzipped`` uncompressed into ``into``, a piece at a time; its size."""
    with gzip.GzipFile(fileobj=gzipped, mode="rb") as archive:
        shutil.copyfileobj(archive, into, PIECE)
    size = gzipped.tell()
    into.seek(0)
    return size


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


def plain_tar(archive: bytes) -> bytes:
    """``archive`` uncompressed, as ``hydrate_workspace`` takes it: remote
    backends and Docker pipe it into the sandbox's ``tar -x``, which refuses
    a compressed archive on a pipe (the local backend alone, reading it with
    Python's tarfile, would take one). An input's archive travels gzipped."""
    return gzip.decompress(archive) if archive[:2] == b"\x1f\x8b" else archive


def repo_archive(clone: Path, name: str) -> bytes:
    """The clone (its ``.git`` included, so the agent can use git) as an
    archive whose members are under ``name`` (uncompressed: ``plain_tar``)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(clone, arcname=name)
    return buffer.getvalue()


async def patch_of(
    clone: Path,
    commit: str,
    tree: dict[str, tuple[bytes, bool]],
    links: dict[str, str],
    timeout: timedelta = GIT_TIMEOUT,
) -> tuple[bytes, list[str]]:
    """The workspace's copy of the repository (``tree``: its files, ``links``:
    its symbolic links, both without ``.git``) against ``commit``: the patch,
    and the paths added or changed. Git reads the worker's own repository,
    and the workspace's files only as a work tree."""
    with tempfile.TemporaryDirectory(prefix="worktree-") as scratch:
        # A clone sharing the worker's objects (nothing copied), whose work
        # tree then becomes the workspace's copy.
        work = Path(scratch) / "tree"
        await git(
            "clone", "--quiet", "--shared", "--no-checkout", str(clone), str(work), timeout=timeout
        )
        for path, (data, executable) in tree.items():
            target = work / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            target.chmod(0o755 if executable else 0o644)
        for path, pointing_to in links.items():
            target = work / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(pointing_to)
        await git("read-tree", commit, cwd=work, timeout=timeout)
        await git("add", "--all", cwd=work, timeout=timeout)
        patch = await git(
            "diff", "--cached", "--binary", "--no-renames", commit, cwd=work, timeout=timeout
        )
        names = await git(
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
    return patch, [name for name in names.decode().split("\0") if name]


def repo_tree(
    archive: io.IOBase, name: str
) -> tuple[dict[str, tuple[bytes, bool]], dict[str, str], list[str]]:
    """The files and links of the repository directory ``name`` in a
    workspace archive, without its ``.git``; and what was left out."""
    files: dict[str, tuple[bytes, bool]] = {}
    links: dict[str, str] = {}
    skipped: list[str] = []
    with tarfile.open(fileobj=archive, mode="r:*") as tar:
        for member in tar:
            try:
                path = archives.safe_name(member.name)
            except archives.UnsafeName:
                continue
            top, _, inside = path.partition("/")
            if top != name or not inside or inside.split("/", 1)[0] == ".git":
                continue
            if member.isdir():
                continue
            if member.issym():
                links[inside] = member.linkname
            elif member.isfile():
                extracted = tar.extractfile(member)
                files[inside] = (extracted.read() if extracted else b"", bool(member.mode & 0o100))
            else:
                skipped.append(f"{path}: a special file or a hard link, not a file")
    # A file under a link would be written through it: leave such files out.
    for inside in list(files):
        parents = inside.split("/")[:-1]
        if any("/".join(parents[: i + 1]) in links for i in range(len(parents))):
            del files[inside]
            skipped.append(f"{name}/{inside}: under a symbolic link")
    return files, links, skipped


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
        return [*super()._get_activities(resolvable_worker_env_vars), *self._workspace_activities()]

    def _workspace_activities(self) -> list[Callable[..., Any]]:
        @activity.defn(name=f"{self.name}-{PLACE}")
        async def place(args: PlaceArgs) -> Placed:
            session = await self._session(args)
            try:
                archives_in = [archives.input_archive(item) for item in args.inputs]
            except archives.UnsafeName as e:
                raise ApplicationError(str(e), type="UnsafeInput", non_retryable=True) from e
            for data in archives_in:
                await session.hydrate_workspace(io.BytesIO(plain_tar(data)))
            commit = ""
            if args.repo is not None:
                clone_path, commit = await clone(args.repo, self.git_timeout)
                data = await asyncio.to_thread(repo_archive, clone_path, args.repo.name)
                await session.hydrate_workspace(io.BytesIO(data))
            skip = {args.repo.name} if args.repo else set()
            files, _ = archives.workspace_files(await session.persist_workspace(), skip)
            return Placed(
                baseline={path: archives.sha256(data) for path, (data, _) in files.items()},
                commit=commit,
            )

        @activity.defn(name=f"{self.name}-{COLLECT}")
        async def collect(args: CollectArgs) -> Outputs:
            session = await self._session(args)
            workspace = (await session.persist_workspace()).read()
            skip = {args.repo.name} if args.repo else set()
            files, skipped = archives.workspace_files(io.BytesIO(workspace), skip)
            changed = {
                path: content
                for path, content in files.items()
                if args.baseline.get(path) != archives.sha256(content[0])
            }
            patch = b""
            if args.repo is not None and args.commit:
                clone_path = clone_dir(args.repo, args.commit)
                if not clone_path.exists():
                    clone_path, _ = await clone(
                        Repo(args.repo.url, args.commit, args.repo.name), self.git_timeout
                    )
                tree, links, left_out = repo_tree(io.BytesIO(workspace), args.repo.name)
                skipped += left_out
                patch, paths = await patch_of(
                    clone_path, args.commit, tree, links, self.git_timeout
                )
                for path in paths:
                    if path in tree:
                        changed[f"{args.repo.name}/{path}"] = tree[path]
            size = sum(len(data) for data, _ in changed.values()) + len(patch)
            listed = archives.listing(changed)
            if size > self.limit:
                how = (
                    "the object store's limit"
                    if self.has_store
                    else "the limit without an object store: set OBJECT_STORE_URL"
                )
                return Outputs(
                    files=listed,
                    commit=args.commit,
                    skipped=skipped,
                    withheld=(
                        f"the run's outputs weigh {archives.size_text(size)}, over "
                        f"{archives.size_text(self.limit)}, {how}"
                    ),
                )
            return Outputs(
                files=listed,
                archive=archives.encoded(archives.output_archive(changed)) if changed else "",
                patch=archives.encoded(patch) if patch else "",
                commit=args.commit,
                skipped=skipped,
            )

        @activity.defn(name=f"{self.name}-{SNAPSHOT}")
        async def snapshot(args: SnapshotArgs) -> Snapshot:
            settings = Snapshot(
                idle_timeout=self.idle_timeout.total_seconds(),
                lifetime=self.lifetime.total_seconds(),
            )
            if self.snapshots is None:
                return settings.model_copy(update={"why_not": "no object store (OBJECT_STORE_URL)"})
            started = time.monotonic()
            session = await self._session(args)
            workspace = (await session.persist_workspace()).read()
            data = await asyncio.to_thread(gzip.compress, workspace, 6)
            if len(data) > STORED_FILES_LIMIT:
                why_not = (
                    f"the workspace weighs {archives.size_text(len(data))} gzipped, over "
                    f"{archives.size_text(STORED_FILES_LIMIT)}"
                )
                return settings.model_copy(update={"why_not": why_not})
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
                    "files": members(workspace),
                    "taken": datetime.now(UTC).isoformat(timespec="seconds"),
                    "encrypted": encrypted,
                    "format": SNAPSHOT_FORMAT,
                    "digest": hashlib.sha256(stored).hexdigest(),
                }
            )

        @activity.defn(name=f"{self.name}-{RESTORE}")
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
        async def forget_snapshot(args: ForgetArgs) -> None:
            if self.snapshots is not None:
                await forget(self.snapshots, args.key)

        return [place, collect, snapshot, restore, forget_snapshot]
