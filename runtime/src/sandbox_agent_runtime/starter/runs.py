"""Finding a run and where it stands, for the starter: the latest run of a
workflow id, or the line for an unknown one; where a conversation stands,
in words; and from which event of its history the prompt it works on is
shown."""

from collections.abc import Callable
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowExecutionDescription

from sandbox_agent_runtime.client import RunNotFound
from sandbox_agent_runtime.client import described as client_described
from sandbox_agent_runtime.run_request import RELEASED, WAITING
from sandbox_agent_runtime.shared import FOLLOW_UP
from sandbox_agent_runtime.starter.statuses import EXIT_USAGE, Refused


async def described(client: Client, workflow_id: str, option: str) -> WorkflowExecutionDescription:
    """The latest run of ``workflow_id``, described; ``Refused`` (EXIT_USAGE)
    when there is no such workflow or it is another service's,
    whatever its workflow type: the same line for both, so a service learns
    nothing of another's runs."""
    try:
        return await client_described(client, workflow_id)
    except RunNotFound as e:
        raise Refused(
            f"{option} {workflow_id!r}: no such workflow in namespace {client.namespace!r}.",
            EXIT_USAGE,
        ) from e


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
