"""Every sandbox of this service lives with its provider, not on a worker's
host: nothing of a run is bound to a host. A run goes on with any other
worker once the one that created its sandbox is gone, the starter shows no
host for the sandbox, and the sandbox operations' metric has no host label.

What a run does whatever its backend (a run resumed on another worker, a bug
in workflow code waiting for its fix, every step replayed, long runs and
chains, a deploy while runs are in flight) is the runtime's suite's, proven
once against a service that also runs sandboxes on its hosts."""

import pytest
from temporalio.client import Client

from sandbox_agent_runtime import RunRequest, start
from sandbox_agent_runtime.testing import (
    ALL_STEPS,
    DROPPED_RUNS_CLOSED,
    SANDBOX_OPERATIONS,
    STARTER_SETTINGS,
    STEPS,
    ScriptedModel,
    metered_client,
    project_service,
    running_worker,
    sandbox_workers,
    stalled_on,
    starter_run,
)

# The labels Temporal's meter gives every metric an activity records.
TEMPORAL_LABELS = {"service_name", "namespace", "task_queue", "activity_type"}


@pytest.mark.usefixtures("collect_dropped_runs")  # the first worker drops its run part-way
@pytest.mark.filterwarnings(DROPPED_RUNS_CLOSED)
@pytest.mark.parametrize("provider", list(project_service().providers))
async def test_a_remote_sandbox_goes_on_on_another_worker_when_its_creator_is_gone(
    temporal_client: Client, provider: str
) -> None:
    run = await stalled_on(temporal_client, "worker-a", provider)
    async with running_worker(
        temporal_client, ScriptedModel(STEPS), provider=provider, identity="worker-b"
    ):
        answer = (await run.result()).answer

    assert answer.endswith(ALL_STEPS)
    # The sandbox's operations stayed on the task queue, and ran on both workers.
    assert await sandbox_workers(run) == ({"worker-a", "worker-b"}, {project_service().task_queue})


async def test_the_starter_shows_no_host_for_the_sandbox(
    starter_env: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    async with running_worker(starter_env, ScriptedModel(["echo once"])):
        status = await starter_run(RunRequest("Say it once."), STARTER_SETTINGS)

    assert status == 0
    steps = [line.strip() for line in capsys.readouterr().out.splitlines() if line.startswith("  ")]
    # No step asks where the sandbox lives: it is created at once.
    assert steps[:2] == [
        f"sandbox  provider {project_service().sandbox_provider!r}",
        "sandbox  creating the sandbox",
    ]


async def test_the_sandbox_operations_metric_has_no_host_label(temporal_client: Client) -> None:
    async with (
        metered_client(temporal_client) as (client, metrics),
        running_worker(client, ScriptedModel(["echo once"])) as (plugged, _),
    ):
        await (await start(plugged, "Say it once.")).result()
        samples = (await metrics.scrape())[SANDBOX_OPERATIONS]

    # Its labels, beside those Temporal gives every activity's metric: no
    # host, since any worker reaches the sandbox.
    labels = {name for found, _ in samples for name in found} - TEMPORAL_LABELS
    assert labels == {"provider", "operation", "outcome"}, labels
