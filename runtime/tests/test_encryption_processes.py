"""With PAYLOAD_ENCRYPTION_KEYS set, what a run carries is ciphertext in
Temporal: the real worker and starter processes, the history read raw with
the Temporal CLI (``temporal workflow show -o json``, no codec) and through
the real codec server process (``--codec-endpoint``); and keys rotated
under a conversation in flight (encryption.py, codec_server.py).
"""

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from sandbox_agent_runtime.testing.object_stores import payloads_in
from sandbox_agent_runtime.testing.processes import (
    CODEC_SERVER,
    STARTER,
    WORKER,
    Service,
    service,
    service_environment,
)
from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server
from sandbox_agent_runtime.testing.support import free_address, started_id

from .test_encryption import TOKEN, A, B

# What the run sees, none of which may be in its raw history.
PROMPT_MARK = "prompt-mark-7f3e9"
SECRET = "sk-secret-value-4f9a2c"
FILE_TEXT = "contents-of-the-input-4b1d"
COMMAND = "cat data.txt && echo made-by-the-agent-91c2 | tee made.txt"
OUTPUT_TEXT = "made-by-the-agent-91c2"


async def show(client: Client, workflow_id: str, *codec: str) -> str:
    """The run's history as the Temporal CLI prints it (JSON), through the
    codec server when ``codec`` gives its endpoint and auth."""
    temporal = shutil.which("temporal")
    assert temporal is not None
    process = await asyncio.create_subprocess_exec(
        *[temporal, "workflow", "show", "--output", "json", "--workflow-id", workflow_id],
        *["--namespace", client.namespace, "--address", client.service_client.config.target_host],
        *codec,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    output, errors = await process.communicate()
    assert process.returncode == 0, errors.decode()
    return output.decode()


async def exit_watching(starter: Service, client: Client) -> int:
    """The starter's exit status; meanwhile its run's history is read raw,
    and a payload in plain text or a workflow task that failed (a worker
    that cannot decrypt) fails the test at once, saying which."""
    await starter.wait_for("Started workflow")
    handle = client.get_workflow_handle(started_id("\n".join(starter.output)))
    while True:
        async for event in handle.fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                failure = event.workflow_task_failed_event_attributes.failure.message
                raise AssertionError(f"a workflow task failed: {failure}")
            for payload in payloads_in(event):
                assert PROMPT_MARK.encode() not in payload.data, f"in plain text: {event}"
        if starter.process.returncode is not None:
            return await starter.exit_status()
        await asyncio.sleep(0.5)


def decoded_texts(history: str) -> str:
    """Every payload's data in a history printed as JSON, decoded from
    base64: what a reader of the history sees of it, all in one text."""
    import base64

    texts = []

    def walk(value: object) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("data"), str) and "metadata" in value:
                texts.append(base64.b64decode(value["data"]).decode(errors="replace"))
            for each in value.values():
                walk(each)
        elif isinstance(value, list):
            for each in value:
                walk(each)

    walk(json.loads(history))
    return "\n".join(texts)


@pytest.mark.process
async def test_with_keys_a_run_s_history_holds_none_of_what_it_saw(
    temporal_client: Client, tmp_path: Path
) -> None:
    (tmp_path / "data.txt").write_text(f"{FILE_TEXT}\nAPI_KEY={SECRET}\n")
    address = temporal_client.service_client.config.target_host
    with scripted_openai_server([COMMAND]) as model:
        environment = {
            **service_environment(address, model.url),
            "PAYLOAD_ENCRYPTION_KEYS": A,
            "TEMPORAL_NAMESPACE": temporal_client.namespace,
        }
        async with service(WORKER, environment) as worker:
            await worker.wait_for("Worker polling")
            ask = ["--input", str(tmp_path / "data.txt"), f"Read data.txt. {PROMPT_MARK}"]
            async with service([*STARTER, *ask], environment) as starter:
                assert await exit_watching(starter, temporal_client) == 0, starter.output
            printed = "\n".join(starter.output)
            workflow_id = started_id(printed)
            assert "Answer:" in printed and "Usage:" in printed
            assert SECRET in printed  # the answer, decrypted by the starter

            raw = await show(temporal_client, workflow_id)
            seen = raw + decoded_texts(raw)
            for text in (PROMPT_MARK, SECRET, FILE_TEXT, "cat data.txt", OUTPUT_TEXT):
                assert text not in seen, f"{text!r} is in the raw history"
            assert '"encryption-key-id"' in raw or "ZW5jcnlwdGlvbi1rZXktaWQ" in raw

            codec_address = free_address()
            codec_environment = {
                **environment,
                "CODEC_SERVER_BIND_ADDRESS": codec_address,
                "CODEC_SERVER_TOKEN": TOKEN,
            }
            async with service(CODEC_SERVER, codec_environment) as codec_server:
                await codec_server.wait_for("Codec server on")
                endpoint = ["--codec-endpoint", f"http://{codec_address}"]
                shown = await show(
                    temporal_client, workflow_id, *endpoint, "--codec-auth", f"Bearer {TOKEN}"
                )
                decoded = shown + decoded_texts(shown)
                for text in (PROMPT_MARK, SECRET, FILE_TEXT, "cat data.txt", OUTPUT_TEXT):
                    assert text in decoded, f"{text!r} is not decoded"
                # Every payload decoded: none left encrypted.
                assert "binary/encrypted" not in decoded
                # Without the token, the CLI gets nothing decoded.
                process = await asyncio.create_subprocess_exec(
                    *[str(shutil.which("temporal")), "workflow", "show", "-o", "json"],
                    *["--workflow-id", workflow_id, "--address", address, *endpoint],
                    *["--namespace", temporal_client.namespace],
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                )
                output, _ = await process.communicate()
                assert PROMPT_MARK not in output.decode() + decoded_texts(output.decode() or "{}")


@pytest.mark.process
async def test_keys_rotated_under_a_conversation_and_a_process_without_the_old_key(
    temporal_client: Client, tmp_path: Path
) -> None:
    address = temporal_client.service_client.config.target_host
    with scripted_openai_server(["echo first > one.txt", "cat one.txt"]) as model:
        base = {
            **service_environment(address, model.url),
            "TEMPORAL_NAMESPACE": temporal_client.namespace,
        }
        under_a = {**base, "PAYLOAD_ENCRYPTION_KEYS": A}
        rotated = {**base, "PAYLOAD_ENCRYPTION_KEYS": f"{B},{A}"}
        only_b = {**base, "PAYLOAD_ENCRYPTION_KEYS": B}
        async with service(WORKER, under_a) as worker:
            await worker.wait_for("Worker polling")
            async with service([*STARTER, "Write one.txt."], under_a) as starter:
                assert await starter.exit_status() == 0, starter.output
        workflow_id = started_id("\n".join(starter.output))
        # The worker and the starter get B first, A after: the conversation
        # started under A goes on, its follow-up written under B.
        async with service(WORKER, rotated) as worker:
            await worker.wait_for("Worker polling")
            follow_up = [*STARTER, "--continue", workflow_id, "Read one.txt."]
            async with service(follow_up, rotated) as starter:
                assert await starter.exit_status() == 0, starter.output
            assert "first" in "\n".join(starter.output)
            async with service([*STARTER, "--end", workflow_id], rotated) as ending:
                assert await ending.exit_status() == 0, ending.output
        raw = await show(temporal_client, workflow_id)
        assert '"QQ=="' in raw and '"Qg=="' in raw  # key ids A and B, in base64
        # A process holding only B cannot read what A encrypted: one line.
        for _ in range(3):
            async with service([*STARTER, "--attach", workflow_id], only_b) as attach:
                status = await attach.exit_status()
            errors = [line for line in attach.output if line.startswith("ERROR")]
            assert status == 5, attach.output
            assert len(errors) == 1 and "the key 'A'" in errors[0], attach.output
            assert not any("Traceback" in line for line in attach.output), attach.output
