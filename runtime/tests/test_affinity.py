"""A run's sandbox stays on the host that holds it (affinity.py), with
several workers on several hosts sharing the task queue.

Workers in this process stand for the hosts: each has a host id of its own,
and each host's sandbox reaches only the workspaces that host created, as a
sandbox on another machine would (``HostSandbox``). The same with real worker
processes and a private filesystem per host: a project's
test_affinity_processes.py (``-m process``).

It runs against both stand-ins (conftest.py), each with the local backend,
whose sandbox lives on the worker's host: the default one (the local backend
alone, no approvals) and the remote one (the local backend beside Daytona and
the other remote backends, with approvals: a stand-in person approves every
call of the runs here)."""

import asyncio
from collections import defaultdict
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from agents.sandbox.manifest import Manifest
from agents.sandbox.sandboxes.unix_local import UnixLocalSandboxClient
from agents.sandbox.session import SandboxSession
from agents.sandbox.session.sandbox_session_state import SandboxSessionState
from temporalio.client import Client, WorkflowHandle
from temporalio.openai_agents.testing import TestModelProvider
from temporalio.worker import Worker

from sandbox_agent_runtime import worker
from sandbox_agent_runtime.affinity import host_queue
from sandbox_agent_runtime.starter import start
from sandbox_agent_runtime.testing import project, project_service
from sandbox_agent_runtime.testing.handovers import (
    ALL_STEPS,
    STEPS,
    StallsAfterTheFirstCommand,
    sandbox_workers,
    stalled_on,
)
from sandbox_agent_runtime.testing.long_workflow import ImpatientSandboxAgentWorkflow
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
from sandbox_agent_runtime.testing.support import (
    DROPPED_RUNS_CLOSED,
    RETRIED_AT_ONCE,
    SETTINGS,
    activities,
    approving_everything,
    bound_provider,
    failure_of,
    running_worker,
    sandboxes_for_tests,
    with_plugins,
)
from sandbox_agent_runtime.worker import ServiceWorker

# Workers here drop runs part-way: see `collect_dropped_runs` (conftest.py).
pytestmark = [
    pytest.mark.usefixtures("collect_dropped_runs"),
    pytest.mark.filterwarnings(DROPPED_RUNS_CLOSED),
]

# A provider whose sandbox lives on the worker's host.
BOUND_PROVIDER = bound_provider()

# The workspaces each host created, by host: what each host's disk holds.
WORKSPACES: dict[str, set[str]] = defaultdict(set)


class WorkspaceNotOnThisHost(Exception):
    """An operation reached a host that does not hold its sandbox."""


class HostSandbox(UnixLocalSandboxClient):
    """The local sandbox of one host among several in this process: it
    reaches only the workspaces its host created (WORKSPACES), as a host
    reaches only its own disk. Any worker of the host, restarted or not,
    reaches them all."""

    def __init__(self, host: str) -> None:
        super().__init__(inherit_host_environment=False)
        self.host = host

    async def create(self, *, manifest: Manifest | None = None, **kwargs: Any) -> SandboxSession:
        session = await super().create(manifest=manifest, **kwargs)
        WORKSPACES[self.host].add(session.state.manifest.root)
        return session

    async def resume(self, state: SandboxSessionState) -> SandboxSession:
        if state.manifest.root not in WORKSPACES[self.host]:
            raise WorkspaceNotOnThisHost(
                f"workspace root not found on host {self.host!r}: {state.manifest.root}"
            )
        return await super().resume(state)


async def refused_once(run: WorkflowHandle[Any, Any], by: str, host: str) -> bool:
    """Whether worker ``by`` refused one operation of ``run`` offered for
    ``host`` on the run's own queue, and the run sent every operation after
    it straight to that host's queue (affinity.HostFirst)."""
    steps = [step for step in await activities(run) if step.is_sandbox_operation]
    refusals = [i for i, step in enumerate(steps) if step.refused]
    if len(refusals) != 1:
        return False
    [at] = refusals
    after = {(step.task_queue, step.host) for step in steps[at + 1 :]}
    return (steps[at].worker, steps[at].host) == (by, host) and after == {(host_queue(host), "")}


def worker_on(
    client: Client, host: str, identity: str = "", **options: Any
) -> AbstractAsyncContextManager[tuple[Client, ServiceWorker]]:
    """A worker of ``host`` (``worker-of-<host>`` unless named) running STEPS
    in that host's sandbox."""
    return running_worker(
        client,
        ScriptedModel(STEPS),
        HostSandbox(host),
        provider=BOUND_PROVIDER,
        host=host,
        identity=identity or f"worker-of-{host}",
        **options,
    )


@pytest.mark.long  # eight runs, two hosts
async def test_runs_on_two_hosts_keep_each_sandbox_operation_on_the_host_that_holds_it(
    temporal_client: Client,
) -> None:
    # Four runs create their sandboxes on host A. Then host A stops taking
    # runs and model calls (its shared queue and the model calls'), while its own queue still runs:
    # host B takes everything else, and four runs more. Sent to the shared
    # queue, host A's sandbox operations would reach host B, which does not
    # hold those workspaces.
    model = StallsAfterTheFirstCommand(STEPS, runs=4)
    settings_a = replace(SETTINGS, runs_in_flight=4, host_id="host-a")
    plugged_a = with_plugins(
        temporal_client,
        worker.agents_plugin(
            settings_a,
            sandboxes=sandboxes_for_tests(HostSandbox("host-a"), BOUND_PROVIDER),
            model_provider=TestModelProvider(model),
            model_retry_policy=RETRIED_AT_ONCE,
        ),
    )
    host_a = worker.build_worker(
        plugged_a,
        settings_a,
        workflows=[project().workflow],
        tool_activities=project().tool_activities,
        identity="worker-a",
        graceful_shutdown_timeout=timedelta(0),
    )
    assert host_a.own is not None
    async with host_a.own:
        # With approvals, a stand-in person approves every call.
        approving: AbstractAsyncContextManager[None] = (
            approving_everything(plugged_a) if project_service().approvals else nullcontext()
        )
        async with host_a.models, host_a.shared, approving:
            on_a = [
                await start(plugged_a, "Add, then print.", provider=BOUND_PROVIDER)
                for _ in range(4)
            ]
            async with asyncio.timeout(20):
                await model.stalled.wait()
        # Eight runs, the first four handed from host to host: 14 s on a
        # quiet machine, past the default 30 s on a loaded one (CI).
        async with worker_on(temporal_client, "host-b", time_limit=timedelta(seconds=120)) as (
            client,
            _,
        ):
            on_b = [
                await start(client, "Add, then print.", provider=BOUND_PROVIDER) for _ in range(4)
            ]
            done = await asyncio.gather(*(run.result() for run in on_a + on_b))
            answers = [each.answer for each in done]

    # Every run saw, at its last step, what each of its steps wrote...
    for answer in answers:
        assert answer.endswith(ALL_STEPS), answer
    # ...because each run's sandbox operations all went to its host's queue
    # and ran on that host's worker, whichever worker ran the rest.
    for run in on_a:
        assert await sandbox_workers(run) == ({"worker-a"}, {host_queue("host-a")})
        model_calls = {step.worker for step in await activities(run) if step.is_model_call}
        assert "worker-of-host-b" in model_calls
        # Host B, running the workflow, was offered one of host A's
        # operations on the run's own queue and refused it, running nothing;
        # the run sent the rest straight to host A's queue.
        assert await refused_once(run, by="worker-of-host-b", host="host-a")
    for run in on_b:
        assert await sandbox_workers(run) == ({"worker-of-host-b"}, {host_queue("host-b")})


@pytest.mark.long  # waits out the host's wait
async def test_a_run_whose_sandbox_host_is_gone_fails_naming_the_host(
    temporal_client: Client,
) -> None:
    run = await stalled_on(
        temporal_client,
        "host-a",
        BOUND_PROVIDER,
        HostSandbox("host-a"),
        ImpatientSandboxAgentWorkflow,
    )
    # Host A never comes back; host B takes the run's model call, and its
    # next command waits on host A's queue for host_wait, then fails the run.
    async with worker_on(temporal_client, "host-b", workflows=[ImpatientSandboxAgentWorkflow]):
        reason = await failure_of(run)

    assert reason.startswith("The agent could not finish: its sandbox's host 'host-a' is gone")
    assert f"task queue {host_queue('host-a')!r}" in reason
    assert "within 2 s" in reason
    # No operation of host A's sandbox ran anywhere else, its removal included.
    assert await sandbox_workers(run) == ({"worker-of-host-a"}, {host_queue("host-a")})


async def test_a_worker_restarted_on_the_same_host_resumes_its_runs_there(
    temporal_client: Client,
) -> None:
    run = await stalled_on(temporal_client, "host-a", BOUND_PROVIDER, HostSandbox("host-a"))
    async with worker_on(temporal_client, "host-a", identity="worker-a-again"):
        answer = (await run.result()).answer

    assert answer.endswith(ALL_STEPS)
    assert await sandbox_workers(run) == (
        {"worker-of-host-a", "worker-a-again"},
        {host_queue("host-a")},
    )


async def test_a_run_offers_each_sandbox_operation_on_its_own_queue_marked_with_its_host(
    temporal_client: Client,
) -> None:
    # One host: the worker that runs the workflow holds the sandbox, so each
    # operation is scheduled on the run's own queue (where Temporal hands it
    # straight back to that worker) and none goes through the host's queue.
    async with worker_on(temporal_client, "host-a") as (client, _):
        run = await start(client, "Add, then print.", provider=BOUND_PROVIDER)
        answer = (await run.result()).answer

    assert answer.endswith(ALL_STEPS)
    steps = [step for step in await activities(run) if step.is_sandbox_operation]
    assert {(step.task_queue, step.host, step.refused) for step in steps} == {
        (project_service().task_queue, "host-a", False)
    }


async def test_an_operation_offered_to_a_worker_of_another_host_is_refused_and_runs_on_its_host(
    temporal_client: Client,
) -> None:
    # Host A created the run's sandbox and went. Its worker comes back
    # polling only its host's queue, and host B runs the workflow: B refuses
    # the operation it is offered for host A, before its sandbox is touched
    # (HostSandbox would fail it: the workspace is not on B), and the run
    # sends it, and each after it, to host A's queue.
    run = await stalled_on(temporal_client, "host-a", BOUND_PROVIDER, HostSandbox("host-a"))
    settings_a = replace(SETTINGS, host_id="host-a")
    plugged_a = with_plugins(
        temporal_client,
        worker.agents_plugin(
            settings_a,
            sandboxes=sandboxes_for_tests(HostSandbox("host-a"), BOUND_PROVIDER),
            model_provider=TestModelProvider(ScriptedModel(STEPS)),
            model_retry_policy=RETRIED_AT_ONCE,
        ),
    )
    # Only the host's queue (build_worker would make a worker of the shared
    # queue too, which may not be made twice in one process).
    host_a = Worker(plugged_a, task_queue=host_queue("host-a"), identity="host-a-queue")
    async with host_a, worker_on(temporal_client, "host-b"):
        answer = (await run.result()).answer

    assert answer.endswith(ALL_STEPS)
    assert await refused_once(run, by="worker-of-host-b", host="host-a")
    assert await sandbox_workers(run) == (
        {"worker-of-host-a", "host-a-queue"},
        {host_queue("host-a")},
    )
