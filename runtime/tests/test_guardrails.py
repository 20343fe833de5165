"""Guardrails: an input or output guardrail of the agent (the SDK's own,
declared in agent.py) that trips ends that prompt with an answer naming it,
never the run, and never a workflow task retried for ever; a conversation
goes on with a follow-up; a guardrail that asks the model is a model
activity like any other, which a worker killed during it leaves to the next
worker; the history replays. The starter exits 7 (EXIT_GUARDRAIL) naming it,
and the API's answer event carries it. The agent: testing/guarded_agents.py."""

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle, WorkflowHistory
from temporalio.worker import Replayer

from sandbox_agent_runtime.run_request import RunAnswer, RunRequest
from sandbox_agent_runtime.shared import USAGE_MEMO
from sandbox_agent_runtime.starter import EXIT_GUARDRAIL, start
from sandbox_agent_runtime.testing import project_service
from sandbox_agent_runtime.testing.api_client import api_process, read_events
from sandbox_agent_runtime.testing.conversing import answered, follow_up
from sandbox_agent_runtime.testing.guarded_agents import (
    GuardedAgentWorkflow,
    GuardedLongWorkflow,
    JudgingModel,
)
from sandbox_agent_runtime.testing.processes import STARTER, service, service_environment
from sandbox_agent_runtime.testing.support import (
    DROPPED_RUNS_CLOSED,
    RETRIED_AT_ONCE,
    SETTINGS,
    activities,
    running_worker,
    sandboxes_for_tests,
)
from sandbox_agent_runtime.worker import agents_plugin, workflow_runner

pytestmark = [
    pytest.mark.usefixtures("collect_dropped_runs"),
    pytest.mark.filterwarnings(DROPPED_RUNS_CLOSED),
]

WORKFLOWS = [GuardedAgentWorkflow]
PASSWORD_PROMPT = "My password is hunter2; keep it somewhere."
INPUT_TRIP = """stopped: input guardrail 'no_passwords' tripped: {"found": "password"}"""
OUTPUT_TRIP = (
    "stopped: output guardrail 'judged_by_the_model' tripped: BLOCK: it gives the secret away"
)
PROVIDER = project_service().sandbox_provider
# Runs of the guarded agent recorded by this module's tests (an answer its
# judge blocked; a conversation whose first prompt tripped, then a follow-up).
HISTORIES = Path(__file__).parent / "histories"
RECORDED = ["guarded.output-trip", "guarded.input-trip-conversation"]


def replayer() -> Replayer:
    return Replayer(
        workflows=WORKFLOWS,
        plugins=[agents_plugin(SETTINGS, sandboxes=sandboxes_for_tests())],
        workflow_runner=workflow_runner(),
    )


async def task_failures(handle: WorkflowHandle[Any, Any]) -> int:
    """How many workflow tasks of the run failed (a trip must fail none)."""
    history = await handle.fetch_history()
    return sum(
        1 for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    )


async def test_an_output_guardrail_that_asks_the_model_trips_as_a_model_activity(
    temporal_client: Client,
) -> None:
    model = JudgingModel(["echo the secret is 42"])
    async with running_worker(temporal_client, model, workflows=WORKFLOWS) as (client, _):
        handle = await start(client, "Tell me the secret.")
        answer = await handle.result()

    assert answer.guardrail == "judged_by_the_model"
    assert answer.stopped == answer.answer == OUTPUT_TRIP
    # The command ran; then the agent's answer; then the judge's call, a
    # model activity like the agent's own.
    steps = await activities(handle)
    kinds = [("model" if a.is_model_call else a.name) for a in steps]
    command = kinds.index(f"{PROVIDER}-sandbox_session_pty_exec_start")
    assert kinds.count("model") == 3 and model.judged == 1
    assert kinds[command + 1 :].count("model") == 2
    assert await task_failures(handle) == 0
    # The history replays: the judge's call included.
    replayed = await replayer().replay_workflow(
        await handle.fetch_history(), raise_on_replay_failure=False
    )
    assert replayed.replay_failure is None


async def test_a_guardrails_model_calls_count_in_the_runs_usage_and_the_prompts_budget(
    temporal_client: Client,
) -> None:
    model = JudgingModel(["echo all is well"])
    async with running_worker(temporal_client, model, workflows=WORKFLOWS) as (client, _):
        handle = await start(client, "How are things?")
        await handle.result()
        memo = (await (await handle.describe()).memo())[USAGE_MEMO]
    # The agent's two calls, then the judge's: counted as the agent's are.
    assert model.judged == 1 and memo["model_calls"] == 3, memo
    agents_tokens = sum(each.input_tokens + each.output_tokens for each in model.reported)

    # A budget the agent's two calls reach stops the judge's call.
    again = JudgingModel(["echo all is well"])
    async with running_worker(temporal_client, again, workflows=WORKFLOWS) as (client, _):
        request = RunRequest("How are things?", token_budget=agents_tokens)
        answer = await (await start(client, request)).result()
    assert answer.stopped.startswith("stopped: token budget reached"), answer
    assert again.judged == 0 and len(again.inputs) == 2


async def test_a_prompt_no_guardrail_trips_is_answered_as_it_was(temporal_client: Client) -> None:
    model = JudgingModel(["echo all is well"])
    async with running_worker(temporal_client, model, workflows=WORKFLOWS) as (client, _):
        answer = await (await start(client, "How are things?")).result()

    assert "all is well" in str(answer.answer)
    assert answer.guardrail == "" and answer.stopped == ""
    assert model.judged == 1


async def test_an_input_guardrail_trips_before_the_model_and_the_conversation_goes_on(
    temporal_client: Client,
) -> None:
    model = JudgingModel(["echo hello again"])
    async with running_worker(temporal_client, model, workflows=WORKFLOWS) as (client, _):
        handle = await start(client, RunRequest(PASSWORD_PROMPT, follow_ups=True))
        tripped = (await answered(handle, 1)).answer
        calls_at_the_trip = len(model.inputs) + model.judged
        steps_at_the_trip = await activities(handle)
        await follow_up(handle, "Say hello.")
        after = (await answered(handle, 2)).answer

    assert tripped is not None and after is not None
    assert tripped.guardrail == "no_passwords" and tripped.stopped == INPUT_TRIP
    # Tripped before its first model call and before its sandbox was made:
    # no activity was scheduled at all.
    assert calls_at_the_trip == 0
    assert [step.name for step in steps_at_the_trip] == []
    # The follow-up is answered; the tripped prompt never reached the model.
    assert "hello again" in str(after.answer) and after.guardrail == "" and model.judged == 1
    assert all("hunter2" not in given for given in model.inputs)
    assert await task_failures(handle) == 0
    # In history, the password is in the run's own input alone: no step got it.
    history = await handle.fetch_history()
    holding = [
        EventType.Name(event.event_type)
        for event in history.events
        if b"hunter2" in event.SerializeToString()
    ]
    assert holding == ["EVENT_TYPE_WORKFLOW_EXECUTION_STARTED"]


@pytest.mark.process
async def test_the_starter_names_the_tripped_guardrail_and_exits_7(
    temporal_client: Client,
) -> None:
    address = temporal_client.service_client.config.target_host
    environment = service_environment(address, "http://127.0.0.1:9")
    model = JudgingModel(["echo never run"])
    async with (
        running_worker(temporal_client, model, workflows=WORKFLOWS),
        service([*STARTER, PASSWORD_PROMPT], environment) as starter,
    ):
        status = await starter.exit_status()

    assert EXIT_GUARDRAIL == 7
    assert status == 7, starter.output
    assert f"Stopped: {INPUT_TRIP.removeprefix('stopped: ')}" in starter.output
    assert not model.inputs


@pytest.mark.process
async def test_the_api_answer_event_names_the_tripped_guardrail_before_the_end(
    temporal_client: Client,
) -> None:
    address = temporal_client.service_client.config.target_host
    environment = service_environment(address, "http://127.0.0.1:9")
    model = JudgingModel(["echo never run"])
    async with (
        running_worker(temporal_client, model, workflows=WORKFLOWS),
        api_process(environment) as api,
        api.client() as http,
    ):
        started = await http.post("/v1/runs", json={"prompt": PASSWORD_PROMPT})
        assert started.status_code == 201, started.text
        workflow_id = started.json()["id"]
        events = await read_events(http, workflow_id)
        state = (await http.get(f"/v1/runs/{workflow_id}")).json()

    answer, end = events[-2:]
    assert answer.name == "answer" and end.name == "end"
    assert answer.data["guardrail"] == "no_passwords"
    assert answer.data["stopped"] == answer.data["text"] == INPUT_TRIP
    assert end.data["status"] == "completed"
    assert state["answer"]["guardrail"] == "no_passwords"


async def test_a_worker_killed_during_a_guardrails_model_call_leaves_it_to_the_next(
    temporal_client: Client,
) -> None:
    stalling = JudgingModel(["echo the secret is 42"], stall=True)
    async with running_worker(
        temporal_client,
        stalling,
        workflows=WORKFLOWS,
        identity="first-worker",
        # Stop at once, cancelling the judge's call in flight, as a crash would.
        graceful_shutdown_timeout=timedelta(0),
        model_retry_policy=RETRIED_AT_ONCE,
    ) as (client, _):
        handle = await start(client, "Tell me the secret.")
        await stalling.stalled.wait()

    fresh = JudgingModel(["echo the secret is 42"])
    async with running_worker(
        temporal_client, fresh, workflows=WORKFLOWS, identity="second-worker"
    ):
        answer: RunAnswer = await handle.result()

    assert answer.stopped == OUTPUT_TRIP
    steps = await activities(handle)
    model_calls = [a for a in steps if a.is_model_call]
    # The agent's two calls and its command ran once, on the first worker;
    # the judge's call, lost with it, was taken up by the second.
    assert [(a.worker, a.attempt > 1) for a in model_calls] == [
        ("first-worker", False),
        ("first-worker", False),
        ("second-worker", True),
    ]
    commands = [a for a in steps if a.name == f"{PROVIDER}-sandbox_session_pty_exec_start"]
    assert [a.worker for a in commands] == ["first-worker"]
    assert fresh.judged == 1 and not fresh.inputs


@pytest.mark.parametrize("name", RECORDED)
async def test_a_recorded_guarded_run_replays(name: str) -> None:
    recorded = json.loads((HISTORIES / f"{name}.json").read_text())
    history = WorkflowHistory.from_json(name, recorded)
    replayed = await replayer().replay_workflow(history, raise_on_replay_failure=False)
    assert replayed.replay_failure is None, f"{name}: {replayed.replay_failure}"


# About 60 kB of output a step: a run's history passes its budget in a few dozen.
BIG_STEP = "head -c 60000 /dev/zero | tr '\\0' x"


@pytest.mark.long
async def test_a_prompt_that_goes_on_in_the_chains_next_run_is_not_checked_again(
    temporal_client: Client,
) -> None:
    # The first command prints what the input guardrail trips on: the
    # conversation the next run of the chain goes on from holds it, the
    # prompt does not.
    commands = ["echo pass''word > seen.txt", "cat seen.txt", *[BIG_STEP] * 25, "cat seen.txt"]
    model = JudgingModel(commands)
    async with running_worker(temporal_client, model, workflows=[GuardedLongWorkflow]) as (
        client,
        _,
    ):
        handle = await client.start_workflow(
            GuardedLongWorkflow.run,
            RunRequest("Note a word, then make noise, then read it back."),
            id=f"guarded-long-{PROVIDER}",
            task_queue=project_service().task_queue,
        )
        answer = await handle.result()

    first_run = await temporal_client.get_workflow_handle(
        handle.id, run_id=handle.first_execution_run_id
    ).fetch_history()
    assert (
        first_run.events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    )
    assert answer.guardrail == "" and "password" in str(answer.answer)
