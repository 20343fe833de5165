"""What downloading a run's outputs costs the API in memory: not a test (no
``test_`` file name, so never collected), a figure to read.

    uv run pytest tests/bench_api_downloads.py -m process -p no:randomly -n 0 -s

A run writes ``SIZE`` random bytes (the object store a directory:
OBJECT_STORE_URL=file://...); then ``AT_ONCE`` clients download its outputs
at once, each reading to the end. It prints the API process's resident
memory before (VmRSS) and its peak while they ran (VmHWM, reset first
through /proc/PID/clear_refs), and the growth per download and per byte
of outputs. Nothing about the figures is checked but that every download
was whole."""

import asyncio
import sys
from pathlib import Path

import pytest
from temporalio.client import Client

from sandbox_agent_runtime.testing.api_client import api_process, read_events
from sandbox_agent_runtime.testing.processes import WORKER, service, service_environment
from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(sys.platform != "linux", reason="reads the API's memory from /proc"),
]

SIZE = 30_000_000
AT_ONCE = 8


def memory(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) << 10
    raise AssertionError(f"no {field} in /proc/{pid}/status")


async def test_what_downloads_cost_the_api(temporal_client: Client, tmp_path: Path) -> None:
    address = temporal_client.service_client.config.target_host
    store = tmp_path / "store"
    store.mkdir()
    with scripted_openai_server([f"head -c {SIZE} /dev/urandom > big.bin"]) as model:
        environment = {
            **service_environment(address, model.url),
            "OBJECT_STORE_URL": f"file://{store}",
            "API_DOWNLOADS_PER_CALLER": str(AT_ONCE),
            "API_DOWNLOADS_AT_ONCE": str(AT_ONCE),
        }
        async with (
            service(WORKER, environment) as worker,
            api_process(environment) as api,
            api.client() as client,
        ):
            await worker.wait_for("Worker polling")
            started = await client.post("/v1/runs", json={"prompt": "Make a big file."})
            workflow_id = started.json()["id"]
            events = await read_events(client, workflow_id)
            assert events[-1].data["status"] == "completed", events[-1]
            # One download first: the one-off costs of the route are not counted.
            assert (await client.get(f"/v1/runs/{workflow_id}/outputs")).status_code == 200
            pid = api.process.process.pid
            before = memory(pid, "VmRSS")
            Path(f"/proc/{pid}/clear_refs").write_text("5")
            answers = await asyncio.gather(
                *(client.get(f"/v1/runs/{workflow_id}/outputs") for _ in range(AT_ONCE))
            )
            peak = memory(pid, "VmHWM")
    assert {answer.status_code for answer in answers} == {200}
    size = len(answers[0].content)
    # Each archive a little over SIZE (its gzip header's time differs).
    assert all(len(answer.content) > SIZE for answer in answers)
    growth = peak - before
    print(
        f"\n{AT_ONCE} downloads at once of a {size / 1e6:.1f} MB archive: the API's memory "
        f"{before / 1e6:.0f} MB before, {peak / 1e6:.0f} MB at its peak: "
        f"{growth / 1e6:.0f} MB more, {growth / AT_ONCE / 1e6:.1f} MB a download "
        f"({growth / AT_ONCE / size:.2f} x the archive)"
    )
