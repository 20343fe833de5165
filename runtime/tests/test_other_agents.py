"""Other agents beside agent.py's: one it hands off to (``handoffs=[...]``)
and one it calls as a tool (``Agent.as_tool``), each with instructions and
a model of its own (testing/other_agents.py), scripted apart
(``ScriptedAgents``). They share the run's sandbox, every model call of
each is a model activity (the agent called as a tool's too: a nested
``Runner.run`` in the workflow), the steps name the agent of each turn, the
turn budget, the token budget and approvals hold across them, a run left
part-way by its worker goes on without redoing a step, and a recorded run
replays (tests/histories/other-agents.json).

It runs against both stand-ins (conftest.py); the approval's test against
the one with approvals alone."""

import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle, WorkflowHistory
from temporalio.worker import Replayer

from sandbox_agent_runtime.client.steps import Progress
from sandbox_agent_runtime.object_store import data_converter
from sandbox_agent_runtime.run_request import RunAnswer, RunRequest
from sandbox_agent_runtime.service import cost_of
from sandbox_agent_runtime.shared import USAGE_MEMO
from sandbox_agent_runtime.starter import start
from sandbox_agent_runtime.testing import other_agents, project, project_service
from sandbox_agent_runtime.testing.api_client import api_process, read_events
from sandbox_agent_runtime.testing.handovers import StallsAfterTheFirstCommand
from sandbox_agent_runtime.testing.other_agents import (
    ASK_HELPER,
    HELPER,
    HELPER_MODEL,
    REVIEWER,
    REVIEWER_MODEL,
    TO_REVIEWER,
    OtherAgentsChainWorkflow,
    OtherAgentsWorkflow,
)
from sandbox_agent_runtime.testing.processes import service_environment
from sandbox_agent_runtime.testing.scripted_model import Call, ScriptedAgents, call_id
from sandbox_agent_runtime.testing.support import (
    DROPPED_RUNS_CLOSED,
    SETTINGS,
    activities,
    failure_of,
    running_worker,
    runs_of_chain,
    sandboxes_for_tests,
)
from sandbox_agent_runtime.worker import agents_plugin, workflow_runner

pytestmark = [
    pytest.mark.usefixtures("collect_dropped_runs"),
    pytest.mark.filterwarnings(DROPPED_RUNS_CLOSED),
]

HISTORIES = Path(__file__).parent / "histories"
# A run of OtherAgentsWorkflow, and the second run of an OtherAgentsChainWorkflow's
# chain (what it was handed names the agent whose turn it was).
HISTORY = HISTORIES / "other-agents.json"
CHAIN_HISTORY = HISTORIES / "other-agents-chain.run-2.json"
COMMAND = f"{project_service().sandbox_provider}-sandbox_session_pty_exec_start"


def scripts(reviewer: list[str | Call] | None = None) -> dict[str, list[str | Call]]:
    """The agent writes a line, asks the helper (which adds one), then
    hands off to the reviewer (which prints the file)."""
    return {
        project().model: [
            "echo main > who.txt",
            Call(ASK_HELPER, json.dumps({"input": "Add your line to who.txt."})),
            Call(TO_REVIEWER, "{}"),
        ],
        HELPER_MODEL: ["echo helper >> who.txt"],
        REVIEWER_MODEL: ["cat who.txt"] if reviewer is None else reviewer,
    }


def printed(answer: RunAnswer) -> str:
    """What the last command printed, from the answer (its tool output)."""
    return str(answer.answer).split("Output:\n", 1)[1]


async def steps_of(client: Client, handle: WorkflowHandle[Any, Any]) -> list[str]:
    """The run's steps, as the starter prints them and the API sends them."""
    progress = Progress(client)
    lines = []
    async for event in handle.fetch_history_events():
        line = await progress.describe(event)
        if line is not None:
            lines.append(line)
    return lines


def model_calls_by_agent(history: WorkflowHistory) -> list[str]:
    """The agent named in each model activity's summary, in order."""
    return [
        json.loads(event.user_metadata.summary.data)
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and event.activity_task_scheduled_event_attributes.activity_type.name
        in ("invoke_model_activity", "invoke_model_activity_streaming")
    ]


async def test_the_other_agents_work_in_the_runs_one_sandbox_each_turn_a_model_activity(
    temporal_client: Client,
) -> None:
    models = ScriptedAgents(scripts())
    async with running_worker(temporal_client, models, workflows=[OtherAgentsWorkflow]) as (
        client,
        _,
    ):
        handle = await start(client, RunRequest("Write, ask the helper, then have it reviewed."))
        answer = await handle.result()
        names = [each.name for each in await activities(handle)]
        history = await handle.fetch_history()
        steps = await steps_of(client, handle)
        memo = await (await handle.describe()).memo()

    # The reviewer read what the agent and the helper wrote: one workspace.
    assert printed(answer) == "main\nhelper\n"
    assert [each.path for each in answer.outputs.files] == ["who.txt"]
    # One sandbox, made once and removed once; each other agent resumed it.
    provider = project_service().sandbox_provider
    assert names.count(f"{provider}-sandbox_client_create") == 1
    # (With approvals, the run also resumes it after each decision.)
    resumes = names.count(f"{provider}-sandbox_client_resume")
    assert resumes == 2 if not project_service().approvals else resumes > 2
    assert names.count(f"{provider}-sandbox_client_delete") == 1
    # Every model call an activity, each of its agent's model, the helper's
    # nested run included; each agent named in the step's summary.
    agent = model_calls_by_agent(history)[0]
    assert (
        models.calls
        == [project().model] * 2 + [HELPER_MODEL] * 2 + [project().model] + [REVIEWER_MODEL] * 2
    )
    assert model_calls_by_agent(history) == [agent] * 2 + [HELPER] * 2 + [agent] + [REVIEWER] * 2
    # Each call priced at its agent's model (the agent's own has no price).
    prices = project_service().prices
    cost = sum(
        cost_of(model, each.input_tokens, 0, each.output_tokens, prices) or 0.0
        for model in (HELPER_MODEL, REVIEWER_MODEL)
        for each in models.models[model].reported
    )
    assert project().model not in prices and cost > 0
    assert memo[USAGE_MEMO]["cost_usd"] == pytest.approx(cost)
    # The steps say which agent took each turn (agent.py's own unnamed).
    turns = [line for line in steps if line.startswith("model")]
    assert turns == [
        "model    turn 1",
        "model    turn 2",
        f"model    turn 3 ({HELPER})",
        f"model    turn 4 ({HELPER})",
        "model    turn 5",
        f"model    turn 6 ({REVIEWER})",
        f"model    turn 7 ({REVIEWER})",
    ]
    assert [line for line in steps if line.startswith("sandbox  $")] == [
        "sandbox  $ echo main > who.txt",
        "sandbox  $ echo helper >> who.txt",
        "sandbox  $ cat who.txt",
    ]
    if not HISTORY.exists():  # written once; commit it (the last test replays it)
        HISTORY.write_text(json.dumps(history.to_json_dict(), indent=2) + "\n")


@pytest.mark.process
async def test_the_api_events_name_the_agent_of_each_turn(temporal_client: Client) -> None:
    address = temporal_client.service_client.config.target_host
    environment = service_environment(address, "http://127.0.0.1:9")
    models = ScriptedAgents(scripts())
    async with (
        running_worker(temporal_client, models, workflows=[OtherAgentsWorkflow]),
        api_process(environment) as api,
        api.client() as http,
    ):
        started = await http.post("/v1/runs", json={"prompt": "Write, ask, have it reviewed."})
        assert started.status_code == 201, started.text
        workflow_id = started.json()["id"]
        events = await read_events(http, workflow_id)
        # A client that reconnects after the first agent's turns is told
        # the same of the turns after.
        second = next(each for each in events if each.data.get("text") == "turn 2")
        after = await read_events(http, workflow_id, last_event_id=second.id)

    # As the starter's steps say (the agent's own turns unnamed).
    turns = [each.data["text"] for each in events if each.name == "model"]
    assert turns == [
        "turn 1",
        "turn 2",
        f"turn 3 ({HELPER})",
        f"turn 4 ({HELPER})",
        "turn 5",
        f"turn 6 ({REVIEWER})",
        f"turn 7 ({REVIEWER})",
    ], events
    assert f"model    turn 6 ({REVIEWER})" in [each.data.get("line") for each in events]
    assert [each.data["text"] for each in after if each.name == "model"] == turns[2:]


async def test_the_turn_budget_counts_the_turns_of_the_agent_handed_off_to(
    temporal_client: Client,
) -> None:
    # The reviewer would go on for ever: the run's MAX_TURNS stops it,
    # counting the turns the agent took before the handoff.
    models = ScriptedAgents(scripts(reviewer=["true"] * 100))
    async with running_worker(temporal_client, models, workflows=[OtherAgentsWorkflow]) as (
        client,
        _,
    ):
        handle = await start(client, RunRequest("Write, ask the helper, then have it reviewed."))
        reason = await failure_of(handle)

    max_turns = project_service().max_turns
    assert reason == f"The agent could not finish: Max turns ({max_turns}) exceeded"
    # The agent's 3 turns (the helper's run is a tool call of one of them).
    assert models.calls.count(REVIEWER_MODEL) == max_turns - 3


async def test_the_token_budget_counts_the_calls_of_an_agent_called_as_a_tool(
    temporal_client: Client,
) -> None:
    # The helper's nested run would go on for ever: the prompt's token
    # budget stops it, then the agent before its next call.
    models = ScriptedAgents({**scripts(), HELPER_MODEL: ["true"] * 100})
    async with running_worker(temporal_client, models, workflows=[OtherAgentsWorkflow]) as (
        client,
        _,
    ):
        handle = await start(client, RunRequest("Ask the helper.", token_budget=3_000))
        answer = await handle.result()
        memo = await (await handle.describe()).memo()

    assert answer.stopped.startswith("stopped: token budget reached"), answer
    assert models.calls.count(HELPER_MODEL) < 10
    assert models.calls.count(REVIEWER_MODEL) == 0
    # Every call counted, the helper's among them.
    assert memo[USAGE_MEMO]["model_calls"] == len(models.calls), memo


async def test_a_run_left_part_way_by_its_worker_goes_on_without_redoing_a_step(
    temporal_client: Client,
) -> None:
    stalls = ScriptedAgents(scripts())
    # The reviewer's first call never comes back: the worker goes away then,
    # after the agent's and the helper's commands and the handoff.
    stalls.models[REVIEWER_MODEL] = StallsAfterTheFirstCommand(["cat who.txt"])
    async with running_worker(temporal_client, stalls, workflows=[OtherAgentsWorkflow]) as (
        client,
        _,
    ):
        handle = await start(client, RunRequest("Write, ask the helper, then have it reviewed."))
        await stalls.models[REVIEWER_MODEL].stalled.wait()  # type: ignore[attr-defined]

    models = ScriptedAgents(scripts())
    async with running_worker(temporal_client, models, workflows=[OtherAgentsWorkflow]):
        answer = await handle.result()
        names = [each.name for each in await activities(handle)]

    assert printed(answer) == "main\nhelper\n"
    # Each command ran once; the new worker asked the reviewer's model alone.
    assert names.count(COMMAND) == 3
    assert models.calls == [REVIEWER_MODEL] * 2


async def test_the_next_run_of_a_chain_goes_on_with_the_agent_handed_off_to(
    temporal_client: Client,
) -> None:
    # The first run's history is taken for full in the reviewer's turn.
    models = ScriptedAgents(scripts())
    async with running_worker(temporal_client, models, workflows=[OtherAgentsChainWorkflow]) as (
        client,
        _,
    ):
        handle = await start(client, RunRequest("Write, ask the helper, then have it reviewed."))
        answer = await handle.result()
        assert handle.first_execution_run_id is not None
        runs = await runs_of_chain(client, handle.id, handle.first_execution_run_id)

    assert len(runs) == 2
    assert printed(answer) == "main\nhelper\n"
    # The reviewer answered in the second run; agent.py's agent took no turn there.
    assert model_calls_by_agent(runs[1].history) == [REVIEWER]
    assert models.calls.count(project().model) == 3
    if not CHAIN_HISTORY.exists():  # written once; commit it
        CHAIN_HISTORY.write_text(json.dumps(runs[1].history.to_json_dict(), indent=2) + "\n")


@pytest.mark.remote_stand_in  # approvals: only the remote stand-in has them
async def test_a_command_of_the_agent_handed_off_to_waits_for_a_person(
    temporal_client: Client,
) -> None:
    models = ScriptedAgents(scripts())
    # running_worker's stand-in person approves each call that waits.
    async with running_worker(temporal_client, models, workflows=[OtherAgentsWorkflow]) as (
        client,
        _,
    ):
        handle = await start(client, RunRequest("Write, ask the helper, then have it reviewed."))
        answer = await handle.result()
        history = await handle.fetch_history()

    assert printed(answer) == "main\nhelper\n"
    decided = [
        event.workflow_execution_update_accepted_event_attributes.accepted_request.input
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    ]
    # The reviewer's command waited for a decision like the agent's own, and
    # so did the helper's, in its nested run.
    for model in (REVIEWER_MODEL, HELPER_MODEL):
        call = call_id(0, models.models[model].agent).encode()
        assert any(call in each.args.payloads[0].data for each in decided), (model, decided)


@pytest.mark.default_stand_in  # recorded from the default stand-in's runs
@pytest.mark.parametrize(
    ("path", "workflow"),
    [(HISTORY, "OtherAgentsWorkflow"), (CHAIN_HISTORY, "OtherAgentsChainWorkflow")],
    ids=["other-agents", "other-agents-chain.run-2"],
)
async def test_a_recorded_run_of_other_agents_replays(path: Path, workflow: str) -> None:
    history = WorkflowHistory.from_json(path.stem, json.loads(path.read_text()))
    replayer = Replayer(
        workflows=[getattr(other_agents, workflow)],
        workflow_runner=workflow_runner(),
        plugins=[agents_plugin(SETTINGS, sandboxes=sandboxes_for_tests())],
        data_converter=data_converter(None),
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.name}: {result.replay_failure}"
    assert REVIEWER in model_calls_by_agent(history)
