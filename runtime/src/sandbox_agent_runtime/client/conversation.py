"""Continuing and ending a conversation: whether a run takes a follow-up or
its end at all, and sending it one (the FOLLOW_UP or END update) once it
does; each refusal a typed error (errors.py)."""

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
    WorkflowUpdateStage,
)
from temporalio.service import RPCError, RPCStatusCode

from sandbox_agent_runtime.client.connection import answered, chain_run
from sandbox_agent_runtime.client.errors import (
    BadFollowUp,
    ConversationEnded,
    NoFollowUps,
    NoWorker,
    Refused,
    RunEnded,
    StillWorking,
    StoppedAnswering,
)
from sandbox_agent_runtime.client.runs import closed_as, session_memo
from sandbox_agent_runtime.encryption import UnknownKey, WrongKey

# Why a conversation refuses a follow-up or the end (the ApplicationError
# type its FOLLOW_UP or END update's validator raises), and what to do
# instead, in one line ({id}: the workflow's id; {then}: what to do once it
# has answered).
REFUSALS: dict[str, tuple[type[Refused], str]] = {
    "StillWorking": (
        StillWorking,
        "workflow {id} is still working on a prompt: follow it to its answer "
        "(--attach {id}), then {then}",
    ),
    "NoFollowUps": (
        NoFollowUps,
        "workflow {id} was started without follow-ups (RunRequest.follow_ups): start a new run",
    ),
    "ConversationEnded": (ConversationEnded, "the conversation {id} has ended: start a new run"),
}


def refused(workflow_id: str, kind: str | None, reason: str, then: str = "") -> Refused:
    """The typed error for a run's refusal of ``kind`` (its ApplicationError
    type), with the run's ``reason``; ``then``: what to do once it has answered."""
    if kind in REFUSALS:
        error, line = REFUSALS[kind]
        return error(workflow_id, reason, line.format(id=workflow_id, then=then))
    return (BadFollowUp if kind == "BadFollowUp" else Refused)(workflow_id, reason)


async def running_conversation(client: Client, description: WorkflowExecutionDescription) -> None:
    """``RunEnded`` unless the run ``description`` describes is running, and
    ``NoFollowUps`` for one started without follow-ups: said here at once,
    where its validator would say it only once a worker takes the update.
    A run whose first workflow task has not run yet (no SESSION_MEMO) is
    asked by its request (``takes_follow_ups``)."""
    workflow_id = description.id
    if description.status != WorkflowExecutionStatus.RUNNING:
        raise RunEnded(workflow_id, closed_as(description))
    if not await session_memo(description) and not await takes_follow_ups(client, description):
        raise refused(workflow_id, "NoFollowUps", "no follow-ups")


async def takes_follow_ups(client: Client, description: WorkflowExecutionDescription) -> bool:
    """Whether the run ``description`` describes was asked for follow-ups
    (its request's ``follow_ups``, in the first event of its history); True
    when its request cannot be read here (the run's validator decides)."""
    run = chain_run(client, description.id, description.run_id)
    async for event in run.fetch_history_events(page_size=1):
        started = event.workflow_execution_started_event_attributes
        try:
            [request, *_] = await client.data_converter.decode(started.input.payloads)
        except (UnknownKey, WrongKey):
            raise
        except Exception:
            return True
        return not isinstance(request, dict) or request.get("follow_ups") is True
    return True


@dataclass(frozen=True)
class Taken:
    """An update a run took: the run that took it, the update's id, what it answered."""

    run_id: str | None
    update_id: str
    answer: Any


async def send_update(
    client: Client,
    workflow_id: str,
    update: str,
    *args: Any,
    result_type: type,
    then: str = "",
    worker_within: timedelta | None = None,
) -> Taken:
    """Send ``update`` to the latest run of ``workflow_id`` and wait until
    the run has taken it and answered. Without ``worker_within``, it is sent
    again (with the same id, which a run takes only once) through an outage
    of the service shorter than SERVICE_OUTAGE_LIMIT (``StoppedAnswering``
    past it) and waits for a worker as long as it takes; with it,
    ``NoWorker`` once no worker took it for that long. ``Refused`` (a
    subclass for a known refusal) when the run refuses it, ``RunEnded``
    when the run has closed."""
    latest = chain_run(client, workflow_id, None)
    update_id = str(uuid.uuid4())
    rpc_timeout = worker_within

    def start() -> Any:
        return latest.start_update(
            update,
            args=args,
            id=update_id,
            wait_for_stage=WorkflowUpdateStage.ACCEPTED,
            result_type=result_type,
            rpc_timeout=rpc_timeout,
        )

    try:
        handle = await (start() if worker_within else answered(start))
        answer = await handle.result(rpc_timeout=rpc_timeout)
    except WorkflowUpdateFailedError as e:
        kind = getattr(e.cause, "type", None)
        reason = str(getattr(e.cause, "message", e.cause))
        raise refused(workflow_id, kind, reason, then) from e
    except WorkflowUpdateRPCTimeoutOrCancelledError as e:
        # The SDK's word for a cancelled wait (Ctrl+C): cancelled it stays.
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise asyncio.CancelledError from e
        if worker_within:
            raise NoWorker(workflow_id, worker_within.total_seconds()) from e
        raise StoppedAnswering from e
    except RPCError as e:
        # The run closed after it was described: a closed run takes no update.
        if e.status == RPCStatusCode.NOT_FOUND:
            raise RunEnded(workflow_id) from e
        if worker_within and e.status in (
            RPCStatusCode.DEADLINE_EXCEEDED,
            RPCStatusCode.CANCELLED,
        ):
            raise NoWorker(workflow_id, worker_within.total_seconds()) from e
        raise
    return Taken(handle.workflow_run_id, handle.id, answer)


def update_taken(update_id: str) -> Callable[[HistoryEvent], bool]:
    """True of the event where a run took the update ``update_id``."""

    def taken(event: HistoryEvent) -> bool:
        if event.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            return False
        accepted = event.workflow_execution_update_accepted_event_attributes.accepted_request
        return accepted.meta.update_id == update_id

    return taken
