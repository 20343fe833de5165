"""What one caller may hold at once through the API (api/limits.py): its
open event streams, its runs in flight and its downloads, each past its
bound a 429 with Retry-After naming the setting; another caller is served
meanwhile, and a slot given back (a stream closed, a run ended, a download
gone) is free again. The API as a process with small bounds, beside a real
dev server, the service's real worker and a scripted model. docs/api.md."""

import asyncio
import hashlib
import io
import socket
import tarfile
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2 as httpx
import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from sandbox_agent_runtime.testing.api_client import (
    TOKENS,
    ApiProcess,
    api_process,
    read_events,
)
from sandbox_agent_runtime.testing.processes import WORKER, service, service_environment
from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server

pytestmark = pytest.mark.process

# Each run writes 16 MB of random bytes (through an object store: a
# directory): an archive that no socket's buffers hold whole, so a download
# whose client reads nothing stays open.
NOISE = 16_000_000
PROMPTS = [[f"head -c {NOISE} /dev/urandom > noise.bin"], ["true"]]
BOUNDS = {
    "API_STREAMS_PER_CALLER": "1",
    "API_RUNS_IN_FLIGHT_PER_CALLER": "2",
    "API_DOWNLOADS_PER_CALLER": "2",
    "API_DOWNLOADS_AT_ONCE": "3",
}


# The API process's temporary directory, where it makes the archives it sends.
API_TMP = Path(tempfile.mkdtemp(prefix="api-limits-"))


@pytest.fixture(scope="module")
async def api(
    temporal_client: Client, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ApiProcess]:
    address = temporal_client.service_client.config.target_host
    store = tmp_path_factory.mktemp("store")
    with scripted_openai_server([], prompts=PROMPTS) as model:
        environment = {
            **service_environment(address, model.url),
            "OBJECT_STORE_URL": f"file://{store}",
        }
        async with (
            service(WORKER, environment) as worker,
            api_process({**environment, **BOUNDS, "TMPDIR": str(API_TMP)}) as api,
        ):
            await worker.wait_for("Worker polling")
            yield api


async def start(client: httpx.AsyncClient, follow_ups: bool) -> str:
    started = await client.post(
        "/v1/runs", json={"prompt": "Make noise.", "follow_ups": follow_ups}
    )
    assert started.status_code == 201, started.text
    return str(started.json()["id"])


def too_many(response: httpx.Response, setting: str) -> str:
    assert response.status_code == 429, response.content[:300]
    assert response.headers["retry-after"] == "5"
    assert response.headers["content-type"] == "application/problem+json"
    detail = str(response.json()["detail"])
    assert "\n" not in detail and f"({setting}=" in detail, detail
    return detail


async def answered(client: httpx.AsyncClient, conversation: str) -> None:
    """Until the conversation has answered its first prompt, and waits."""
    for _ in range(600):
        state = (await client.get(f"/v1/runs/{conversation}")).json()["state"]
        if state in ("waiting", "released"):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{conversation} never answered")


async def listed_running(temporal_client: Client, workflow_ids: set[str]) -> None:
    """Until Temporal's visibility lists each of ``workflow_ids`` as running."""
    for _ in range(200):
        running = {
            each.id async for each in temporal_client.list_workflows("ExecutionStatus = 'Running'")
        }
        if workflow_ids <= running:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{workflow_ids - running} never listed as running")


async def test_a_caller_holds_one_stream_open_at_a_time(api: ApiProcess) -> None:
    async with api.client("alice") as alice:
        conversation = await start(alice, follow_ups=True)
        async with alice.stream("GET", f"/v1/runs/{conversation}/events") as first:
            assert first.status_code == 200
            async with alice.stream("GET", f"/v1/runs/{conversation}/events") as second:
                # Served, it would stay open as long as the conversation.
                assert second.status_code == 429
                await second.aread()
            detail = too_many(second, "API_STREAMS_PER_CALLER")
        # The first closed: the slot is free again, once the API sees it gone.
        await answered(alice, conversation)
        events = []
        for _ in range(200):
            try:
                events = await read_events(alice, conversation, most=3)
                break
            except AssertionError as e:
                assert "(API_STREAMS_PER_CALLER=1)" in str(e), e
                await asyncio.sleep(0.1)
        assert (await alice.post(f"/v1/runs/{conversation}/end")).status_code == 202

    assert detail.startswith("you have 1 event streams open, the most one caller may")
    assert len(events) == 3


async def test_a_caller_starts_no_run_past_its_runs_in_flight(
    api: ApiProcess, temporal_client: Client
) -> None:
    async with api.client("dana") as dana, api.client("bob") as bob:
        going = {await start(dana, follow_ups=True) for _ in range(2)}
        await listed_running(temporal_client, going)
        refused = await dana.post("/v1/runs", json={"prompt": "One more."})
        # Another caller is not held back by dana's runs.
        bobs = await start(bob, follow_ups=False)
        # One of dana's ends: dana may start another.
        ending = sorted(going)[0]
        await answered(dana, ending)
        assert (await dana.post(f"/v1/runs/{ending}/end")).status_code == 202
        for _ in range(200):
            description = await temporal_client.get_workflow_handle(ending).describe()
            running = {
                each.id
                async for each in temporal_client.list_workflows("ExecutionStatus = 'Running'")
            }
            if description.status != WorkflowExecutionStatus.RUNNING and ending not in running:
                break
            await asyncio.sleep(0.1)
        again = await start(dana, follow_ups=False)
        for run in going - {ending}:
            await answered(dana, run)
            await dana.post(f"/v1/runs/{run}/end")

    detail = too_many(refused, "API_RUNS_IN_FLIGHT_PER_CALLER")
    assert detail.startswith("you have 2 runs going, the most one caller may")
    assert bobs and again


def held_download(url: str, workflow_id: str, caller: str) -> socket.socket:
    """A download of the run's outputs whose client reads nothing past the
    start of the answer: the API's writes wait on it, its slot held."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    connection = socket.socket()
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    connection.settimeout(60)
    connection.connect((host, int(port)))
    connection.sendall(
        f"GET /v1/runs/{workflow_id}/outputs HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {TOKENS[caller]}\r\n\r\n".encode()
    )
    assert connection.recv(1024).startswith(b"HTTP/1.1 200 ")
    return connection


async def test_downloads_are_bounded_per_caller_and_in_all_and_streamed(
    api: ApiProcess,
) -> None:
    async with api.client("alice") as alice, api.client("bob") as bob:
        runs = {}
        for name, client in (("alice", alice), ("bob", bob)):
            runs[name] = await start(client, follow_ups=False)
            events = await read_events(client, runs[name])
            assert events[-1].data["status"] == "completed", events[-1]
        listed = events[-2].data["outputs"]
        held = [
            await asyncio.to_thread(held_download, api.url, runs["alice"], "alice"),
            await asyncio.to_thread(held_download, api.url, runs["alice"], "alice"),
        ]
        per_caller = await alice.get(f"/v1/runs/{runs['alice']}/outputs")
        # Alice's two downloads of one run send one archive, made once.
        making = sorted(path.name for path in API_TMP.iterdir())
        held.append(await asyncio.to_thread(held_download, api.url, runs["bob"], "bob"))
        in_all = await bob.get(f"/v1/runs/{runs['bob']}/outputs")
        # A client that goes gives its slot back.
        held.pop(0).close()
        for _ in range(200):
            whole = await bob.get(f"/v1/runs/{runs['bob']}/outputs")
            if whole.status_code != 429:
                break
            await asyncio.sleep(0.1)
        for connection in held:
            connection.close()
        # Every download gone, so are their archives.
        for _ in range(200):
            left = list(API_TMP.iterdir())
            if not left:
                break
            await asyncio.sleep(0.1)

    assert too_many(per_caller, "API_DOWNLOADS_PER_CALLER").startswith(
        "you have 2 downloads open, the most one caller may"
    )
    assert too_many(in_all, "API_DOWNLOADS_AT_ONCE").startswith(
        "3 downloads are open, the most this API serves at once"
    )
    assert len(making) == 1 and making[0].startswith("api-outputs-"), making
    assert left == []
    assert whole.status_code == 200, whole.content[:300]
    assert whole.headers["content-length"] == str(len(whole.content))
    with tarfile.open(fileobj=io.BytesIO(whole.content)) as tar:
        member = tar.extractfile("noise.bin")
        assert member is not None
        noise = member.read()
    assert len(noise) == NOISE
    assert [each["sha256"] for each in listed] == [hashlib.sha256(noise).hexdigest()]
