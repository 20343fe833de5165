"""The files a run takes in and hands back, as tar archives: packed on the
starter's machine (``--input``), checked and read on the worker
(workspace.py), written out under ``--output DIR`` by the starter.

The Python standard library only, so the starter stays quick to start. No
name in an archive is trusted: each is checked against the tree it belongs
in before anything is written, on the worker and again on the starter, so a
workspace (or a forged run result) cannot write outside ``DIR``.
"""

import base64
import hashlib
import io
import os
import shutil
import stat
import tarfile
import tempfile
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, cast

from {{ cookiecutter.package_name }}.machinery.run_request import Input, OutputFile, Outputs, Repo
from {{ cookiecutter.package_name }}.machinery.shared import (
    INLINE_FILES_LIMIT,
    MOST_SKIPPED,
    STORED_FILES_LIMIT,
)


class BadInput(Exception):
    """An ``--input`` path that cannot be sent (missing, unreadable, a
    special file, ...): its message is one line naming the path."""


class UnsafeName(Exception):
    """A name in an archive that would land outside its tree."""


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
    return base64.b64decode(text.encode("ascii"), validate=True)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ----------------------------------------------------------- the starter's side


def _walk(root: Path) -> Iterator[Path]:
    """Every path under ``root`` (``root`` too), parents first, sorted."""
    yield root
    if root.is_dir() and not root.is_symlink():
        for child in sorted(root.iterdir()):
            yield from _walk(child)


def pack_input(path: Path) -> Input:
    """``path`` (a file or a directory) as an ``Input`` named after its last
    part; ``BadInput`` when it cannot be sent as it is. Links and special
    files are refused rather than followed: what is sent is what is there."""
    shown = str(path)
    if not os.path.lexists(path):
        raise BadInput(f"--input {shown}: no such file or directory")
    name = path.resolve().name if path.name in ("", ".", "..") else path.name
    if not name:
        raise BadInput(f"--input {shown}: give a file or a directory below the root")
    buffer = io.BytesIO()
    size = files = 0
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for each in _walk(path):
            relative = each.relative_to(path).as_posix()
            member = name if relative == "." else f"{name}/{relative}"
            mode = each.lstat().st_mode
            if stat.S_ISLNK(mode):
                raise BadInput(
                    f"--input {shown}: {each} is a symbolic link; send what it points to"
                )
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise BadInput(f"--input {shown}: {each} is not a regular file or a directory")
            if not os.access(each, os.R_OK | (os.X_OK if stat.S_ISDIR(mode) else 0)):
                raise BadInput(f"--input {shown}: {each} is not readable")
            info = tarfile.TarInfo(member)
            info.mode = 0o755 if stat.S_ISDIR(mode) or mode & stat.S_IXUSR else 0o644
            info.mtime = int(each.lstat().st_mtime)
            if stat.S_ISDIR(mode):
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
                continue
            try:
                data = each.read_bytes()
            except OSError as e:
                raise BadInput(f"--input {shown}: {each} cannot be read: {e.strerror}") from e
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
            size += len(data)
            files += 1
    archive = buffer.getvalue()
    return Input(
        name=name,
        kind="directory" if path.is_dir() else "file",
        size=size,
        files=files,
        archive=encoded(archive),
        sha256=sha256(archive),
    )


def write_outputs(outputs: Outputs, directory: Path) -> tuple[list[str], list[str]]:
    """Write the files of ``outputs`` under ``directory`` (made if missing),
    each at its workspace path, and ``changes.patch`` when there is one.
    Returns the paths written and the entries refused, each "name: why".
    Only regular files are written, each inside ``directory``: a name that
    would land elsewhere, or through a link already in ``directory``, is
    refused."""
    directory.mkdir(parents=True, exist_ok=True)
    root = directory.resolve()
    written: list[str] = []
    refused: list[str] = []
    listed = {file.path: file for file in outputs.files}

    def place(name: str, data: bytes, mode: int) -> None:
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
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.partial")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
        descriptor = os.open(partial, flags, mode)
        with os.fdopen(descriptor, "wb") as out:
            out.write(data)
        os.replace(partial, target)
        written.append(relative)

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
                data = extracted.read() if extracted else b""
                if listed_file is None or sha256(data) != listed_file.sha256:
                    refused.append(f"{member.name}: not among the files the run listed")
                    continue
                place(member.name, data, 0o755 if member.mode & 0o100 else 0o644)
    if outputs.patch:
        place("changes.patch", decoded(outputs.patch), 0o644)
    return written, refused


# ------------------------------------------------------------- the worker's side


def input_archive(item: Input) -> bytes:
    """The archive of ``item``, checked: its checksum, and that every member
    is a regular file or a directory under ``item.name``."""
    data = decoded(item.archive)
    if sha256(data) != item.sha256:
        raise UnsafeName(f"input {item.name!r}: its archive does not match its checksum")
    top = safe_name(item.name)
    if "/" in top:
        raise UnsafeName(f"input {item.name!r}: an input's name is one path part")
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
        for member in tar:
            name = safe_name(member.name)
            if name != top and not name.startswith(f"{top}/"):
                raise UnsafeName(f"input {item.name!r}: {member.name!r} is outside it")
            if not (member.isfile() or member.isdir()):
                raise UnsafeName(f"input {item.name!r}: {member.name!r} is not a file")
    return data


@dataclass(frozen=True)
class Member:
    """A regular file of a workspace archive, as far as the worker needs it:
    its checksum and size (its content stays in the archive)."""

    sha256: str
    size: int
    executable: bool


# The chunk the worker reads archives in: no file is ever held whole.
CHUNK = 1024 * 1024


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
    """The ``--input`` paths, packed; ``BadInput`` for a path that cannot be
    sent, two inputs of one name, or more than a run may carry (the limit
    without a store names OBJECT_STORE_URL)."""
    inputs = [pack_input(Path(path)) for path in paths]
    names = [item.name for item in inputs]
    for name in names:
        if names.count(name) > 1:
            raise BadInput(f"--input: two inputs are named {name!r}; each must have its own name")
    total = sum(item.size for item in inputs)
    limit = STORED_FILES_LIMIT if has_store else INLINE_FILES_LIMIT
    if total > limit:
        how = (
            "the most a run takes through the object store (STORED_FILES_LIMIT)"
            if has_store
            else "the most a run takes without an object store: set OBJECT_STORE_URL "
            "(docs/object-store.md) for up to " + size_text(STORED_FILES_LIMIT)
        )
        weight, most = size_text(total), size_text(limit)
        if weight == most:  # just over: in bytes, or it would read "1.0 MB, over 1.0 MB"
            weight, most = f"{total:,} bytes", f"{limit:,}"
        raise BadInput(f"--input: the inputs weigh {weight}, over {most}, {how}")
    return inputs


def repo_of(text: str) -> Repo:
    """``--repo URL[@REF]`` as a ``Repo``. The ref follows the last ``@``
    that comes after the repository's path (``git@host:org/repo`` has none;
    ``git@host:org/repo@v1`` has ``v1``); the directory is the URL's last
    part without ``.git``."""
    url, ref = text, None
    head, at, tail = text.rpartition("@")
    if at and tail and ("/" in head.split("://", 1)[-1] or ":" in head.split("://", 1)[-1]):
        url, ref = head, tail
    name = url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1].removesuffix(".git")
    if not url.strip() or not name or name in (".", "..") or any(c.isspace() for c in text):
        raise BadInput(
            f"--repo {text!r}: give a git URL, optionally @ a branch, tag or commit "
            "(https://github.com/org/repo@v1.2, /path/to/repo@main)"
        )
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
