"""Approvals, for a service whose runs wait for a person's approval: what
waits in a run (asked of it: a worker answers) and a signed decision sent
to it; each refusal a typed error (errors.py)."""

from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode

from sandbox_agent_runtime import approvers
from sandbox_agent_runtime.client.connection import WORKER_ANSWERS_WITHIN, chain_run
from sandbox_agent_runtime.client.errors import NoWorker, Refused, RunEnded, RunNotFound
from sandbox_agent_runtime.client.runs import closed_as, described
from sandbox_agent_runtime.shared import DECIDE, PENDING

# What a call that waits for a worker gets when none answered in time.
NO_ANSWER = (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED)


def no_worker(workflow_id: str) -> NoWorker:
    return NoWorker(workflow_id, WORKER_ANSWERS_WITHIN.total_seconds())


async def pending_requests(
    client: Client, workflow_id: str, run_id: str | None = None
) -> list[dict[str, Any]]:
    """The requests of a run of the chain (None: its latest) that wait for a
    person; ``NoWorker`` when no worker answered within WORKER_ANSWERS_WITHIN."""
    try:
        found = await chain_run(client, workflow_id, run_id).query(
            PENDING, result_type=list, rpc_timeout=WORKER_ANSWERS_WITHIN
        )
    except RPCError as e:
        if e.status in NO_ANSWER:
            raise no_worker(workflow_id) from e
        raise
    return [request for request in found if isinstance(request, dict)]


async def running_run(client: Client, workflow_id: str) -> str:
    """The latest run of ``workflow_id`` while it runs: ``RunNotFound`` for
    no such workflow or another service's, ``RunEnded`` once it has closed."""
    description = await described(client, workflow_id)
    if description.status != WorkflowExecutionStatus.RUNNING:
        raise RunEnded(workflow_id, closed_as(description) if description.status else "ended")
    return str(description.run_id)


async def waiting_requests(client: Client, workflow_id: str) -> tuple[str, list[dict[str, Any]]]:
    """The running run of ``workflow_id`` and what waits in it for a person
    (``running_run``'s errors, and ``pending_requests``')."""
    run_id = await running_run(client, workflow_id)
    return run_id, await pending_requests(client, workflow_id, run_id)


async def send_signed(
    client: Client, workflow_id: str, run_id: str, decision: dict[str, Any]
) -> str:
    """Send a signed decision to run ``run_id`` of ``workflow_id``; what the
    run answered. ``Refused`` in the run's words, ``RunNotFound`` (its
    ``run_id`` set) when that run is not there to take it, ``NoWorker``."""
    try:
        answer = await chain_run(client, workflow_id, run_id).execute_update(
            DECIDE, decision, result_type=str, rpc_timeout=WORKER_ANSWERS_WITHIN
        )
    except WorkflowUpdateFailedError as e:
        reason = getattr(e.cause, "message", None) or str(e.cause)
        raise Refused(workflow_id, reason, reason) from e
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            raise RunNotFound(workflow_id, client.namespace, run_id) from e
        if e.status in NO_ANSWER:
            raise no_worker(workflow_id) from e
        raise
    return str(answer)


async def send_decision(
    client: Client,
    workflow_id: str,
    run_id: str,
    request: dict[str, Any],
    approve: bool,
    reason: str,
    always: bool,
    key: Ed25519PrivateKey,
) -> str:
    """Sign a person's decision on ``request`` (as it was shown) in run
    ``run_id`` with the approver's ``key`` and send it (``send_signed``);
    what the run answered."""
    decision = approvers.signed_decision(key, workflow_id, run_id, request, approve, reason, always)
    return await send_signed(client, workflow_id, run_id, decision)
