"""A caller's memory across conversations (``Service.memory_across_conversations``):
the directory of the agent's ``Memory`` capability (``memories/`` unless its
layout says otherwise), kept in the object store under its caller once each
prompt is answered, and put back into the workspace of that caller's next
conversation before its first model turn.

One object per caller of the service (``memory_key``: the service's queue and
the caller hashed), sealed with the worker's payload codec as snapshots are
and bound to that object (``memory_context``): a copy put under another
caller's name does not decrypt there, and a worker with keys takes no
plaintext memory. Only regular files under the memory directory travel, at
most MOST_MEMORY_FILES and LARGEST_MEMORY; nothing of them goes through
history (the activities carry the session's state, the key and counts)."""

import gzip
import hashlib
import io
import json
import shlex
import tarfile
from typing import Any

from google.protobuf.message import DecodeError
from temporalio import workflow
from temporalio.api.common.v1 import Payload

from sandbox_agent_runtime.archives import size_text
from sandbox_agent_runtime.workspace.requests import IN_STORE, MemoryArgs, Remembered
from sandbox_agent_runtime.workspace.snapshots import SnapshotStore

# As in snapshots.py: the codec's module is passed through the workflow's sandbox.
with workflow.unsafe.imports_passed_through():
    from sandbox_agent_runtime.encryption import KEY_ID, UnknownKey, WrongKey

# The most files and bytes (before gzip) a caller's memory may hold.
MOST_MEMORY_FILES = 200
LARGEST_MEMORY = 4 * 1024 * 1024
# The owner of the runs the command-line starter starts (they record no
# API caller): whoever holds the service's Temporal credentials.
STARTER_OWNER = "starter"


def memory_key(service: str, owner: str) -> str:
    """The object that holds the memory of ``owner`` (a run's caller, as its
    memo names it) in ``service`` (its task queue): both hashed, so a name
    may hold any character and the store's listing shows no caller."""
    digest = hashlib.sha256(json.dumps([service, owner]).encode()).hexdigest()[:40]
    return f"memories/{digest}.tar.gz"


def memory_context(key: str) -> bytes:
    """What a memory's ciphertext is bound to (AES-GCM's associated data)."""
    return json.dumps(["caller-memory", 1, key]).encode()


def _inside(name: str, directory: str) -> bool:
    parts = name.split("/")
    return (
        name.startswith(directory + "/")
        and ".." not in parts
        and "" not in parts
        and not name.startswith("/")
    )


async def read_memory(session: Any, directory: str) -> tuple[bytes, int]:
    """The regular files under ``directory`` of the session's workspace as
    a gzipped tar (names relative to the workspace's root), and how many;
    (b"", 0) for none. Links and anything else are left out."""
    root = str(session.state.manifest.root).rstrip("/")
    listing = await session.exec(
        f"cd {shlex.quote(root)} && [ -d {shlex.quote(directory)} ] && "
        f"find {shlex.quote(directory)} -type f -print0 || true",
        shell=["sh", "-c"],
    )
    names = sorted(
        name
        for name in listing.stdout.decode(errors="replace").split("\0")
        if _inside(name, directory)
    )
    if not names:
        return b"", 0
    if len(names) > MOST_MEMORY_FILES:
        raise MemoryTooLarge(f"{len(names)} files, over {MOST_MEMORY_FILES}")
    packed, size = io.BytesIO(), 0
    with tarfile.open(fileobj=packed, mode="w") as tar:
        for name in names:
            handle = await session.read(f"{root}/{name}")
            try:
                data = handle.read()
            finally:
                handle.close()
            size += len(data)
            if size > LARGEST_MEMORY:
                raise MemoryTooLarge(f"over {size_text(LARGEST_MEMORY)}")
            member = tarfile.TarInfo(name)
            member.size = len(data)
            member.mode = 0o644
            tar.addfile(member, io.BytesIO(data))
    return gzip.compress(packed.getvalue(), compresslevel=6, mtime=0), len(names)


class MemoryTooLarge(Exception):
    """A memory directory over MOST_MEMORY_FILES or LARGEST_MEMORY."""


def sealed(store: SnapshotStore, key: str, data: bytes) -> tuple[bytes, str]:
    """``data`` as it is stored under ``key``, and the key id that encrypted it."""
    return store.sealed(data, memory_context(key))


def opened(store: SnapshotStore, key: str, directory: str, stored: bytes) -> tuple[bytes, int]:
    """The memory's tar (uncompressed) from the object stored under ``key``,
    and its files: only regular files under ``directory``, at most
    LARGEST_MEMORY in all. With keys, only ciphertext bound to ``key``
    opens; ``ValueError`` (or UnknownKey, WrongKey) says why not."""
    if stored.startswith(b"\x1f\x8b"):
        if store.codec is not None:
            raise ValueError(
                "it is not encrypted, and this worker encrypts (PAYLOAD_ENCRYPTION_KEYS)"
            )
        packed = stored
    else:
        payload = Payload()
        try:
            payload.ParseFromString(stored)
        except DecodeError:
            raise ValueError("it is neither a gzipped archive nor an encrypted one") from None
        key_id = payload.metadata.get(KEY_ID, b"").decode(errors="replace")
        packed = store.opened(stored, key_id or "?", memory_context(key))
    try:
        tar_bytes = gzip.decompress(packed)
    except (OSError, EOFError) as e:
        raise ValueError(f"it is not a gzipped archive ({e})") from None
    if len(tar_bytes) > LARGEST_MEMORY + 512 * (2 * MOST_MEMORY_FILES + 4):
        raise ValueError(f"it weighs over {size_text(LARGEST_MEMORY)}")
    files = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(tar_bytes), mode="r:") as tar:
            for member in tar:
                if not member.isfile():
                    raise ValueError(f"it holds {member.name!r}, which is not a file")
                if not _inside(member.name, directory):
                    raise ValueError(f"it holds {member.name!r}, outside its directory")
                files += 1
    except tarfile.TarError as e:
        raise ValueError(f"it is not a tar archive ({e})") from None
    if files > MOST_MEMORY_FILES:
        raise ValueError(f"it holds {files} files, over {MOST_MEMORY_FILES}")
    return tar_bytes, files


async def save(store: SnapshotStore | None, session: Any, args: MemoryArgs) -> Remembered:
    """Keep the memory directory of ``session``'s workspace under ``args.key``."""
    if store is None or store.where != IN_STORE:
        return Remembered(why_not="no object store (OBJECT_STORE_URL)")
    try:
        data, files = await read_memory(session, args.directory)
    except MemoryTooLarge as e:
        return Remembered(why_not=f"the memory directory {args.directory!r} holds {e}")
    if not files:
        return Remembered(why_not=f"the workspace holds no {args.directory}/")
    stored, encrypted = sealed(store, args.key, data)
    await store.objects.put_object(bucket=store.bucket, key=args.key, data=stored)
    return Remembered(files=files, size=len(data), encrypted=encrypted)


async def load(store: SnapshotStore | None, session: Any, args: MemoryArgs) -> Remembered:
    """Put the memory kept under ``args.key`` into ``session``'s workspace."""
    if store is None or store.where != IN_STORE:
        return Remembered(why_not="no object store (OBJECT_STORE_URL)")
    if not await store.objects.object_exists(bucket=store.bucket, key=args.key):
        return Remembered(why_not="no memory kept yet")
    stored = await store.objects.get_object(bucket=store.bucket, key=args.key)
    try:
        tar_bytes, files = opened(store, args.key, args.directory, stored)
    except (ValueError, UnknownKey, WrongKey) as e:
        return Remembered(why_not=f"the kept memory cannot be read: {e}")
    await session.hydrate_workspace(io.BytesIO(tar_bytes))
    return Remembered(files=files, size=len(stored))
