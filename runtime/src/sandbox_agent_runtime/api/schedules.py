"""The API's schedules (schedules.py): made from a run's body through every
check a run's request gets, and found, shown, paused, resumed and deleted
by their caller only; any other id is a 404, as a schedule that does not
exist."""

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.responses import Response

from sandbox_agent_runtime import schedules
from sandbox_agent_runtime.api.bodies import read_body
from sandbox_agent_runtime.api.document import problems, request_body
from sandbox_agent_runtime.api.models import ScheduleBody, Schedules, ScheduleState
from sandbox_agent_runtime.api.problems import Problem
from sandbox_agent_runtime.api.routes import CalledBy, ServedBy, run_request_of

log = logging.getLogger("api")

ScheduleId = Annotated[
    str, Path(description="The schedule's id, as POST /v1/schedules answered it.")
]

router = APIRouter(prefix="/v1/schedules")


def links(schedule_id: str) -> dict[str, str]:
    base = f"/v1/schedules/{schedule_id}"
    return {"self": base, "pause": f"{base}/pause", "unpause": f"{base}/unpause"}


async def owned(api: ServedBy, caller: CalledBy, schedule_id: str) -> Any:
    """The caller's schedule's handle; a 404 for any other id."""
    try:
        return await schedules.own(api.client, schedule_id, caller.owner)
    except schedules.NoSchedule as e:
        raise Problem(404, f"schedule {schedule_id[:80]!r}: no such schedule of yours.") from e


async def state(handle: Any) -> dict[str, Any]:
    shown = await schedules.shown(await handle.describe())
    return {**shown, "links": links(shown["id"])}


@router.post(
    "",
    status_code=201,
    operation_id="create_schedule",
    summary="Make a schedule: a job started on a calendar or an interval",
    response_model=ScheduleState,
    responses={
        201: {
            "description": "Made: the schedule",
            "headers": {"Location": {"description": "The schedule", "schema": {"type": "string"}}},
        },
        **problems(400, 401, 411, 413, 415, 422, 429, 503),
    },
    openapi_extra=request_body(ScheduleBody, files=True),
)
async def create(
    request: Request, response: Response, api: ServedBy, caller: CalledBy
) -> dict[str, Any]:
    body = await read_body(request, ScheduleBody, api.has_store)
    run = await run_request_of(body, api)
    starter = api.settings.starter
    try:
        spec, when = schedules.spec_of(
            body.fields.get("cron"),
            body.fields.get("interval_seconds"),
            starter.schedule_min_interval,
            ("field 'cron'", "field 'interval_seconds'"),
            as_text=not request.headers.get("content-type", "").startswith("application/json"),
        )
        overlap = schedules.overlap_of(body.fields.get("overlap", ""), "field 'overlap'")
    except schedules.BadSchedule as e:
        raise Problem(422, f"{e}.") from e
    try:
        schedule_id = await schedules.create(
            api.client, run, spec, when, overlap, caller.owner, starter.schedules_per_caller
        )
    except schedules.TooManySchedules as e:
        raise Problem(429, f"{e}.") from e
    except schedules.BadSchedule as e:
        raise Problem(422, f"field '{next(iter(when))}' {str(e).split(' ', 1)[1]}.") from e
    log.info("%s made schedule %s", caller.owner, schedule_id)
    response.headers["Location"] = f"/v1/schedules/{schedule_id}"
    return await state(api.client.get_schedule_handle(schedule_id))


@router.get(
    "",
    operation_id="list_schedules",
    summary="The caller's schedules",
    response_model=Schedules,
    responses=problems(401, 503),
)
async def listed(api: ServedBy, caller: CalledBy) -> dict[str, Any]:
    found = []
    for schedule_id in await schedules.owned(api.client, caller.owner):
        try:
            found.append(await state(await schedules.own(api.client, schedule_id, caller.owner)))
        except schedules.NoSchedule:
            continue  # deleted since it was listed
    return {"schedules": found}


@router.get(
    "/{schedule}",
    operation_id="schedule_state",
    summary="A schedule, with its latest runs",
    response_model=ScheduleState,
    responses=problems(401, 404, 503),
)
async def one(schedule: ScheduleId, api: ServedBy, caller: CalledBy) -> dict[str, Any]:
    return await state(await owned(api, caller, schedule))


@router.post(
    "/{schedule}/pause",
    operation_id="pause_schedule",
    summary="Pause a schedule: it starts no run until unpaused",
    response_model=ScheduleState,
    responses=problems(401, 404, 503),
)
async def pause(schedule: ScheduleId, api: ServedBy, caller: CalledBy) -> dict[str, Any]:
    handle = await owned(api, caller, schedule)
    await handle.pause(note=f"paused by {caller.owner}")
    return await state(handle)


@router.post(
    "/{schedule}/unpause",
    operation_id="unpause_schedule",
    summary="Resume a paused schedule",
    response_model=ScheduleState,
    responses=problems(401, 404, 503),
)
async def unpause(schedule: ScheduleId, api: ServedBy, caller: CalledBy) -> dict[str, Any]:
    handle = await owned(api, caller, schedule)
    await handle.unpause(note=f"unpaused by {caller.owner}")
    return await state(handle)


@router.delete(
    "/{schedule}",
    operation_id="delete_schedule",
    summary="Delete a schedule (the runs it started go on); the schedule as it was",
    response_model=ScheduleState,
    responses=problems(401, 404, 503),
)
async def delete(schedule: ScheduleId, api: ServedBy, caller: CalledBy) -> dict[str, Any]:
    handle = await owned(api, caller, schedule)
    was = await state(handle)
    await handle.delete()
    log.info("%s deleted schedule %s", caller.owner, schedule)
    return was
