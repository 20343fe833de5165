"""Payloads too large for history go to the object store (OBJECT_STORE_URL), named by their run, and come back whole.

Both kinds of store, for real: a directory (``file://``) and an S3 API
(``s3://``: moto's server mode on loopback, the testing plugin's ``s3_service``),
with a real dev server and a real worker. A workflow whose input, activity
input and result and result each weigh megabytes runs through them: every
one of those payloads is in the store under the run's workflow id and run
id, history holds only references (no payload of STORE_THRESHOLD bytes or
more), and what comes back matches its checksum. A URL the service cannot use,
or a store that does not answer, stops the worker (status 1) and the starter
(status 2, or 3 for a bad URL) with one line, before either does anything.
"""

import asyncio
import hashlib
import io
import json
import os
import stat
import subprocess
import tarfile
import uuid
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote

import aioboto3
import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.worker import Worker

from sandbox_agent_runtime import archives
from sandbox_agent_runtime.display import without_credentials, without_secrets
from sandbox_agent_runtime.object_store import (
    LARGEST_PAYLOAD,
    DirectoryObjects,
    ObjectStore,
    ObjectStoreUnreachable,
    check_reachable,
    data_converter,
    external_storage,
    parse,
    worker_storage,
)
from sandbox_agent_runtime.run_request import RunAnswer, RunRequest
from sandbox_agent_runtime.settings import BadSetting, starter_settings
from sandbox_agent_runtime.shared import STORE_THRESHOLD, STORED_FILES_LIMIT
from sandbox_agent_runtime.starter import EXIT_UNREACHABLE, EXIT_USAGE
from sandbox_agent_runtime.testing.long_workflow import LongSandboxAgentWorkflow, start_long
from sandbox_agent_runtime.testing.object_stores import client_with, objects_in, payloads_in
from sandbox_agent_runtime.testing.plugin import BUCKET
from sandbox_agent_runtime.testing.processes import STARTER, WORKER, service, service_environment
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server
from sandbox_agent_runtime.testing.stored_payloads import StoredPayloadsWorkflow, transform
from sandbox_agent_runtime.testing.support import (
    CREDENTIALS,
    closed_address,
    running_worker,
    runs_of_chain,
    settings_with,
    started_id,
)

INPUT_SIZE = 5_000_000


@pytest.fixture(params=["file", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    """A store of each kind, empty: a directory not made yet, or a prefix of
    the tests' bucket of its own."""
    if request.param == "file":
        return parse(f"file://{tmp_path}/object-store")
    request.getfixturevalue("s3_service")
    return parse(f"s3://{BUCKET}/test-{uuid.uuid4().hex[:8]}/runs", region="us-east-1")


async def test_payloads_over_the_threshold_go_to_the_store_by_run_and_come_back_whole(
    temporal_client: Client, store: ObjectStore, tmp_path: Path
) -> None:
    data = os.urandom(INPUT_SIZE)
    (tmp_path / "data.bin").write_bytes(data)
    given = archives.pack_input(tmp_path / "data.bin")
    request = RunRequest(prompt="Transform it.", inputs=[given])
    task_queue = f"stored-payloads-{uuid.uuid4()}"
    workflow_id = f"stored payloads/{uuid.uuid4()}"

    # The worker holds one client of the store for as long as it runs; the
    # starter's side opens one for each call, as the starter does.
    await check_reachable(store)
    async with worker_storage(store) as storage:
        worker_client = client_with(temporal_client, data_converter(storage))
        starter_client = client_with(temporal_client, data_converter(external_storage(store)))
        async with Worker(
            worker_client,
            task_queue=task_queue,
            workflows=[StoredPayloadsWorkflow],
            activities=[transform],
        ):
            handle = await starter_client.start_workflow(
                StoredPayloadsWorkflow.run,
                request,
                id=workflow_id,
                task_queue=task_queue,
                execution_timeout=timedelta(seconds=60),
            )
            answer = await handle.result()

    # Whole on the way in (the workflow and its activity checked the
    # archive's digest) and on the way out.
    assert isinstance(answer, RunAnswer)
    assert answer.answer == given.sha256
    [made] = answer.outputs.files
    with tarfile.open(fileobj=io.BytesIO(archives.decoded(answer.outputs.archive))) as tar:
        member = tar.extractfile("made.bin")
        assert member is not None
        assert hashlib.sha256(member.read()).hexdigest() == made.sha256

    # History holds references only: the workflow's input and result, the
    # activity's input and result, each a small payload.
    history = await handle.fetch_history()
    payloads = [payload for event in history.events for payload in payloads_in(event)]
    assert max(payload.ByteSize() for payload in payloads) < STORE_THRESHOLD
    references = [payload for payload in payloads if payload.external_payloads]
    assert len(references) == 4
    assert all(ref.external_payloads[0].size_bytes > INPUT_SIZE for ref in references)
    assert given.archive[:10_000] not in history.to_json()

    # Each of them is in the store, under the run's workflow id (the
    # starter's, before the run had an id, under "null") and its digest.
    objects = await objects_in(store)
    assert len(objects) == 4, sorted(objects)
    run_id = handle.result_run_id
    prefix = f"{store.prefix}/" if store.prefix else ""
    runs = set()
    for key, stored in objects.items():
        head = f"{prefix}v0/ns/default/wt/StoredPayloadsWorkflow/wi/{key_segment(workflow_id)}/"
        assert key.startswith(head), key
        run, _, digest = key.rpartition("/ri/")[2].partition("/d/sha256/")
        runs.add(run)
        assert hashlib.sha256(stored).hexdigest() == digest
    assert runs == {"null", run_id}
    # The one the starter stored is the request, whole.
    [(key, started)] = [(key, stored) for key, stored in objects.items() if "/ri/null/" in key]
    payload = Payload()
    payload.ParseFromString(started)
    assert json.loads(payload.data)["inputs"][0]["sha256"] == given.sha256


@pytest.mark.process
async def test_a_5_mb_input_and_a_5_mb_output_go_through_the_store_with_the_commands(
    temporal_client: Client, store: ObjectStore, tmp_path: Path
) -> None:
    data = os.urandom(INPUT_SIZE)
    (tmp_path / "data.bin").write_bytes(data)
    out = tmp_path / "out"
    address = temporal_client.service_client.config.target_host
    make = "sha256sum data.bin > sum.txt && head -c 5000000 /dev/urandom > made.bin"
    with scripted_openai_server([make]) as model:
        # The AWS variables of s3_service are this process's: both commands get them.
        environment = {**service_environment(address, model.url), "OBJECT_STORE_URL": store.url}
        async with service(WORKER, environment) as worker:
            await worker.wait_for("Worker polling")
            ask = ["--input", str(tmp_path / "data.bin"), "--output", str(out), "Sum it."]
            async with service([*STARTER, *ask], environment) as starter:
                status = await starter.exit_status()
            assert status == 0, starter.output
            # The starter's run is a conversation: ended, it closes with its answer.
            workflow_id = started_id("\n".join(starter.output))
            async with service([*STARTER, "--end", workflow_id], environment) as ending:
                assert await ending.exit_status() == 0, ending.output
    assert (out / "sum.txt").read_text().split()[0] == hashlib.sha256(data).hexdigest()
    assert (out / "made.bin").stat().st_size == 5_000_000

    # Every run of the chain recorded references, no large payload.
    payloads = [
        payload
        async for event in temporal_client.get_workflow_handle(workflow_id).fetch_history_events()
        for payload in payloads_in(event)
    ]
    assert max(payload.ByteSize() for payload in payloads) < STORE_THRESHOLD
    # In: the request, the inputs placed; out: the outputs, the answer.
    assert len([payload for payload in payloads if payload.external_payloads]) >= 4
    objects = await objects_in(store)
    assert len(objects) >= 4
    # The run's payloads only: its workspace snapshots (one after placing the
    # input, one at the answer) were deleted, the first by the second, the
    # second when the conversation ended.
    assert all(f"/wi/{key_segment(workflow_id)}/ri/" in key for key in objects), sorted(objects)


@pytest.mark.long
async def test_a_300_step_chain_keeps_every_large_payload_in_the_store(
    temporal_client: Client, tmp_path: Path
) -> None:
    """The 300-step chain of tests/test_long_runs.py with a
    store: each model call carries the whole conversation (hundreds of kB),
    and none of them, nor any other payload, is in history: each run's
    history holds references alone past STORE_THRESHOLD, and the answer
    comes back whole. (Its histories with and without the store, side by
    side: the template's benchmarks/project/long_runs.py.)"""
    store = parse(f"file://{tmp_path}/objects")
    commands = ["echo written-at-step-1 > first.txt", *["seq 1 400"] * 298, "cat first.txt"]
    async with worker_storage(store) as storage:
        client = client_with(temporal_client, data_converter(storage))
        async with running_worker(
            client,
            ScriptedModel(commands),
            workflows=[LongSandboxAgentWorkflow],
            time_limit=timedelta(minutes=8),
        ) as (plugged, _):
            handle = await start_long(plugged, "Run the 300 commands.")
            answer = (await handle.result()).answer
            assert handle.first_execution_run_id is not None
            runs = await runs_of_chain(plugged, handle.id, handle.first_execution_run_id)
    assert "written-at-step-1" in answer
    payloads = [
        payload for run in runs for event in run.history.events for payload in payloads_in(event)
    ]
    assert max(payload.ByteSize() for payload in payloads) < STORE_THRESHOLD
    stored = [payload for payload in payloads if payload.external_payloads]
    # The conversation passes the threshold at about the 110th step: from
    # then on, every model call's input is a reference.
    assert len(stored) > 150, len(stored)
    assert max(ref.external_payloads[0].size_bytes for ref in stored) > 2 * STORE_THRESHOLD


def key_segment(text: str) -> str:
    """``text`` as the S3 driver writes it into a key (percent-encoded)."""
    return "".join(
        c if c.isascii() and (c.isalnum() or c in "!-_.*'()") else quote(c, safe="") for c in text
    )


def test_the_largest_payload_the_store_takes_holds_a_run_s_files() -> None:
    # The files' tar archive in base64, and room for its headers.
    assert LARGEST_PAYLOAD > STORED_FILES_LIMIT * 4 // 3 + 1_000_000


@pytest.mark.parametrize(
    "key", ["v0/../escape", "../escape", "/etc/passwd", "v0//d", "v0/./d", "v0/d/", "v0/\0"]
)
def test_a_key_that_would_leave_the_directory_is_refused(tmp_path: Path, key: str) -> None:
    with pytest.raises(ValueError, match="would leave the store's directory"):
        DirectoryObjects(tmp_path).path(key)


async def test_the_directory_writes_objects_whole_and_keeps_long_names_inside(
    tmp_path: Path,
) -> None:
    objects = DirectoryObjects(tmp_path / "store")
    long_id = "w" * 400
    key = f"v0/ns/default/wi/{long_id}/d/sha256/abc"
    assert not await objects.object_exists(bucket="directory", key=key)
    await objects.put_object(bucket="directory", key=key, data=b"payload")
    await objects.put_object(bucket="directory", key=key, data=b"payload")
    assert await objects.object_exists(bucket="directory", key=key)
    assert await objects.get_object(bucket="directory", key=key) == b"payload"
    # One file, no temporary file beside it, every name short enough.
    [written] = [path for path in (tmp_path / "store").rglob("*") if path.is_file()]
    assert written == objects.path(key)
    assert all(len(part) <= 255 for part in written.parts)
    assert written.is_relative_to(tmp_path / "store")


async def test_what_the_directory_makes_takes_its_permissions(tmp_path: Path) -> None:
    # Shared by two users (the worker's container, the starter on the host):
    # a directory everyone may write, and so is everything in it.
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    key = "v0/ns/default/wi/run/d/sha256/abc"
    await DirectoryObjects(shared).put_object(bucket="directory", key=key, data=b"x")
    path = DirectoryObjects(shared).path(key)
    assert {stat.S_IMODE(p.stat().st_mode) for p in path.parents if shared in p.parents} == {0o777}
    assert stat.S_IMODE(path.stat().st_mode) == 0o666


async def test_a_reachable_store_is_checked_without_leaving_anything(
    store: ObjectStore,
) -> None:
    await check_reachable(store)

    assert await objects_in(store) == {}
    if store.directory is not None:
        # Made when missing, and left empty.
        assert store.directory.is_dir()
        assert list(store.directory.iterdir()) == []


def unreachable(store: ObjectStore) -> str:
    """The one line check_reachable() fails with for ``store``."""
    with pytest.raises(ObjectStoreUnreachable) as failed:
        asyncio.run(check_reachable(store))
    line = str(failed.value)
    assert "\n" not in line and line.startswith(
        f"Cannot use the object store OBJECT_STORE_URL={store.url!r}: "
    ), line
    return line


def test_a_directory_that_cannot_be_written_is_unreachable(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    for directory in (blocker, blocker / "store"):
        line = unreachable(parse(f"file://{directory}"))
        assert f"{directory} is not a directory this process can write" in line
    assert [path.name for path in tmp_path.iterdir()] == ["a-file"]
    if os.geteuid() != 0:  # root writes any directory
        read_only = tmp_path / "read-only"
        read_only.mkdir(mode=0o500)
        assert "(Permission denied)" in unreachable(parse(f"file://{read_only}"))
        assert list(read_only.iterdir()) == []


def test_a_bucket_that_does_not_answer_or_does_not_exist_is_unreachable(
    s3_service: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = unreachable(parse("s3://no-such-bucket/runs", region="us-east-1"))
    assert (
        f"the bucket 'no-such-bucket' does not exist at {s3_service['AWS_ENDPOINT_URL']}" in missing
    )

    nowhere = f"http://{closed_address()}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", nowhere)
    line = unreachable(parse(f"s3://{BUCKET}/runs", region="us-east-1"))
    assert f"no S3 API answers at {nowhere}" in line
    assert "AWS_ENDPOINT_URL" in line


# Values of OBJECT_STORE_URL the service cannot use, and a part of what it says.
BAD_URLS = {
    "": "it is empty",
    "²": "not a URL",
    "relative/store": "not a URL",
    "/var/store": "not a URL",
    "file://host/store": "names no host",
    "file:///": "other than /",
    "file:///srv/../etc": "no '.' or '..'",
    "s3://": "names no bucket",
    "s3://No_Such": "a bucket's name is 3 to 63",
    "s3://bucket-a/x/../y": "a prefix is at most",
    "s3://bucket-a?versionId=3": "a query or a fragment",
    "s3://key:secret@bucket-a": "go in the AWS variables",
    "s3://key:secret/bucket-a": "go in the AWS variables",
    "s3://bucket-a:9000/runs": "go in the AWS variables",
    "gs://bucket-a": "gs:// is not a kind of store",
    "https://s3.amazonaws.com/bucket-a": "https:// is not a kind of store",
}


@pytest.mark.parametrize(("value", "why"), BAD_URLS.items())
def test_a_bad_url_is_refused_in_one_line_naming_it(value: str, why: str) -> None:
    for settings in (settings_with, starter_settings):
        with pytest.raises(BadSetting) as refused:
            settings({"OBJECT_STORE_URL": value})
        line = str(refused.value)
        assert "\n" not in line and len(line) < 500, line
        # Named with what may be a credential masked (the key, a query).
        shown = without_credentials(value)
        assert line.startswith(f"OBJECT_STORE_URL={shown!r} is not allowed: use file:///"), line
        assert "secret" not in line and "versionId" not in line, line
        assert "s3://bucket/prefix" in line and why in line, line


@pytest.mark.parametrize(
    ("environ", "parsed"),
    [
        ({}, None),
        (
            {"OBJECT_STORE_URL": " file:///srv/agent%20store "},
            ObjectStore("file:///srv/agent%20store", "file", directory=Path("/srv/agent store")),
        ),
        (
            {"OBJECT_STORE_URL": "s3://my.bucket-1", "AWS_DEFAULT_REGION": "eu-west-3"},
            ObjectStore("s3://my.bucket-1", "s3", bucket="my.bucket-1", region="eu-west-3"),
        ),
        (
            {
                "OBJECT_STORE_URL": "s3://bucket-a/agents/prod/",
                "AWS_REGION": "auto",
                "AWS_DEFAULT_REGION": "eu-west-3",
            },
            ObjectStore(
                "s3://bucket-a/agents/prod/",
                "s3",
                bucket="bucket-a",
                prefix="agents/prod",
                region="auto",
            ),
        ),
    ],
)
def test_a_good_url_is_taken_by_the_worker_and_the_starter(
    environ: dict[str, str], parsed: ObjectStore | None
) -> None:
    assert settings_with(environ).object_store == parsed
    assert starter_settings(environ).object_store == parsed


# ------------------------------------------------------- the real commands


def run_command(
    command: list[str], environment: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, env=environment, capture_output=True, text=True, timeout=120)


def one_line(ran: subprocess.CompletedProcess[str]) -> str:
    """The one line a command that could not start printed, and nothing else."""
    assert "Traceback" not in ran.stderr, ran.stderr
    assert ran.stdout == "", ran.stdout
    [line] = ran.stderr.splitlines()
    return line


@pytest.mark.process
@pytest.mark.parametrize("value", ["relative/store", "s3://", "gs://bucket-a"])
def test_the_commands_refuse_a_bad_url_with_one_line_and_their_status(value: str) -> None:
    environment = {
        **service_environment(closed_address(), "http://127.0.0.1:1"),
        **CREDENTIALS,
        "OBJECT_STORE_URL": value,
    }
    worker = run_command(WORKER, environment)
    assert worker.returncode == 1, worker
    assert one_line(worker).startswith(f"OBJECT_STORE_URL={value!r} is not allowed: use ")

    starter = run_command([*STARTER, "Say hello."], environment)
    assert starter.returncode == EXIT_USAGE, starter
    assert one_line(starter).startswith(f"ERROR: OBJECT_STORE_URL={value!r} is not allowed: ")


@pytest.mark.process
async def test_an_unreachable_store_stops_the_commands_with_one_line_leaving_nothing(
    temporal_client: Client, s3_service: dict[str, str], tmp_path: Path
) -> None:
    # Temporal answers: a command that went past the store would start a
    # run (the starter) or poll for ever (the worker).
    environment = {
        **service_environment(temporal_client.service_client.config.target_host, "http://x:1"),
        **CREDENTIALS,
        **s3_service,
    }
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    nowhere = f"http://{closed_address()}"
    cases = [
        ({"OBJECT_STORE_URL": f"file://{blocker}/store"}, "is not a directory this process"),
        ({"OBJECT_STORE_URL": "s3://no-such-bucket/runs"}, "the bucket 'no-such-bucket' does"),
        (
            {"OBJECT_STORE_URL": f"s3://{BUCKET}/runs", "AWS_ENDPOINT_URL": nowhere},
            f"no S3 API answers at {nowhere}",
        ),
    ]
    runs_before = (await temporal_client.count_workflows()).count
    for setting, why in cases:
        value = setting["OBJECT_STORE_URL"]
        expected = f"Cannot use the object store OBJECT_STORE_URL={value!r}: "
        worker = await asyncio.to_thread(run_command, WORKER, {**environment, **setting})
        assert worker.returncode == 1, worker
        line = one_line(worker)
        assert line.startswith(expected) and why in line, line

        starter = await asyncio.to_thread(
            run_command, [*STARTER, "Say hello."], {**environment, **setting}
        )
        assert starter.returncode == EXIT_UNREACHABLE, starter
        line = one_line(starter)
        assert line.startswith(expected) and why in line, line

    # No run started, no directory made, no bucket made.
    assert (await temporal_client.count_workflows()).count == runs_before
    assert [path.name for path in tmp_path.iterdir()] == ["a-file"]
    async with aioboto3.Session().client("s3") as s3:
        assert [bucket["Name"] for bucket in (await s3.list_buckets())["Buckets"]] == [BUCKET]


# A credential pasted where it does not go, and the part of it that is secret.
SECRET = "TopSecret42"
KEY = "AKIAEXAMPLEKEY"


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (f"s3://{KEY}:{SECRET}@bucket-a/x", "s3://***@bucket-a/x"),
        (f"s3://{KEY}:{SECRET}/bucket-a", "s3://***/bucket-a"),
        (f"{KEY}:{SECRET}@127.0.0.1:7233", "***@127.0.0.1:7233"),
        ("https://host/path?X-Amz-Signature=abc", "https://host/path?***"),
        # No credential: shown as it is.
        ("http://127.0.0.1:9000/x", "http://127.0.0.1:9000/x"),
        ("http://[::1]:9000/x", "http://[::1]:9000/x"),
        ("localhost:7233", "localhost:7233"),
        # A port out of range is what the line refusing it must show.
        ("http://x:99999999999999999999", "http://x:99999999999999999999"),
    ],
)
def test_a_setting_is_shown_with_what_may_be_a_credential_masked(value: str, shown: str) -> None:
    assert without_credentials(value) == shown


def test_an_sdks_message_is_shown_without_the_credentials_it_repeats() -> None:
    endpoint = f"http://{KEY}:Top%2F{SECRET}@127.0.0.1:9"
    said = (
        f"Custom endpoint `{endpoint}` was not a valid URI; the key {KEY}, the secret "
        f"Top/{SECRET} decoded; another URL's credentials: ftp://user:pw@host/x"
    )
    assert without_secrets(said, endpoint) == (
        "Custom endpoint `http://***@127.0.0.1:9` was not a valid URI; the key ***, the secret "
        "*** decoded; another URL's credentials: ftp://***@host/x"
    )


@pytest.mark.process
def test_credentials_in_the_store_s_settings_are_never_printed_by_the_commands(
    s3_service: dict[str, str],
) -> None:
    # Every line is one the commands print before they reach Temporal (or
    # any network: an endpoint with a port that is none, or no scheme).
    environment = {
        **service_environment(closed_address(), "http://127.0.0.1:1"),
        **CREDENTIALS,
        **s3_service,
    }
    moto = s3_service["AWS_ENDPOINT_URL"].removeprefix("http://")
    store = f"Cannot use the object store OBJECT_STORE_URL='s3://{BUCKET}/runs': "
    cases = [
        (
            # No '@': KEY:SECRET reads as a host and a port.
            {"OBJECT_STORE_URL": f"s3://{KEY}:{SECRET}/{BUCKET}"},
            f"OBJECT_STORE_URL='s3://***/{BUCKET}' is not allowed: use ",
            "(credentials and the endpoint go in the AWS variables, not the URL: "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), AWS_ENDPOINT_URL).",
        ),
        (
            # botocore repeats the endpoint it was given in its message.
            {
                "OBJECT_STORE_URL": f"s3://{BUCKET}/runs",
                "AWS_ENDPOINT_URL": f"http://{KEY}:{SECRET}@127.0.0.1:99999",
            },
            f"{store}no S3 API answers at http://***@127.0.0.1:99999 (Custom endpoint ",
            "`http://***@127.0.0.1:99999` was not a valid URI). Check AWS_ENDPOINT_URL and the "
            "network.",
        ),
        (
            # ... and in the ValueError it raises for an endpoint without a scheme.
            {
                "OBJECT_STORE_URL": f"s3://{BUCKET}/runs",
                "AWS_ENDPOINT_URL": f"{KEY}:{SECRET}@127.0.0.1:1",
            },
            f"{store}the AWS SDK refused its settings (Invalid endpoint: ***@127.0.0.1:1). ",
            "Set AWS_ENDPOINT_URL to the store's URL (https://host:port) or unset it, and "
            "AWS_REGION to a region.",
        ),
        (
            # The S3 API on loopback, reached with credentials in its URL.
            {
                "OBJECT_STORE_URL": f"s3://{BUCKET}/runs",
                "AWS_ENDPOINT_URL": f"http://{KEY}:{SECRET}@{moto}",
            },
            f"{store}no S3 API answers at http://***@{moto} (",
            "Check AWS_ENDPOINT_URL and the network.",
        ),
    ]
    for setting, starts, ends in cases:
        # The starter: a URL it refuses is bad usage; a store it cannot use, unreachable.
        refused = "AWS_ENDPOINT_URL" not in setting
        starter_status = EXIT_USAGE if refused else EXIT_UNREACHABLE
        for command, status in ((WORKER, 1), ([*STARTER, "Say hello."], starter_status)):
            ran = run_command(command, {**environment, **setting})
            printed = ran.stdout + ran.stderr
            assert SECRET not in printed and KEY not in printed, printed
            assert ran.returncode == status, ran
            line = one_line(ran).removeprefix("ERROR: ")
            assert line.startswith(starts) and line.endswith(ends), line
