"""Finding a run: the latest run of a workflow id, described and checked to
be this service's, and where a conversation stands (its
SESSION_MEMO)."""

from typing import Any

from temporalio.client import Client, WorkflowExecutionDescription
from temporalio.service import RPCError, RPCStatusCode

from sandbox_agent_runtime.client.connection import answered, chain_run
from sandbox_agent_runtime.client.errors import RunNotFound
from sandbox_agent_runtime.owners import of_this_service
from sandbox_agent_runtime.shared import SESSION_MEMO


async def described(
    client: Client, workflow_id: str, through_outages: bool = True
) -> WorkflowExecutionDescription:
    """The latest run of ``workflow_id``, described (``through_outages``: asked
    again through an outage of the service shorter than SERVICE_OUTAGE_LIMIT);
    ``RunNotFound`` when there is no such workflow or it is another
    service's, whatever its workflow type."""
    describe = chain_run(client, workflow_id, None).describe
    try:
        description: WorkflowExecutionDescription = await (
            answered(describe) if through_outages else describe()
        )
    except RPCError as e:
        if e.status not in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT):
            raise
        raise RunNotFound(workflow_id, client.namespace) from e
    if not of_this_service(description, await description.memo()):
        raise RunNotFound(workflow_id, client.namespace)
    return description


def closed_as(description: WorkflowExecutionDescription) -> str:
    """How a run closed, in words ("completed", "timed out")."""
    status = description.status
    return status.name.lower().replace("_", " ") if status else "?"


async def session_memo(description: WorkflowExecutionDescription) -> dict[str, Any]:
    """Where a conversation stands, from its latest run's memo
    (SESSION_MEMO); {} for a run without follow-ups, or one whose first
    workflow task has not run yet."""
    session = (await description.memo()).get(SESSION_MEMO)
    return session if isinstance(session, dict) else {}
