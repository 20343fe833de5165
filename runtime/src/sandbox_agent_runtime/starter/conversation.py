"""Continuing and ending a conversation: ``--continue`` sends a follow-up (the
FOLLOW_UP update) and follows it, from the event where the run took it, to
its answer; ``--end`` ends it (the END update) and waits until its sandbox is
removed. A run that takes neither refuses in one line, saying what to do."""

import asyncio
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowUpdateFailedError,
    WorkflowUpdateHandle,
    WorkflowUpdateRPCTimeoutOrCancelledError,
    WorkflowUpdateStage,
)
from temporalio.service import RPCError, RPCStatusCode

from sandbox_agent_runtime.display import visible
from sandbox_agent_runtime.encryption import UnknownKey, WrongKey
from sandbox_agent_runtime.run_request import FollowUp
from sandbox_agent_runtime.settings import StarterSettings
from sandbox_agent_runtime.shared import END, FOLLOW_UP
from sandbox_agent_runtime.starter.approving import key_file_of
from sandbox_agent_runtime.starter.client import (
    StoppedAnswering,
    answered,
    chain_run,
    reached,
    stopped_answering,
    web_ui_link,
)
from sandbox_agent_runtime.starter.following import follow, show_waits
from sandbox_agent_runtime.starter.runs import described, session_memo
from sandbox_agent_runtime.starter.statuses import (
    EXIT_COMPLETED,
    EXIT_NOT_COMPLETED,
    EXIT_REFUSED,
    EXIT_UNREACHABLE,
    Refused,
)
from sandbox_agent_runtime.starter.steps import why_not_completed

# Why a conversation refuses a follow-up or the end (the ApplicationError
# type its FOLLOW_UP or END update's validator raises), and what to do
# instead, in the line the starter prints ({id}: the workflow's id; {then}:
# what to do once it has answered).
REFUSALS = {
    "StillWorking": "workflow {id} is still working on a prompt: follow it to its answer "
    "(--attach {id}), then {then}",
    "NoFollowUps": "workflow {id} was started without follow-ups (RunRequest.follow_ups): "
    "start a new run",
    "ConversationEnded": "the conversation {id} has ended: start a new run",
}


async def running_conversation(client: Client, workflow_id: str, option: str, closed: str) -> None:
    """``Refused`` unless the latest run of ``workflow_id`` is a running
    conversation: a closed workflow takes no update (EXIT_REFUSED: the line
    says ``closed``, what to do), nor does a run started without follow-ups
    (EXIT_REFUSED, said here at once: its validator would say it only once a
    worker takes the update); there may be no such workflow, or one of
    another type (EXIT_USAGE)."""
    description = await described(client, workflow_id, option)
    if description.status != WorkflowExecutionStatus.RUNNING:
        status = description.status.name.lower().replace("_", " ") if description.status else "?"
        raise Refused(f"workflow {workflow_id} has ended ({status}): {closed}.")
    if not await session_memo(description) and not await takes_follow_ups(client, description):
        # Refused here, not by the run's validator: that needs a worker.
        raise Refused(REFUSALS["NoFollowUps"].format(id=workflow_id) + ".")


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


def update_taken(update_id: str) -> Callable[[HistoryEvent], bool]:
    """True of the event where a run took the update ``update_id``."""

    def taken(event: HistoryEvent) -> bool:
        if event.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            return False
        accepted = event.workflow_execution_update_accepted_event_attributes.accepted_request
        return accepted.meta.update_id == update_id

    return taken


async def send(
    client: Client, workflow_id: str, update: str, *args: Any, result_type: type
) -> WorkflowUpdateHandle[Any]:
    """Send ``update`` to the latest run of ``workflow_id`` once a worker
    takes it (saying so when none does for WAIT_NOTICE), through an outage
    of the service: it is sent again with the same id, which a run takes
    only once. ``WorkflowUpdateFailedError`` when the run refuses it."""
    latest = chain_run(client, workflow_id, None)
    waits = asyncio.create_task(show_waits(client, lambda: latest))
    update_id = str(uuid.uuid4())
    try:
        sent: WorkflowUpdateHandle[Any] = await answered(
            lambda: latest.start_update(
                update,
                args=args,
                id=update_id,
                wait_for_stage=WorkflowUpdateStage.ACCEPTED,
                result_type=result_type,
            )
        )
        return sent
    except WorkflowUpdateRPCTimeoutOrCancelledError as e:
        # The SDK's word for a cancelled wait (Ctrl+C): cancelled it stays.
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            print(
                f"\nStopped before workflow {workflow_id} took it: it may still; "
                f"see with --attach {workflow_id}",
                file=sys.stderr,
            )
            raise asyncio.CancelledError from e
        raise StoppedAnswering from e
    finally:
        waits.cancel()


def refusal(error: WorkflowUpdateFailedError, workflow_id: str, then: str) -> str:
    """Why a run refused an update, and what to do (``then``, once it has
    answered), in one line."""
    kind = getattr(error.cause, "type", None)
    if kind in REFUSALS:
        return REFUSALS[kind].format(id=workflow_id, then=then)
    return f"workflow {workflow_id} refused it: {getattr(error.cause, 'message', error.cause)}"


async def continue_conversation(
    workflow_id: str, follow_up: FollowUp, settings: StarterSettings, output: Path | None = None
) -> int:
    """--continue: send a follow-up to a conversation that has answered
    (the FOLLOW_UP update), then follow it, from the event where the run
    took it, to its answer, and write its files under ``output``."""
    client = await reached(settings)
    if client is None:
        return EXIT_UNREACHABLE
    try:
        await running_conversation(client, workflow_id, "--continue", "start a new run")
        update = await send(client, workflow_id, FOLLOW_UP, follow_up, result_type=int)
        # The run answers at once with the prompt's number (or refuses).
        number = int(await update.result())
    except Refused as e:
        print(visible(f"ERROR: {e}"), file=sys.stderr)
        return e.status
    except WorkflowUpdateFailedError as e:
        print(visible(f"ERROR: {refusal(e, workflow_id, 'send it')}."), file=sys.stderr)
        return EXIT_REFUSED
    except StoppedAnswering:
        return stopped_answering(
            client,
            f"sending the follow-up to workflow {workflow_id}: it may or may not have "
            f"been taken; see with --attach {workflow_id}",
        )
    except RPCError as e:
        # The run closed after it was described: a closed run takes no update.
        if e.status != RPCStatusCode.NOT_FOUND:
            raise
        print(
            visible(f"ERROR: workflow {workflow_id} has ended: start a new run."), file=sys.stderr
        )
        return EXIT_REFUSED
    print(f"Follow-up {number} taken by workflow {workflow_id}")
    print(f"Web UI: {web_ui_link(client, workflow_id, settings.ui_url)}", flush=True)
    return await follow(
        client,
        chain_run(client, workflow_id, update.workflow_run_id),
        key_file_of(settings),
        output,
        prompt=number,
        after=update_taken(update.id),
        conversation=True,
    )


async def end_conversation(workflow_id: str, settings: StarterSettings) -> int:
    """--end: end a conversation (the END update), and wait until the run
    has removed its sandbox and closed."""
    client = await reached(settings)
    if client is None:
        return EXIT_UNREACHABLE
    try:
        await running_conversation(client, workflow_id, "--end", "nothing to end")
        update = await send(client, workflow_id, END, result_type=str)
        await update.result()
        # The run removes its sandbox, then closes with its last answer.
        await answered(chain_run(client, workflow_id, None).result)
    except Refused as e:
        print(visible(f"ERROR: {e}"), file=sys.stderr)
        return e.status
    except WorkflowUpdateFailedError as e:
        print(visible(f"ERROR: {refusal(e, workflow_id, 'end it')}."), file=sys.stderr)
        return EXIT_REFUSED
    except WorkflowFailureError as e:
        print(f"Workflow {workflow_id} {why_not_completed(e)}", file=sys.stderr)
        return EXIT_NOT_COMPLETED
    except StoppedAnswering:
        return stopped_answering(
            client,
            f"ending workflow {workflow_id}: see whether it ended with --attach {workflow_id}",
        )
    except RPCError as e:
        if e.status != RPCStatusCode.NOT_FOUND:
            raise
        print(visible(f"ERROR: workflow {workflow_id} has ended already."), file=sys.stderr)
        return EXIT_REFUSED
    print(visible(f"Ended the conversation {workflow_id}: its sandbox is removed"))
    return EXIT_COMPLETED
