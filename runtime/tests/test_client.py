"""The client the commands share (client/): what a run refuses, or the
service cannot answer, is a typed error that carries no exit status and no
HTTP status, against a real dev server and, where a run must answer, the
service's real worker with a scripted model. The API, which takes its
conversations' checks from the client, refuses a follow-up to a
conversation that has not run its first step no more than the starter does."""

import asyncio
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle

from sandbox_agent_runtime.api import runs as api_runs
from sandbox_agent_runtime.api.callers import Caller
from sandbox_agent_runtime.api.problems import Problem
from sandbox_agent_runtime.client import (
    BadFollowUp,
    ConversationEnded,
    NoFollowUps,
    NoWorker,
    Refused,
    RunEnded,
    RunNotFound,
    StillWorking,
    described,
    pending_requests,
    running_conversation,
    send_update,
)
from sandbox_agent_runtime.client import approvals as client_approvals
from sandbox_agent_runtime.client.conversation import refused
from sandbox_agent_runtime.owners import service_memo
from sandbox_agent_runtime.run_request import FollowUp, RunAnswer, RunRequest
from sandbox_agent_runtime.shared import END, FOLLOW_UP, SERVICE_MEMO, WORKFLOW_TYPE
from sandbox_agent_runtime.testing import project_service
from sandbox_agent_runtime.testing.conversing import Conversing, answered, until
from sandbox_agent_runtime.testing.support import running_worker

# How long a test waits for a worker that is not there.
NO_WORKER_WITHIN = timedelta(seconds=1)


async def started(
    client: Client, follow_ups: bool, memo: dict[str, Any] | None = None, queue: str | None = None
) -> WorkflowHandle[Any, RunAnswer]:
    """A run of this service (``memo``, ``queue``: another's), which no
    worker takes until a test runs one."""
    return await client.start_workflow(
        WORKFLOW_TYPE,
        RunRequest("Wait.", follow_ups=follow_ups),
        id=f"client-{uuid.uuid4()}",
        task_queue=queue or project_service().task_queue,
        memo=service_memo() if memo is None else memo,
        result_type=RunAnswer,
    )


async def test_an_unknown_run_and_another_services_are_both_run_not_found(
    temporal_client: Client,
) -> None:
    other = "another-service"
    theirs = await started(temporal_client, True, {SERVICE_MEMO: other}, other)
    unknown = f"client-no-such-run-{uuid.uuid4()}"
    try:
        with pytest.raises(RunNotFound) as none:
            await described(temporal_client, unknown)
        with pytest.raises(RunNotFound) as others:
            await described(temporal_client, theirs.id)
    finally:
        await theirs.terminate()

    assert str(none.value) == f"no such workflow {unknown!r} in namespace 'default'."
    assert str(others.value).replace(theirs.id, unknown) == str(none.value)
    assert none.value.workflow_id == unknown and none.value.namespace == "default"


async def test_a_closed_run_takes_nothing_more_as_run_ended(temporal_client: Client) -> None:
    handle = await started(temporal_client, True)
    await handle.terminate()
    description = await described(temporal_client, handle.id)

    with pytest.raises(RunEnded) as ended:
        await running_conversation(temporal_client, description)
    with pytest.raises(RunEnded) as sent:
        await send_update(temporal_client, handle.id, END, result_type=str)

    assert ended.value.status == "terminated"
    assert str(ended.value) == f"workflow {handle.id} has ended (terminated)"
    assert sent.value.status is None


async def test_a_run_not_yet_begun_is_asked_by_its_request_whether_it_takes_follow_ups(
    temporal_client: Client,
) -> None:
    # No worker has run either: neither has written where it stands
    # (SESSION_MEMO); the request each was started with says.
    job = await started(temporal_client, False)
    conversation = await started(temporal_client, True)
    try:
        with pytest.raises(NoFollowUps) as refused:
            await running_conversation(temporal_client, await described(temporal_client, job.id))
        # The conversation is taken at its word: no refusal.
        await running_conversation(
            temporal_client, await described(temporal_client, conversation.id)
        )
    finally:
        await job.terminate()
        await conversation.terminate()

    assert str(refused.value) == (
        f"workflow {job.id} was started without follow-ups (RunRequest.follow_ups): start a new run"
    )


async def test_an_update_or_a_question_no_worker_takes_is_no_worker(
    temporal_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client_approvals, "WORKER_ANSWERS_WITHIN", NO_WORKER_WITHIN)
    handle = await started(temporal_client, True)
    try:
        with pytest.raises(NoWorker) as update:
            await send_update(
                temporal_client,
                handle.id,
                FOLLOW_UP,
                FollowUp("Are you there?"),
                result_type=int,
                worker_within=NO_WORKER_WITHIN,
            )
        with pytest.raises(NoWorker) as question:
            await pending_requests(temporal_client, handle.id)
    finally:
        await handle.terminate()

    assert str(update.value) == str(question.value)
    assert str(update.value) == f"no worker answered for workflow {handle.id} within 1 s"


async def test_a_conversation_s_refusals_are_typed_in_the_run_s_words(
    temporal_client: Client, tmp_path: Path
) -> None:
    # Started through the API, so the API's answers to the same refusals
    # are seen beside the client's.
    alice = Caller("token", "alice")
    gate = tmp_path / "gate"
    model = Conversing([[f"while [ ! -e {gate} ]; do sleep 0.05; done; echo done"]])
    workflow_id = await api_runs.start_run(
        temporal_client, alice, RunRequest("Wait.", follow_ups=True)
    )
    async with running_worker(temporal_client, model) as (client, _):
        handle = client.get_workflow_handle(workflow_id, result_type=RunAnswer)
        # Working on its first prompt: it waits for the gate.
        await until(handle, lambda state: state.state == "working")
        with pytest.raises(StillWorking) as working:
            await send_update(
                client, workflow_id, FOLLOW_UP, FollowUp("Done?"), result_type=int, then="send it"
            )
        with pytest.raises(Problem) as api_working:
            await api_runs.follow_up(client, alice, workflow_id, FollowUp("Done?"))
        gate.touch()
        await answered(handle, 1)
        with pytest.raises(BadFollowUp) as blank:
            await send_update(client, workflow_id, FOLLOW_UP, FollowUp(" "), result_type=int)
        with pytest.raises(Problem) as api_blank:
            await api_runs.follow_up(client, alice, workflow_id, FollowUp(" "))
        ended = await send_update(client, workflow_id, END, result_type=str)
        await asyncio.wait_for(handle.result(), timeout=60)

    assert str(working.value) == (
        f"workflow {workflow_id} is still working on a prompt: follow it to its answer "
        f"(--attach {workflow_id}), then send it"
    )
    assert "still working on prompt 1" in working.value.reason
    assert (api_working.value.status, api_working.value.detail) == (409, f"{working.value}.")
    assert blank.value.reason
    assert str(blank.value) == f"workflow {workflow_id} refused it: {blank.value.reason}"
    assert (api_blank.value.status, api_blank.value.detail) == (
        409,
        f"run {workflow_id!r} refused it: {blank.value.reason}.",
    )
    assert ended.run_id and ended.update_id


async def test_the_api_asks_a_conversation_not_yet_begun_by_its_request(
    temporal_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The API's follow-up to a conversation no worker has begun: its own
    # copy of the check read only where the run stands (none yet) and
    # refused it as started without follow-ups; the client's asks the
    # request, and the follow-up waits for a worker as the starter's does.
    monkeypatch.setattr(api_runs, "WORKER_ANSWERS_WITHIN", NO_WORKER_WITHIN)
    alice = Caller("token", "alice")
    conversation = await api_runs.start_run(
        temporal_client, alice, RunRequest("Wait.", follow_ups=True)
    )
    job = await api_runs.start_run(temporal_client, alice, RunRequest("Wait."))
    try:
        with pytest.raises(Problem) as waits:
            await api_runs.follow_up(temporal_client, alice, conversation, FollowUp("Done?"))
        with pytest.raises(Problem) as refused:
            await api_runs.follow_up(temporal_client, alice, job, FollowUp("Done?"))
    finally:
        for workflow_id in (conversation, job):
            await temporal_client.get_workflow_handle(workflow_id).terminate()

    assert waits.value.status == 504, waits.value.detail
    assert "no worker answered within 1 s" in waits.value.detail
    assert refused.value.status == 409
    assert "was started without follow-ups" in refused.value.detail


def test_each_refusal_a_run_names_is_its_own_type_and_any_other_is_refused() -> None:
    # The types the workflow's validators raise (phases/between.py,
    # workflow.py), as the client hands them on; one that a run could say
    # only at its end (ConversationEnded) is not easily caught live.
    kinds = {
        kind: refused("w", kind, "the run's words", then="send it")
        for kind in ("StillWorking", "NoFollowUps", "ConversationEnded", "BadFollowUp", "Other")
    }

    assert {kind: type(error) for kind, error in kinds.items()} == {
        "StillWorking": StillWorking,
        "NoFollowUps": NoFollowUps,
        "ConversationEnded": ConversationEnded,
        "BadFollowUp": BadFollowUp,
        "Other": Refused,
    }
    assert str(kinds["ConversationEnded"]) == "the conversation w has ended: start a new run"
    assert str(kinds["Other"]) == "workflow w refused it: the run's words"
    assert all(error.reason == "the run's words" for error in kinds.values())
