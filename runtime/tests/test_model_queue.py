"""Where model calls wait (MODEL_CALLS_QUEUE, model_queue.py): on their own
task queue when the fleet has a rate (or asks for the queue), with the run's
own work otherwise; and a run goes on, without non-determinism and without a
call stranded, when the worker that takes it over is set the other way (a
rolling change of the setting). The rate itself: test_model_rate.py."""

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Replayer

from sandbox_agent_runtime.model_queue import OWN, RUN, model_task_queue
from sandbox_agent_runtime.settings import BadSetting, WorkerSettings
from sandbox_agent_runtime.starter import start
from sandbox_agent_runtime.starter.following import Queued, wait_notice
from sandbox_agent_runtime.testing import project, project_service
from sandbox_agent_runtime.testing.handovers import StallsAfterTheFirstCommand
from sandbox_agent_runtime.testing.processes import WORKER, service, service_environment
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server
from sandbox_agent_runtime.testing.support import (
    DROPPED_RUNS_CLOSED,
    RETRIED_AT_ONCE,
    SETTINGS,
    activities,
    running_worker,
    sandboxes_for_tests,
    settings_with,
)
from sandbox_agent_runtime.worker import agents_plugin

# Workers here drop runs part-way: see `collect_dropped_runs` (conftest.py).
pytestmark = [
    pytest.mark.usefixtures("collect_dropped_runs"),
    pytest.mark.filterwarnings(DROPPED_RUNS_CLOSED),
]

COMMANDS = ["printf 'noted\\n' > note.txt", "cat note.txt"]
PROMPT = "Write a note, then read it back."
OWN_QUEUE = replace(SETTINGS, model_calls_queue=OWN)


async def model_call_queues(run: WorkflowHandle[Any, Any]) -> list[str]:
    """The task queue each model call of ``run`` was scheduled on, in order
    (its history's ActivityTaskScheduled events)."""
    return [step.task_queue for step in await activities(run) if step.is_model_call]


async def replays_under_both_settings(run: WorkflowHandle[Any, Any]) -> None:
    """Assert that ``run``'s history replays with a worker set either way."""
    history = await run.fetch_history()
    for settings in (SETTINGS, OWN_QUEUE):
        replayer = Replayer(
            workflows=[project().workflow],
            plugins=[agents_plugin(settings, sandboxes=sandboxes_for_tests())],
        )
        replayed = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert replayed.replay_failure is None, (settings.model_calls_queue, replayed)
    failed = [
        e for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    ]
    assert not failed, failed


@pytest.mark.parametrize(
    ("settings", "queue"),
    [(SETTINGS, project_service().task_queue), (OWN_QUEUE, model_task_queue())],
    ids=["without a rate: the run's queue", "MODEL_CALLS_QUEUE=own: their own"],
)
async def test_model_calls_wait_on_the_runs_queue_unless_the_fleet_asks_for_their_own(
    temporal_client: Client, settings: WorkerSettings, queue: str
) -> None:
    async with running_worker(temporal_client, ScriptedModel(COMMANDS), settings=settings) as (
        client,
        _,
    ):
        run = await start(client, PROMPT)
        answer = (await run.result()).answer

    assert "noted" in answer
    # A command each, then the answer: three calls, each on ``queue``.
    assert await model_call_queues(run) == [queue] * 3


async def test_a_call_left_on_the_model_queue_is_taken_by_a_worker_set_without_it(
    temporal_client: Client,
) -> None:
    # The first worker sends the calls to their own queue, and stops while
    # its second call waits on the model (as a crash would): Temporal
    # retries the call on the queue it was scheduled on.
    stalling = StallsAfterTheFirstCommand(COMMANDS)
    async with running_worker(
        temporal_client,
        stalling,
        settings=OWN_QUEUE,
        identity="worker-with-the-queue",
        graceful_shutdown_timeout=timedelta(0),
        model_retry_policy=RETRIED_AT_ONCE,
    ) as (client, _):
        run = await start(client, PROMPT)
        await stalling.stalled.wait()

    # A worker set without it (no rate) still polls that queue: it takes the
    # call there, replays the run, and sends the rest with the run's work.
    async with running_worker(
        temporal_client, ScriptedModel(COMMANDS), identity="worker-without-it"
    ):
        answer = (await run.result()).answer

    assert "noted" in answer
    service = project_service().task_queue
    assert await model_call_queues(run) == [model_task_queue(), model_task_queue(), service]
    calls = [step for step in await activities(run) if step.is_model_call]
    assert [call.worker for call in calls] == [
        "worker-with-the-queue",
        "worker-without-it",
        "worker-without-it",
    ]
    await replays_under_both_settings(run)


async def test_a_run_begun_without_the_model_queue_goes_on_with_it_on_another_worker(
    temporal_client: Client,
) -> None:
    # The first worker sends the calls with the run's own work, and stops
    # while its second call waits on the model (as a crash would).
    stalling = StallsAfterTheFirstCommand(COMMANDS)
    async with running_worker(
        temporal_client,
        stalling,
        identity="worker-without-the-queue",
        graceful_shutdown_timeout=timedelta(0),
        model_retry_policy=RETRIED_AT_ONCE,
    ) as (client, _):
        run = await start(client, PROMPT)
        await stalling.stalled.wait()

    # A worker with the queue retries that call on the run's queue, where it
    # was scheduled, and sends the next to the model calls' own.
    async with running_worker(
        temporal_client, ScriptedModel(COMMANDS), settings=OWN_QUEUE, identity="worker-with-it"
    ):
        answer = (await run.result()).answer

    assert "noted" in answer
    service = project_service().task_queue
    assert await model_call_queues(run) == [service, service, model_task_queue()]
    calls = [step for step in await activities(run) if step.is_model_call]
    assert [call.worker for call in calls] == [
        "worker-without-the-queue",
        "worker-with-it",
        "worker-with-it",
    ]
    await replays_under_both_settings(run)


@pytest.mark.parametrize(
    ("environ", "queue"),
    [
        ({}, RUN),
        ({"MODEL_CALLS_PER_SECOND": "2"}, OWN),
        ({"MODEL_CALLS_QUEUE": "own"}, OWN),
        ({"MODEL_CALLS_QUEUE": " run "}, RUN),
        ({"MODEL_CALLS_QUEUE": "own", "MODEL_CALLS_PER_SECOND": "2"}, OWN),
    ],
)
def test_the_model_calls_queue_is_their_own_with_a_rate_or_when_asked(
    environ: dict[str, str], queue: str
) -> None:
    assert settings_with(environ).model_calls_queue == queue


def test_a_rate_without_the_model_calls_own_queue_is_refused_in_one_line() -> None:
    with pytest.raises(BadSetting) as refused:
        settings_with({"MODEL_CALLS_QUEUE": "run", "MODEL_CALLS_PER_SECOND": "2"})

    assert str(refused.value) == (
        "MODEL_CALLS_QUEUE='run' is not allowed: use own, or leave it unset (MODEL_CALLS_PER_SECOND "
        "is set, and the fleet's rate holds on the model calls' own queue alone)."
    )


@pytest.mark.process
async def test_the_worker_says_where_its_model_calls_go(temporal_client: Client) -> None:
    address = temporal_client.service_client.config.target_host
    with scripted_openai_server(COMMANDS) as model:
        async with service(WORKER, service_environment(address, model.url)) as worker:
            await worker.wait_for("Worker polling")

    [line] = [line for line in worker.output if line.startswith("Worker polling")]
    assert (
        f"{model_task_queue()!r} (model calls left there by a worker with MODEL_CALLS_QUEUE=own; "
        "this worker's go with their runs)"
    ) in line, line


async def test_the_starter_names_the_queue_a_waiting_model_call_is_on(
    temporal_client: Client,
) -> None:
    # A call sent with its run's work waits on the run's queue, and the
    # notice says so (with its own queue, test_model_rate.py).
    on_the_runs = Queued("key", "its model call", model_call=True, task_queue=None)
    assert await wait_notice(temporal_client, on_the_runs, 12) == (
        "  waiting  12 s for a worker to take its model call: every worker on task queue "
        f"{project_service().task_queue!r} is busy, or none is running; the run waits, "
        "nothing is lost"
    )
    on_its_own = replace(on_the_runs, task_queue=model_task_queue())
    assert "(the service's model calls)" in await wait_notice(temporal_client, on_its_own, 12)
