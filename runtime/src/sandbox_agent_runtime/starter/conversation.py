"""Continuing and ending a conversation: ``--continue`` sends a follow-up (the
FOLLOW_UP update) and follows it, from the event where the run took it, to
its answer; ``--end`` ends it (the END update) and waits until its sandbox is
removed. A run that takes neither refuses in one line, saying what to do."""

import asyncio
import sys
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowFailureError

from sandbox_agent_runtime.client import (
    NoFollowUps,
    Refused,
    RunEnded,
    StoppedAnswering,
    Taken,
    answered,
    chain_run,
    running_conversation,
    send_update,
    update_taken,
    web_ui_link,
    why_not_completed,
)
from sandbox_agent_runtime.display import visible
from sandbox_agent_runtime.run_request import FollowUp
from sandbox_agent_runtime.settings import StarterSettings
from sandbox_agent_runtime.shared import END, FOLLOW_UP
from sandbox_agent_runtime.starter.approving import key_file_of
from sandbox_agent_runtime.starter.following import NOT_WRITTEN, follow, show_waits
from sandbox_agent_runtime.starter.reaching import reached, stopped_answering
from sandbox_agent_runtime.starter.runs import described
from sandbox_agent_runtime.starter.statuses import (
    EXIT_COMPLETED,
    EXIT_NOT_COMPLETED,
    EXIT_REFUSED,
    EXIT_UNREACHABLE,
)
from sandbox_agent_runtime.starter.statuses import Refused as StarterRefused
from sandbox_agent_runtime.starter.writing import offset_now, writes_as_it_comes


async def conversation_of(client: Client, workflow_id: str, option: str, closed: str) -> None:
    """``Refused`` unless the latest run of ``workflow_id`` is a running
    conversation: a closed workflow takes no update (EXIT_REFUSED: the line
    says ``closed``, what to do), nor does a run started without follow-ups
    (EXIT_REFUSED); there may be no such workflow, or one of another type
    (EXIT_USAGE)."""
    description = await described(client, workflow_id, option)
    try:
        await running_conversation(client, description)
    except RunEnded as e:
        raise StarterRefused(f"{e}: {closed}.") from e
    except NoFollowUps as e:
        raise StarterRefused(f"{e}.") from e


async def send(
    client: Client, workflow_id: str, update: str, *args: Any, result_type: type, then: str
) -> Taken:
    """Send ``update`` to the latest run of ``workflow_id`` (client.send_update),
    saying so when no worker takes it for WAIT_NOTICE, and that it may still
    take it when the starter is stopped first (Ctrl+C)."""
    waits = asyncio.create_task(show_waits(client, lambda: chain_run(client, workflow_id, None)))
    try:
        return await send_update(
            client, workflow_id, update, *args, result_type=result_type, then=then
        )
    except asyncio.CancelledError:
        print(
            f"\nStopped before workflow {workflow_id} took it: it may still; "
            f"see with --attach {workflow_id}",
            file=sys.stderr,
        )
        raise
    finally:
        waits.cancel()


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
        await conversation_of(client, workflow_id, "--continue", "start a new run")
        # On a terminal, the text the model writes for this follow-up: what
        # the run's stream holds from here.
        stream_from = (await offset_now(client, workflow_id)) if writes_as_it_comes() else None
        # The run answers at once with the prompt's number (or refuses).
        update = await send(
            client, workflow_id, FOLLOW_UP, follow_up, result_type=int, then="send it"
        )
        number = int(update.answer)
    except StarterRefused as e:
        print(visible(f"ERROR: {e}"), file=sys.stderr)
        return e.status
    except Refused as e:
        print(visible(f"ERROR: {e}."), file=sys.stderr)
        return EXIT_REFUSED
    except StoppedAnswering:
        return stopped_answering(
            client,
            f"sending the follow-up to workflow {workflow_id}: it may or may not have "
            f"been taken; see with --attach {workflow_id}",
        )
    except RunEnded:
        # The run closed after it was described: a closed run takes no update.
        print(
            visible(f"ERROR: workflow {workflow_id} has ended: start a new run."), file=sys.stderr
        )
        return EXIT_REFUSED
    print(f"Follow-up {number} taken by workflow {workflow_id}")
    print(f"Web UI: {web_ui_link(client, workflow_id, settings.ui_url)}", flush=True)
    return await follow(
        client,
        chain_run(client, workflow_id, update.run_id),
        key_file_of(settings),
        output,
        prompt=number,
        after=update_taken(update.update_id),
        conversation=True,
        stream_from=NOT_WRITTEN if stream_from is None else stream_from,
    )


async def end_conversation(workflow_id: str, settings: StarterSettings) -> int:
    """--end: end a conversation (the END update), and wait until the run
    has removed its sandbox and closed."""
    client = await reached(settings)
    if client is None:
        return EXIT_UNREACHABLE
    try:
        await conversation_of(client, workflow_id, "--end", "nothing to end")
        await send(client, workflow_id, END, result_type=str, then="end it")
        # The run removes its sandbox, then closes with its last answer.
        await answered(chain_run(client, workflow_id, None).result)
    except StarterRefused as e:
        print(visible(f"ERROR: {e}"), file=sys.stderr)
        return e.status
    except Refused as e:
        print(visible(f"ERROR: {e}."), file=sys.stderr)
        return EXIT_REFUSED
    except WorkflowFailureError as e:
        print(f"Workflow {workflow_id} {why_not_completed(e)}", file=sys.stderr)
        return EXIT_NOT_COMPLETED
    except StoppedAnswering:
        return stopped_answering(
            client,
            f"ending workflow {workflow_id}: see whether it ended with --attach {workflow_id}",
        )
    except RunEnded:
        print(visible(f"ERROR: workflow {workflow_id} has ended already."), file=sys.stderr)
        return EXIT_REFUSED
    print(visible(f"Ended the conversation {workflow_id}: its sandbox is removed"))
    return EXIT_COMPLETED
