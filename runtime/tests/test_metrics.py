"""What operators see: the worker's /metrics, each run's usage, its traces.

The worker here runs on a Temporal runtime that serves /metrics on a free
port, as ``PROMETHEUS_BIND_ADDRESS`` makes the real one do; the tests scrape
that endpoint and read it with Prometheus's own parser. The worker keeps no
run in its cache, so it replays each run from its start at every step: a
counter that replay moved would show more than the scripted model reported.

It runs against both stand-ins (conftest.py): the default one (the local
backend: its sandbox operations counted for the worker's host, every turn
traced) and the remote one (a Daytona sandbox, counted for "any" host, with
approvals: each command approved without a query, which would replay a run
and count again, and the turns after an approval not traced).
"""

from typing import Any

import pytest
from agents import set_trace_processors
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client
from temporalio.openai_agents.testing import TestModelProvider
from temporalio.runtime import Runtime
from temporalio.worker import Replayer

from sandbox_agent_runtime.backends import sandbox_backends
from sandbox_agent_runtime.observability import (
    INPUT_TOKENS,
    MODEL_CALLS,
    OUTPUT_TOKENS,
    RUNS,
    SANDBOX_OPERATIONS,
    TOKENS_ONLY,
    metrics_runtime,
    trace_to,
)
from sandbox_agent_runtime.shared import USAGE_MEMO
from sandbox_agent_runtime.starter import start, usage_line
from sandbox_agent_runtime.testing import project, project_service
from sandbox_agent_runtime.testing.long_workflow import LongSandboxAgentWorkflow, start_long
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
from sandbox_agent_runtime.testing.support import (
    SETTINGS,
    activities,
    approve_as_they_wait,
    free_address,
    local_activities_in,
    metered_client,
    running_worker,
    runs_of_chain,
    sandboxes_for_tests,
    with_plugins,
)
from sandbox_agent_runtime.worker import agents_plugin, build_worker

# About 60 kB of output a step: a run's history passes the budget in a dozen.
BIG_STEP = "head -c 60000 /dev/zero | tr '\\0' x"


def agent_name() -> str:
    """The name of the project's agent, which its span carries (the project's
    name): the runtime's workflow takes the agent of each run from its
    ``agent()`` (the project's agent.py). The instance is made without its
    ``__init__``, which opens the run's stream: that needs a workflow's
    event loop, and ``agent()`` needs nothing of it."""
    workflow = project().workflow
    name: str = object.__new__(workflow).agent().name
    return name


@pytest.mark.long  # every step replayed, then the whole run again
async def test_the_worker_counts_model_calls_tokens_runs_and_sandbox_operations_once(
    temporal_client: Client,
) -> None:
    model = ScriptedModel(["echo one", "echo two"])
    service = project_service()
    # (A service without approvals has none to approve, and ignores approve.)
    async with (
        metered_client(temporal_client) as (client, metrics),
        running_worker(client, model, max_cached_workflows=0, host="host-a", approve=False) as (
            plugged,
            _,
        ),
    ):
        handle = await start(plugged, "Say one, then two.")
        if service.approvals:
            # Approved without a query (see approve_as_they_wait).
            await approve_as_they_wait(handle, ["echo one", "echo two"])
        await handle.result()
        history = await handle.fetch_history()

        # Temporal's own metrics are served alongside the service's.
        assert await metrics.total("temporal_workflow_completed") == 1
        # What the scripted model reported, counted once.
        assert await metrics.total(MODEL_CALLS) == len(model.reported) == 3
        assert await metrics.total(INPUT_TOKENS) == sum(u.input_tokens for u in model.reported)
        assert await metrics.total(OUTPUT_TOKENS) == sum(u.output_tokens for u in model.reported)
        assert await metrics.total(RUNS, outcome="completed") == 1
        # One per sandbox activity, by provider, outcome and the host the
        # sandbox lives on: the worker's, or "any" for one any worker reaches.
        sandbox_steps = [step for step in await activities(handle) if step.is_sandbox_operation]
        provider = service.sandbox_provider
        host = "host-a" if sandbox_backends()[provider].host_bound(SETTINGS) else "any"
        counted = await metrics.total(
            SANDBOX_OPERATIONS, provider=provider, outcome="ok", host=host
        )
        assert counted == len(sandbox_steps)
        assert await metrics.total(SANDBOX_OPERATIONS, outcome="error") == 0
        before = await metrics.scrape()

        # Replaying the whole run on the same runtime counts nothing more.
        await Replayer(
            workflows=[project().workflow],
            plugins=[agents_plugin(SETTINGS, sandboxes=sandboxes_for_tests())],
            runtime=client.service_client.config.runtime,
        ).replay_workflow(history)
        after = await metrics.scrape()
        for name in (MODEL_CALLS, INPUT_TOKENS, OUTPUT_TOKENS, RUNS):
            assert after[name] == before[name]


async def test_a_failing_sandbox_operation_is_counted_as_an_error_of_its_provider(
    temporal_client: Client,
) -> None:
    from sandbox_agent_runtime.testing.failing_sandbox import FailingSandbox, busy_sandbox

    sandbox = FailingSandbox(command_errors=[busy_sandbox()])
    async with (
        metered_client(temporal_client) as (client, metrics),
        running_worker(client, ScriptedModel(["echo done"]), sandbox) as (plugged, _),
    ):
        await (await start(plugged, "Say done.")).result()
        provider = project_service().sandbox_provider
        errors = await metrics.total(SANDBOX_OPERATIONS, provider=provider, outcome="error")
        assert errors == 1


@pytest.mark.long
async def test_usage_adds_up_across_a_chain_and_the_starter_prints_it(
    temporal_client: Client,
) -> None:
    model = ScriptedModel([BIG_STEP] * 14 + ["echo chained"])
    async with (
        metered_client(temporal_client) as (client, metrics),
        running_worker(client, model, workflows=[LongSandboxAgentWorkflow]) as (plugged, _),
    ):
        handle = await start_long(plugged, "Work a while.")
        await handle.result()
        assert handle.first_execution_run_id is not None
        runs = await runs_of_chain(plugged, handle.id, handle.first_execution_run_id)
        assert len(runs) > 1
        assert await metrics.total(RUNS, outcome="continued_as_new") == len(runs) - 1
        assert await metrics.total(INPUT_TOKENS) == sum(u.input_tokens for u in model.reported)

        # The latest run's memo holds the whole chain's usage...
        description = await plugged.get_workflow_handle(handle.id).describe()
        usage: dict[str, Any] = (await description.memo())[USAGE_MEMO]
        assert {key: usage[key] for key in TOKENS_ONLY} == {
            "model_calls": len(model.reported),
            "input_tokens": sum(u.input_tokens for u in model.reported),
            "output_tokens": sum(u.output_tokens for u in model.reported),
            "cached_input_tokens": 0,
            # The stand-in's model has no price in its PRICES.
            "cost_usd": None,
        }
        # The sandbox's time across the chain: it lived from the first run to
        # the last, its clock handed on at each continue-as-new; and at least
        # each run's start and each model call are actions.
        first = await plugged.get_workflow_handle(
            handle.id, run_id=handle.first_execution_run_id
        ).describe()
        assert first.start_time is not None and description.close_time is not None
        span = (description.close_time - first.start_time).total_seconds()
        assert 0.8 * span <= usage["sandbox_seconds"] <= span
        assert usage["actions"] >= len(runs) + len(model.reported)
        assert usage["total_usd"] is None
        # ...and the starter prints it.
        line = await usage_line(plugged, handle.id)
        assert line.startswith(
            f"Usage: {usage['model_calls']:,} model calls, {usage['input_tokens']:,} input "
            f"tokens, {usage['output_tokens']:,} output tokens, cost n/a; "
            f"sandbox {usage['sandbox_seconds']:,.1f} s, ${usage['sandbox_usd']:.4f}; "
            f"{usage['actions']:,} Temporal actions, ${usage['actions_usd']:.4f}; total n/a"
        )


@pytest.mark.long  # every step replayed
async def test_spans_of_the_workflow_its_activities_and_the_agent_are_exported_once(
    temporal_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The Agents SDK traces this run, to the in-memory exporter alone (the
    # tests never send traces to OpenAI).
    monkeypatch.delenv("OPENAI_AGENTS_DISABLE_TRACING")
    set_trace_processors([])
    exported = InMemorySpanExporter()
    tracing = trace_to(SimpleSpanProcessor(exported))
    client = with_plugins(
        temporal_client,
        agents_plugin(
            SETTINGS,
            sandboxes=sandboxes_for_tests(),
            model_provider=TestModelProvider(ScriptedModel(["echo traced"])),
            traced=True,
        ),
        tracing,
    )
    # No run stays in the worker's cache: each step replays the run so far.
    async with build_worker(
        client,
        SETTINGS,
        workflows=[project().workflow],
        tool_activities=project().tool_activities,
        max_cached_workflows=0,
    ):
        handle = await start(client, "Say traced.")
        if project_service().approvals:
            # A person approves the command, asking the run nothing (a query
            # would replay it, adding spans of its own).
            await approve_as_they_wait(handle, ["echo traced"])
        await handle.result()

    spans = exported.get_finished_spans()
    names = [span.name for span in spans]
    ids = [span.context.span_id for span in spans if span.context is not None]
    assert len(ids) == len(set(ids)) == len(spans)
    # The workflow, the agent and its turns, once each despite the replays...
    assert names.count("RunWorkflow:SandboxAgentWorkflow") == 1, names
    assert names.count(agent_name()) == 1, names
    if project_service().approvals:
        # The run stops for the command's approval and resumes from its state:
        # the Agents SDK traces the turns before the stop only (a known issue,
        # a project's docs/operations.md). This fails once it traces both:
        # drop the case then.
        assert names.count("turn") == 1, names
    else:
        assert names.count("turn") == 2, names
    assert names.count("exec_command") == 1, names
    # ...and one span for each activity the run's history records, local ones too.
    recorded = [step.name for step in await activities(handle)]
    recorded += local_activities_in(await handle.fetch_history())
    for name in recorded:
        assert names.count(f"RunActivity:{name}") >= 1, name
    run_spans = [name for name in names if name.startswith("RunActivity:")]
    assert len(run_spans) == len(recorded)


def test_metrics_are_served_only_where_the_settings_say() -> None:
    assert metrics_runtime(None) is None
    host, port = free_address().rsplit(":", 1)
    assert isinstance(metrics_runtime((host, int(port))), Runtime)
