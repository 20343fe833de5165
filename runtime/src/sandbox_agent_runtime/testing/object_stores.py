"""The object store as the tests read it: every object a store holds, every
payload a history event carries, and a client with another data converter."""

from collections.abc import Iterator

import aioboto3
from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.converter import DataConverter

from sandbox_agent_runtime.object_store import ObjectStore


async def objects_in(store: ObjectStore) -> dict[str, bytes]:
    """Every object of ``store``, by its key (below the directory, or with
    the prefix)."""
    if store.kind == "file":
        assert store.directory is not None
        return {
            path.relative_to(store.directory).as_posix(): path.read_bytes()
            for path in sorted(store.directory.rglob("*"))
            if path.is_file()
        }
    found = {}
    async with aioboto3.Session().client("s3") as s3:
        pages = s3.get_paginator("list_objects_v2").paginate(
            Bucket=store.bucket, Prefix=f"{store.prefix}/"
        )
        async for page in pages:
            for item in page.get("Contents", []):
                answer = await s3.get_object(Bucket=store.bucket, Key=item["Key"])
                found[item["Key"]] = await answer["Body"].read()
    return found


def payloads_in(message: Message) -> Iterator[Payload]:
    """Every Payload in ``message`` (a history event), however deep."""
    if isinstance(message, Payload):
        yield message
        return
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if isinstance(value, Message):
            values = [value]
        elif field.message_type.GetOptions().map_entry:
            values = list(value.values())
        else:
            values = list(value)
        for each in values:
            if isinstance(each, Message):
                yield from payloads_in(each)


def client_with(client: Client, converter: DataConverter) -> Client:
    """``client``'s connection with another data converter."""
    config = client.config()
    config["data_converter"] = converter
    return Client(**config)
