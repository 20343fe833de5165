"""Counting a workspace before anything reads it, and its limits: the census
of its files and bytes in its sandbox (``census``: one command) or of a clone
on the worker (``tree_size``), the most a workspace may hold
(LARGEST_WORKSPACE), and why outputs do not travel (``outputs_over``,
``grown_over``) or a workspace is refused (``too_large``, ``too_many``)."""

import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.exceptions import ApplicationError

from sandbox_agent_runtime import archives
from sandbox_agent_runtime.shared import LONGEST_LISTING, MOST_FILES, STORED_FILES_LIMIT

# The most a workspace may hold (its files' apparent sizes, a sparse file
# at its full size, its repository included) for the worker to read it whole:
# placing inputs beside more is refused, and a larger workspace is not
# snapshotted. Its outputs may weigh the run's limit more than it held once
# placed (STORED_FILES_LIMIT or INLINE_FILES_LIMIT).
LARGEST_WORKSPACE = 4 * STORED_FILES_LIMIT

# Counts the files (and links, FIFOs, ...) under the workspace and their
# sizes as the file system gives them (``ls -ln``: a sparse file at its full
# size), without reading one; POSIX find, ls and awk alone, so it runs in
# every backend's sandbox (GNU, busybox, macOS), with as few processes as
# that allows (one find, one awk, an ls per batch of names). A line per
# entry would be split by a name holding a newline: only sizes of digits
# alone are added (a split line can only add to the count, never take
# from it). In a sandbox at its process limit it cannot start them: the
# census fails, and so does its step (a snapshot is then not taken).
_CENSUS = (
    "find . ! -type d -exec ls -ldn {} + "
    "| awk '$5 ~ /^[0-9]+$/ { size += $5 } END { printf \"%.0f\\n%d\\n\", size, NR }'"
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


def too_large(what: str, size: int) -> ApplicationError:
    """The place step's refusal of a workspace the worker would not read whole."""
    return ApplicationError(
        f"{what} weighs {archives.size_text(size)}, over "
        f"{archives.size_text(LARGEST_WORKSPACE)}, the most a workspace may hold",
        type="WorkspaceTooLarge",
        non_retryable=True,
    )


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
