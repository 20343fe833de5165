"""Approvals through the API (a service whose commands wait for a person):
a request that waits is an ``approval`` event and is listed exactly as the
run shows it (what the starter prints), and a decision is the person's,
signed with their own key: the API passes it on, and the worker checks it.
A reason with non-ASCII text is signed over Python's canonical form. A
decision signed over something else than what was shown, or sent by
another caller, does nothing. The API is a process; the worker runs in the
test, with a scripted model."""

import asyncio
from typing import Any

import httpx2 as httpx
import pytest
from temporalio.client import Client

from sandbox_agent_runtime.shared import PENDING
from sandbox_agent_runtime.testing import approver
from sandbox_agent_runtime.testing.api_client import Event, api_process, read_events
from sandbox_agent_runtime.testing.processes import service_environment
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
from sandbox_agent_runtime.testing.support import running_worker

pytestmark = pytest.mark.process


async def next_approval(
    client: httpx.AsyncClient, workflow_id: str, after: str | None
) -> list[Event]:
    """The run's events after ``after`` up to and with its next request for approval."""
    found: list[Event] = []
    while not found or found[-1].name != "approval":
        found += await read_events(client, workflow_id, found[-1].id if found else after, most=1)
    return found


def decision(
    request: dict[str, Any], workflow_id: str, approve: bool, reason: str = ""
) -> dict[str, Any]:
    """A decision on ``request`` as the API listed it, signed with the tests' approver's key."""
    signed = approver.signed(workflow_id, request["run_id"], request, approve, reason)
    return {
        "run_id": request["run_id"],
        "approve": approve,
        "reason": reason,
        "always": False,
        "approver": signed["approver"],
        "signature": signed["signature"],
    }


async def test_a_pending_command_is_shown_whole_and_decided_by_the_persons_signature(
    temporal_client: Client,
) -> None:
    model = ScriptedModel(["touch rejected.txt", "printf 'it ran\\n'"])
    environment = service_environment(
        temporal_client.service_client.config.target_host, "http://127.0.0.1:9"
    )
    async with (
        running_worker(temporal_client, model, approve=False) as (client, _),
        api_process(environment) as api,
        api.client("alice") as alice,
        api.client("bob") as bob,
    ):
        started = await alice.post("/v1/runs", json={"prompt": "Make a file, then print."})
        workflow_id = started.json()["id"]
        try:
            first = await asyncio.wait_for(next_approval(alice, workflow_id, None), 20)
        except TimeoutError:
            raise AssertionError("\n".join(api.process.output)) from None
        listed = (await alice.get(f"/v1/runs/{workflow_id}/approvals")).json()
        [request] = listed["approvals"]
        pending = await client.get_workflow_handle(workflow_id).query(PENDING, result_type=list)

        # Unsigned, to an API that holds no key: refused.
        unsigned = await alice.post(
            f"/v1/runs/{workflow_id}/approvals/{request['call_id']}",
            json={"run_id": request["run_id"], "approve": True},
        )
        # A decision signed over another command than the one shown: refused by the worker.
        forged = decision({**request, "detail": "$ true"}, workflow_id, True)
        tampered = await alice.post(
            f"/v1/runs/{workflow_id}/approvals/{request['call_id']}", json=forged
        )
        # Another caller: the run is not theirs.
        not_theirs = await bob.post(
            f"/v1/runs/{workflow_id}/approvals/{request['call_id']}",
            json=decision(request, workflow_id, True),
        )
        # The person rejects it, with a reason in another language.
        rejected = await alice.post(
            f"/v1/runs/{workflow_id}/approvals/{request['call_id']}",
            json=decision(request, workflow_id, False, reason="pas ce fichier-là, désolé"),
        )
        second = await next_approval(alice, workflow_id, first[-1].id)
        approved = await alice.post(
            f"/v1/runs/{workflow_id}/approvals/{second[-1].data['call_id']}",
            json=decision(second[-1].data, workflow_id, True),
        )
        rest = await read_events(alice, workflow_id, second[-1].id)

    # Shown exactly as the run lists it: every argument, whole.
    assert {key: value for key, value in first[-1].data.items() if key != "time"} == request
    assert [(each["call_id"], each["detail"]) for each in pending] == [
        (request["call_id"], request["detail"])
    ]
    assert (
        request["detail"]
        == "$ touch rejected.txt\nruns in: sh -c (not a login shell), in the workspace"
    )
    assert unsigned.status_code == 422
    assert unsigned.json()["detail"].startswith("fields 'approver' and 'signature' are missing")
    assert tampered.status_code == 409, tampered.text
    assert "does not match this request and decision" in tampered.json()["detail"]
    assert not_theirs.status_code == 404
    assert rejected.status_code == 200 and rejected.json() == {
        "call_id": request["call_id"],
        "decision": "rejected",
    }
    assert second[-1].data["detail"].startswith("$ printf 'it ran\\n'")
    assert approved.json()["decision"] == "approved"
    assert rest[-2].name == "answer" and rest[-2].data["text"].endswith("it ran\n")
    assert rest[-1].name == "end"
    # The rejected command never ran; the approved one did.
    commands = [
        event.data["text"]
        for event in first + second + rest
        if event.data.get("text", "").startswith("$ ")
    ]
    assert commands == ["$ printf 'it ran\\n'"]


async def test_with_a_key_the_operator_gave_the_api_an_unsigned_decision_is_signed_by_it(
    temporal_client: Client,
) -> None:
    model = ScriptedModel(["printf 'it ran\\n'"])
    environment = {
        **service_environment(
            temporal_client.service_client.config.target_host, "http://127.0.0.1:9"
        ),
        # The tests' approver's key, which every worker of the tests trusts.
        "API_APPROVER_KEY_FILE": approver.ENVIRONMENT["APPROVER_KEY_FILE"],
    }
    async with (
        running_worker(temporal_client, model, approve=False) as (client, _),
        api_process(environment) as api,
        api.client("alice") as alice,
    ):
        started = await alice.post("/v1/runs", json={"prompt": "Print."})
        workflow_id = started.json()["id"]
        [asked] = (await next_approval(alice, workflow_id, None))[-1:]
        unsigned = {"run_id": asked.data["run_id"], "approve": True}
        decided = await alice.post(
            f"/v1/runs/{workflow_id}/approvals/{asked.data['call_id']}", json=unsigned
        )
        rest = await read_events(alice, workflow_id, asked.id)

    assert decided.status_code == 200 and decided.json()["decision"] == "approved", decided.text
    assert rest[-2].name == "answer" and rest[-2].data["text"].endswith("it ran\n")


async def test_a_closed_runs_events_are_read_again_without_asking_the_run(
    temporal_client: Client,
) -> None:
    # Read again once the run has closed, its events come from its history
    # alone: nothing waits for a person in a closed run, and asking it would
    # replay it on a worker at each of its workflow tasks (or, with no worker
    # left, wait WORKER_ANSWERS_WITHIN for each).
    environment = service_environment(
        temporal_client.service_client.config.target_host, "http://127.0.0.1:9"
    )
    async with api_process(environment) as api, api.client("alice") as alice:
        # The stand-in person approves each command as it waits.
        async with running_worker(temporal_client, ScriptedModel(["echo one", "echo two"])):
            started = await alice.post("/v1/runs", json={"prompt": "Run two commands."})
            workflow_id = started.json()["id"]
            live = await read_events(alice, workflow_id)
        again = await read_events(alice, workflow_id)

    def steps(events: list[Event]) -> list[tuple[str, Any]]:
        return [(e.name, e.data.get("text")) for e in events if e.name not in ("approval", "delta")]

    assert steps(again) == steps(live)
    assert again[-1].name == "end" and again[-1].data["status"] == "completed"
    asked = [line for line in api.process.output if "did not say what waits" in line]
    assert asked == [], asked
