"""Following a run: each step printed as its history records it, through
every run of its chain; a notice when no worker takes a step for
WAIT_NOTICE; with approvals, the requests that wait for a person; then its
answer or, for a conversation that waits for a follow-up, its latest one."""

import asyncio
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import (
    PendingActivityState,
    PendingWorkflowTaskState,
    RateLimitSource,
    TaskQueueType,
)
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import (
    Client,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
)
from temporalio.service import RPCError, RPCStatusCode

from sandbox_agent_runtime.client import (
    WORKER_ANSWERS_WITHIN,
    Progress,
    StoppedAnswering,
    answered,
    chain_run,
    continued_as,
    history_of,
    why_not_completed,
)
from sandbox_agent_runtime.display import visible
from sandbox_agent_runtime.model_queue import model_task_queue
from sandbox_agent_runtime.run_request import Conversation, RunAnswer
from sandbox_agent_runtime.service import current
from sandbox_agent_runtime.shared import CONVERSATION, MODEL_ACTIVITIES, step_name
from sandbox_agent_runtime.starter.approving import approvals, ask_for_decisions
from sandbox_agent_runtime.starter.outputs import show_answer
from sandbox_agent_runtime.starter.reaching import stopped_answering
from sandbox_agent_runtime.starter.statuses import (
    EXIT_NOT_COMPLETED,
    EXIT_UNREACHABLE,
    Refused,
)
from sandbox_agent_runtime.starter.writing import Writing, offset_now, writes_as_it_comes

# follow()'s stream_from for a run whose text is printed whole, not as written.
NOT_WRITTEN = -1

# A step that no worker has taken for this long is shown as waiting. Past a
# worker's capacity, or with no worker running, a run's next
# step waits on the task queue until a worker is free: nothing fails.
WAIT_NOTICE = timedelta(seconds=10)


@dataclass(frozen=True)
class Queued:
    """A step of a run that waits for a worker: a key that tells one wait
    from the next, the step in words, whether it is a model call, and the
    task queue it waits on (None: the run's)."""

    key: object
    step: str
    model_call: bool = False
    task_queue: str | None = None


async def queued_step(run: WorkflowHandle[Any, RunAnswer]) -> Queued | None:
    """The step of a run that waits for a worker to take it, if any."""
    description = (await run.describe()).raw_description
    task = description.pending_workflow_task
    if task.state == PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_SCHEDULED:
        key = ("workflow task", task.scheduled_time.ToNanoseconds())
        return Queued(key, "the run's next workflow task")
    scheduled = PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED
    for activity in description.pending_activities:
        backing_off = activity.next_attempt_schedule_time.ToNanoseconds() > time.time_ns()
        if activity.state == scheduled and not backing_off:
            name = activity.activity_type.name
            step = step_name(name).replace("the ", "its ", 1)
            # A model call waits on its own queue or on the run's, as the
            # worker that scheduled it was set (MODEL_CALLS_QUEUE).
            queue = activity.activity_options.task_queue.name or None
            key = (activity.activity_id, activity.attempt)
            return Queued(key, step, name in MODEL_ACTIVITIES, queue)
    return None


async def fleet_rate(client: Client) -> float | None:
    """The rate the server holds the model calls' queue to (its workers'
    MODEL_CALLS_PER_SECOND, or one set on the queue itself), or None for
    none: the system's default is no limit a person set."""
    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=model_task_queue()),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
            report_config=True,
        )
    )
    limit = response.effective_rate_limit
    if limit.rate_limit_source in (
        RateLimitSource.RATE_LIMIT_SOURCE_API,
        RateLimitSource.RATE_LIMIT_SOURCE_WORKER,
    ):
        return limit.requests_per_second
    return None


async def wait_notice(client: Client, queued: Queued, waited: float) -> str:
    """The line saying that ``queued`` has waited ``waited`` seconds for a worker."""
    if queued.model_call and queued.task_queue == model_task_queue():
        queue = model_task_queue()
        try:
            rate = await fleet_rate(client)
        except RPCError:
            rate = None
        why = (
            f"the service's model calls (task queue {queue!r}) are held to {rate:g} a second "
            "across the fleet (MODEL_CALLS_PER_SECOND), or every worker is busy, or none is running"
            if rate is not None
            else f"every worker on task queue {queue!r} (the service's model calls) is busy, or "
            "none is running"
        )
    else:
        why = f"every worker on task queue {current().task_queue!r} is busy, or none is running"
    return (
        f"  waiting  {waited:.0f} s for a worker to take {queued.step}: {why}; the run waits, "
        "nothing is lost"
    )


def print_line(line: str) -> None:
    print(line, flush=True)


async def show_waits(
    client: Client,
    following: Callable[[], WorkflowHandle[Any, RunAnswer]],
    show: Callable[[str], None] | None = None,
) -> None:
    """Say so when the run being followed (``following()``) has a step that
    no worker has taken for WAIT_NOTICE."""
    first_seen: dict[object, float] = {}
    shown: set[object] = set()
    while True:
        await asyncio.sleep(WAIT_NOTICE.total_seconds() / 5)
        try:
            queued = await queued_step(following())
        except RPCError:
            continue
        if queued is None or queued.key in shown:
            continue
        waited = time.monotonic() - first_seen.setdefault(queued.key, time.monotonic())
        if waited >= WAIT_NOTICE.total_seconds():
            shown.add(queued.key)
            (show or print_line)(await wait_notice(client, queued, waited))


async def follow(
    client: Client,
    handle: WorkflowHandle[Any, RunAnswer],
    key_file: Path | None = None,
    output: Path | None = None,
    *,
    prompt: int | None = 1,
    after: Callable[[HistoryEvent], bool] | None = None,
    conversation: bool = False,
    stream_from: int | None = 0,
) -> int:
    """Print each step of the run, through every run of its chain, as it happens,
    then its answer, and write its files under ``output``. With approvals, a
    decision asked on the terminal is signed with the approver's key.

    Args:
        client: the Temporal client.
        handle: the run's handle (``start``).
        key_file: the approver's key; None for the one ``APPROVER_KEY_FILE``
            names (unused without approvals).
        output: where to write the run's files; None writes none.
        prompt: for a conversation, the prompt whose answer ends the
            following (not the conversation, which may last days); None
            follows to the conversation's end.
        after: show only the steps after the first event it is true of (the
            follow-up being taken); the events before are only read.
        conversation: follow the run as a conversation.
        stream_from: on a terminal, where in the run's stream the model's
            text to print as it is written begins (0: all of it; None: what
            it writes from now on; NOT_WRITTEN: none, the answer whole).

    Returns:
        The starter's exit status for what happened (``EXIT_COMPLETED``...).
    """
    progress = Progress(client, conversation)
    current: WorkflowHandle[Any, RunAnswer] | None = handle
    writing, reading = None, None
    if writes_as_it_comes() and stream_from != NOT_WRITTEN:
        if stream_from is None:
            stream_from = await offset_now(client, handle.id)
        if stream_from is not None:
            writing = Writing(from_start=stream_from == 0 and after is None)
            reading = asyncio.create_task(writing.read(client, handle.id, stream_from))
    show = writing.line if writing is not None else print_line
    waits = asyncio.create_task(show_waits(client, lambda: current or handle, show))
    # With approvals, set on each event of the run's history: ask_for_decisions asks again soon.
    moved = asyncio.Event()
    asking = (
        asyncio.create_task(ask_for_decisions(client, handle.id, key_file, moved))
        if approvals()
        else None
    )
    showing = after is None
    try:
        while current is not None:
            next_run = None
            async for event in history_of(current):
                moved.set()
                if writing and reading and writing.ends_a_model_call(event):
                    # The text of the turn before the steps after it.
                    await writing.caught_up(client, handle.id, reading)
                if showing:
                    line = await progress.describe(event)
                    if line is not None:
                        show(f"  {line}")
                elif after is not None:
                    await progress.session_of(event)
                    showing = after(event)
                if progress.answered(prompt):
                    break
                next_run = continued_as(event)
            current = None if next_run is None else chain_run(client, handle.id, next_run)
        waiting = progress.answered(prompt)
        if waiting:
            # It waits for a follow-up: its answer is in its state.
            answer = await answered(lambda: latest_answer(client, handle.id))
        else:
            answer = await answered(handle.result)
        if writing is not None and reading is not None:
            await writing.caught_up(client, handle.id, reading, last=True)
    except WorkflowFailureError as e:
        print(f"Workflow {handle.id} {why_not_completed(e)}", file=sys.stderr)
        return EXIT_NOT_COMPLETED
    except Refused as e:
        print(visible(f"ERROR: {e}"), file=sys.stderr)
        return e.status
    except StoppedAnswering:
        following = f"following workflow {handle.id}; the run itself may go on"
        return stopped_answering(client, f"{following}. Follow it again with --attach {handle.id}")
    except asyncio.CancelledError:
        print(
            f"\nStopped following. The run goes on; follow it again with --attach {handle.id}",
            file=sys.stderr,
        )
        raise
    finally:
        waits.cancel()
        if asking is not None:
            asking.cancel()
        if reading is not None:
            reading.cancel()
    # An answer printed as it was written is not printed again.
    written = (
        writing is not None and not answer.structured and writing.shown_whole(str(answer.answer))
    )
    return await show_answer(client, handle.id, answer, output, waiting, written)


async def latest_answer(client: Client, workflow_id: str) -> RunAnswer:
    """A conversation's latest answer (from the CONVERSATION query, which a
    worker answers); ``Refused`` when no worker answers within
    WORKER_ANSWERS_WITHIN, or the run has no answer to give."""
    try:
        found = await chain_run(client, workflow_id, None).query(
            CONVERSATION, result_type=Conversation, rpc_timeout=WORKER_ANSWERS_WITHIN
        )
    except RPCError as e:
        if e.status not in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED):
            raise
        raise Refused(
            f"no worker answered for workflow {workflow_id} within "
            f"{WORKER_ANSWERS_WITHIN.total_seconds():.0f} s: start one "
            f"({current().command('worker')}) and ask again with --attach {workflow_id}",
            EXIT_UNREACHABLE,
        ) from e
    except WorkflowQueryFailedError as e:
        raise Refused(
            f"workflow {workflow_id} did not say where it stands: {e}", EXIT_NOT_COMPLETED
        ) from e
    if not isinstance(found, Conversation) or found.answer is None:
        raise Refused(f"workflow {workflow_id} has no answer yet", EXIT_NOT_COMPLETED)
    return found.answer
