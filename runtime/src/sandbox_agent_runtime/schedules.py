"""Scheduled runs: a run's request started on a calendar (``cron``) or every
``interval_seconds``, as a Temporal Schedule whose id is the schedule's id
everywhere (the API's, the starter's, the Web UI's).

Each run it starts is an ordinary run: the same workflow type, task queue,
execution timeout and request the API or the starter would start, its id
the schedule's and the time it was due (Temporal's), its memo naming the
service and the caller as a run's does, so its owner sees it through the
API. The schedule's memo names them too: a schedule is found, shown, paused
and deleted by its owner only (the starter, the service's operator, by any
of the service's), and another service's is answered as no schedule at all.

Bounded: an interval of at least SCHEDULE_MIN_INTERVAL seconds, a cron of
five fields (at most once a minute), at most SCHEDULES_PER_CALLER
schedules per caller (the starter's counted as one caller's).
"""

import re
import uuid
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionStartWorkflow,
    ScheduleDescription,
    ScheduleHandle,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
)
from temporalio.service import RPCError, RPCStatusCode

from sandbox_agent_runtime.owners import service_memo
from sandbox_agent_runtime.run_request import RunRequest
from sandbox_agent_runtime.service import current
from sandbox_agent_runtime.shared import CALLER_MEMO, SERVICE_MEMO, WORKFLOW_TYPE

# What a schedule's memo holds of when it runs and its overlap policy (the
# server keeps a cron only as the calendar it made of it).
SCHEDULE_MEMO = "schedule"
# The overlap policies a creator chooses from, by name; the first is the default.
OVERLAPS = {
    "skip": ScheduleOverlapPolicy.SKIP,
    "buffer_one": ScheduleOverlapPolicy.BUFFER_ONE,
    "buffer_all": ScheduleOverlapPolicy.BUFFER_ALL,
    "cancel_other": ScheduleOverlapPolicy.CANCEL_OTHER,
    "terminate_other": ScheduleOverlapPolicy.TERMINATE_OTHER,
    "allow_all": ScheduleOverlapPolicy.ALLOW_ALL,
}
# The longest interval: a year.
LONGEST_INTERVAL = 366 * 24 * 3600
# The names a cron may use instead of its five fields.
CRON_NAMES = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
# One field of a cron: digits, names (JAN, MON), * , - / ? L W #.
_CRON_FIELD = re.compile(r"[0-9A-Za-z*,/?#-]{1,64}")
CRONS = (
    "five fields, minute hour day-of-month month day-of-week, in UTC (0 6 * * *: at 06:00 "
    f"every day), or one of {', '.join(CRON_NAMES)}"
)
# A schedule's id: the task queue, "-schedule-", a UUID.
SCHEDULE_ID = re.compile(r"[A-Za-z0-9._:@=+-]{1,200}")


class BadSchedule(ValueError):
    """A schedule that cannot be made; its message is one line naming the
    value, what is wrong and what is allowed."""


class NoSchedule(LookupError):
    """No schedule of the caller's by that id (none, another caller's, or
    another service's: told apart by nothing)."""


class TooManySchedules(Exception):
    """The caller holds SCHEDULES_PER_CALLER schedules already."""


def spec_of(
    cron: str | None,
    interval_seconds: Any,
    minimum: int,
    names: tuple[str, str] = ("cron", "interval_seconds"),
    as_text: bool = True,
) -> tuple[ScheduleSpec, dict[str, Any]]:
    """When a schedule runs: one of ``cron`` and ``interval_seconds`` (a
    whole number of seconds, at least ``minimum``; written as text only
    when ``as_text``: a form's, an option's); the spec and what the memo
    records of it. ``BadSchedule`` naming the value (``names``: how the
    caller calls the two)."""
    cron_name, interval_name = names
    if (cron is None or cron == "") == (interval_seconds is None or interval_seconds == ""):
        raise BadSchedule(
            f"give one of {cron_name} and {interval_name}: {cron_name} for a calendar ({CRONS}), "
            f"{interval_name} for every N seconds (at least {minimum})"
        )
    if cron:
        text = " ".join(cron.split())
        fields = text.split(" ")
        named = len(fields) == 1 and text.lower() in CRON_NAMES
        if not named and (len(fields) != 5 or not all(map(_CRON_FIELD.fullmatch, fields))):
            raise BadSchedule(
                f"{cron_name} {cron[:80]!r} is not a cron this service takes: it has "
                f"{len(fields)} field{'s' * (len(fields) != 1)} or a character a cron does not "
                f"use; use {CRONS}"
            )
        return ScheduleSpec(cron_expressions=[text.lower() if named else text]), {"cron": text}
    if isinstance(interval_seconds, float) and interval_seconds.is_integer():
        interval_seconds = int(interval_seconds)
    if (
        as_text
        and isinstance(interval_seconds, str)
        and re.fullmatch(r"\s*[0-9]{1,12}\s*", interval_seconds)
    ):
        interval_seconds = int(interval_seconds)
    if (
        not isinstance(interval_seconds, int)
        or isinstance(interval_seconds, bool)
        or not minimum <= interval_seconds <= LONGEST_INTERVAL
    ):
        raise BadSchedule(
            f"{interval_name} {str(interval_seconds)[:40]!r} is not allowed: use a whole number of "
            f"seconds from {minimum} (SCHEDULE_MIN_INTERVAL) to {LONGEST_INTERVAL:,} (a year)"
        )
    every = ScheduleIntervalSpec(every=timedelta(seconds=interval_seconds))
    return ScheduleSpec(intervals=[every]), {"interval_seconds": interval_seconds}


def overlap_of(value: Any, name: str = "overlap") -> str:
    """The overlap policy's name (empty: skip); ``BadSchedule`` otherwise."""
    if value == "":
        return "skip"
    if not isinstance(value, str) or value not in OVERLAPS:
        raise BadSchedule(
            f"{name} {str(value)[:40]!r} is not an overlap policy: use one of {', '.join(OVERLAPS)}"
        )
    return value


def memo_of(owner: str | None) -> dict[str, Any]:
    """What a schedule and each of its runs record of whose they are."""
    return {**service_memo(), **({CALLER_MEMO: owner} if owner else {})}


def whose(memo: Mapping[str, Any], owner: str | None) -> bool:
    """Whether a schedule (its memo) is this service's and ``owner``'s
    (None: the starter's view, any of this service's)."""
    if memo.get(SERVICE_MEMO) != current().task_queue:
        return False
    return owner is None or memo.get(CALLER_MEMO) == owner


async def owned(client: Client, owner: str | None, only_owner: bool = False) -> list[str]:
    """The ids of the schedules ``owner`` holds (None: all of this
    service's; ``only_owner``: those with no caller, the starter's). The
    server's list is eventually consistent: one just made or deleted may
    show a moment late."""
    found = []
    async for each in await client.list_schedules():
        memo = await each.memo()
        if not whose(memo, owner) or (only_owner and memo.get(CALLER_MEMO)):
            continue
        found.append(each.id)
    return sorted(found)


async def create(
    client: Client,
    request: RunRequest,
    spec: ScheduleSpec,
    when: dict[str, Any],
    overlap: str,
    owner: str | None,
    most: int,
) -> str:
    """Make a schedule of ``request`` for ``owner`` (None: the starter);
    its id. ``TooManySchedules`` when ``owner`` holds ``most`` already."""
    if len(await owned(client, owner, only_owner=owner is None)) >= most:
        raise TooManySchedules(
            f"you hold {most} schedules, the most one caller may (SCHEDULES_PER_CALLER): "
            "delete one first"
        )
    service = current()
    schedule_id = f"{service.task_queue}-schedule-{uuid.uuid4()}"
    memo = memo_of(owner)
    action = ScheduleActionStartWorkflow(
        WORKFLOW_TYPE,
        request,
        id=schedule_id,
        task_queue=service.task_queue,
        execution_timeout=service.workflow_execution_timeout,
        memo=memo,
    )
    policy = SchedulePolicy(overlap=OVERLAPS[overlap])
    try:
        await client.create_schedule(
            schedule_id,
            Schedule(action=action, spec=spec, policy=policy),
            memo={**memo, SCHEDULE_MEMO: {**when, "overlap": overlap}},
        )
    except RPCError as e:
        if e.status != RPCStatusCode.INVALID_ARGUMENT:
            raise
        [(name, value)] = when.items()
        raise BadSchedule(
            f"{name} {str(value)[:80]!r} is not allowed: the Temporal service refused it "
            f"({e.message[:200]}); use {CRONS if name == 'cron' else 'a whole number of seconds'}"
        ) from None
    return schedule_id


async def own(client: Client, schedule_id: str, owner: str | None) -> ScheduleHandle:
    """The handle of ``owner``'s schedule ``schedule_id`` (None: any of this
    service's); ``NoSchedule`` otherwise."""
    if not SCHEDULE_ID.fullmatch(schedule_id):
        raise NoSchedule(schedule_id)
    handle = client.get_schedule_handle(schedule_id)
    try:
        description = await handle.describe()
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            raise NoSchedule(schedule_id) from e
        raise
    if not whose(await description.memo(), owner):
        raise NoSchedule(schedule_id)
    return handle


async def shown(description: ScheduleDescription) -> dict[str, Any]:
    """A schedule as the API and the starter show it: when it runs, its
    overlap policy, whether it is paused, its next times and its recent
    runs (the server keeps the latest ten), newest first."""
    memo = await description.memo()
    recorded = memo.get(SCHEDULE_MEMO)
    when = recorded if isinstance(recorded, dict) else {}
    info = description.info
    runs = [
        {
            "id": each.action.workflow_id,
            "scheduled_at": each.scheduled_at.isoformat(),
            "started_at": each.started_at.isoformat(),
        }
        for each in reversed(info.recent_actions)
        if isinstance(each.action, ScheduleActionExecutionStartWorkflow)
    ]
    return {
        "id": description.id,
        "cron": when.get("cron"),
        "interval_seconds": when.get("interval_seconds"),
        "overlap": when.get("overlap", "skip"),
        "paused": description.schedule.state.paused,
        "next_runs": [each.isoformat() for each in info.next_action_times],
        "runs_started": info.num_actions,
        "runs": runs,
    }
