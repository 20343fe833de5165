"""What a run costs beyond its tokens: its sandbox's time and its Temporal actions.

A run's cost is its tokens at ``runs.PRICES``, plus the time it held a
sandbox at its backend's rate (``<BACKEND>_SANDBOX_USD_PER_HOUR``, the
provider's published rate by default: backends/catalog.toml), plus its
Temporal actions at ``TEMPORAL_USD_PER_MILLION_ACTIONS`` (0 by default: a
self-hosted server bills none). Both are measured in the workflow, so a
replay measures them again the same: the sandbox's time from ``workflow.now()``
when it is created to when it is removed; the actions as the workflow makes
them (``CountsActions``): the run's start (a continue-as-new starts the next),
each activity and local activity scheduled, each signal and update received,
each timer the run waits with, each child workflow started or signalled.
Temporal Cloud also bills retries of an activity, queries, rejected updates
and heartbeats past the first, which the workflow cannot see: the count is
what the run's own history holds, a floor of what Cloud bills. The agents
plugin carries ``CountsActions``, so a replayer counts as the worker did. The
rates are the worker's settings: the workers of one build share them, as they
share PRICES (a money budget's stop depends on them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.worker import (
    ExecuteWorkflowInput,
    HandleSignalInput,
    HandleUpdateInput,
    Interceptor,
    SignalChildWorkflowInput,
    SignalExternalWorkflowInput,
    StartActivityInput,
    StartChildWorkflowInput,
    StartLocalActivityInput,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)

# The patch that gives a run its sandbox's time and its actions: a run
# recorded before it replays with its tokens alone (docs/versioning.md).
RUN_COST = "run-cost"
SECONDS_PER_HOUR = 3600.0

# The worker's TEMPORAL_USD_PER_MILLION_ACTIONS (use_action_rate()).
_usd_per_million_actions = 0.0


def use_action_rate(usd_per_million: float) -> None:
    """Make ``usd_per_million`` (TEMPORAL_USD_PER_MILLION_ACTIONS) what every
    run this process works on pays for a million Temporal actions."""
    global _usd_per_million_actions
    _usd_per_million_actions = float(usd_per_million)


def action_usd() -> float:
    """What one Temporal action costs, in USD."""
    return _usd_per_million_actions / 1_000_000


@dataclass
class Charge:
    """What a run used of its sandbox and of Temporal since the last look."""

    sandbox_seconds: float = 0.0
    sandbox_usd: float = 0.0
    actions: int = 0
    actions_usd: float = 0.0


@dataclass
class RunMeter:
    """One run's sandbox clock and action count (``on``: the run records
    them; off for a run recorded before RUN_COST)."""

    on: bool = False
    # The actions the run has made (CountsActions), and those already charged.
    actions: int = 0
    charged_actions: int = 0
    # Since when the run's sandbox has been charged, and its rate; the
    # seconds and USD of sandboxes removed since the last charge.
    since: datetime | None = None
    usd_per_hour: float = 0.0
    pending_seconds: float = 0.0
    pending_usd: float = 0.0
    # The metrics each charge is recorded in (observability.py).
    record: Callable[[Charge], None] | None = field(default=None, repr=False)

    def count(self, actions: int = 1) -> None:
        """Count ``actions`` Temporal actions."""
        self.actions += actions

    def sandbox_created(self, usd_per_hour: float) -> None:
        """A sandbox costing ``usd_per_hour`` is being created: its time
        counts from now."""
        if self.on and self.since is None:
            self.since = workflow.now()
            self.usd_per_hour = usd_per_hour

    def sandbox_removed(self) -> None:
        """The run's sandbox is gone: its time stops counting."""
        if self.since is None:
            return
        seconds = max(0.0, (workflow.now() - self.since).total_seconds())
        self.pending_seconds += seconds
        self.pending_usd += seconds * self.usd_per_hour / SECONDS_PER_HOUR
        self.since = None

    def held_since(self, since: str, usd_per_hour: float) -> None:
        """Take up a sandbox costing ``usd_per_hour`` that an earlier run of
        the chain held ``since`` (ISO)."""
        if self.on and since:
            self.since = datetime.fromisoformat(since)
            self.usd_per_hour = usd_per_hour

    def charge(self) -> Charge:
        """What the run used since the last charge: its sandbox's time up to
        now, and its actions."""
        if not self.on:
            return Charge()
        now = workflow.now()
        seconds, usd = self.pending_seconds, self.pending_usd
        if self.since is not None:
            running = max(0.0, (now - self.since).total_seconds())
            seconds += running
            usd += running * self.usd_per_hour / SECONDS_PER_HOUR
            self.since = now
        actions = self.actions - self.charged_actions
        self.pending_seconds = self.pending_usd = 0.0
        self.charged_actions = self.actions
        charge = Charge(seconds, usd, actions, actions * action_usd())
        if self.record is not None:
            self.record(charge)
        return charge


def meter_of_this_run() -> RunMeter | None:
    """The meter of the workflow running now, if it keeps one."""
    meter: Any = getattr(workflow.instance(), "meter", None)
    return meter if isinstance(meter, RunMeter) else None


def count_action() -> None:
    """Count one Temporal action of the workflow running now (a timer its
    own code starts: the SDK gives timers no interceptor)."""
    meter = meter_of_this_run()
    if meter is not None:
        meter.count()


class CountsActions(Interceptor):
    """Counts the Temporal actions each run makes into its ``RunMeter`` (a
    workflow without one is left alone)."""

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor]:
        return _CountedInbound


class _CountedInbound(WorkflowInboundInterceptor):
    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        super().init(_CountedOutbound(outbound))

    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        count_action()  # the run's start
        return await super().execute_workflow(input)

    async def handle_signal(self, input: HandleSignalInput) -> None:
        count_action()
        await super().handle_signal(input)

    async def handle_update_handler(self, input: HandleUpdateInput) -> Any:
        count_action()
        return await super().handle_update_handler(input)


class _CountedOutbound(WorkflowOutboundInterceptor):
    def start_activity(self, input: StartActivityInput) -> workflow.ActivityHandle[Any]:
        count_action()
        return super().start_activity(input)

    def start_local_activity(self, input: StartLocalActivityInput) -> workflow.ActivityHandle[Any]:
        count_action()
        return super().start_local_activity(input)

    async def start_child_workflow(self, input: StartChildWorkflowInput) -> Any:
        count_action()
        return await super().start_child_workflow(input)

    async def signal_child_workflow(self, input: SignalChildWorkflowInput) -> None:
        count_action()
        await super().signal_child_workflow(input)

    async def signal_external_workflow(self, input: SignalExternalWorkflowInput) -> None:
        count_action()
        await super().signal_external_workflow(input)
