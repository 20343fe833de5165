"""Worker Versioning (versioning.py): a deploy of a changed workflow while
runs are in flight, on a dev server of each test's own, with the commands
a project's docs/versioning.md gives.

Build A is the service's workflow; build B adds a step before the agent
(testing/long_workflow.py), so B cannot replay a run A started. With
versioning, a run in flight finishes on A while new runs go to B, and a
chain moves to B at its next continue-as-new; without it, B takes the run in
flight and fails to replay it, which is what versioning prevents.

It runs against both stand-ins (conftest.py): the default one (the local
backend, no approvals) and the remote one (Daytona first, the local backend
beside it, with approvals: the starter signs what it is asked with the
approver's key). Both have a backend whose sandbox lives on the worker's
host, so each build's worker has a host of its own (``running_worker``
gives a worker its host only where the service has such a backend)."""

import asyncio
import json
import shutil
import time
from datetime import timedelta
from typing import Any

import pytest
from agents import ModelResponse
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkerDeploymentVersion

from sandbox_agent_runtime.observability import RUNS
from sandbox_agent_runtime.starter import (
    EXIT_COMPLETED,
    chain_run,
    follow,
    start,
)
from sandbox_agent_runtime.testing import project_service
from sandbox_agent_runtime.testing.handovers import ALL_STEPS, STEPS, workspaces_used
from sandbox_agent_runtime.testing.long_workflow import NEXT_BUILDS_STEP, NextBuildWorkflow
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel, steps_done
from sandbox_agent_runtime.testing.support import (
    DROPPED_RUNS_CLOSED,
    STARTER_SETTINGS,
    dev_server,
    metered_client,
    running_worker,
    runs_of_chain,
)

pytestmark = pytest.mark.long

DEPLOYMENT = project_service().name
BUILD_A = WorkerDeploymentVersion(deployment_name=DEPLOYMENT, build_id="build-a")
BUILD_B = WorkerDeploymentVersion(deployment_name=DEPLOYMENT, build_id="build-b")

# The dev server suggests continuing as new once a run's history has this
# many events (by default 4,096): each run of a chain then takes a turn or
# two, so a chain of a few steps is a chain of several runs.
SUGGEST_CONTINUE_AS_NEW = "limit.historyCount.suggestContinueAsNew=20"


class HoldsTheFirstCall(ScriptedModel):
    """Holds the first model call it is given, a run's first, until
    ``go_on`` is set (``holding`` is set meanwhile); answers every other call
    at once. Only the first: model calls are on a queue of their own that
    every build's worker polls (model_queue.py), so this build's worker may
    also be given the first call of a run of the next build."""

    def __init__(self, commands: list[str]) -> None:
        super().__init__(commands)
        self.holding = asyncio.Event()
        self.go_on = asyncio.Event()

    async def get_response(
        self, system_instructions: str | None, input: str | list[Any], *args: Any, **kwargs: Any
    ) -> ModelResponse:
        if steps_done(input) == 0 and not self.holding.is_set():
            self.holding.set()
            await self.go_on.wait()
        return await super().get_response(system_instructions, input, *args, **kwargs)


async def make_current(client: Client, version: WorkerDeploymentVersion) -> float:
    """``temporal worker deployment set-current-version``, as
    docs/versioning.md gives it, retried until a worker of ``version`` has
    polled (the server knows no version before); when it took effect."""
    temporal = shutil.which("temporal")
    assert temporal is not None
    command = [
        temporal,
        "worker",
        "deployment",
        "set-current-version",
        "--address",
        client.service_client.config.target_host,
        "--namespace",
        client.namespace,
        "--deployment-name",
        version.deployment_name,
        "--build-id",
        version.build_id,
        "--yes",
    ]
    output = b""
    for _ in range(100):
        process = await asyncio.create_subprocess_exec(
            *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        output, _ = await process.communicate()
        if process.returncode == 0:
            return time.time()
        await asyncio.sleep(0.1)
    pytest.fail(f"set-current-version {version.build_id} kept failing: {output.decode()}")


async def workflow_tasks(handle: WorkflowHandle[Any, Any]) -> tuple[list[str], list[str]]:
    """The build of each workflow task a run completed, and why each that
    failed failed."""
    builds, failures = [], []
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            builds.append(
                event.workflow_task_completed_event_attributes.deployment_version.build_id
            )
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            failures.append(event.workflow_task_failed_event_attributes.failure.message)
    return builds, failures


async def pinned_to(handle: WorkflowHandle[Any, Any]) -> str:
    """The build a run is pinned to, as Temporal describes it."""
    info = (await handle.describe()).raw_description.workflow_execution_info.versioning_info
    return info.deployment_version.build_id


async def timers(handle: WorkflowHandle[Any, Any]) -> int:
    """How many timers of build B's step a run started."""
    return len(
        [
            event
            async for event in handle.fetch_history_events()
            if event.event_type == EventType.EVENT_TYPE_TIMER_STARTED
            and event.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta()
            == NEXT_BUILDS_STEP
        ]
    )


async def test_a_run_in_flight_finishes_on_its_build_while_new_runs_go_to_the_next() -> None:
    async with dev_server() as server, metered_client(server) as (metered, metrics):
        model = HoldsTheFirstCall(STEPS)
        async with running_worker(metered, model, version=BUILD_A, host="host-a") as (client, _):
            await make_current(client, BUILD_A)
            in_flight = await start(client, "Add to the file, then print it.")
            async with asyncio.timeout(20):
                await model.holding.wait()
            async with running_worker(
                metered,
                ScriptedModel(STEPS),
                version=BUILD_B,
                host="host-b",
                workflows=[NextBuildWorkflow],
            ):
                await make_current(client, BUILD_B)
                new = await start(client, "Add to the file, then print it.")
                assert (await new.result()).answer.endswith(ALL_STEPS)
                model.go_on.set()
                assert (await in_flight.result()).answer.endswith(ALL_STEPS)

            # The run in flight finished on A, every workflow task of it,
            # without one failure; the new run ran on B, B's step included.
            builds, failures = await workflow_tasks(in_flight)
            assert (set(builds), failures) == ({"build-a"}, [])
            assert await pinned_to(in_flight) == "build-a"
            assert await timers(in_flight) == 0
            builds, failures = await workflow_tasks(new)
            assert (set(builds), failures) == ({"build-b"}, [])
            assert await pinned_to(new) == "build-b"
            assert await timers(new) == 1
            # The runs metric says which build each run ended on.
            for build in ("build-a", "build-b"):
                assert await metrics.total(RUNS, outcome="completed", build_id=build) == 1


@pytest.mark.usefixtures("collect_dropped_runs")
@pytest.mark.filterwarnings(DROPPED_RUNS_CLOSED)
async def test_without_versioning_the_next_build_fails_to_replay_a_run_in_flight() -> None:
    async with dev_server() as server:
        model = HoldsTheFirstCall(STEPS)
        # Build A, unversioned, goes away while the run waits on its model
        # call (the call is cancelled), as a worker replaced by a deploy does.
        async with running_worker(server, model, graceful_shutdown_timeout=timedelta(0)) as (
            client,
            _,
        ):
            in_flight = await start(client, "Add to the file, then print it.")
            async with asyncio.timeout(20):
                await model.holding.wait()
        async with running_worker(server, ScriptedModel(STEPS), workflows=[NextBuildWorkflow]):
            async with asyncio.timeout(20):
                while not (failures := (await workflow_tasks(in_flight))[1]):
                    await asyncio.sleep(0.2)
            await in_flight.terminate("the test saw what it came for")
    assert "[TMPRL1100]" in failures[0], failures


async def test_a_chain_moves_to_the_current_build_at_continue_as_new(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with dev_server(SUGGEST_CONTINUE_AS_NEW) as server:
        model = HoldsTheFirstCall(STEPS)
        async with running_worker(server, model, version=BUILD_A, host="host-a") as (client, _):
            await make_current(client, BUILD_A)
            chain = await start(client, "Add to the file, then print it.")
            async with asyncio.timeout(20):
                await model.holding.wait()
            async with running_worker(
                server,
                ScriptedModel(STEPS),
                version=BUILD_B,
                host="host-b",
                workflows=[NextBuildWorkflow],
            ):
                await make_current(client, BUILD_B)
                model.go_on.set()
                answer = (await chain.result()).answer

            runs = await runs_of_chain(client, chain.id, chain.first_execution_run_id or "")
            first, *later = runs
            assert later, "the chain did not continue as new"
            # The first run stayed on A; every later run ran on B...
            builds = [
                await workflow_tasks(client.get_workflow_handle(chain.id, run_id=run.run_id))
                for run in runs
            ]
            assert builds[0] == (builds[0][0], []) and set(builds[0][0]) == {"build-a"}
            for run_builds, failures in builds[1:]:
                assert (set(run_builds), failures) == ({"build-b"}, [])
            # ...carrying the conversation, the sandbox and the turns: the
            # last step printed what every step wrote, in one workspace.
            assert answer.endswith(ALL_STEPS)
            roots = set()
            for run in runs:
                roots |= await workspaces_used(
                    client.get_workflow_handle(chain.id, run_id=run.run_id)
                )
            assert len(roots) == 1, roots
            [started] = [e for e in runs[-1].history.events][:1]
            carried = json.loads(
                started.workflow_execution_started_event_attributes.input.payloads[1].data
            )
            assert carried["turns"] >= 1 and carried["conversation"]

            # The starter shows the build each run of the chain is pinned to.
            capsys.readouterr()
            followed = chain_run(client, chain.id, first.run_id)
            # With approvals, signed with the approver's key.
            key_file = STARTER_SETTINGS.approver_key_file if project_service().approvals else None
            status = await follow(client, followed, key_file)
            assert status == EXIT_COMPLETED
            shown = [line.strip() for line in capsys.readouterr().out.splitlines()]
            pins = [line for line in shown if line.startswith("version")]
            assert pins == [
                f"version  build {build!r} of {DEPLOYMENT!r} (pinned)"
                for build in ["build-a"] + ["build-b"] * len(later)
            ], shown
