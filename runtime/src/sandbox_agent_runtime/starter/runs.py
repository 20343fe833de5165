"""Finding a run and where it stands: the latest run of a workflow id,
described and checked to be this service's (owners.py); where a conversation stands
(its SESSION_MEMO), in words; and from which event of its history the
prompt it works on is shown."""

from collections.abc import Callable
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowExecutionDescription
from temporalio.service import RPCError, RPCStatusCode

from sandbox_agent_runtime.owners import of_this_service
from sandbox_agent_runtime.run_request import RELEASED, WAITING
from sandbox_agent_runtime.shared import FOLLOW_UP, SESSION_MEMO
from sandbox_agent_runtime.starter.client import answered, chain_run
from sandbox_agent_runtime.starter.statuses import EXIT_USAGE, Refused


async def described(client: Client, workflow_id: str, option: str) -> WorkflowExecutionDescription:
    """The latest run of ``workflow_id``, described; ``Refused`` (EXIT_USAGE)
    when there is no such workflow or it is another service's (owners.py),
    whatever its workflow type: the same line for both, so a service learns
    nothing of another's runs."""
    unknown = Refused(
        f"{option} {workflow_id!r}: no such workflow in namespace {client.namespace!r}.",
        EXIT_USAGE,
    )
    try:
        description: WorkflowExecutionDescription = await answered(
            chain_run(client, workflow_id, None).describe
        )
    except RPCError as e:
        if e.status != RPCStatusCode.NOT_FOUND:
            raise
        raise unknown from e
    if not of_this_service(description, await description.memo()):
        raise unknown
    return description


async def session_memo(description: WorkflowExecutionDescription) -> dict[str, Any]:
    """Where a conversation stands, from its latest run's memo
    (SESSION_MEMO); {} for a run without follow-ups, or one whose first
    workflow task has not run yet."""
    session = (await description.memo()).get(SESSION_MEMO)
    return session if isinstance(session, dict) else {}


def state_line(workflow_id: str, session: dict[str, Any]) -> str:
    """A conversation that waits for a follow-up, or has ended, in words."""
    state, since = session.get("state"), session.get("since") or "?"
    answered = session.get("answered", "?")
    if state == WAITING:
        return (
            f"Conversation {workflow_id} is waiting for a follow-up after prompt {answered} "
            f"(sandbox held since {since})"
        )
    if state == RELEASED:
        return (
            f"Conversation {workflow_id} is waiting for a follow-up after prompt {answered}, "
            f"released: its workspace is in a snapshot (since {since})"
        )
    return f"Conversation {workflow_id} has ended (since {since}): it closes once its sandbox is removed"


def prompt_started(prompt: int) -> Callable[[HistoryEvent], bool]:
    """True from the event where a conversation took ``prompt``: its
    follow-up ``prompt - 1`` (a validator refuses the others, so only
    follow-ups taken are in history)."""
    taken = 0

    def started(event: HistoryEvent) -> bool:
        nonlocal taken
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            accepted = event.workflow_execution_update_accepted_event_attributes.accepted_request
            taken += accepted.input.name == FOLLOW_UP
        return taken >= prompt - 1

    return started
