"""git on the worker: the worker's clones of the runs' repositories
(``clone``, at a branch, tag or commit), placed in a workspace as an archive
(``repo_archive``), and a workspace's copy of one as a patch against its
commit (``patch_of``), git running only on the worker's own clone
(``UNSTEERED``, ``repo_tree``). Every git process runs in a process group of
its own, under its time limit (``git``: GitTimedOut, GIT_TIMEOUT_MINUTES,
and never past its sandbox operation's own: ``Limit``), killed however it
ends and, on Linux, with the worker (``_GUARD``), its transport giving up on
a server that stops answering (``STALLED``). A clone is of a repository
the service allows, checked again here, over the transports it
allows alone."""

import asyncio
import contextlib
import ctypes
import functools
import gzip
import hashlib
import io
import logging
import os
import shlex
import shutil
import signal
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from sandbox_agent_runtime import archives, repos
from sandbox_agent_runtime.display import without_credentials
from sandbox_agent_runtime.repos import DEFAULT_POLICY, RepoPolicy
from sandbox_agent_runtime.run_request import Repo
from sandbox_agent_runtime.service import current
from sandbox_agent_runtime.shared import GIT_TIMEOUT

log = logging.getLogger(__name__)


def clones() -> Path:
    """Where the worker keeps its clones of the runs' repositories, one per
    repository and commit: the collect step diffs against it. (A function:
    the workflow imports this module, and may not ask for a directory.)"""
    return Path(tempfile.gettempdir()) / f"{current().name}-clones"


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
# status. Git runs under ``env``, which sets what it may not inherit
# (``git``: its transports, no prompt).
_GUARD = ("sh", "-c", 'trap "kill -s KILL 0" TERM; "$@" & wait $!', "git", "env")


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


# What git is left of its sandbox operation's start-to-close timeout: a
# tenth of it, at most this much, for the operation to fail with git's own
# line (GitTimedOut) before Temporal times the operation out and retries it.
OPERATION_MARGIN = timedelta(seconds=30)


@dataclass(frozen=True)
class Limit:
    """How long git may run in one sandbox operation: each process at most
    ``each`` (GIT_TIMEOUT_MINUTES), and all of them ending by ``ends``
    (time.monotonic()), a margin before the operation's own timeout (None:
    outside an activity, no such end)."""

    each: timedelta
    ends: float | None = None
    # The operation's start-to-close timeout, as the line says it.
    operation: timedelta | None = None

    @classmethod
    def of(cls, each: timedelta) -> "Limit":
        """``each``, within the current activity's start-to-close timeout."""
        if not activity.in_activity():
            return cls(each)
        info = activity.info()
        total = info.start_to_close_timeout
        if not total:
            return cls(each)
        spent = max(timedelta(0), datetime.now(UTC) - info.started_time)
        left = total - min(OPERATION_MARGIN, total / 10) - spent
        return cls(each, time.monotonic() + max(left.total_seconds(), 0.0), total)

    def next(self) -> tuple[float, str]:
        """The seconds the next git process may take, and the line that
        says so when it takes them all."""
        each = self.each.total_seconds()
        if self.ends is None or self.operation is None or each <= self.ends - time.monotonic():
            return each, f"git did not finish within {minutes(self.each)} (GIT_TIMEOUT_MINUTES)"
        return max(self.ends - time.monotonic(), 0.0), (
            f"git did not finish within the time its sandbox operation leaves it (the "
            f"operation's timeout is {minutes(self.operation)}, under GIT_TIMEOUT_MINUTES)"
        )


def minutes(limit: timedelta) -> str:
    """A time limit in words: "5 minutes", "1 minute", "30 seconds"."""
    seconds = int(limit.total_seconds())
    if seconds % 60:
        return f"{seconds} second{'s' if seconds != 1 else ''}"
    return f"{seconds // 60} minute{'s' if seconds != 60 else ''}"


async def git(
    *arguments: str,
    cwd: Path | None = None,
    timeout: timedelta | Limit = GIT_TIMEOUT,
    protocols: Sequence[str] = (),
) -> bytes:
    """Run git; its output, or ``GitFailed`` with the last line it printed
    (``GitTimedOut`` once ``timeout`` has passed). In a session of its own,
    so it has no terminal to ask a password on (a repository that needs one
    fails instead of waiting) and its process group holds git and every
    helper it starts: the group is killed however this ends (the limit, the
    activity cancelled or timed out, an error), and, on Linux, with the
    worker (``_GUARD``, ``_dies_with_this_process``). Its transports are
    ``protocols`` alone (GIT_ALLOW_PROTOCOL, which overrides any
    configuration: none unless given)."""
    limit = timeout if isinstance(timeout, Limit) else Limit(timeout)
    seconds, said = limit.next()
    process = await asyncio.create_subprocess_exec(
        *_GUARD,
        f"GIT_ALLOW_PROTOCOL={':'.join(protocols)}",
        "GIT_TERMINAL_PROMPT=0",
        "GCM_INTERACTIVE=never",
        "git",
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
        async with asyncio.timeout(seconds):
            out, err = await _communicate(process)
    except TimeoutError:
        raise GitTimedOut(f"{said} and was stopped") from None
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


# Why a clone failed, whatever git said: the same line for a repository
# that does not exist, one the worker may not read, and a host that did not
# answer as a git server, so that a run tells nothing of the worker's
# network (which port is closed, which filtered). The worker's log has
# git's own line.
NOT_CLONED = (
    "it could not be cloned (no such repository, the worker may not read it, or its server "
    "did not answer as a git server)"
)


async def clone(
    repo: Repo, timeout: timedelta = GIT_TIMEOUT, policy: RepoPolicy = DEFAULT_POLICY
) -> tuple[Path, str]:
    """The worker's clone of ``repo`` checked out at its ref, and the commit.
    A repository ``policy`` does not allow (its host's addresses
    looked up again), one that does not exist, a ref that does not, and one
    that git cannot clone within ``timeout`` (or the sandbox operation's
    own: ``Limit``) each fails for good, naming it, before any connection to
    a host that is not allowed."""
    try:
        allowed = await asyncio.to_thread(repos.checked, repo.url, policy)
    except repos.BadRepo as e:
        raise ApplicationError(
            f"Repository {e}", type="RepoNotAllowed", non_retryable=True
        ) from None
    if shutil.which("git") is None:
        raise ApplicationError(
            "--repo needs git on the worker, and this worker has none: install git",
            type="GitMissing",
            non_retryable=True,
        )
    limit = Limit.of(timeout)
    clones().mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(prefix="clone-", dir=clones()))
    try:
        try:
            await git(
                *repos.git_options(allowed, policy),
                "clone",
                "--quiet",
                "--no-checkout",
                "--",
                repo.url,
                str(fresh),
                timeout=limit,
                protocols=policy.schemes,
            )
        except GitTimedOut as e:
            # No cause: the run's failure names the innermost one alone
            # (workflow.describe), which would drop the URL.
            raise ApplicationError(
                f"Cannot clone {repo.url}: {e}", type="RepoUnavailable", non_retryable=True
            ) from None
        except GitFailed as e:
            log.warning("Cannot clone %s: %s", without_credentials(repo.url), e)
            raise ApplicationError(
                f"Cannot clone {repo.url}: {NOT_CLONED}", type="RepoUnavailable", non_retryable=True
            ) from None
        commit = await resolve(fresh, repo, limit)
        await git("checkout", "--quiet", "--detach", commit, cwd=fresh, timeout=limit)
        target = clone_dir(repo, commit)
        if target.exists():
            shutil.rmtree(fresh)
        else:
            os.replace(fresh, target)
        return target, commit
    except BaseException:
        shutil.rmtree(fresh, ignore_errors=True)
        raise


async def resolve(clone: Path, repo: Repo, timeout: timedelta | Limit = GIT_TIMEOUT) -> str:
    """The commit ``repo.ref`` names in ``clone`` (a commit, a tag, a branch)."""
    ref = repo.ref or "HEAD"
    # A ref git would read as an option names nothing.
    for candidate in (ref, f"origin/{ref}") if not ref.startswith("-") else ():
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
    limit = Limit.of(timeout)
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
            timeout=limit,
            protocols=("file",),
        )
        tree, skipped = await asyncio.to_thread(repo_tree, archive, name, work)
        named = (*UNSTEERED, f"--git-dir={work / '.git'}", f"--work-tree={work}")
        await git(*named, "read-tree", commit, cwd=work, timeout=limit)
        await git(*named, "add", "--all", cwd=work, timeout=limit)
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
            timeout=limit,
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
            timeout=limit,
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
