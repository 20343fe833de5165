"""A run belongs to one service and one caller (owners.py).

Two services share a Temporal namespace: A, the project, and B, the same
project on a task queue of its own, as a second render would be (its
workflow type, the same name in every render, tells them apart by nothing).
Each has an API with a caller named alice. B's alice can neither read,
download the outputs of, follow the events of, follow up nor end A's
alice's run: each answer is the 404 of an id that names no run. B's starter
refuses A's run with the line and exit status of an unknown id. A's run
goes on untouched. A's record-histories leaves B's runs out. docs/api.md."""

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from temporalio.client import Client, WorkflowExecutionDescription, WorkflowHandle

from sandbox_agent_runtime.client import running_run
from sandbox_agent_runtime.histories import record
from sandbox_agent_runtime.owners import of_this_service, service_memo
from sandbox_agent_runtime.run_request import RunRequest
from sandbox_agent_runtime.shared import SERVICE_MEMO, WORKFLOW_TYPE
from sandbox_agent_runtime.starter import start
from sandbox_agent_runtime.starter.approving import NoDecision, asked
from sandbox_agent_runtime.starter.runs import described
from sandbox_agent_runtime.starter.statuses import EXIT_USAGE, Refused
from sandbox_agent_runtime.testing import project, project_service
from sandbox_agent_runtime.testing.api_client import ApiProcess, api_process, read_events
from sandbox_agent_runtime.testing.processes import WORKER, service, service_environment
from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server

# Service B's task queue.
OTHER_QUEUE = "another-service"

# What the agent does: the first prompt writes a file, a follow-up reads it.
PROMPTS = [["echo made > made.txt && echo written"], ["cat made.txt"]]

# Everything the API does with a run it is given the id of.
ROUTES = [
    ("GET", ""),
    ("GET", "/events"),
    ("GET", "/outputs"),
    ("GET", "/approvals"),
    ("POST", "/messages"),
    ("POST", "/end"),
    ("POST", "/approvals/call_0"),
]


def other_service(command: str) -> list[str]:
    """Service B's ``command`` (api or starter)."""
    return [
        sys.executable,
        "-m",
        "sandbox_agent_runtime.testing.other_service",
        project().package,
        OTHER_QUEUE,
        command,
    ]


async def workflow(client: Client, memo: dict[str, Any] | None, queue: str, kind: str) -> Any:
    """A run no worker takes (none polls ``queue``, or it is never asked)."""
    return await client.start_workflow(
        kind, RunRequest("Wait."), id=f"owners-{uuid.uuid4()}", task_queue=queue, memo=memo
    )


async def ours(handle: WorkflowHandle[Any, Any]) -> bool:
    description: WorkflowExecutionDescription = await handle.describe()
    return of_this_service(description, await description.memo())


async def test_a_run_is_this_services_by_the_service_its_memo_names_whatever_its_type(
    temporal_client: Client,
) -> None:
    queue = project_service().task_queue
    cases = {
        "recorded here": (service_memo(), queue, WORKFLOW_TYPE),
        "recorded here, on another queue": (service_memo(), OTHER_QUEUE, WORKFLOW_TYPE),
        "recorded by another service, on this queue": (
            {SERVICE_MEMO: OTHER_QUEUE},
            queue,
            WORKFLOW_TYPE,
        ),
        "recorded by another service": ({SERVICE_MEMO: OTHER_QUEUE}, OTHER_QUEUE, WORKFLOW_TYPE),
        # Started before runs recorded their service: their task queue says.
        "unrecorded, on this queue": (None, queue, WORKFLOW_TYPE),
        "unrecorded, on this queue, of a type of its own": (None, queue, "SubclassedWorkflow"),
        "unrecorded, on another queue": (None, OTHER_QUEUE, WORKFLOW_TYPE),
    }
    handles = {
        name: await workflow(temporal_client, memo, on, kind)
        for name, (memo, on, kind) in cases.items()
    }
    try:
        found = {name: await ours(handle) for name, handle in handles.items()}
    finally:
        for handle in handles.values():
            await handle.terminate()

    assert found == {
        "recorded here": True,
        "recorded here, on another queue": True,
        "recorded by another service, on this queue": False,
        "recorded by another service": False,
        "unrecorded, on this queue": True,
        "unrecorded, on this queue, of a type of its own": True,
        "unrecorded, on another queue": False,
    }


async def test_every_run_the_starter_starts_records_its_service(temporal_client: Client) -> None:
    handle = await start(temporal_client, RunRequest("Wait.", follow_ups=True))
    try:
        memo = await (await handle.describe()).memo()
    finally:
        await handle.terminate()

    assert memo[SERVICE_MEMO] == project_service().task_queue


async def test_the_starter_finds_another_services_run_as_no_run_at_all(
    temporal_client: Client,
) -> None:
    others = await workflow(
        temporal_client, {SERVICE_MEMO: OTHER_QUEUE}, OTHER_QUEUE, WORKFLOW_TYPE
    )
    unknown = f"owners-no-such-run-{uuid.uuid4()}"
    try:
        with pytest.raises(Refused) as theirs:
            await described(temporal_client, others.id, "--attach")
        with pytest.raises(Refused) as none:
            await described(temporal_client, unknown, "--attach")
        # --pending, --approve and --reject print the line of an unknown id
        # (client.RunNotFound) for another service's run too.
        with pytest.raises(NoDecision) as undecided:
            await asked(running_run(temporal_client, others.id))
    finally:
        await others.terminate()

    assert str(theirs.value).replace(others.id, "ID") == str(none.value).replace(unknown, "ID")
    assert str(none.value) == f"--attach {unknown!r}: no such workflow in namespace 'default'."
    assert theirs.value.status == none.value.status == EXIT_USAGE
    assert str(undecided.value) == f"no such workflow {others.id!r} in namespace 'default'."
    assert undecided.value.status == EXIT_USAGE


@dataclass
class TwoServices:
    client: Client
    environment: dict[str, str]
    a: ApiProcess  # service A's API (the project's), its worker running
    b: ApiProcess  # service B's API, on its own task queue


@pytest.fixture(scope="module")
async def two(temporal_client: Client) -> AsyncIterator[TwoServices]:
    address = temporal_client.service_client.config.target_host
    with scripted_openai_server([], prompts=PROMPTS) as model:
        environment = service_environment(address, model.url)
        async with (
            service(WORKER, environment) as worker,
            api_process(environment) as a,
            api_process(environment, other_service("api")) as b,
        ):
            await worker.wait_for("Worker polling")
            yield TwoServices(temporal_client, environment, a, b)


async def answered(client: httpx.AsyncClient, workflow_id: str, last: str | None) -> str:
    """Wait for the run's next answer; the id of its event."""
    while True:
        [event] = await read_events(client, workflow_id, last, most=1)
        last = event.id
        if event.name == "answer":
            return last


async def a_conversation(alice: httpx.AsyncClient) -> tuple[str, str]:
    """A conversation A's alice started, answered once: its id, and its answer's event id."""
    started = await alice.post("/v1/runs", json={"prompt": "Write made.txt.", "follow_ups": True})
    assert started.status_code == 201, started.text
    workflow_id = str(started.json()["id"])
    return workflow_id, await answered(alice, workflow_id, None)


async def answer_to(
    client: httpx.AsyncClient, method: str, url: str, run: str
) -> tuple[int, str, str]:
    """What ``client`` is answered (status, type, body, the run's id in it as
    ID); of an event stream, which a conversation keeps open, its first line."""
    async with client.stream(method, url, json={"prompt": "Read made.txt."}) as response:
        kind = response.headers["content-type"]
        if kind.startswith("text/event-stream"):
            body = await anext(response.aiter_lines())
        else:
            body = (await response.aread()).decode(errors="replace")
    return response.status_code, kind, body.replace(run, "ID")


@pytest.mark.process
async def test_another_services_api_finds_a_run_as_no_run_at_all(two: TwoServices) -> None:
    async with two.a.client("alice") as alice, two.b.client("alice") as b_alice:
        workflow_id, answer = await a_conversation(alice)
        recorded = await (await two.client.get_workflow_handle(workflow_id).describe()).memo()
        unknown = f"{workflow_id}-no-such-run"
        asked = {
            run: {
                (method, path): await answer_to(b_alice, method, f"/v1/runs/{run}{path}", run)
                for method, path in ROUTES
            }
            for run in (workflow_id, unknown)
        }
        # B's alice's own run is hers on B (none of B's workers takes it).
        hers = await b_alice.post("/v1/runs", json={"prompt": "Wait."})
        her_state = await b_alice.get(f"/v1/runs/{hers.json()['id']}")
        # A's alice's run took nothing of B's: it waits after one answer,
        # and goes on with her follow-up.
        after = (await alice.get(f"/v1/runs/{workflow_id}")).json()
        sent = await alice.post(f"/v1/runs/{workflow_id}/messages", json={"prompt": "Read it."})
        await answered(alice, workflow_id, answer)
        outputs = await alice.get(f"/v1/runs/{workflow_id}/outputs")
        ended = await alice.post(f"/v1/runs/{workflow_id}/end")
        await two.client.get_workflow_handle(hers.json()["id"]).terminate()

    # The API records its service in the runs it starts.
    assert recorded[SERVICE_MEMO] == project_service().task_queue
    theirs, none = asked[workflow_id], asked[unknown]
    # Another service's run and no run are told apart by nothing.
    assert theirs == none
    for status, kind, body in theirs.values():
        assert (status, kind) == (404, "application/problem+json"), body
        assert json.loads(body)["detail"] == "run 'ID': no such run of yours.", body
    assert hers.status_code == 201 and her_state.status_code == 200, her_state.text
    assert after["state"] in ("waiting", "released") and after["answered"] == 1, after
    assert sent.status_code == 202 and sent.json()["prompt"] == 2
    assert outputs.status_code == 200 and ended.status_code == 202


@pytest.mark.process
async def test_another_services_starter_finds_a_run_as_no_run_at_all(two: TwoServices) -> None:
    def starter_b(*arguments: str) -> tuple[int, str, str]:
        done = subprocess.run(
            [*other_service("starter"), *arguments],
            env=two.environment,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return done.returncode, done.stderr, done.stdout

    async with two.a.client("alice") as alice:
        workflow_id, _ = await a_conversation(alice)
        unknown = f"{workflow_id}-no-such-run"
        said = {}
        for option, prompt in (("--attach", []), ("--continue", ["Go on."]), ("--end", [])):
            for run in (workflow_id, unknown):
                status, err, out = await asyncio.to_thread(starter_b, option, run, *prompt)
                said[(option, run == workflow_id)] = (status, err.replace(run, "ID"), out)
        after = (await alice.get(f"/v1/runs/{workflow_id}")).json()
        ended = await alice.post(f"/v1/runs/{workflow_id}/end")

    for option in ("--attach", "--continue", "--end"):
        assert (
            said[(option, True)]
            == said[(option, False)]
            == (
                EXIT_USAGE,
                f"ERROR: {option} 'ID': no such workflow in namespace 'default'.\n",
                "",
            )
        ), option
    # Nothing reached the run: it waits after its one answer.
    assert after["state"] in ("waiting", "released") and after["answered"] == 1, after
    assert ended.status_code == 202


async def test_recording_histories_leaves_another_services_runs_out(
    temporal_client: Client, tmp_path: Path
) -> None:
    ours = await start(temporal_client, RunRequest("Wait.", follow_ups=True))
    theirs = await workflow(
        temporal_client, {SERVICE_MEMO: OTHER_QUEUE}, OTHER_QUEUE, WORKFLOW_TYPE
    )
    both = f"WorkflowId = {ours.id!r} OR WorkflowId = {theirs.id!r}"
    try:
        # Both listed (visibility catches up with a start shortly after it).
        while len([run async for run in temporal_client.list_workflows(both)]) < 2:
            await asyncio.sleep(0.1)
        written = await record(temporal_client, tmp_path, 10, both)
    finally:
        await ours.terminate()
        await theirs.terminate()

    assert [path.name.partition(".")[0] for path in written] == [ours.id]
