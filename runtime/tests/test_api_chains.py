"""A conversation that continued as new, followed through the API: its
events come from both runs of its chain, in order, each id naming its run
(history event ids restart in each run), and a client that reconnects with
the id of the first run's last event gets the second run's events, once.
Every run of the chain names its service and its caller, as the first did.

The API is a process; the worker runs in the test (a variant of the
service's workflow that continues as new between two prompts,
testing/long_workflow.py), with a scripted model."""

import asyncio
import uuid

import pytest
from temporalio.client import Client

from sandbox_agent_runtime.api.events import event_id_parts
from sandbox_agent_runtime.owners import service_memo
from sandbox_agent_runtime.run_request import RunRequest
from sandbox_agent_runtime.shared import CALLER_MEMO, END, SERVICE_MEMO
from sandbox_agent_runtime.testing import project_service
from sandbox_agent_runtime.testing.api_client import api_process, read_events
from sandbox_agent_runtime.testing.conversing import Conversing, answered, follow_up
from sandbox_agent_runtime.testing.long_workflow import ContinuesBetweenPromptsWorkflow
from sandbox_agent_runtime.testing.processes import service_environment
from sandbox_agent_runtime.testing.support import running_worker

pytestmark = pytest.mark.process


async def test_a_stream_follows_a_conversation_across_its_continue_as_new(
    temporal_client: Client,
) -> None:
    model = Conversing([["echo first > one.txt && echo made"], ["cat one.txt"]])
    environment = service_environment(
        temporal_client.service_client.config.target_host, "http://127.0.0.1:9"
    )
    async with (
        running_worker(temporal_client, model, workflows=[ContinuesBetweenPromptsWorkflow]) as (
            client,
            _,
        ),
        api_process(environment) as api,
        api.client("alice") as alice,
        api.client("bob") as bob,
    ):
        handle = await client.start_workflow(
            ContinuesBetweenPromptsWorkflow.run,
            RunRequest("Write a file.", follow_ups=True),
            id=f"{project_service().task_queue}-{uuid.uuid4()}",
            task_queue=project_service().task_queue,
            # As the API records its service and caller (owners.py, api/callers.py).
            memo={**service_memo(), CALLER_MEMO: "token:alice"},
        )
        await answered(handle, 1)
        # The first run answered, then handed the conversation on.
        while (await handle.describe()).run_id == handle.first_execution_run_id:
            await asyncio.sleep(0.05)
        assert await follow_up(handle, "Show the file.") == 2
        await answered(handle, 2)
        await handle.execute_update(END)
        await handle.result()
        last_memo = await (await handle.describe()).memo()
        whole = await read_events(alice, handle.id)
        # Every run of the chain is alice's, and no one else's.
        state = await alice.get(f"/v1/runs/{handle.id}")
        refused = await bob.get(f"/v1/runs/{handle.id}")
        runs = [event_id_parts(event.id)[0] for event in whole]
        last_of_first = max(index for index, run in enumerate(runs) if run == runs[0])
        rest = await read_events(alice, handle.id, whole[last_of_first].id)

    assert len(set(runs)) == 2 and runs == sorted(runs, key=runs.index)
    assert runs[0] == handle.first_execution_run_id
    texts = [f"{event.name} {event.data.get('text', '')}" for event in whole]
    assert texts.index("run continues as new: its history is large") < texts.index(
        "prompt 2, a follow-up"
    )
    answers = [event.data for event in whole if event.name == "answer"]
    assert [each["prompt"] for each in answers] == [1, 2]
    assert answers[0]["text"] == "prompt 1: made\n" and answers[1]["text"] == "prompt 2: first\n"
    assert whole[-1].name == "end"
    # Each prompt's text came as it was written (events.py's deltas), in the
    # chain's first run and in the next: each answer's turn in one delta,
    # named by its run's history event.
    written = [event for event in whole if event.name == "delta"]
    assert [delta.data["text"] for delta in written] == [each["text"] for each in answers]
    assert [event_id_parts(delta.id)[0] for delta in written] == [runs[0], runs[-1]]
    assert rest == whole[last_of_first + 1 :] and event_id_parts(rest[0].id)[0] == runs[-1]
    assert state.status_code == 200 and state.json()["answered"] == 2
    assert refused.status_code == 404
    # The chain's last run names its service and caller as its first did.
    assert last_memo[SERVICE_MEMO] == project_service().task_queue
    assert last_memo[CALLER_MEMO] == "token:alice"
