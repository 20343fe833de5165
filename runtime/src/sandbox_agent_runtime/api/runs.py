"""What the API does with runs, against the Temporal service: start one for
a caller, find a caller's own, say where it stands, send it a follow-up or
its end, hand over its outputs, list and decide what waits for a person.
Every refusal is a ``Problem`` of one sentence; the routes (app.py) only
read requests and write answers."""

import asyncio
import shutil
import tarfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowFailureError,
)
from temporalio.service import RPCError, RPCStatusCode

from sandbox_agent_runtime import approvers
from sandbox_agent_runtime.api.callers import Caller
from sandbox_agent_runtime.api.problems import Problem, not_found
from sandbox_agent_runtime.archives import write_outputs
from sandbox_agent_runtime.client import (
    WORKER_ANSWERS_WITHIN,
    ConversationEnded,
    NoFollowUps,
    NoWorker,
    Refused,
    RunEnded,
    RunNotFound,
    StillWorking,
    chain_run,
    described,
    pending_requests,
    running_conversation,
    send_signed,
    send_update,
    why_not_completed,
)
from sandbox_agent_runtime.owners import service_memo
from sandbox_agent_runtime.run_request import (
    ENDED,
    WORKING,
    Conversation,
    FollowUp,
    RunAnswer,
    RunRequest,
    answer_json,
)
from sandbox_agent_runtime.service import current
from sandbox_agent_runtime.shared import (
    CALLER_MEMO,
    CONVERSATION,
    END,
    FOLLOW_UP,
    SESSION_MEMO,
    USAGE_MEMO,
    WORKFLOW_TYPE,
)


def no_worker(workflow_id: str) -> Problem:
    return Problem(
        504,
        f"run {workflow_id!r}: no worker answered within "
        f"{WORKER_ANSWERS_WITHIN.total_seconds():.0f} s; is one running "
        f"({current().command('worker')})? Ask again.",
    )


async def own_run(client: Client, caller: Caller, workflow_id: str) -> WorkflowExecutionDescription:
    """The latest run of ``workflow_id`` when ``caller`` started it through
    the API; a 404 otherwise, the same for a run that does not exist, one of
    another caller or of the command-line starter, and another service's, whatever its workflow type."""
    try:
        description = await described(client, workflow_id, through_outages=False)
    except RunNotFound as e:
        raise not_found(workflow_id) from e
    memo = await description.memo()
    if memo.get(CALLER_MEMO) != caller.owner:
        raise not_found(workflow_id)
    return description


async def start_run(client: Client, caller: Caller, request: RunRequest) -> str:
    """Start ``request`` for ``caller`` (its owner, in the run's memo); the run's id."""
    service = current()
    workflow_id = f"{service.task_queue}-{uuid.uuid4()}"
    await client.start_workflow(
        WORKFLOW_TYPE,
        request,
        id=workflow_id,
        task_queue=service.task_queue,
        execution_timeout=None if request.follow_ups else service.workflow_execution_timeout,
        memo={**service_memo(), CALLER_MEMO: caller.owner},
    )
    return workflow_id


def session_of(memo: Mapping[str, Any]) -> dict[str, Any]:
    """Where a conversation stands, from its memo ({} for a job)."""
    session = memo.get(SESSION_MEMO)
    return session if isinstance(session, dict) else {}


def state_of(description: WorkflowExecutionDescription, session: dict[str, Any]) -> str:
    """Where a run stands: working, waiting (for a follow-up, holding its
    sandbox), released (waiting, its workspace in a snapshot), ended
    (answered and closed, or a conversation ended), or failed (closed
    without an answer: failed, timed out, terminated, cancelled)."""
    status = description.status
    if status == WorkflowExecutionStatus.RUNNING:
        return str(session.get("state") or WORKING)
    if status == WorkflowExecutionStatus.COMPLETED:
        return ENDED
    return "failed"


async def answer_of(
    client: Client,
    workflow_id: str,
    description: WorkflowExecutionDescription,
    session: dict[str, Any],
) -> RunAnswer | None:
    """The run's answer: a closed run's result, or a conversation's latest
    (asked of the run: a worker answers); None before the first."""
    handle = chain_run(client, workflow_id, None)
    if description.status == WorkflowExecutionStatus.COMPLETED:
        answer: RunAnswer = await handle.result()
        return answer
    if description.status != WorkflowExecutionStatus.RUNNING or not session.get("answered"):
        return None
    try:
        state = await handle.query(
            CONVERSATION, result_type=Conversation, rpc_timeout=WORKER_ANSWERS_WITHIN
        )
    except RPCError as e:
        if e.status in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED):
            raise no_worker(workflow_id) from e
        raise
    return state.answer if isinstance(state, Conversation) else None


def approval_data(run_id: str, request: dict[str, Any]) -> dict[str, Any]:
    """A request that waits for a person, as the run listed it: its detail
    whole, as the starter shows it (made visible by the run),
    and the run it waits in (a decision names it)."""
    return {
        "run_id": run_id,
        "call_id": str(request.get("call_id", "")),
        "tool": str(request.get("tool", "")),
        "detail": str(request.get("detail", "")),
        "asked_at": str(request.get("asked_at", "")),
    }


def links(workflow_id: str) -> dict[str, str]:
    base = f"/v1/runs/{workflow_id}"
    return {
        "self": base,
        "events": f"{base}/events",
        "messages": f"{base}/messages",
        "end": f"{base}/end",
        "outputs": f"{base}/outputs",
        "approvals": f"{base}/approvals",
    }


async def run_state(client: Client, caller: Caller, workflow_id: str) -> dict[str, Any]:
    """Where the caller's run stands, with its answer, usage and outputs."""
    description = await own_run(client, caller, workflow_id)
    memo = await description.memo()
    session = session_of(memo)
    state = state_of(description, session)
    body: dict[str, Any] = {
        "id": workflow_id,
        "state": state,
        "follow_ups": bool(session),
        "prompts": session.get("prompts", 1),
        "answered": session.get("answered", 1 if state == ENDED else 0),
        "since": session.get("since", ""),
        "usage": memo.get(USAGE_MEMO) if isinstance(memo.get(USAGE_MEMO), dict) else None,
        "answer": None,
        "links": links(workflow_id),
    }
    if state == "failed":
        try:
            await chain_run(client, workflow_id, None).result()
        except WorkflowFailureError as e:
            body["reason"] = why_not_completed(e)
        return body
    answer = await answer_of(client, workflow_id, description, session)
    if answer is not None:
        body["answer"] = answer_json(answer)
    return body


async def conversation(client: Client, caller: Caller, workflow_id: str, doing: str) -> None:
    """A 409 unless the caller's run is a running conversation
    (client.running_conversation)."""
    description = await own_run(client, caller, workflow_id)
    try:
        await running_conversation(client, description)
    except RunEnded as e:
        raise Problem(
            409, f"run {workflow_id!r} has ended: {doing} a run that is still going."
        ) from e
    except NoFollowUps as e:
        raise Problem(409, f"{e}.") from e


async def send(client: Client, workflow_id: str, update: str, *args: Any, then: str) -> Any:
    """Send ``update`` to the latest run and wait until the run takes it
    (client.send_update); what it answered. A 409 in the run's own words
    when it refuses."""
    try:
        taken = await send_update(
            client,
            workflow_id,
            update,
            *args,
            result_type=int if update == FOLLOW_UP else str,
            then=then,
            worker_within=WORKER_ANSWERS_WITHIN,
        )
    except (StillWorking, NoFollowUps, ConversationEnded) as e:
        raise Problem(409, f"{e}.") from e
    except Refused as e:
        raise Problem(409, f"run {workflow_id!r} refused it: {e.reason}.") from e
    except RunEnded as e:
        raise Problem(409, f"run {workflow_id!r} has ended: start a new run.") from e
    except NoWorker as e:
        raise no_worker(workflow_id) from e
    return taken.answer


async def follow_up(client: Client, caller: Caller, workflow_id: str, follow_up: FollowUp) -> int:
    """Send a follow-up; the prompt's number."""
    await conversation(client, caller, workflow_id, "follow up")
    return int(await send(client, workflow_id, FOLLOW_UP, follow_up, then="send it"))


async def end(client: Client, caller: Caller, workflow_id: str) -> None:
    await conversation(client, caller, workflow_id, "end")
    await send(client, workflow_id, END, then="end it")


def outputs_archive(answer: RunAnswer, workflow_id: str, directory: Path) -> Path:
    """The run's outputs as one gzipped tar in ``directory``: each file at
    its workspace path and, with a repository, the run's changes as
    ``changes.patch``: what ``--output DIR`` writes, through the same checks. Made on disk, a file at a time, and sent from there."""
    outputs = answer.outputs
    if outputs.withheld:
        raise Problem(409, f"run {workflow_id!r}: its files did not travel ({outputs.withheld}).")
    root = directory / "outputs"
    try:
        write_outputs(outputs, root)
    except (OSError, ValueError) as e:
        raise Problem(500, f"run {workflow_id!r}: its outputs could not be packed ({e}).") from e
    archive = directory / "outputs.tar.gz"
    with tarfile.open(archive, mode="w:gz") as tar:
        for path in sorted(root.rglob("*")):
            if path.is_file() and not path.is_symlink():
                info = tar.gettarinfo(str(path), arcname=path.relative_to(root).as_posix())
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = int(time.time())
                with path.open("rb") as file:
                    tar.addfile(info, file)
    shutil.rmtree(root, ignore_errors=True)
    return archive


async def outputs(client: Client, caller: Caller, workflow_id: str, directory: Path) -> Path:
    """The caller's run's outputs, a gzipped tar made in ``directory``."""
    description = await own_run(client, caller, workflow_id)
    memo = await description.memo()
    session = session_of(memo)
    if state_of(description, session) == "failed":
        raise Problem(409, f"run {workflow_id!r} ended without an answer: it has no outputs.")
    answer = await answer_of(client, workflow_id, description, session)
    if answer is None:
        raise Problem(
            409, f"run {workflow_id!r} has no answer yet: ask for its outputs once it has."
        )
    return await asyncio.to_thread(outputs_archive, answer, workflow_id, directory)


async def approvals(client: Client, caller: Caller, workflow_id: str) -> dict[str, Any]:
    """What waits for a person in the caller's run, as the run lists it."""
    description = await own_run(client, caller, workflow_id)
    if not current().approvals or description.status != WorkflowExecutionStatus.RUNNING:
        return {"run_id": description.run_id, "approvals": []}
    try:
        found = await pending_requests(client, workflow_id, description.run_id)
    except NoWorker as e:
        raise no_worker(workflow_id) from e
    run_id = str(description.run_id)
    return {"run_id": run_id, "approvals": [approval_data(run_id, each) for each in found]}


async def decide(
    client: Client,
    caller: Caller,
    workflow_id: str,
    decision: dict[str, Any],
    server_key: Ed25519PrivateKey | None = None,
) -> str:
    """Send a person's signed decision to the run it names (``run_id``).
    An unsigned one is signed with ``server_key``, the operator's choice
    (API_APPROVER_KEY_FILE), over the request as the run lists it now."""
    description = await own_run(client, caller, workflow_id)
    if not current().approvals:
        raise Problem(409, f"run {workflow_id!r}: this service asks no one for approval.")
    if description.status != WorkflowExecutionStatus.RUNNING:
        raise Problem(409, f"run {workflow_id!r} has ended: nothing in it waits for a decision.")
    run_id = decision.pop("run_id")
    if not decision.get("signature"):
        if server_key is None:
            raise Problem(
                422,
                "fields 'approver' and 'signature' are missing: a decision is signed by the "
                "person's own key (this API holds none).",
            )
        listed = await approvals(client, caller, workflow_id)
        [request] = [
            each for each in listed["approvals"] if each["call_id"] == decision["call_id"]
        ] or [None]
        if request is None or listed["run_id"] != run_id:
            raise Problem(
                409,
                f"call {decision['call_id']!r} does not wait in run {run_id!r}: list the approvals again.",
            )
        decision = approvers.signed_decision(
            server_key,
            workflow_id,
            run_id,
            request,
            decision["approve"],
            decision["reason"],
            decision["always"],
        )
    try:
        return await send_signed(client, workflow_id, run_id, decision)
    except Refused as e:
        raise Problem(
            409,
            f"run {workflow_id!r} refused the decision on {decision['call_id']!r}: {e.reason}.",
        ) from e
    except RunNotFound as e:
        raise Problem(
            409,
            f"run {run_id!r} of {workflow_id!r} is not the running one: list the approvals again.",
        ) from e
    except NoWorker as e:
        raise no_worker(workflow_id) from e
