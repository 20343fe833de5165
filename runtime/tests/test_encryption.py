"""Payloads are encrypted with PAYLOAD_ENCRYPTION_KEYS and read only by
processes that hold the key; the codec server decodes them for those
allowed, and for nobody else (encryption.py, codec_server.py).

The codec and the keys are tested here in this process; the codec server is
a real HTTP server on loopback, called with urllib as the Web UI and the CLI
call it (the Web UI itself, in a real browser: test_codec_ui.py). A real
worker and starter with keys set, their history read raw and through the
codec server: test_encryption_processes.py.
"""

import asyncio
import base64
import dataclasses
import json
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sandbox_agent.service import SANDBOX_PROVIDER, TASK_QUEUE
from sandbox_agent.workflow import SandboxAgentWorkflow
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.converter import DataConverter

from sandbox_agent_runtime.codec_server import Codec, CodecServer
from sandbox_agent_runtime.encryption import (
    ENCODING,
    KEY_ID,
    BadKeys,
    EncryptionCodec,
    UnknownKey,
    WrongKey,
    parse_keys,
)
from sandbox_agent_runtime.object_store import (
    DirectoryObjects,
    data_converter,
    external_storage,
    parse,
)
from sandbox_agent_runtime.run_request import RELEASED, RunRequest
from sandbox_agent_runtime.settings import (
    BadSetting,
    WorkerSettings,
    codec_server_settings,
    starter_settings,
)
from sandbox_agent_runtime.shared import END, RESTORE, STORE_THRESHOLD
from sandbox_agent_runtime.starter import start
from sandbox_agent_runtime.testing.conversing import (
    Conversing,
    answered,
    conversation,
    follow_up,
    printed,
    until,
)
from sandbox_agent_runtime.testing.failing_sandbox import watched
from sandbox_agent_runtime.testing.long_workflow import SnapshotsBeforeFormatsWorkflow
from sandbox_agent_runtime.testing.object_stores import client_with
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
from sandbox_agent_runtime.testing.support import (
    activities,
    running_worker,
    sandboxes_for_tests,
    settings_with,
)
from sandbox_agent_runtime.workspace import (
    IN_STORE,
    SNAPSHOT_FORMAT,
    SnapshotStore,
    snapshot_context,
)

# Test keys: 32 bytes each, never used outside the tests.
KEY_A = base64.b64encode(bytes(range(32))).decode()
KEY_B = base64.b64encode(bytes(range(32, 64))).decode()
A = f"A={KEY_A}"
B = f"B={KEY_B}"

TOKEN = "codec-token-0123456789abcdef"
UI = "http://localhost:8233"


def payload_of(value: Any) -> Payload:
    [payload] = DataConverter.default.payload_converter.to_payloads([value])
    return payload


def value_of(payload: Payload) -> Any:
    [value] = DataConverter.default.payload_converter.from_payloads([payload])
    return value


# ------------------------------------------------------------------ the keys


def test_the_first_key_encrypts_and_every_key_decrypts() -> None:
    keys = parse_keys(f" {B} , {A} ")
    assert keys.current == "B"
    assert set(keys.by_id) == {"A", "B"}
    assert keys.by_id["A"] == bytes(range(32))


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("", "entry 1 of 1 is empty"),
        (f"{A},", "entry 2 of 2 is empty"),
        (KEY_A, "has no key id before its key"),
        (KEY_A.rstrip("="), "has no '='"),
        (f"a b={KEY_A}", "has the key id 'a b'"),
        (f"{A},A={KEY_B}", "the key id 'A' is given twice"),
        ("A=not base64!", "the key of 'A' is not base64"),
        (f"A={base64.b64encode(bytes(16)).decode()}", "the key of 'A' is 16 bytes, not 32"),
    ],
)
def test_a_bad_key_value_is_refused_in_one_line_that_shows_no_key(value: str, says: str) -> None:
    with pytest.raises(BadKeys) as refused:
        parse_keys(value)
    message = str(refused.value)
    assert says in message
    assert "\n" not in message
    assert message.startswith("PAYLOAD_ENCRYPTION_KEYS: entry ")
    assert KEY_A[:16] not in message and KEY_B[:16] not in message


def test_the_worker_and_the_starter_stop_at_start_on_a_bad_key() -> None:
    with pytest.raises(BadSetting, match="PAYLOAD_ENCRYPTION_KEYS: entry 1 of 1"):
        settings_with({"PAYLOAD_ENCRYPTION_KEYS": "A=short"})
    with pytest.raises(BadSetting, match="PAYLOAD_ENCRYPTION_KEYS: entry 1 of 1"):
        starter_settings({"PAYLOAD_ENCRYPTION_KEYS": "A=short"})
    assert settings_with({}).keys is None
    assert settings_with({"PAYLOAD_ENCRYPTION_KEYS": A}).keys is not None


# ----------------------------------------------------------------- the codec


async def test_a_payload_is_ciphertext_naming_its_key_and_decrypts_back() -> None:
    codec = EncryptionCodec(parse_keys(A))
    secret = "the prompt: sk-live-0123456789"
    [sealed] = await codec.encode([payload_of(secret)])
    assert sealed.metadata["encoding"] == ENCODING
    assert sealed.metadata[KEY_ID] == b"A"
    assert secret.encode() not in sealed.SerializeToString()
    [opened] = await codec.decode([sealed])
    assert value_of(opened) == secret
    # A fresh nonce each time: the same payload twice is two ciphertexts.
    [again] = await codec.encode([payload_of(secret)])
    assert again.data != sealed.data


async def test_a_rotated_process_reads_the_old_key_s_payloads_and_writes_with_the_new() -> None:
    [under_a] = await EncryptionCodec(parse_keys(A)).encode([payload_of("from A")])
    rotated = EncryptionCodec(parse_keys(f"{B},{A}"))
    assert value_of((await rotated.decode([under_a]))[0]) == "from A"
    [under_b] = await rotated.encode([payload_of("from B")])
    assert under_b.metadata[KEY_ID] == b"B"


async def test_a_process_without_the_key_says_which_key_in_one_line() -> None:
    [under_a] = await EncryptionCodec(parse_keys(A)).encode([payload_of("from A")])
    with pytest.raises(UnknownKey) as refused:
        await EncryptionCodec(parse_keys(B)).decode([under_a])
    message = str(refused.value)
    assert "the key 'A'" in message and "it holds 'B'" in message
    assert "\n" not in message


async def test_another_key_under_the_same_id_or_an_altered_payload_never_decodes() -> None:
    [sealed] = await EncryptionCodec(parse_keys(A)).encode([payload_of("from A")])
    with pytest.raises(WrongKey, match="the key 'A'"):
        await EncryptionCodec(parse_keys(f"A={KEY_B}")).decode([sealed])
    # The key id is bound to the ciphertext: relabelled, it does not decrypt.
    relabelled = Payload()
    relabelled.CopyFrom(sealed)
    relabelled.metadata[KEY_ID] = b"B"
    with pytest.raises(WrongKey):
        await EncryptionCodec(parse_keys(f"B={KEY_A}")).decode([relabelled])
    flipped = Payload()
    flipped.CopyFrom(sealed)
    flipped.data = sealed.data[:-1] + bytes([sealed.data[-1] ^ 1])
    with pytest.raises(WrongKey):
        await EncryptionCodec(parse_keys(A)).decode([flipped])


async def test_a_payload_that_is_not_encrypted_is_read_as_it_is() -> None:
    plain = payload_of("recorded before the keys were set")
    [read] = await EncryptionCodec(parse_keys(A)).decode([plain])
    assert read == plain


async def test_a_large_payload_is_encrypted_before_the_store_takes_it(tmp_path: Path) -> None:
    store = parse(f"file://{tmp_path}/objects")
    codec = EncryptionCodec(parse_keys(A))
    converter = data_converter(external_storage(store), codec=codec)
    text = "a model input " * (STORE_THRESHOLD // 10)
    [reference] = await converter.encode([text])
    assert reference.external_payloads
    [stored] = [path for path in (tmp_path / "objects").rglob("*") if path.is_file()]
    assert b"a model input" not in stored.read_bytes()
    assert await converter.decode([reference]) == [text]


async def test_a_worker_without_the_key_fails_the_workflow_task_naming_it(
    temporal_client: Client,
) -> None:
    """The run waits (Temporal retries the task), its failure one line that
    names the key; a worker with the key would take it from there."""
    under_a = client_with(
        temporal_client, data_converter(None, codec=EncryptionCodec(parse_keys(A)))
    )
    only_b = client_with(
        temporal_client, data_converter(None, codec=EncryptionCodec(parse_keys(B)))
    )
    handle = await start(under_a, RunRequest("Say done."))
    settings = dataclasses.replace(settings_with({}), keys=parse_keys(B))
    failure = None
    async with running_worker(only_b, ScriptedModel(["echo done"]), settings=settings):
        async with asyncio.timeout(20):
            while failure is None:
                async for event in temporal_client.get_workflow_handle(
                    handle.id
                ).fetch_history_events():
                    if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                        failure = event.workflow_task_failed_event_attributes.failure.message
                await asyncio.sleep(0.2)
    assert "the key 'A'" in failure and "holds 'B'" in failure, failure
    assert "\n" not in failure
    await temporal_client.get_workflow_handle(handle.id).terminate("test over")


async def test_a_conversation_s_snapshots_are_encrypted_and_restore_from_ciphertext(
    temporal_client: Client, tmp_path: Path
) -> None:
    """With keys set, a snapshot in the store is a payload encrypted under
    the first key (no gzip, none of the workspace's text), and the
    follow-up after the sandbox was released restores from it."""
    keys = parse_keys(A)
    client = client_with(temporal_client, data_converter(None, codec=EncryptionCodec(keys)))
    settings = dataclasses.replace(
        settings_with({}),
        keys=keys,
        object_store=parse(f"file://{tmp_path}/objects"),
        session_idle_timeout=timedelta(seconds=1),
    )
    model = Conversing([["echo kept-in-the-snapshot > note.txt"], ["cat note.txt"]])
    async with running_worker(client, model, settings=settings) as (plugged, _):
        handle = await conversation(plugged, "Write a note.")
        await until(handle, lambda state: state.state == RELEASED)
        snapshots = [path for path in (tmp_path / "objects").rglob("*.tar.gz")]
        assert len(snapshots) == 1, snapshots
        stored = snapshots[0].read_bytes()
        assert not stored.startswith(b"\x1f\x8b") and b"kept-in-the-snapshot" not in stored
        sealed = Payload()
        sealed.ParseFromString(stored)
        assert sealed.metadata["encoding"] == ENCODING and sealed.metadata[KEY_ID] == b"A"
        await follow_up(handle, "Read the note.")
        state = await answered(handle, 2)
        await handle.execute_update(END)
    # The follow-up ran in a fresh sandbox, restored from the ciphertext.
    restores = [
        event
        async for event in handle.fetch_history_events()
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and event.activity_task_scheduled_event_attributes.activity_type.name.endswith(RESTORE)
    ]
    assert len(restores) == 1
    assert "kept-in-the-snapshot" in str(state.answer.answer if state.answer else "")


def snapshot_objects(store: Path) -> list[Path]:
    """The snapshots in a ``file://`` store's directory."""
    return sorted(store.rglob("*.tar.gz"))


async def released_conversation(
    client: Client, settings: WorkerSettings, command: str, workflows: Sequence[type] = ()
) -> tuple[WorkflowHandle[Any, Any], Path]:
    """A conversation whose first prompt ran ``command``, answered, then left
    idle until its sandbox was released (a worker of its own, stopped
    since), and the object of its snapshot."""
    model = Conversing([[command], ["cat note.txt"]])
    store = settings.object_store.directory if settings.object_store else None
    assert store is not None
    before = set(snapshot_objects(store))
    async with running_worker(
        client, model, settings=settings, workflows=workflows or (SandboxAgentWorkflow,)
    ) as (plugged, _):
        if workflows:
            handle = await plugged.start_workflow(
                workflows[0].run,  # type: ignore[attr-defined]
                RunRequest("Write a note.", follow_ups=True),
                id=f"{TASK_QUEUE}-{uuid.uuid4()}",
                task_queue=TASK_QUEUE,
            )
        else:
            handle = await conversation(plugged, "Write a note.")
        await until(handle, lambda state: state.state == RELEASED)
    [snapshot] = set(snapshot_objects(store)) - before
    return handle, snapshot


async def test_a_snapshot_copied_from_another_conversation_fails_the_follow_up_at_once(
    temporal_client: Client, tmp_path: Path
) -> None:
    """With keys set, conversation A's snapshot copied over B's in the store
    decrypts (same key) but is not B's: B's follow-up fails at once, in one
    line naming B's snapshot, before anything of A's reaches a workspace."""
    keys = parse_keys(A)
    client = client_with(temporal_client, data_converter(None, codec=EncryptionCodec(keys)))
    settings = dataclasses.replace(
        settings_with({}),
        keys=keys,
        object_store=parse(f"file://{tmp_path}/objects"),
        session_idle_timeout=timedelta(seconds=1),
    )
    a, of_a = await released_conversation(client, settings, "echo written-by-a > note.txt")
    b, of_b = await released_conversation(client, settings, "echo written-by-b > note.txt")
    of_b.write_bytes(of_a.read_bytes())
    key_of_b = of_b.relative_to(tmp_path / "objects").as_posix()

    model = Conversing([["echo unused"], ["cat note.txt"]])
    deleted: list[list[str]] = []
    sandbox = watched(sandboxes_for_tests()[SANDBOX_PROVIDER], deleted)
    async with running_worker(client, model, sandbox, settings=settings) as (plugged, _):
        handle = plugged.get_workflow_handle(b.id)
        await follow_up(handle, "Read the note.")
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        await plugged.get_workflow_handle(a.id).terminate("test over")

    failure = str(failed.value.cause)
    assert "\n" not in failure, failure
    assert f"The snapshot {key_of_b!r}" in failure, failure
    assert "not the snapshot this conversation took" in failure, failure
    assert "nothing of it was put in the workspace" in failure, failure
    # At once: one attempt, and no model call for the follow-up.
    [restore] = [step for step in await activities(handle) if step.name.endswith(RESTORE)]
    assert restore.attempt == 1 and restore.failed
    assert model.inputs == []
    # Nothing of A's in B's fresh workspace when the failed run removed it.
    assert len(deleted) == 1 and "note.txt" not in deleted[0], deleted


async def test_a_snapshot_sealed_for_another_place_does_not_decrypt_there(
    tmp_path: Path,
) -> None:
    """The ciphertext names its conversation and its object: opened under
    another conversation's id, or another key of the same conversation, it
    fails; under its own, it opens."""
    objects = DirectoryObjects(tmp_path)
    store = SnapshotStore(objects, "", IN_STORE, EncryptionCodec(parse_keys(A)))
    sealed, encrypted = store.sealed(b"workspace", snapshot_context("chat-a", "snapshots/1", 1))
    assert store.opened(sealed, encrypted, snapshot_context("chat-a", "snapshots/1", 1)) == (
        b"workspace"
    )
    for elsewhere in (
        snapshot_context("chat-b", "snapshots/1", 1),
        snapshot_context("chat-a", "snapshots/2", 1),
        snapshot_context("chat-a", "snapshots/1", 0),
    ):
        with pytest.raises(WrongKey, match="does not decrypt"):
            store.opened(sealed, encrypted, elsewhere)


async def test_a_snapshot_recorded_before_formats_still_restores(
    temporal_client: Client, tmp_path: Path
) -> None:
    """A conversation waiting when this build deployed: its snapshot's
    record has no format nor digest (and is carried so to the next run of
    its chain), its object sealed as builds before sealed it, bound to
    nothing but its key id. Its follow-up restores it unchecked."""
    keys = parse_keys(A)
    client = client_with(temporal_client, data_converter(None, codec=EncryptionCodec(keys)))
    settings = dataclasses.replace(
        settings_with({}),
        keys=keys,
        object_store=parse(f"file://{tmp_path}/objects"),
        session_idle_timeout=timedelta(seconds=1),
    )
    workflows = [SnapshotsBeforeFormatsWorkflow]
    handle, stored = await released_conversation(
        client, settings, "echo kept-before-formats > note.txt", workflows
    )
    # The object as a build before formats wrote it.
    store = SnapshotStore(
        DirectoryObjects(tmp_path / "objects"), "", IN_STORE, EncryptionCodec(keys)
    )
    key = stored.relative_to(tmp_path / "objects").as_posix()
    data = store.opened(stored.read_bytes(), "A", snapshot_context(handle.id, key, SNAPSHOT_FORMAT))
    stored.write_bytes(store.sealed(data)[0])

    model = Conversing([["echo unused"], ["cat note.txt"]])
    async with running_worker(client, model, settings=settings, workflows=workflows) as (
        plugged,
        _,
    ):
        latest = plugged.get_workflow_handle(handle.id)
        await follow_up(latest, "Read the note.")
        state = await answered(latest, 2)
        await latest.execute_update(END)
        await latest.result()
    assert state.answer is not None and printed(state.answer) == ["kept-before-formats"]
    # The record it restored from had no digest: the snapshot operations' results do.
    snapshots = [step for step in await activities(latest) if step.name.endswith(RESTORE)]
    assert len(snapshots) == 1 and not snapshots[0].failed


# ---------------------------------------------------------- the codec server


def server_environ(**more: str) -> dict[str, str]:
    return {
        "PAYLOAD_ENCRYPTION_KEYS": A,
        "CODEC_SERVER_BIND_ADDRESS": "127.0.0.1:8081",
        "CODEC_SERVER_TOKEN": TOKEN,
        **more,
    }


@asynccontextmanager
async def codec_server(environ: Mapping[str, str]) -> AsyncIterator[CodecServer]:
    """The codec server on a free loopback port, its codec work on this loop."""
    # On a port of its own (the settings take no port 0).
    settings = dataclasses.replace(codec_server_settings(environ), address=("127.0.0.1", 0))
    codec = EncryptionCodec(settings.keys)
    storage = external_storage(settings.object_store) if settings.object_store else None
    converter = data_converter(storage, codec=codec)
    server = CodecServer(settings, Codec(converter, codec), asyncio.get_running_loop())
    serving = asyncio.create_task(asyncio.to_thread(server.http.serve_forever, 0.05))
    try:
        yield server
    finally:
        server.http.shutdown()
        await serving
        server.http.server_close()


def call(
    url: str, body: dict[str, Any] | None, headers: Mapping[str, str], method: str = "POST"
) -> tuple[int, dict[str, str], dict[str, Any]]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=dict(headers), method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
            return response.status, dict(response.headers), json.loads(raw) if raw else {}
    except urllib.error.HTTPError as e:
        raw = e.read()
        return e.code, dict(e.headers), json.loads(raw) if raw else {}


def payloads_json(payloads: list[Payload]) -> dict[str, Any]:
    from google.protobuf import json_format
    from temporalio.api.common.v1 import Payloads

    return json_format.MessageToDict(Payloads(payloads=payloads))


def payloads_from(body: dict[str, Any]) -> list[Payload]:
    from google.protobuf import json_format
    from temporalio.api.common.v1 import Payloads

    return list(json_format.ParseDict(body, Payloads()).payloads)


AUTHORIZED = {
    "Authorization": f"Bearer {TOKEN}",
    "Content-Type": "application/json",
    "X-Namespace": "default",
}


async def test_the_codec_server_decodes_and_encodes_for_a_bearer_of_the_token() -> None:
    [sealed] = await EncryptionCodec(parse_keys(A)).encode([payload_of("the prompt")])
    async with codec_server(server_environ()) as server:
        status, _, body = await asyncio.to_thread(
            call, f"{server.url}/decode", payloads_json([sealed]), AUTHORIZED
        )
        assert status == 200, body
        assert [value_of(p) for p in payloads_from(body)] == ["the prompt"]
        # Mounted at any depth: only the last part of the path counts.
        status, _, body = await asyncio.to_thread(
            call, f"{server.url}/default/encode", payloads_json([payload_of("x")]), AUTHORIZED
        )
        assert status == 200, body
        [encoded] = payloads_from(body)
        assert encoded.metadata[KEY_ID] == b"A"


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token-0123456789", TOKEN])
async def test_without_the_token_the_codec_server_decodes_nothing(
    authorization: str | None,
) -> None:
    [sealed] = await EncryptionCodec(parse_keys(A)).encode([payload_of("the prompt")])
    headers = {"Content-Type": "application/json"}
    if authorization is not None:
        headers["Authorization"] = authorization
    async with codec_server(server_environ()) as server:
        status, _, body = await asyncio.to_thread(
            call, f"{server.url}/decode", payloads_json([sealed]), headers
        )
    assert status == 401
    assert "the prompt" not in json.dumps(body)


async def test_a_browser_may_call_it_from_the_web_ui_s_origin_only() -> None:
    preflight = {
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type,x-namespace",
    }
    async with codec_server(server_environ()) as server:
        status, headers, _ = await asyncio.to_thread(
            call, f"{server.url}/decode", None, {**preflight, "Origin": UI}, "OPTIONS"
        )
        assert status == 204
        assert headers["Access-Control-Allow-Origin"] == UI
        assert "Authorization" in headers["Access-Control-Allow-Headers"]
        for origin in ("https://evil.example", "http://localhost:8234", "null"):
            status, headers, _ = await asyncio.to_thread(
                call, f"{server.url}/decode", None, {**preflight, "Origin": origin}, "OPTIONS"
            )
            assert status == 403
            assert "Access-Control-Allow-Origin" not in headers
            [sealed] = await EncryptionCodec(parse_keys(A)).encode([payload_of("the prompt")])
            status, headers, body = await asyncio.to_thread(
                call,
                f"{server.url}/decode",
                payloads_json([sealed]),
                {**AUTHORIZED, "Origin": origin},
            )
            assert status == 403 and "Access-Control-Allow-Origin" not in headers
            assert "the prompt" not in json.dumps(body)


async def test_it_decodes_for_its_own_namespace_only() -> None:
    [sealed] = await EncryptionCodec(parse_keys(A)).encode([payload_of("the prompt")])
    async with codec_server(server_environ(TEMPORAL_NAMESPACE="agents")) as server:
        for namespace, expected in (("agents", 200), ("other", 403)):
            status, _, _ = await asyncio.to_thread(
                call,
                f"{server.url}/decode",
                payloads_json([sealed]),
                {**AUTHORIZED, "X-Namespace": namespace},
            )
            assert status == expected, namespace


async def test_a_payload_it_cannot_decrypt_comes_back_as_it_was() -> None:
    [under_b] = await EncryptionCodec(parse_keys(B)).encode([payload_of("from B")])
    [under_a] = await EncryptionCodec(parse_keys(A)).encode([payload_of("from A")])
    async with codec_server(server_environ()) as server:
        status, _, body = await asyncio.to_thread(
            call, f"{server.url}/decode", payloads_json([under_b, under_a]), AUTHORIZED
        )
    assert status == 200
    kept, decoded = payloads_from(body)
    assert kept == under_b
    assert value_of(decoded) == "from A"


async def test_it_shows_a_stored_payload_as_what_the_reference_refers_to(tmp_path: Path) -> None:
    store_url = f"file://{tmp_path}/objects"
    converter = data_converter(
        external_storage(parse(store_url)), codec=EncryptionCodec(parse_keys(A))
    )
    text = "a model input " * (STORE_THRESHOLD // 10)
    [reference] = await converter.encode([text])
    assert reference.external_payloads
    async with codec_server(server_environ(OBJECT_STORE_URL=store_url)) as server:
        status, _, body = await asyncio.to_thread(
            call, f"{server.url}/decode", payloads_json([reference]), AUTHORIZED
        )
    assert status == 200
    assert [value_of(p) for p in payloads_from(body)] == [text]


@pytest.mark.parametrize(
    ("environ", "says"),
    [
        ({"PAYLOAD_ENCRYPTION_KEYS": None}, "PAYLOAD_ENCRYPTION_KEYS is unset"),
        ({"PAYLOAD_ENCRYPTION_KEYS": " "}, "PAYLOAD_ENCRYPTION_KEYS is set but empty"),
        ({"CODEC_SERVER_TOKEN": "short"}, "CODEC_SERVER_TOKEN is not allowed"),
        (
            {"CODEC_SERVER_BIND_ADDRESS": "0.0.0.0:8081", "CODEC_SERVER_TOKEN": None},
            "is not a loopback address and CODEC_SERVER_TOKEN is unset",
        ),
        ({"CODEC_SERVER_ALLOWED_ORIGINS": "*"}, "CODEC_SERVER_ALLOWED_ORIGINS='*' is not allowed"),
        (
            {"CODEC_SERVER_ALLOWED_ORIGINS": "http://localhost:8233/path"},
            "CODEC_SERVER_ALLOWED_ORIGINS=",
        ),
    ],
)
def test_a_codec_server_setting_it_cannot_use_is_one_line(
    environ: dict[str, str | None], says: str
) -> None:
    given = {k: v for k, v in {**server_environ(), **environ}.items() if v is not None}
    with pytest.raises(BadSetting) as refused:
        codec_server_settings(given)
    assert says in str(refused.value)
    assert "\n" not in str(refused.value) and TOKEN not in str(refused.value)


def test_without_a_token_it_serves_on_loopback_only() -> None:
    environ = {k: v for k, v in server_environ().items() if k != "CODEC_SERVER_TOKEN"}
    assert codec_server_settings(environ).token is None
    for host in ("127.0.0.1", "[::1]", "localhost"):
        settings = codec_server_settings({**environ, "CODEC_SERVER_BIND_ADDRESS": f"{host}:1"})
        assert settings.token is None
