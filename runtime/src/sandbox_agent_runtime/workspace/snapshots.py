"""A conversation's snapshots of its workspace: where they are kept
(``SnapshotStore``: the object store, or the host's disk), sealed with the
worker's payload codec and bound to their conversation and object
(``snapshot_context``), gzipped as they are taken, and verified whole
(``verified``: the digest its record names) before a restore puts anything
of one into a workspace; deleted once a newer one replaces it or its
conversation ends (``forget``)."""

import asyncio
import gzip
import io
import json
import shutil
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from google.protobuf.message import DecodeError
from temporalio import activity, workflow
from temporalio.api.common.v1 import Payload
from temporalio.exceptions import ApplicationError

from sandbox_agent_runtime import archives
from sandbox_agent_runtime.object_store import (
    BucketObjects,
    DirectoryObjects,
    ObjectStore,
    objects_of,
)
from sandbox_agent_runtime.observability import SNAPSHOT_BYTES, SNAPSHOT_SECONDS
from sandbox_agent_runtime.service import current
from sandbox_agent_runtime.workspace.requests import (
    IN_STORE,
    ON_HOST,
    SNAPSHOT_FORMAT,
    RestoreArgs,
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

# The encoding of a snapshot's bytes inside the payload that encrypts them.
SNAPSHOT_ENCODING = b"binary/workspace-snapshot"


@dataclass(frozen=True)
class SnapshotStore:
    """Where a worker writes its workspaces' snapshots (IN_STORE or ON_HOST:
    without an object store, a host-bound backend keeps them on its host's
    disk).

    A snapshot is bound to what it is: the snapshot operation answers with
    the SHA-256 of exactly what it stored, which the workflow keeps in its
    own state, and restore refuses an object whose digest differs (another
    conversation's snapshot, an older one of this conversation, any other
    archive) before anything of it reaches the workspace, failing the
    follow-up at once. With PAYLOAD_ENCRYPTION_KEYS, the ciphertext also
    names its conversation and its object (AES-GCM's associated data), so a
    copy does not decrypt anywhere else. A snapshot recorded before this (its
    record has no ``format``) is restored as it was then: unchecked."""

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
