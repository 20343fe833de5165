"""What the service tells its operators: metrics, each run's usage, traces.

Metrics (``PROMETHEUS_BIND_ADDRESS``): Temporal's ``temporal_*`` and the
service's ``agent_*``, counted from the workflow through counters that do
nothing while a run replays, so nothing is counted twice. Usage: each run's
memo keeps its chain's model calls, tokens and cost, shown by the Web UI and
the starter. Budgets: a prompt's use is checked before each model call
(``BudgetReached``). Traces (``OTEL_EXPORTER_OTLP_ENDPOINT``, the ``traces``
extra): OpenTelemetry spans of workflows, activities and the agent.
"""

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from agents import AgentsException, RunContextWrapper, RunHooks, TResponseInputItem
from agents.agent import Agent
from agents.items import ModelResponse
from temporalio import activity, workflow
from temporalio.client import Plugin
from temporalio.exceptions import CancelledError, FailureError, is_cancelled_exception
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from sandbox_agent_runtime.affinity import host_queue
from sandbox_agent_runtime.approvals import Decision
from sandbox_agent_runtime.service import Budget, Price, cost_of, current, priced_as
from sandbox_agent_runtime.shared import (
    CHOOSING_THE_HOST,
    HOST_HEADER,
    MODEL_ACTIVITIES,
    sandbox_operation,
    tool_of,
)

# The service's own metrics (counters), next to Temporal's temporal_* ones.
MODEL_CALLS = "agent_model_calls"
INPUT_TOKENS = "agent_input_tokens"
OUTPUT_TOKENS = "agent_output_tokens"
# What each model call cost, in USD at the model's price (a histogram: its
# _sum is the total; calls of a model without a price are not in it).
MODEL_COST = "agent_model_cost_usd"
# Label: kind ("tokens" or "cost"): prompts stopped at their budget.
BUDGETS_REACHED = "agent_budgets_reached"
# Labels: provider, operation ("sandbox_session_exec", ...), outcome ("ok" or
# "error"), and, when the service has a host-bound backend, host (the host the
# sandbox lives on, or "any").
SANDBOX_OPERATIONS = "agent_sandbox_operations"
# With approvals. Label: decision ("approved", "rejected", "timed_out"):
# requests for approval, and the time each waited for its decision (a
# histogram, in ms).
APPROVALS = "agent_approvals"
APPROVAL_WAIT = "agent_approval_wait"
# Labels: tool (the agent's own tools: tools.py), outcome ("ok" or "error").
TOOL_CALLS = "agent_tool_calls"
# Label: outcome ("completed", "failed", "cancelled", or "continued_as_new"
# for each run of a long chain that handed its work on).
RUNS = "agent_runs"
# Label: state ("waiting": answered, holding its sandbox; "released": its
# sandbox removed, the workspace in a snapshot; "restored": a sandbox
# restored from a snapshot; "ended"): each time a conversation enters it.
SESSIONS = "agent_sessions"
# Label: operation ("snapshot" or "restore"): the gzipped size of each
# workspace snapshot (bytes), and how long each took (seconds); histograms.
SNAPSHOT_BYTES = "agent_snapshot_bytes"
SNAPSHOT_SECONDS = "agent_snapshot_seconds"
# When the service has a host-bound backend. Labels: host, outcome ("failed":
# the run failed naming it; "recovered": the run went on on another host from
# its last snapshot): each time a run took its sandbox's host for gone.
HOSTS_GONE = "agent_sandbox_hosts_gone"
# Label: provider. Each sandbox the reaper removed because its run was closed
# (sandboxes.py).
SANDBOXES_REAPED = "agent_sandboxes_reaped"
# A histogram, in seconds: how long each model call's attempt waited on its
# task queue before a worker started it (the fleet's rate, or every worker
# busy; next to nothing for a call handed out with its workflow task).
MODEL_CALL_WAIT = "agent_model_call_wait_seconds"
# Their buckets: the SDK's defaults (50 to 10,000) fit milliseconds, not these.
BUCKETS = {
    SNAPSHOT_BYTES: [float(4**power * 1024) for power in range(1, 11)],
    SNAPSHOT_SECONDS: [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0],
    MODEL_CALL_WAIT: [0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0],
    MODEL_COST: [0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0],
}


class TelemetryUnavailable(Exception):
    """The worker cannot serve metrics or export traces as configured."""


@dataclass
class Usage:
    """What a chain of runs (or one prompt) has used of the model so far.

    It is part of the chain's recorded state (chain.Carried) and of the
    run's memo: add a field only with a default."""

    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    # Among the input tokens, those the model read from its cache.
    cached_input_tokens: int = 0
    # What those tokens cost, in USD at the model's price; None without one.
    cost_usd: float | None = None

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, call: "Usage") -> None:
        self.model_calls += call.model_calls
        self.input_tokens += call.input_tokens
        self.output_tokens += call.output_tokens
        self.cached_input_tokens += call.cached_input_tokens
        if call.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + call.cost_usd


class BudgetReached(AgentsException):
    """Raised before a model call to stop the agent: the prompt has reached
    its budget (``kind``: "tokens" or "cost"), as ``reason`` says."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


@dataclass
class UsageMeter(RunHooks[Any]):
    """Counts each model call as the workflow receives its response: into
    ``usage`` (the chain's total, which the workflow shows in the run's memo
    as each prompt ends), into ``prompt`` (the current prompt's own, across
    its chain) and into the worker's metrics, which a replay leaves alone;
    and stops the agent before a call once ``prompt`` has reached
    ``budget``. Each call is priced as ``model``'s in ``prices`` (none
    there: no cost)."""

    usage: Usage = field(default_factory=Usage)
    prompt: Usage = field(default_factory=Usage)
    budget: Budget = field(default_factory=Budget)
    model: str = ""
    prices: Mapping[str, Price] = field(default_factory=dict)

    async def on_llm_start(
        self,
        context: RunContextWrapper[Any],
        agent: Agent[Any],
        system_prompt: str | None,
        input_items: list[TResponseInputItem],
    ) -> None:
        reached = self.budget.reached(self.prompt.tokens, self.prompt.cost_usd)
        if reached is not None:
            raise BudgetReached(*reached)

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        details = response.usage.input_tokens_details
        cached = (details.cached_tokens if details is not None else 0) or 0
        input_tokens, output_tokens = response.usage.input_tokens, response.usage.output_tokens
        call = Usage(
            model_calls=1,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cached_input_tokens=cached,
            # At the price of the model of the agent that called it (a
            # handoff's, or an agent's called as a tool), else the run's.
            cost_usd=cost_of(
                priced_as(agent.model) or self.model,
                input_tokens,
                cached,
                output_tokens,
                self.prices,
            ),
        )
        self.usage.add(call)
        self.prompt.add(call)
        meter = workflow.metric_meter()
        meter.create_counter(MODEL_CALLS, "Model calls the agent made").add(1)
        meter.create_counter(INPUT_TOKENS, "Input tokens of the model calls").add(call.input_tokens)
        meter.create_counter(OUTPUT_TOKENS, "Output tokens of the model calls").add(
            call.output_tokens
        )
        if call.cost_usd is not None:
            meter.create_histogram_float(
                MODEL_COST, "What each model call cost, at the model's price", unit="USD"
            ).record(call.cost_usd)


# The outcomes every worker reports from its start, at 0 (count_runs_from_zero):
# an alert on increase() sees the first failure of a worker's life.
RUN_OUTCOMES = ("completed", "failed")


def count_runs_from_zero(
    runtime: Runtime | None,
    namespace: str,
    task_queue: str,
    workflow_type: str,
    build_id: str | None,
) -> None:
    """Report agent_runs at 0 for each of RUN_OUTCOMES, with the labels the
    workflow's own counter will carry (count_run()): a counter first seen at
    1 has no increase, and its first failure would pass unseen by a rule
    like ``increase(agent_runs{outcome="failed"}[15m]) > 0``."""
    if runtime is None:
        return
    counter = runtime.metric_meter.create_counter(RUNS, "Runs of the workflow, by outcome")
    for outcome in RUN_OUTCOMES:
        labels = {
            "namespace": namespace,
            "task_queue": task_queue,
            "workflow_type": workflow_type,
            "outcome": outcome,
        }
        if build_id is not None:
            labels["build_id"] = build_id
        counter.add(0, labels)


def count_run(outcome: str) -> None:
    """Count one run of the workflow ending with ``outcome`` (replay-safe),
    and the build it ran on: a versioned worker's, or an
    unversioned one's ``build_id`` (worker.UNVERSIONED_BUILD), which the
    workflow sees as its current version too. count_runs_from_zero() uses
    the same ids, so its zero is the series this counter adds to."""
    labels = {"outcome": outcome}
    version = workflow.info().get_current_deployment_version()
    if version is not None:
        labels["build_id"] = version.build_id
    workflow.metric_meter().create_counter(RUNS, "Runs of the workflow, by outcome").add(1, labels)


def count_budget_reached(kind: str) -> None:
    """Count one prompt stopped at its budget of ``kind`` (replay-safe)."""
    workflow.metric_meter().create_counter(
        BUDGETS_REACHED, "Prompts stopped at their budget, by kind (tokens or cost)"
    ).add(1, {"kind": kind})


def count_host_gone(host: str, outcome: str) -> None:
    """Count a run taking its sandbox's ``host`` for gone (replay-safe)."""
    workflow.metric_meter().create_counter(
        HOSTS_GONE, "Runs that took their sandbox's host for gone, by host and outcome"
    ).add(1, {"host": host, "outcome": outcome})


def count_session(state: str) -> None:
    """Count one conversation entering ``state`` (replay-safe)."""
    workflow.metric_meter().create_counter(SESSIONS, "Conversations entering a state").add(
        1, {"state": state}
    )


def count_approval(decision: Decision, waited: timedelta) -> None:
    """Count one request for approval by how it was decided (approved,
    rejected, timed_out) and how long it waited (replay-safe)."""
    meter = workflow.metric_meter()
    outcome = "approved" if decision.approve else "rejected"
    if decision.timed_out:
        outcome = "timed_out"
    meter.create_counter(APPROVALS, "Requests for approval, by decision").add(
        1, {"decision": outcome}
    )
    if waited:
        meter.create_histogram_timedelta(
            APPROVAL_WAIT, "How long a request waited for its decision", unit="ms"
        ).record(waited, {"decision": outcome})


def run_outcome(error: BaseException) -> str | None:
    """How a run that raised ``error`` ends, or None when the error fails
    only the workflow task (Temporal retries it; the run goes on)."""
    if isinstance(error, workflow.ContinueAsNewError):
        return "continued_as_new"
    if isinstance(error, asyncio.CancelledError | CancelledError) or is_cancelled_exception(error):
        return "cancelled"
    if isinstance(error, FailureError):
        return "failed"
    return None


class ModelCallWait(Interceptor):
    """Records how long each model call waited on its task queue (the
    model calls' own, or the run's: MODEL_CALLS_QUEUE) before a worker
    started it (MODEL_CALL_WAIT)."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ModelCallWait(next)


class _ModelCallWait(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        if info.activity_type in MODEL_ACTIVITIES:
            activity.metric_meter().create_histogram_float(
                MODEL_CALL_WAIT,
                "Seconds each model call waited on its task queue before a worker started it",
                "s",
            ).record(waited(info.current_attempt_scheduled_time, info.started_time))
        return await super().execute_activity(input)


def waited(scheduled: datetime, started: datetime) -> float:
    """Seconds from ``scheduled`` to ``started`` (never below 0: the two
    come from the server's clock, which may step)."""
    return max(0.0, (started - scheduled).total_seconds())


class SandboxOperationMeter(Interceptor):
    """Counts every sandbox activity the worker runs (each attempt), by
    provider, operation and outcome, and, when the service has a host-bound
    backend, the host the sandbox lives on: this worker's ``host`` for an
    operation of a sandbox on its host, "any" for a sandbox any worker
    reaches; and every call of one of the agent's tools, by
    tool and outcome. ``host`` is the worker's host (None for a service
    without a host-bound backend)."""

    def __init__(self, host: str | None = None) -> None:
        self.host = host

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _CountedActivity(next, self.host)


class _CountedActivity(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, host: str | None = None) -> None:
        super().__init__(next)
        self.host = host

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        name = info.activity_type
        operation, tool = sandbox_operation(name), tool_of(name)
        bound = current().host_bound
        if tool is None and (operation is None or (bound and operation == CHOOSING_THE_HOST)):
            return await super().execute_activity(input)
        outcome = "error"
        try:
            result = await super().execute_activity(input)
            outcome = "ok"
            return result
        finally:
            if tool is not None:
                activity.metric_meter().create_counter(
                    TOOL_CALLS, "Calls of the agent's own tools, by tool and outcome"
                ).add(1, {"tool": tool, "outcome": outcome})
            elif bound:
                # Through the host's queue, or offered on the run's own with
                # this host's mark (affinity.HostFirst).
                on_host = self.host is not None and (
                    info.task_queue == host_queue(self.host) or HOST_HEADER in input.headers
                )
                self._count_operation(name, str(operation), outcome, on_host)
            else:
                self._count_operation(name, str(operation), outcome)

    def _count_operation(
        self, name: str, operation: str, outcome: str, on_host: bool | None = None
    ) -> None:
        """Count one sandbox operation; ``on_host`` is None for a service
        without a host-bound backend (no host label)."""
        labels = {
            "provider": name.removesuffix(f"-{operation}"),
            "operation": operation,
            "outcome": outcome,
        }
        if on_host is None:
            description = "Sandbox operations, by provider, operation and outcome"
        else:
            description = "Sandbox operations, by provider, operation, outcome and host"
            labels["host"] = self.host if on_host and self.host is not None else "any"
        activity.metric_meter().create_counter(SANDBOX_OPERATIONS, description).add(1, labels)


def metrics_runtime(address: tuple[str, int] | None) -> Runtime | None:
    """A Temporal runtime serving /metrics on ``address``
    (``PROMETHEUS_BIND_ADDRESS``), or None for none. The worker's client must
    be created on it."""
    if address is None:
        return None
    bind = f"{address[0]}:{address[1]}"
    try:
        metrics = PrometheusConfig(bind_address=bind, histogram_bucket_overrides=BUCKETS)
        return Runtime(telemetry=TelemetryConfig(metrics=metrics))
    except Exception as e:
        raise TelemetryUnavailable(
            f"Cannot serve metrics on {bind} (PROMETHEUS_BIND_ADDRESS): {e}"
        ) from e


def tracing_plugins(endpoint: str | None) -> list[Plugin]:
    """With an OTLP ``endpoint`` (``OTEL_EXPORTER_OTLP_ENDPOINT``, which the
    exporter reads itself), send this process's spans there and return the
    client plugin that traces workflows and activities; otherwise nothing."""
    if endpoint is None:
        return []
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as e:
        raise TelemetryUnavailable(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set, but the traces extra is not installed: "
            "install the project with its `traces` extra (uv sync --extra traces)."
        ) from e
    return [trace_to(BatchSpanProcessor(OTLPSpanExporter()))]


def trace_to(processor: Any) -> Plugin:
    """Make ``processor`` (an OpenTelemetry span processor) receive this
    process's spans through a replay-safe tracer provider, and return the
    client plugin that traces workflows and activities. The worker's agents
    plugin must then be built with ``traced=True``, for the agent's spans."""
    from opentelemetry import trace
    from temporalio.contrib.opentelemetry import OpenTelemetryPlugin, create_tracer_provider

    provider = create_tracer_provider()
    provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    return OpenTelemetryPlugin(add_temporal_spans=True)
