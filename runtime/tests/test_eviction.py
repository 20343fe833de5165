"""Past the cache nothing fails: a worker with more runs open than it caches
drops some from its cache part-way (the SDK's "Workflow cache full") and
replays each from its history at its next step. The SDK's safe eviction ends
a dropped run's coroutines before it lets go of them, so none is left for
the garbage collector to close inside another run (temporalio/sdk-python#494,
docs/operations.md "Known issues"): a stop is what drops runs without that."""

import asyncio
import gc
import logging
import sys
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from agents import ModelResponse
from sandbox_agent.workflow import SandboxAgentWorkflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle, WorkflowHistory
from temporalio.worker import Replayer

from sandbox_agent_runtime.capacity import worker_options
from sandbox_agent_runtime.starter import start
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
from sandbox_agent_runtime.testing.support import SETTINGS, running_worker, sandboxes_for_tests
from sandbox_agent_runtime.worker import agents_plugin

# Twelve runs, each replayed from its history after it was dropped: seconds.
pytestmark = pytest.mark.long

# A worker sized for 2 runs in flight caches 4; 12 runs are open at once.
RUNS_IN_FLIGHT = 2
OPEN_RUNS = 12
STEPS = ["echo one step >> steps.txt && cat steps.txt"]


class GatedModel(ScriptedModel):
    """The scripted model, answering nothing until ``gate`` is set."""

    def __init__(self, commands: list[str]) -> None:
        super().__init__(commands)
        self.gate = asyncio.Event()

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        await self.gate.wait()
        return await super().get_response(*args, **kwargs)


async def has_begun(handle: WorkflowHandle[Any, Any]) -> bool:
    """A worker has completed a workflow task of the run: it is open on the worker."""
    history = await handle.fetch_history()
    return any(e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED for e in history.events)


async def test_more_runs_open_than_the_worker_caches_all_complete_and_replay(
    temporal_client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="temporalio.worker._workflow")
    settings = replace(SETTINGS, runs_in_flight=RUNS_IN_FLIGHT)
    options = worker_options(settings.runs_in_flight)
    assert options["max_cached_workflows"] < OPEN_RUNS
    model = GatedModel(STEPS)
    # 12 runs through 2 slots, each replayed from its history at its steps
    # after an eviction: 10 to 25 s here, more than a run's usual time limit.
    limit = timedelta(seconds=60)
    # A coroutine of a dropped run that the garbage collector closes is an
    # "unraisable" exception: note every one from this test's runs (whatever
    # earlier tests in this process left is collected first).
    gc.collect()
    closed: list[str] = []
    hook = sys.unraisablehook
    sys.unraisablehook = lambda unraisable: closed.append(
        f"{unraisable.err_msg}: {unraisable.object!r}"
    )
    try:
        async with running_worker(temporal_client, model, time_limit=limit, settings=settings) as (
            client,
            _,
        ):
            runs = await asyncio.gather(*(start(client, f"run {n}") for n in range(OPEN_RUNS)))
            # Every run has begun before any model call answers: all are open at once.
            # The gate opens however this wait ends: a model call held past the
            # test holds the worker's shutdown, which then hung the test process
            # until pytest-timeout ended it (CI at 389e783, on a loaded machine).
            # No clock of its own: the runs begin at the pace of their first
            # workflow tasks (a run dropped from the cache while it asks for its
            # host holds its task up to 8 s, the SDK's heartbeat of a local
            # activity), and running_worker fails the test once they stop
            # making progress.
            try:
                while not all([await has_begun(run) for run in runs]):
                    await asyncio.sleep(0.2)
            finally:
                model.gate.set()
            done = await asyncio.gather(*(run.result() for run in runs))
            answers = [each.answer for each in done]
        gc.collect()
    finally:
        sys.unraisablehook = hook
    assert not closed, closed

    # The worker did drop runs from its cache part-way.
    # The SDK logs "Evicting workflow with run ID <id>, message: <why>".
    evictions = [r.getMessage() for r in caplog.records if r.name == "temporalio.worker._workflow"]
    evicted = {
        e.split("run ID ")[1].split(",")[0] for e in evictions if e.endswith("Workflow cache full")
    }
    assert len(evicted) >= OPEN_RUNS - options["max_cached_workflows"], evicted
    # Each run ran its step in its own workspace, once.
    assert all(answer.split("Output:\n")[-1].split() == ["one", "step"] for answer in answers), (
        answers
    )

    async def histories() -> AsyncIterator[WorkflowHistory]:
        for run in runs:
            yield await run.fetch_history()

    replayed = await Replayer(
        workflows=[SandboxAgentWorkflow],
        plugins=[agents_plugin(SETTINGS, sandboxes=sandboxes_for_tests())],
    ).replay_workflows(histories(), raise_on_replay_failure=False)
    assert not replayed.replay_failures, replayed.replay_failures
