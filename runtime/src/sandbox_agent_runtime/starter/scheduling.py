"""The starter's schedules (schedules.py): ``--every SECONDS`` or ``--cron
EXPR`` with a prompt makes one and prints its id and Web UI link;
``--schedules`` lists this service's; ``--unschedule ID`` deletes one. The
starter is the service's operator: it sees every schedule of the service
(each API caller's too), and another service's as no schedule at all."""

import sys
from urllib.parse import quote

from temporalio.client import Client, ScheduleSpec

from sandbox_agent_runtime import schedules
from sandbox_agent_runtime.client import web_ui_link
from sandbox_agent_runtime.run_request import RunRequest
from sandbox_agent_runtime.settings import StarterSettings
from sandbox_agent_runtime.starter.reaching import reached
from sandbox_agent_runtime.starter.statuses import (
    EXIT_COMPLETED,
    EXIT_REFUSED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
)


def schedule_link(client: Client, schedule_id: str, ui_url: str | None) -> str:
    """The schedule's page in the Temporal Web UI (beside its runs')."""
    quoted = quote(schedule_id, safe="")
    runs = web_ui_link(client, schedule_id, ui_url)
    return runs.replace(f"/workflows/{quoted}", f"/schedules/{quoted}")


async def make_schedule(
    request: RunRequest,
    spec: ScheduleSpec,
    when: dict[str, object],
    overlap: str,
    settings: StarterSettings,
) -> int:
    """Make a schedule of ``request``; print its id and Web UI link."""
    client = await reached(settings)
    if client is None:
        return EXIT_UNREACHABLE
    try:
        schedule_id = await schedules.create(
            client, request, spec, when, overlap, None, settings.schedules_per_caller
        )
    except schedules.TooManySchedules as e:
        print(f"ERROR: {str(e).replace('you hold', 'the starter holds')}.", file=sys.stderr)
        return EXIT_REFUSED
    except schedules.BadSchedule as e:
        name = "--cron" if "cron" in when else "--every"
        print(f"ERROR: {name} {str(e).split(' ', 1)[1]}.", file=sys.stderr)
        return EXIT_USAGE
    print(f"Made schedule {schedule_id}")
    print(f"Web UI: {schedule_link(client, schedule_id, settings.ui_url)}", flush=True)
    return EXIT_COMPLETED


async def list_schedules(settings: StarterSettings) -> int:
    """Print this service's schedules, one a line: id, when, overlap, state."""
    client = await reached(settings)
    if client is None:
        return EXIT_UNREACHABLE
    for schedule_id in await schedules.owned(client, None):
        try:
            handle = await schedules.own(client, schedule_id, None)
        except schedules.NoSchedule:
            continue
        shown = await schedules.shown(await handle.describe())
        when = f"cron {shown['cron']}" if shown["cron"] else f"every {shown['interval_seconds']} s"
        state = "paused" if shown["paused"] else "active"
        print(
            f"{schedule_id}  {when}  overlap {shown['overlap']}  {state}  "
            f"{shown['runs_started']} runs started"
        )
    return EXIT_COMPLETED


async def unschedule(schedule_id: str, settings: StarterSettings) -> int:
    """Delete one of this service's schedules (the runs it started go on)."""
    client = await reached(settings)
    if client is None:
        return EXIT_UNREACHABLE
    try:
        handle = await schedules.own(client, schedule_id, None)
    except schedules.NoSchedule:
        print(
            f"ERROR: --unschedule {schedule_id[:80]!r}: no such schedule of this service in "
            f"namespace {client.namespace!r}.",
            file=sys.stderr,
        )
        return EXIT_USAGE
    await handle.delete()
    print(f"Deleted schedule {schedule_id}")
    return EXIT_COMPLETED
