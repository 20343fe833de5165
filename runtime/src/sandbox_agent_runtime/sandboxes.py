"""The sandboxes a service's runs left behind: listed, and the orphans removed.

``<slug>-sandboxes list`` prints every sandbox of this service that its
providers hold (each backend's ``sandboxes()``: the containers on the Docker
engine, the workspaces on this host's disk, ...) with its run and that run's
state. ``<slug>-sandboxes reap [--grace SECONDS]`` removes each whose run is
closed (completed, failed, cancelled, terminated, timed out, or unknown to
the namespace) and which is older than the grace period, logs and prints
each removal. A sandbox of another service (its task queue), of another
namespace, or of a run still open is never touched. ``ReapSandboxes``, a
workflow of its own, reaps on a Temporal Schedule the worker creates
(``SANDBOX_REAP_EVERY``; worker.py).

Exit statuses: 0 done; 1 Temporal or a backend could not be reached (one
line says which); 2 bad arguments (one line).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import NoReturn

from temporalio import activity, workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from temporalio.client import (
        Client,
        Schedule,
        ScheduleActionStartWorkflow,
        ScheduleAlreadyRunningError,
        ScheduleIntervalSpec,
        ScheduleSpec,
        ScheduleUpdate,
        ScheduleUpdateInput,
    )
    from temporalio.service import RPCError, RPCStatusCode

    from sandbox_agent_runtime.backends import Found, backend_module
    from sandbox_agent_runtime.connection import ConnectionFailed, connect
    from sandbox_agent_runtime.exits import exit_after
    from sandbox_agent_runtime.observability import SANDBOXES_REAPED
    from sandbox_agent_runtime.service import current
    from sandbox_agent_runtime.settings.worker import lacking

logger = logging.getLogger(__name__)

# The grace period by default: a sandbox younger than this is left alone
# whatever its run's state (a run that has just created it, or just ended).
DEFAULT_GRACE = timedelta(minutes=5)
# A run's state when the namespace does not know its workflow id.
UNKNOWN = "unknown"
# The one state of a run that keeps its sandbox.
OPEN = "running"


@dataclass(frozen=True)
class Listed:
    """A sandbox of this service, with its run's state ("running",
    "completed", "failed", "canceled", "terminated", "timed_out",
    "continued_as_new" or "unknown")."""

    sandbox: Found
    state: str


class BackendUnreachable(Exception):
    """A backend could not list or remove its sandboxes."""


async def run_state(client: Client, workflow_id: str) -> str:
    """The state of the latest run of ``workflow_id`` in the client's namespace."""
    try:
        described = await client.get_workflow_handle(workflow_id).describe()
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            return UNKNOWN
        raise
    return described.status.name.lower() if described.status else UNKNOWN


async def survey(client: Client) -> list[Listed]:
    """Every sandbox of this service in the client's namespace on each of its
    backends, with its run's state.

    Args:
        client: a client of the service's namespace.

    Returns:
        The sandboxes, by provider in the service's order.
    """
    providers = current().providers
    every: list[Found] = []
    for name in dict.fromkeys(providers.values()):
        # A backend whose provider cannot list sandboxes by what they carry
        # (Vercel, Cloudflare) has none here: its sandboxes' lifetime ends them.
        backend = backend_module(name)
        listing = getattr(backend, "sandboxes", None)
        if listing is None:
            continue
        if lack := lacking(backend.REQUIRED_ENVIRONMENT, backend.CREDENTIALS_URL):
            raise BackendUnreachable(f"Cannot list the sandboxes of {name}: set {lack}")
        try:
            held = await asyncio.to_thread(listing, client.namespace)
        except Exception as e:
            raise BackendUnreachable(f"Cannot list the sandboxes of {name}: {e}") from e
        every += [s for s in held if providers.get(s.provider) == name]
    ours = [s for s in every if s.namespace == client.namespace]
    order = list(providers)
    ours.sort(key=lambda s: (order.index(s.provider), s.created))
    return [Listed(s, await run_state(client, s.workflow_id)) for s in ours]


async def reap(client: Client, grace: timedelta = DEFAULT_GRACE) -> list[Listed]:
    """Remove each sandbox of this service whose run is closed and which is
    older than ``grace``; log each removal.

    Args:
        client: a client of the service's namespace.
        grace: the youngest a sandbox may be to be removed.

    Returns:
        The sandboxes removed.
    """
    now = datetime.now(UTC)
    removed = []
    for listed in await survey(client):
        sandbox = listed.sandbox
        if listed.state == OPEN or now - sandbox.created < grace:
            continue
        module = backend_module(current().providers[sandbox.provider])
        try:
            await asyncio.to_thread(module.remove, sandbox)  # type: ignore[attr-defined]
        except Exception as e:
            raise BackendUnreachable(f"Cannot remove {sandbox.sandbox_id}: {e}") from e
        logger.info(
            "Removed sandbox %s (%s) of run %s, %s",
            sandbox.sandbox_id,
            sandbox.provider,
            sandbox.workflow_id,
            listed.state,
        )
        removed.append(listed)
    return removed


@activity.defn(name="reap_sandboxes")
async def reap_sandboxes(grace_seconds: int) -> int:
    """Reap this host's orphans (``reap()``) and count each removal.

    Args:
        grace_seconds: the grace period.

    Returns:
        How many sandboxes were removed.
    """
    removed = await reap(activity.client(), timedelta(seconds=grace_seconds))
    counter = activity.metric_meter().create_counter(
        SANDBOXES_REAPED, "Sandboxes removed because their run was closed, by provider"
    )
    for listed in removed:
        counter.add(1, {"provider": listed.sandbox.provider})
    return len(removed)


@workflow.defn(name="ReapSandboxes")
class ReapSandboxes:
    """One reap (the Schedule's action): ``reap_sandboxes`` on ``task_queue``."""

    @workflow.run
    async def run(self, grace_seconds: int, task_queue: str) -> int:
        return await workflow.execute_activity(
            reap_sandboxes,
            grace_seconds,
            task_queue=task_queue,
            start_to_close_timeout=timedelta(minutes=5),
            retry_policy=RetryPolicy(maximum_attempts=3),
        )


def schedule_id(host: str = "") -> str:
    """The id of the reaper's schedule: "<service>-reap-sandboxes", and the
    host's name for sandboxes that live on one host."""
    return f"{current().name}-reap-sandboxes" + (f"-{host}" if host else "")


async def schedule_reaping(
    client: Client,
    every: timedelta,
    activity_queue: str,
    host: str = "",
    grace: timedelta = DEFAULT_GRACE,
) -> str:
    """Create the reaper's schedule, or make the one there run ``every``
    (idempotent: every worker of the fleet calls it at start).

    Args:
        client: a client of the service's namespace.
        every: how often it reaps.
        activity_queue: where the reap runs: the service's task queue, or
            a host's own when the sandboxes live on that host.
        host: that host, if any.
        grace: the grace period of each reap.

    Returns:
        The schedule's id.
    """
    queue = current().task_queue
    seconds = int(grace.total_seconds())
    schedule = Schedule(
        action=ScheduleActionStartWorkflow(
            ReapSandboxes.run,
            args=[seconds, activity_queue],
            id=f"{schedule_id(host)}-run",
            task_queue=queue,
        ),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=every)]),
    )
    try:
        await client.create_schedule(schedule_id(host), schedule)
    except ScheduleAlreadyRunningError:

        def updated(_: ScheduleUpdateInput) -> ScheduleUpdate:
            return ScheduleUpdate(schedule=schedule)

        await client.get_schedule_handle(schedule_id(host)).update(updated)
    return schedule_id(host)


def line(listed: Listed) -> str:
    """How ``list`` and ``reap`` print a sandbox."""
    s = listed.sandbox
    return f"{s.provider}\t{s.sandbox_id}\t{s.workflow_id}\t{listed.state}\t{s.created:%Y-%m-%dT%H:%M:%SZ}"


class OneLineParser(argparse.ArgumentParser):
    """Bad arguments: one line, status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message}\n")


def seconds(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of seconds (0 or more)")
    return int(text)


def main(argv: Sequence[str] | None = None) -> None:
    """List this service's sandboxes, or reap its orphans.

    Args:
        argv: the command's arguments; None for ``sys.argv``.
    """
    parser = OneLineParser(
        prog=f"{current().name}-sandboxes", description=(__doc__ or "").partition("\n")[0]
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    commands.add_parser("list", help="every sandbox of this service, its run and its state")
    reaping = commands.add_parser("reap", help="remove the sandboxes of closed runs")
    grace = int(DEFAULT_GRACE.total_seconds())
    reaping.add_argument("--grace", type=seconds, default=grace, help=f"seconds (default {grace})")
    arguments = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    async def done() -> list[Listed]:
        client = await connect()
        if arguments.command == "list":
            return await survey(client)
        return await reap(client, timedelta(seconds=arguments.grace))

    try:
        shown = asyncio.run(done())
    except (ConnectionFailed, BackendUnreachable) as e:
        sys.exit(str(e))
    except RPCError as e:
        sys.exit(f"Temporal did not say a run's state: {e.message}")
    for listed in shown:
        print(line(listed))
    if arguments.command == "reap":
        print(f"Removed {len(shown)} sandbox{'es' if len(shown) != 1 else ''}.")


def cli() -> NoReturn:
    """The installed ``<slug>-sandboxes`` command: ``main()``, then exit with its status."""
    exit_after(main)
