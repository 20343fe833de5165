"""The files a run takes in and hands back, as tar archives: packed on the
starter's machine (``--input``), checked and read on the worker
(workspace/), written out under ``--output DIR`` by the starter.

The Python standard library only, so the starter stays quick to start. No
name in an archive is trusted: each is checked against the tree it belongs
in before anything is written, on the worker and again on the starter, so a
workspace (or a forged run result) cannot write outside ``DIR``.
"""

import base64
import contextlib
import hashlib
import io
import os
import shutil
import stat
import tarfile
import tempfile
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, cast

from sandbox_agent_runtime import repos
from sandbox_agent_runtime.repos import RepoPolicy
from sandbox_agent_runtime.run_request import Input, OutputFile, Outputs, Repo
from sandbox_agent_runtime.shared import (
    INLINE_FILES_LIMIT,
    LONGEST_LISTING,
    MOST_FILES,
    MOST_SKIPPED,
    STORED_FILES_LIMIT,
)


class BadInput(Exception):
    """An ``--input`` path that cannot be sent (missing, unreadable, a
    special file, ...): its message is one line naming the path."""


class UnsafeName(Exception):
    """A name in an archive that would land outside its tree."""


class TooMuch(UnsafeName):
    """An input archive holding more than any run takes (MOST_FILES,
    LONGEST_LISTING, STORED_FILES_LIMIT): refused for good, like an unsafe
    name, and before any of it is placed."""


def size_text(size: int) -> str:
    """``size`` bytes in the unit a person reads (``12 KB``, ``5.0 MB``)."""
    if size < 1000:
        return f"{size} B"
    for unit, scale in (("KB", 1e3), ("MB", 1e6), ("GB", 1e9)):
        if size < scale * 1000 or unit == "GB":
            shown = size / scale
            return f"{shown:.0f} {unit}" if shown >= 10 else f"{shown:.1f} {unit}"
    raise AssertionError("unreachable")


def safe_name(name: str) -> str:
    """``name`` (an archive member) as a plain relative POSIX path, or
    ``UnsafeName``: absolute, with ``..``, empty, or holding a NUL byte."""
    if "\0" in name or "\\" in name:
        raise UnsafeName(f"{name!r} holds a NUL byte or a backslash")
    path = PurePosixPath(name)
    if path.is_absolute():
        raise UnsafeName(f"{name!r} is an absolute path")
    parts = [part for part in path.parts if part != "."]
    if not parts:
        raise UnsafeName(f"{name!r} names no file")
    if ".." in parts:
        raise UnsafeName(f"{name!r} climbs out of its directory with '..'")
    return "/".join(parts)


def encoded(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def decoded(text: str) -> bytes:
    """The bytes of an archive as a run's answer carries it (base64 text).

    Args:
        text: ``Outputs.archive``, or any base64 text.

    Returns:
        The archive's bytes (a tar).
    """
    return base64.b64decode(text.encode("ascii"), validate=True)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ----------------------------------------------------------- the starter's side


@dataclass(frozen=True)
class _Entry:
    """A file or a directory of an input, as ``lstat`` found it."""

    path: Path
    member: str
    mode: int
    size: int
    mtime: int
    identity: tuple[int, int]


@dataclass
class _Found:
    """What an input holds, counted before a byte of it is read."""

    path: Path
    name: str
    entries: list[_Entry] = field(default_factory=list)
    # Its files' bytes (st_size), how many files it holds (directories are
    # not counted, as the worker counts a workspace's) and
    # the UTF-8 bytes of their paths in the archive.
    size: int = 0
    files: int = 0
    listing: int = 0
    # Whether the walk stopped past a limit: the counts are then a floor.
    more: bool = False

    @property
    def shown(self) -> str:
        return str(self.path)


def _found(path: Path, most_bytes: int) -> _Found:
    """The entries of ``path`` (a file or a directory, links not followed),
    parents first, sorted, found with ``lstat`` alone; ``BadInput`` for a
    link, a special file or one it cannot read. The walk stops once the
    input is past MOST_FILES, LONGEST_LISTING or ``most_bytes``."""
    shown = str(path)
    if not os.path.lexists(path):
        raise BadInput(f"--input {shown}: no such file or directory")
    name = path.resolve().name if path.name in ("", ".", "..") else path.name
    if not name:
        raise BadInput(f"--input {shown}: give a file or a directory below the root")
    found = _Found(path, name)
    # A stack rather than recursion: a tree may be deeper than Python recurses.
    stack = [path]
    while stack:
        each = stack.pop()
        try:
            status = each.lstat()
        except OSError as e:
            raise BadInput(f"--input {shown}: {each} cannot be read: {e.strerror}") from e
        mode = status.st_mode
        if stat.S_ISLNK(mode):
            raise BadInput(f"--input {shown}: {each} is a symbolic link; send what it points to")
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise BadInput(f"--input {shown}: {each} is not a regular file or a directory")
        if not os.access(each, os.R_OK | (os.X_OK if stat.S_ISDIR(mode) else 0)):
            raise BadInput(f"--input {shown}: {each} is not readable")
        relative = each.relative_to(path).as_posix()
        member = name if relative == "." else f"{name}/{relative}"
        size = status.st_size if stat.S_ISREG(mode) else 0
        found.entries.append(
            _Entry(each, member, mode, size, int(status.st_mtime), (status.st_dev, status.st_ino))
        )
        found.size += size
        found.files += stat.S_ISREG(mode)
        found.listing += len(member.encode("utf-8", "surrogateescape"))
        if found.files > MOST_FILES or found.listing > LONGEST_LISTING or found.size > most_bytes:
            found.more = bool(stack) or stat.S_ISDIR(mode)
            return found
        if stat.S_ISDIR(mode):
            try:
                children = sorted(os.scandir(each), key=lambda child: child.name, reverse=True)
            except OSError as e:
                raise BadInput(f"--input {shown}: {each} cannot be listed: {e.strerror}") from e
            stack.extend(Path(child.path) for child in children)
    return found


def _check_limits(found: list[_Found], most_bytes: int, how: str) -> None:
    """``BadInput``, in one line naming the input (or the inputs, in all),
    the figure and the limit, when ``found`` holds more than a run takes:
    MOST_FILES files, LONGEST_LISTING bytes of paths, or
    ``most_bytes`` bytes of files (``how`` names that limit)."""
    groups = [
        (f"--input {each.shown}: it", "s", f"--input {each.shown}: its", [each]) for each in found
    ]
    if len(found) > 1:
        groups.append(("--input: the inputs", " in all", "--input: the inputs'", found))
    for who, verb, whose, group in groups:
        # A walk stopped past a limit counted that far: the figure is a floor.
        floor = "at least " if any(item.more for item in group) else ""
        files = sum(item.files for item in group)
        listing = sum(item.listing for item in group)
        size = sum(item.size for item in group)
        if files > MOST_FILES:
            raise BadInput(
                f"{who} hold{verb} {floor}{files:,} files; a run takes at "
                f"most {MOST_FILES:,} (MOST_FILES)"
            )
        if listing > LONGEST_LISTING:
            raise BadInput(
                f"{whose} paths weigh {floor}{listing:,} bytes; "
                f"a run's list of files takes at most {LONGEST_LISTING:,} (LONGEST_LISTING)"
            )
        if size > most_bytes:
            weight, most = size_text(size), size_text(most_bytes)
            if weight == most:  # just over: in bytes, or it would read "1.0 MB, over 1.0 MB"
                weight, most = f"{size:,} bytes", f"{most_bytes:,}"
            raise BadInput(f"{who} weigh{verb} {floor}{weight}, over {most}, {how}")


# What the limits in bytes are, in the line that refuses an input over one.
STORED_HOW = "the most a run takes through the object store (STORED_FILES_LIMIT)"
INLINE_HOW = (
    "the most a run takes without an object store: set OBJECT_STORE_URL "
    f"(docs/object-store.md) for up to {size_text(STORED_FILES_LIMIT)}"
)


# How much of a file is read at once (the starter's and the worker's: no
# file is ever held whole), and how much of an archive is kept in memory
# before it goes to a temporary file.
CHUNK = 1024 * 1024


def _packed(found: _Found) -> Input:
    """``found`` as an ``Input``: each file streamed from disk into a
    gzipped tar archive in a temporary file, never read whole; ``BadInput``
    for a file that changed (or was replaced) since it was counted."""
    shown = found.shown
    digest = hashlib.sha256()
    with tempfile.SpooledTemporaryFile(max_size=CHUNK) as spool:
        with tarfile.open(fileobj=spool, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
            for entry in found.entries:
                info = tarfile.TarInfo(entry.member)
                info.mode = (
                    0o755 if stat.S_ISDIR(entry.mode) or entry.mode & stat.S_IXUSR else 0o644
                )
                info.mtime = entry.mtime
                if stat.S_ISDIR(entry.mode):
                    info.type = tarfile.DIRTYPE
                    tar.addfile(info)
                    continue
                info.size = entry.size
                _add_file(tar, info, entry, shown)
        spool.seek(0)
        parts = []
        # Base64 of whole 3-byte groups, chunk by chunk, is the base64 of the whole.
        while chunk := spool.read(CHUNK * 3):
            digest.update(chunk)
            parts.append(encoded(chunk))
    return Input(
        name=found.name,
        kind="directory" if stat.S_ISDIR(found.entries[0].mode) else "file",
        size=found.size,
        files=found.files,
        archive="".join(parts),
        sha256=digest.hexdigest(),
    )


def _add_file(tar: tarfile.TarFile, info: tarfile.TarInfo, entry: _Entry, shown: str) -> None:
    """Stream the file of ``entry`` into ``tar``: the very file that was
    counted (no link followed, nothing swapped in), of the size counted,
    unchanged while it was read."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        descriptor = os.open(entry.path, flags)
    except OSError as e:
        raise BadInput(f"--input {shown}: {entry.path} cannot be read: {e.strerror}") from e
    with os.fdopen(descriptor, "rb") as file:
        changed = (
            f"--input {shown}: {entry.path} changed while it was read; "
            "send it once it no longer changes"
        )
        before = os.fstat(descriptor)
        if (before.st_dev, before.st_ino) != entry.identity or before.st_size != entry.size:
            raise BadInput(changed)
        try:
            tar.addfile(info, file)
        except OSError as e:  # shorter than counted: tarfile's "unexpected end of data"
            raise BadInput(changed) from e
        after = os.fstat(descriptor)
        grown = file.read(1)
        if grown or after.st_size != entry.size or after.st_mtime_ns != before.st_mtime_ns:
            raise BadInput(changed)


def pack_input(path: Path) -> Input:
    """``path`` (a file or a directory) as an ``Input`` named after its last
    part; ``BadInput`` when it cannot be sent as it is, or holds more than
    any run takes (MOST_FILES, LONGEST_LISTING, STORED_FILES_LIMIT), found
    before anything is read. Links and special files are refused rather than
    followed: what is sent is what is there."""
    found = _found(path, STORED_FILES_LIMIT)
    _check_limits([found], STORED_FILES_LIMIT, STORED_HOW)
    return _packed(found)


def write_outputs(outputs: Outputs, directory: Path) -> tuple[list[str], list[str]]:
    """Write the files of ``outputs`` under ``directory`` (made if missing),
    each at its workspace path, and ``changes.patch`` when there is one.
    Returns the paths written and the entries refused, each "name: why".
    Only regular files are written, each inside ``directory``: a name that
    would land elsewhere, or through a link already in ``directory``, is
    refused. Each file is written whole or not at all, under a temporary
    name made for it (``mkstemp``: ``O_EXCL``, no link followed, a name no
    file holds), then renamed over its own; a file that cannot be written
    (``OSError``) is refused with why, its temporary file removed, and the
    others are written all the same."""
    directory.mkdir(parents=True, exist_ok=True)
    root = directory.resolve()
    # Each file gets the mode the process would give it (mkstemp makes 0o600).
    umask = os.umask(0o022)
    os.umask(umask)
    written: list[str] = []
    refused: list[str] = []
    listed = {file.path: file for file in outputs.files}

    def place(name: str, source: IO[bytes], mode: int, sha: str | None = None) -> None:
        try:
            relative = safe_name(name)
        except UnsafeName as e:
            refused.append(f"{name}: {e}")
            return
        target = root / relative
        # Every existing part of the way must be a real directory inside root.
        for parent in reversed(target.relative_to(root).parents):
            part = root / parent
            if part.is_symlink() or (part.exists() and not part.is_dir()):
                refused.append(f"{relative}: {parent} is not a directory of {directory}")
                return
        if target.is_symlink() or (target.exists() and not target.is_file()):
            refused.append(f"{relative}: a link or a directory is in its place in {directory}")
            return
        temporary = None
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            descriptor, temporary = tempfile.mkstemp(
                prefix=".output-", suffix=".partial", dir=target.parent
            )
            digest = hashlib.sha256()
            with os.fdopen(descriptor, "wb") as out:
                while chunk := source.read(CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
                os.fchmod(out.fileno(), mode & ~umask)
            if sha is not None and digest.hexdigest() != sha:
                refused.append(f"{relative}: not among the files the run listed")
                return
            os.replace(temporary, target)
            temporary = None
            written.append(relative)
        except OSError as e:
            refused.append(f"{relative}: cannot be written ({e.strerror or e})")
        finally:
            # Refused, failed or interrupted (Ctrl+C): nothing half-written stays.
            if temporary is not None:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)

    try:
        archive = decoded(outputs.archive) if outputs.archive else b""
        if archive:
            tarfile.open(fileobj=io.BytesIO(archive), mode="r:*").close()
    except (ValueError, tarfile.TarError) as e:
        refused.append(f"the run's archive: not a tar archive ({e})")
        archive = b""
    if archive:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:*") as tar:
            for member in tar:
                if member.isdir():
                    continue
                if not member.isfile():
                    refused.append(f"{member.name}: not a regular file")
                    continue
                listed_file = listed.get(member.name)
                extracted = tar.extractfile(member)
                if listed_file is None or extracted is None:
                    refused.append(f"{member.name}: not among the files the run listed")
                    continue
                mode = 0o755 if member.mode & 0o100 else 0o644
                place(member.name, extracted, mode, listed_file.sha256)
    if outputs.patch:
        place("changes.patch", io.BytesIO(decoded(outputs.patch)), 0o644)
    return written, refused


# ------------------------------------------------------------- the worker's side


def input_archive(item: Input) -> bytes:
    """The archive of ``item``, checked: its checksum, that every member
    is a regular file or a directory under ``item.name``, and that it holds
    no more than any run takes (``TooMuch``): MOST_FILES members, whose
    names weigh LONGEST_LISTING bytes, of STORED_FILES_LIMIT bytes in all.
    The starter refuses such an input before it sends it; another client
    may not, and the members are counted from their headers, each read
    once, as the archive streams."""
    data = decoded(item.archive)
    if sha256(data) != item.sha256:
        raise UnsafeName(f"input {item.name!r}: its archive does not match its checksum")
    top = safe_name(item.name)
    if "/" in top:
        raise UnsafeName(f"input {item.name!r}: an input's name is one path part")
    try:
        _count_input(item, top, data)
    except (tarfile.TarError, EOFError) as e:
        raise UnsafeName(f"input {item.name!r}: not a tar archive ({e})") from e
    return data


def _count_input(item: Input, top: str, data: bytes) -> None:
    """Each member of ``data`` (the archive of ``item``) under ``top``, a
    file or a directory, and within the limits in number and bytes."""
    files = listing = size = 0
    with tarfile.open(fileobj=io.BytesIO(data), mode="r|*") as tar:
        for member in tar:
            name = safe_name(member.name)
            if name != top and not name.startswith(f"{top}/"):
                raise UnsafeName(f"input {item.name!r}: {member.name!r} is outside it")
            if not (member.isfile() or member.isdir()):
                raise UnsafeName(f"input {item.name!r}: {member.name!r} is not a file")
            files += member.isfile()
            listing += len(name.encode("utf-8", "surrogateescape"))
            size += member.size if member.isfile() else 0
            if files > MOST_FILES:
                raise TooMuch(
                    f"input {item.name!r}: over {MOST_FILES:,} files, "
                    "the most a run takes (MOST_FILES)"
                )
            if listing > LONGEST_LISTING:
                raise TooMuch(
                    f"input {item.name!r}: its paths weigh over {LONGEST_LISTING:,} bytes, "
                    "the most a run's list of files takes (LONGEST_LISTING)"
                )
            if size > STORED_FILES_LIMIT:
                raise TooMuch(
                    f"input {item.name!r}: its files weigh over {size_text(STORED_FILES_LIMIT)}, "
                    "the most a run takes (STORED_FILES_LIMIT)"
                )


@dataclass(frozen=True)
class Member:
    """A regular file of a workspace archive, as far as the worker needs it:
    its checksum and size (its content stays in the archive)."""

    sha256: str
    size: int
    executable: bool


def spooled(stream: io.IOBase | IO[bytes]) -> IO[bytes]:
    """``stream`` at its start, when it can be read twice; else a copy of
    it in a temporary file (in memory up to CHUNK), read in chunks."""
    if stream.seekable():
        stream.seek(0)
        return cast(IO[bytes], stream)
    copy = tempfile.SpooledTemporaryFile(max_size=CHUNK)  # noqa: SIM115 (returned)
    shutil.copyfileobj(stream, copy, CHUNK)
    copy.seek(0)
    return cast(IO[bytes], copy)


def digest_of(stream: IO[bytes] | None, copy: IO[bytes] | None = None) -> str:
    """The SHA-256 of what ``stream`` holds, read in chunks (each written
    to ``copy`` too, when given)."""
    digest = hashlib.sha256()
    while stream is not None and (chunk := stream.read(CHUNK)):
        digest.update(chunk)
        if copy is not None:
            copy.write(chunk)
    return digest.hexdigest()


def workspace_files(
    archive: IO[bytes],
    skip: Collection[str] = frozenset(),
) -> tuple[dict[str, Member], list[str]]:
    """The regular files of a workspace archive (``persist_workspace()``),
    by relative path, except under the top-level names in ``skip``; and the
    entries left out, each "name: why" (links, devices, FIFOs, unsafe
    names, a ``.git`` and all below it). Each file is read in chunks and
    checksummed, never held."""
    files: dict[str, Member] = {}
    skipped: list[str] = []
    repositories: set[str] = set()
    with tarfile.open(fileobj=archive, mode="r:*") as tar:
        for member in tar:
            try:
                name = safe_name(member.name)
            except UnsafeName as e:
                if member.name.strip("./"):
                    skipped.append(f"{member.name}: {e}")
                continue
            parts = name.split("/")
            if parts[0] in skip:
                continue
            if ".git" in parts:
                repositories.add("/".join(parts[: parts.index(".git") + 1]))
                continue
            if member.isdir():
                continue
            if member.issym() or member.islnk():
                skipped.append(f"{name}: a link (to {member.linkname}), not a file")
                continue
            if not member.isfile():
                skipped.append(f"{name}: a special file (device, FIFO or socket)")
                continue
            files[name] = Member(
                digest_of(tar.extractfile(member)), member.size, bool(member.mode & 0o100)
            )
    skipped += [
        f"{path}: a git repository's own files (its config and hooks would run where it lands)"
        for path in sorted(repositories)
    ]
    return files, skipped


def output_archive(archive: IO[bytes], wanted: Collection[str]) -> bytes:
    """A gzipped tar archive of the regular files of the workspace archive
    ``archive`` whose paths are in ``wanted``, copied member by member
    through a temporary file: only the result is held whole."""
    archive.seek(0)
    with tempfile.TemporaryFile() as out:
        with (
            tarfile.open(fileobj=archive, mode="r:*") as source,
            tarfile.open(fileobj=out, mode="w:gz", format=tarfile.PAX_FORMAT) as tar,
        ):
            chosen: dict[str, tarfile.TarInfo] = {}
            for member in source:
                try:
                    name = safe_name(member.name)
                except UnsafeName:
                    continue
                if name in wanted and member.isfile():
                    chosen[name] = member
            for name, member in sorted(chosen.items()):
                info = tarfile.TarInfo(name)
                info.size = member.size
                info.mode = 0o755 if member.mode & 0o100 else 0o644
                tar.addfile(info, source.extractfile(member))
        out.seek(0)
        return out.read()


def listing(files: dict[str, Member]) -> list[OutputFile]:
    return [
        OutputFile(path=path, size=file.size, sha256=file.sha256)
        for path, file in sorted(files.items())
    ]


def listing_size(paths: Iterable[str]) -> int:
    """The bytes of UTF-8 the paths of a listing weigh (LONGEST_LISTING)."""
    return sum(len(path.encode(errors="surrogateescape")) for path in paths)


def bounded(skipped: list[str]) -> list[str]:
    """At most MOST_SKIPPED entries of ``skipped``, and how many more."""
    if len(skipped) <= MOST_SKIPPED:
        return skipped
    more = len(skipped) - MOST_SKIPPED
    return [*skipped[:MOST_SKIPPED], f"and {more:,} more entries left out, not named"]


# ------------------------------------------------ the starter's side, again


def inputs_of(paths: list[str], has_store: bool) -> list[Input]:
    """The ``--input`` paths, packed, all found with ``lstat`` before a byte of
    any file is read.

    Args:
        paths: files or directories, each placed under its own name.
        has_store: whether an object store carries them (a larger limit).

    Returns:
        The inputs, for ``RunRequest.inputs``; ``BadInput`` for a path that
        cannot be sent, two inputs of one name, or more than a run may carry.
    """
    limit = STORED_FILES_LIMIT if has_store else INLINE_FILES_LIMIT
    found = [_found(Path(path), limit) for path in paths]
    names = [each.name for each in found]
    for name in names:
        if names.count(name) > 1:
            raise BadInput(f"--input: two inputs are named {name!r}; each must have its own name")
    _check_limits(found, limit, STORED_HOW if has_store else INLINE_HOW)
    return [_packed(each) for each in found]


def repo_of(text: str, policy: RepoPolicy | None = None) -> Repo:
    """``--repo URL[@REF]`` as a ``Repo``. The ref follows the last ``@``
    that comes after the repository's path (``git@host:org/repo`` has none;
    ``git@host:org/repo@v1`` has ``v1``); the directory is the URL's last
    part without ``.git``. The URL is one a run may be given: with ``policy``, allowed by it, its host's addresses
    looked up (blocking: a coroutine runs this in a thread); without, of a
    form a policy could allow (an evaluation's dataset, before the
    settings are read)."""
    url, ref = text, None
    head, at, tail = text.rpartition("@")
    if at and tail and ("/" in head.split("://", 1)[-1] or ":" in head.split("://", 1)[-1]):
        url, ref = head, tail
    name = url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1].removesuffix(".git")
    if (
        not url.strip()
        or not name
        or name in (".", "..")
        or any(c.isspace() for c in text)
        or not repos.text(ref or "")
    ):
        raise BadInput(
            f"--repo {repos.shown(text)}: give a git URL, optionally @ a branch, tag or commit "
            "(https://github.com/org/repo@v1.2, git@github.com:org/repo@main)"
        )
    try:
        if policy is None:
            repos.target_of(url, repos.RepoPolicy(schemes=repos.SCHEMES))
        else:
            repos.checked_by_client(url, policy)
    except repos.BadRepo as e:
        raise BadInput(f"--repo {e}") from None
    return Repo(url=url, ref=ref, name=name)


def outputs_lines(outputs: Outputs) -> list[str]:
    """What a run's outputs hold, in a line or two."""
    lines = []
    if outputs.files:
        count = len(outputs.files)
        lines.append(
            f"Outputs: {count} file{'s' if count != 1 else ''} ({size_text(outputs.size)})"
            + (", and changes.patch" if outputs.patch else "")
        )
    elif outputs.patch:
        lines.append("Outputs: changes.patch")
    if outputs.withheld:
        lines.append(f"Outputs not kept: {outputs.withheld}")
    for entry in outputs.skipped:
        lines.append(f"  skipped  {entry}")
    return lines
