"""The object store: where payloads too large for workflow history are kept (OBJECT_STORE_URL).

Temporal refuses a large payload and ends a run whose history grows too
large, so a run's files cannot all travel in history. With a store
(``file:///absolute/path`` or ``s3://bucket/prefix``, any S3-compatible
store), every payload over STORE_THRESHOLD is kept there by Temporal's own
external storage, named by the run that wrote it, and history holds a small
reference; every process that reads the payloads needs the same store.
``check_reachable()`` proves it answers before a worker polls or a starter
starts a run. A render's docs/object-store.md is the guide.
"""

import asyncio
import dataclasses
import hashlib
import os
import re
import stat
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from temporalio.contrib.aws.s3driver import S3StorageDriver, S3StorageDriverClient
from temporalio.converter import DataConverter, ExternalStorage, PayloadCodec

from sandbox_agent_runtime.display import without_credentials, without_secrets
from sandbox_agent_runtime.shared import STORE_THRESHOLD, STORED_FILES_LIMIT

if TYPE_CHECKING:
    from botocore.exceptions import ClientError

# The largest payload the store takes. A run's files may weigh
# STORED_FILES_LIMIT each way; they travel as a tar archive in base64 (4/3
# of the archive), and the archive adds up to a kilobyte of header and
# padding per file. Twice the limit holds all that, and the JSON around it.
LARGEST_PAYLOAD = 2 * STORED_FILES_LIMIT

# How long check_reachable() waits for an S3 API before saying it does not
# answer (the AWS SDK alone would retry a dead endpoint for minutes).
CHECK_TIMEOUT = 20

# What OBJECT_STORE_URL allows, for the line that refuses another value.
ALLOWED = (
    "file:///absolute/path (a directory the worker and the starter share) or "
    "s3://bucket/prefix (S3, or S3-compatible through AWS_ENDPOINT_URL; the prefix is "
    "optional), or leave it unset for no object store"
)

# S3's rules for a bucket's name (MinIO, R2 and GCS have the same or looser).
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
# A prefix: segments of printable characters S3 keys take without trouble.
_SEGMENT = re.compile(r"[A-Za-z0-9!_.*'()=+,;@&$-]+")
_LONGEST_PREFIX = 512
# The longest name most file systems take; a longer segment of a key (a
# very long workflow id) is stored under its digest.
_LONGEST_NAME = 255
# The bucket a directory's objects are recorded under (the driver needs one).
_DIRECTORY_BUCKET = "directory"
# The size of the pieces read_into() reads an object in.
PIECE = 1024 * 1024


# Where an S3 store's credentials and endpoint go, for the line that
# refuses a URL holding them.
CREDENTIALS_ELSEWHERE = (
    "credentials and the endpoint go in the AWS variables, not the URL: AWS_ACCESS_KEY_ID "
    "and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), AWS_ENDPOINT_URL"
)


class NotAStore(ValueError):
    """OBJECT_STORE_URL is no store this service can use; the message says why."""


class ObjectStoreUnreachable(Exception):
    """The object store does not answer, or refuses this process; the
    message is one line saying which, and what to do."""


@dataclass(frozen=True)
class ObjectStore:
    """Where the service keeps large payloads, as OBJECT_STORE_URL names it."""

    # The URL as given (stripped); messages name it through
    # without_credentials() (parse() refuses a URL that holds any).
    url: str
    # "file" or "s3".
    kind: str
    # file: the directory.
    directory: Path | None = None
    # s3: the bucket, and the prefix (no slash at either end; "" for none).
    bucket: str = ""
    prefix: str = ""
    # s3: AWS_REGION or AWS_DEFAULT_REGION; None: the AWS SDK's own choice.
    region: str | None = None
    # s3: the endpoints the AWS SDK reads (AWS_ENDPOINT_URL and
    # AWS_ENDPOINT_URL_S3, set by the settings), whose credentials a message
    # masks wherever the SDK's own text repeats them. Not shown, not compared.
    endpoints: tuple[str, ...] = field(default=(), repr=False, compare=False)


def parse(value: str, region: str | None = None) -> ObjectStore:
    """The store ``value`` names, or ``NotAStore`` saying what is wrong with it."""
    text = value.strip()
    if not text:
        raise NotAStore("it is empty")
    if not text.isprintable() or any(c.isspace() for c in text):
        raise NotAStore("a URL holds no spaces or control characters")
    try:
        parts = urlsplit(text)
    except ValueError:
        # (Not the parser's message: it quotes the value, which may hold a secret.)
        raise NotAStore("not a URL: its host or its port cannot be read") from None
    # s3://KEY:SECRET@bucket, s3://KEY:SECRET/bucket, s3://host:9000/bucket.
    if parts.scheme == "s3" and ("@" in parts.netloc or ":" in parts.netloc):
        raise NotAStore(CREDENTIALS_ELSEWHERE)
    try:
        parts.port  # noqa: B018 (raises ValueError for a port that is not one)
    except ValueError:
        raise NotAStore("not a URL: its host or its port cannot be read") from None
    if parts.query or parts.fragment or "?" in text or "#" in text:
        raise NotAStore("a query or a fragment means nothing here")
    if parts.scheme == "file":
        path = unquote(parts.path)
        if parts.netloc:
            raise NotAStore("a file URL names no host: three slashes, file:///path")
        if not path.startswith("/") or not path.strip("/"):
            raise NotAStore("the directory must be an absolute path other than /")
        if any(segment in (".", "..") for segment in path.split("/")):
            raise NotAStore("the path may hold no '.' or '..'")
        return ObjectStore(url=text, kind="file", directory=Path(path))
    if parts.scheme == "s3":
        bucket = parts.netloc
        if not bucket:
            raise NotAStore("it names no bucket")
        if not _BUCKET.fullmatch(bucket) or ".." in bucket:
            raise NotAStore(
                "a bucket's name is 3 to 63 lowercase letters, digits, '.' or '-', "
                "starting and ending with a letter or a digit"
            )
        prefix = parts.path.strip("/")
        segments = prefix.split("/") if prefix else []
        if (
            len(prefix) > _LONGEST_PREFIX
            or "//" in parts.path
            or any(s in (".", "..") or not _SEGMENT.fullmatch(s) for s in segments)
        ):
            raise NotAStore(
                f"a prefix is at most {_LONGEST_PREFIX} characters: letters, digits and "
                "!_.*'()=+,;@&$- in segments between single slashes, none of them '.' or '..'"
            )
        return ObjectStore(url=text, kind="s3", bucket=bucket, prefix=prefix, region=region)
    if not parts.scheme:
        raise NotAStore("it is not a URL: a relative path, or no scheme")
    raise NotAStore(f"{parts.scheme}:// is not a kind of store this service has")


# ------------------------------------------------------------ a directory


class DirectoryObjects(S3StorageDriverClient):
    """A directory standing in for a bucket: each object a file at its key.

    Written whole or not at all (a temporary file, then renamed over the
    name), so a reader never sees half an object, and two writers of the
    same key (the same bytes: keys end in their digest) cannot clash. The
    directories and files it makes take the permissions of the store's
    directory, so a store the worker and the starter share as two users (a
    group's directory, or everyone's) stays writable by both."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, key: str) -> Path:
        """The file of ``key``; ``ValueError`` for a key that would leave the
        directory or name it (an empty, '.' or '..' segment)."""
        segments = key.split("/")
        if any(segment in ("", ".", "..") or "\0" in segment for segment in segments):
            raise ValueError(f"refused object key {key!r}: it would leave the store's directory")
        return self.directory.joinpath(
            *(
                segment
                if len(segment.encode()) <= _LONGEST_NAME
                else hashlib.sha256(segment.encode()).hexdigest()
                for segment in segments
            )
        )

    def describe(self) -> Mapping[str, str]:
        return {"directory": str(self.directory)}

    async def put_object(self, *, bucket: str, key: str, data: bytes) -> None:
        await asyncio.to_thread(write_whole, self.directory, self.path(key), data)

    async def object_exists(self, *, bucket: str, key: str) -> bool:
        return await asyncio.to_thread(self.path(key).is_file)

    async def get_object(self, *, bucket: str, key: str) -> bytes:
        return await asyncio.to_thread(self.path(key).read_bytes)

    async def read_into(self, *, bucket: str, key: str, into: IO[bytes]) -> str:
        """Ours, not the driver's: the object copied into ``into`` a piece at
        a time, and its SHA-256 (``FileNotFoundError`` if it is not there)."""
        return await asyncio.to_thread(_copy_hashing, self.path(key), into)

    async def delete_object(self, *, bucket: str, key: str) -> None:
        """Ours, not the driver's (it never deletes): a snapshot forgotten."""
        await asyncio.to_thread(self.path(key).unlink, missing_ok=True)


def _copy_hashing(path: Path, into: IO[bytes]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while piece := file.read(PIECE):
            digest.update(piece)
            into.write(piece)
    return digest.hexdigest()


def write_whole(root: Path, path: Path, data: bytes) -> None:
    """Write ``path``, below ``root``, at once: a temporary file beside it,
    renamed over it. What it makes gets ``root``'s permissions."""
    root.mkdir(parents=True, exist_ok=True)
    mode = stat.S_IMODE(root.stat().st_mode)
    directory = root
    for part in path.relative_to(root).parts[:-1]:
        directory = directory / part
        try:
            directory.mkdir()
        except FileExistsError:
            continue
        os.chmod(directory, mode)
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(temporary, "xb") as file:
            os.fchmod(file.fileno(), mode & 0o666)
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


# --------------------------------------------------------------- a bucket


class BucketObjects(S3StorageDriverClient):
    """The objects under a bucket's prefix, through aioboto3 and temporalio's
    own adapter for it (``new_aioboto3_client``); keys get ``prefix/``.

    An aioboto3 client is an async context manager holding a pool of
    connections. The worker holds one open for as long as it runs
    (``held_open()``); otherwise (the starter, which makes a call or two)
    each call opens a client and closes it again."""

    def __init__(self, store: ObjectStore) -> None:
        import aioboto3

        self.store = store
        self.session = aioboto3.Session(region_name=store.region)
        self._held: S3StorageDriverClient | None = None
        self._s3: Any = None

    def key(self, key: str) -> str:
        return f"{self.store.prefix}/{key}" if self.store.prefix else key

    @asynccontextmanager
    async def held_open(self) -> AsyncIterator[None]:
        """One client for every call made inside this context."""
        from temporalio.contrib.aws.s3driver.aioboto3 import new_aioboto3_client

        async with self.session.client("s3") as s3:
            self._held, self._s3 = new_aioboto3_client(s3), s3
            try:
                yield
            finally:
                self._held = self._s3 = None

    @asynccontextmanager
    async def _client(self) -> AsyncIterator[S3StorageDriverClient]:
        if self._held is not None:
            yield self._held
            return
        from temporalio.contrib.aws.s3driver.aioboto3 import new_aioboto3_client

        async with self.session.client("s3") as s3:
            yield new_aioboto3_client(s3)

    def describe(self) -> Mapping[str, str]:
        region = self.store.region or self.session.region_name
        return {"prefix": self.store.prefix, **({"region": region} if region else {})}

    async def put_object(self, *, bucket: str, key: str, data: bytes) -> None:
        async with self._client() as client:
            await client.put_object(bucket=bucket, key=self.key(key), data=data)

    async def object_exists(self, *, bucket: str, key: str) -> bool:
        async with self._client() as client:
            return await client.object_exists(bucket=bucket, key=self.key(key))

    async def get_object(self, *, bucket: str, key: str) -> bytes:
        async with self._client() as client:
            return await client.get_object(bucket=bucket, key=self.key(key))

    async def read_into(self, *, bucket: str, key: str, into: IO[bytes]) -> str:
        """Ours, not the driver's: the object streamed into ``into``, and its
        SHA-256 (``FileNotFoundError`` if it is not there)."""
        from botocore.exceptions import ClientError

        async with self._raw() as s3:
            try:
                response = await s3.get_object(Bucket=bucket, Key=self.key(key))
            except ClientError as e:
                if e.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                    raise FileNotFoundError(key) from None
                raise
            digest, body = hashlib.sha256(), response["Body"]
            async with body:
                while piece := await body.read(PIECE):
                    digest.update(piece)
                    await asyncio.to_thread(into.write, piece)
        return digest.hexdigest()

    @asynccontextmanager
    async def _raw(self) -> AsyncIterator[Any]:
        """aioboto3's own S3 client: the one held open, or a fresh one."""
        if self._s3 is not None:
            yield self._s3
            return
        async with self.session.client("s3") as s3:
            yield s3

    async def delete_object(self, *, bucket: str, key: str) -> None:
        """Ours, not the driver's (it never deletes): a snapshot forgotten.
        Deleting a key that is not there succeeds, as S3's DeleteObject does."""
        async with self._raw() as s3:
            await s3.delete_object(Bucket=bucket, Key=self.key(key))


# ---------------------------------------------------------- for the SDK


def objects_of(store: ObjectStore) -> "DirectoryObjects | BucketObjects":
    """The client the S3 driver reads and writes ``store``'s objects with."""
    if store.kind == "file":
        assert store.directory is not None
        return DirectoryObjects(store.directory)
    return BucketObjects(store)


def external_storage(
    store: ObjectStore, objects: S3StorageDriverClient | None = None
) -> ExternalStorage:
    """Temporal's external storage in ``store``: every payload from
    STORE_THRESHOLD bytes up goes there, a reference to it into history.
    The driver is named after the kind of store, so a process given another
    kind than the one that wrote a reference says so instead of reading the
    wrong place."""
    driver = S3StorageDriver(
        client=objects or objects_of(store),
        bucket=store.bucket or _DIRECTORY_BUCKET,
        driver_name=f"{store.kind}.objectstore",
        max_payload_size=LARGEST_PAYLOAD,
    )
    return ExternalStorage(drivers=[driver], payload_size_threshold=STORE_THRESHOLD)


def data_converter(
    storage: ExternalStorage | None,
    converter: DataConverter | None = None,
    codec: PayloadCodec | None = None,
) -> DataConverter:
    """A data converter that encrypts payloads, then stores the large ones.

    Args:
        storage: where large payloads go; None keeps them in history.
        converter: the converter to extend; None is Temporal's default.
        codec: the payload codec (``EncryptionCodec``); None encrypts nothing.

    Returns:
        ``converter`` with ``storage`` and ``codec``, each where given.
    """
    converter = converter or DataConverter.default
    if codec is not None:
        converter = dataclasses.replace(converter, payload_codec=codec)
    if storage is not None:
        converter = dataclasses.replace(converter, external_storage=storage)
    return converter


@asynccontextmanager
async def worker_storage(store: ObjectStore | None) -> AsyncIterator[ExternalStorage | None]:
    """The worker's external storage in ``store`` (None without one), its S3
    client held open for the whole context: the worker process's life."""
    if store is None:
        yield None
        return
    objects = objects_of(store)
    if isinstance(objects, BucketObjects):
        async with objects.held_open():
            yield external_storage(store, objects)
    else:
        yield external_storage(store, objects)


# ------------------------------------------------------------ reachable?


async def check_reachable(store: ObjectStore) -> None:
    """Return once ``store`` takes objects; else ``ObjectStoreUnreachable``
    in one line: a directory that cannot be made or written, a bucket that
    does not answer, does not exist or refuses the credentials."""
    if store.kind == "file":
        assert store.directory is not None
        await asyncio.to_thread(_check_directory, store, store.directory)
    else:
        await _check_bucket(store)


def _check_directory(store: ObjectStore, directory: Path) -> None:
    """Make ``directory`` if missing, then write, read and remove an object there."""
    probe = directory / f".reachable-{uuid.uuid4().hex}"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        write_whole(directory, probe, b"ok")
        try:
            probe.read_bytes()
        finally:
            probe.unlink()
    except OSError as e:
        raise ObjectStoreUnreachable(
            f"Cannot use the object store OBJECT_STORE_URL={without_credentials(store.url)!r}: "
            f"{directory} is not "
            f"a directory this process can write ({e.strerror or e}). Make it one, or set "
            "OBJECT_STORE_URL to another."
        ) from None


async def _check_bucket(store: ObjectStore) -> None:
    import aioboto3
    from aiobotocore.config import AioConfig
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    session = aioboto3.Session(region_name=store.region)
    quick = AioConfig(connect_timeout=5, read_timeout=10, retries={"max_attempts": 2})
    where = f"Cannot use the object store OBJECT_STORE_URL={without_credentials(store.url)!r}"
    endpoint = "?"

    def said(error: Exception) -> str:
        """The AWS SDK's message, which repeats the endpoint it was given."""
        return without_secrets(str(error), *store.endpoints)

    try:
        async with asyncio.timeout(CHECK_TIMEOUT), session.client("s3", config=quick) as s3:
            endpoint = without_credentials(s3.meta.endpoint_url)
            await s3.head_bucket(Bucket=store.bucket)
    except TimeoutError:
        raise ObjectStoreUnreachable(
            f"{where}: the S3 API at {endpoint} did not answer within {CHECK_TIMEOUT} s. "
            "Check AWS_ENDPOINT_URL and the network."
        ) from None
    except NoCredentialsError:
        raise ObjectStoreUnreachable(
            f"{where}: no AWS credentials found. Set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, or give the process a role)."
        ) from None
    except ClientError as e:
        refusal = _refusal(e, store, endpoint)
        raise ObjectStoreUnreachable(
            f"{where}: {without_secrets(refusal, *store.endpoints)}"
        ) from None
    except BotoCoreError as e:
        raise ObjectStoreUnreachable(
            f"{where}: no S3 API answers at {endpoint} ({said(e)}). Check AWS_ENDPOINT_URL "
            "and the network."
        ) from None
    except ValueError as e:
        # An endpoint the AWS SDK cannot take (no scheme), before any request.
        raise ObjectStoreUnreachable(
            f"{where}: the AWS SDK refused its settings ({said(e)}). Set AWS_ENDPOINT_URL to "
            "the store's URL (https://host:port) or unset it, and AWS_REGION to a region."
        ) from None


def _refusal(error: "ClientError", store: ObjectStore, endpoint: str) -> str:
    """What an S3 API's answer to HeadBucket means, and what to do."""
    response = error.response
    code = str(response.get("Error", {}).get("Code", ""))
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    bucket = store.bucket
    if code in ("404", "NoSuchBucket") or status == 404:
        return (
            f"the bucket {bucket!r} does not exist at {endpoint}. Create it, or set "
            "OBJECT_STORE_URL to one that does."
        )
    if code in ("403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch") or (
        status == 403
    ):
        return (
            f"{endpoint} refused access to the bucket {bucket!r} ({code or status}). Check "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, and that they may s3:ListBucket, "
            "s3:GetObject and s3:PutObject there (docs/object-store.md)."
        )
    if code in ("301", "PermanentRedirect") or status == 301:
        headers = response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
        region = headers.get("x-amz-bucket-region", "another region")
        return f"the bucket {bucket!r} is in {region}: set AWS_REGION to it."
    return f"{endpoint} answered {code or status} for the bucket {bucket!r}: {error}."
