"""Faults a run survives, injected into real processes: the worker process,
a Temporal dev server, the network between them, and the model's HTTP
endpoint; nothing is mocked but the model's answers.

Each command of these runs appends its step to a file outside its workspace,
so a command that ran twice shows twice: Temporal delivers each sandbox
operation at least once, and a fault can make it run again (the README says
so). Each test adds its figures to FAULT_FIGURES (faults.figures())."""

import asyncio
from pathlib import Path

import pytest
from temporalio.client import Client

from sandbox_agent_runtime.archives import repo_of
from sandbox_agent_runtime.run_request import RunRequest
from sandbox_agent_runtime.starter import start
from sandbox_agent_runtime.testing.faults import (
    cuttable_network,
    figures,
    lines_of,
    processes_holding,
    silent_git_server,
    until,
    until_ran,
)
from sandbox_agent_runtime.testing.processes import WORKER, service, service_environment
from sandbox_agent_runtime.testing.repositories import LOOPBACK_REPO_ENVIRONMENT
from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server
from sandbox_agent_runtime.testing.support import (
    activities,
    failure_of,
    restartable_dev_server,
    with_plugins,
)
from sandbox_agent_runtime.workspace import STALL_SECONDS
from sandbox_agent_runtime.workspace.git import NOT_CLONED

pytestmark = pytest.mark.faults

# How long the network between the worker and Temporal stays cut.
CUT = 30
# How long the model answers only 429 (with Retry-After) and 500, in turn.
STORM = 60
RETRY_AFTER = 10


def counted_steps(log: Path, steps: int) -> list[str]:
    """Commands that each add their step to ``log``, then take a moment."""
    return [f"echo {step} >> {log} && sleep 0.5 && echo did {step}" for step in range(steps)]


async def test_a_run_survives_its_temporal_server_restarted_three_times(tmp_path: Path) -> None:
    steps, log = 12, tmp_path / "steps.log"
    async with restartable_dev_server(tmp_path / "temporal.db") as server:
        with scripted_openai_server(counted_steps(log, steps)) as model:
            environment = service_environment(server.address, model.url)
            async with service(WORKER, environment) as worker:
                await worker.wait_for("Worker polling")
                client = with_plugins(await Client.connect(server.address))
                handle = await start(client, "Count, one step at a time.")
                for step in (3, 6, 9):
                    await until_ran(log, step)
                    # Stopped, then started again two seconds later: its
                    # state is on disk.
                    await server.stop()
                    await asyncio.sleep(2)
                    await server.start()
                async with asyncio.timeout(60):
                    answer = (await handle.result()).answer
                # The worker rode it out: it never stopped.
                assert worker.process.returncode is None

    assert f"did {steps - 1}" in answer
    ran = [int(line) for line in lines_of(log)]
    # Every step ran, in order; a step may have run twice (at least once).
    assert sorted(set(ran)) == list(range(steps))
    assert ran == sorted(ran)
    twice = len(ran) - len(set(ran))
    print(f"commands that ran twice: {twice} of {steps}")
    figures("Temporal server stopped and restarted, 3 times", 1, 1, 0, twice)


async def test_a_worker_cut_off_from_temporal_for_30_s_goes_on(
    temporal_client: Client, tmp_path: Path
) -> None:
    steps, log = 4, tmp_path / "steps.log"
    address = temporal_client.service_client.config.target_host
    async with cuttable_network(address) as network:
        with scripted_openai_server(counted_steps(log, steps)) as model:
            # The cut comes while the model thinks over its third step: no
            # sandbox operation is in flight (see the README on one that is).
            model.hold_at_step = 2
            # The worker reaches Temporal only through the network the test cuts.
            environment = service_environment(network.address, model.url)
            async with service(WORKER, environment) as worker:
                await worker.wait_for("Worker polling")
                handle = await start(with_plugins(temporal_client), "Count, one step at a time.")
                await until(model.reached.is_set, 60, "the model was asked for step 3")
                await network.cut()
                await asyncio.sleep(CUT)
                assert worker.process.returncode is None, worker.output
                ran_during_cut = lines_of(log)
                await network.restore()
                model.release.set()
                # A few seconds once restored (a test whose cut never ends
                # fails here, within this bound).
                async with asyncio.timeout(30):
                    answer = (await handle.result()).answer

    # The cut held: it dropped the worker's connections, no step ran while it
    # lasted, and Temporal, hearing no heartbeat, gave the model call up...
    assert network.dropped > 0
    assert ran_during_cut == ["0", "1"]
    model_calls = [step.attempt for step in await activities(handle) if step.is_model_call]
    assert max(model_calls) == 2, model_calls
    # ...and the run went on once it ended, each step once.
    assert f"did {steps - 1}" in answer
    assert lines_of(log) == [str(step) for step in range(steps)]
    figures(f"Worker cut off from Temporal for {CUT} s", 1, 1, 0, 0)


async def test_a_model_storm_of_429_and_500_is_waited_out_as_retry_after_asks(
    temporal_client: Client,
) -> None:
    address = temporal_client.service_client.config.target_host
    with scripted_openai_server(["echo calm again"]) as model:
        model.storm, model.retry_after = STORM, RETRY_AFTER
        async with service(WORKER, service_environment(address, model.url)) as worker:
            await worker.wait_for("Worker polling")
            handle = await start(with_plugins(temporal_client), "Say something once it is calm.")
            async with asyncio.timeout(STORM + 120):
                answer = (await handle.result()).answer

    assert "calm again" in answer
    statuses = [status for _, status in model.answered]
    stormy = [status for status in statuses if status != 200]
    assert {429, 500} <= set(stormy), statuses
    # The storm lasted its minute, and the model was asked again after it.
    first, last = model.answered[0][0], model.answered[len(stormy) - 1][0]
    assert last - first < STORM <= model.answered[len(stormy)][0] - first
    # Each wait after a 429 lasted at least as long as its Retry-After said.
    for (at, status), (next_at, _) in zip(model.answered, model.answered[1:], strict=False):
        if status == 429:
            assert next_at - at >= RETRY_AFTER, (next_at - at, statuses)
    figures(f"Model answers 429 (Retry-After {RETRY_AFTER} s) and 500 for {STORM} s", 1, 1, 0, 0)


async def test_a_model_answering_malformed_json_fails_the_run_at_once_saying_why(
    temporal_client: Client,
) -> None:
    address = temporal_client.service_client.config.target_host
    with scripted_openai_server(["true"]) as model:
        model.malformed = True
        async with service(WORKER, service_environment(address, model.url)) as worker:
            await worker.wait_for("Worker polling")
            handle = await start(with_plugins(temporal_client), "Do nothing.")
            async with asyncio.timeout(60):
                reason = await failure_of(handle)

    assert reason.startswith(
        "The agent could not finish: the model call failed with an error that retrying cannot "
        f"fix: The model endpoint answered 200 OK to {model.url}/responses with JSON it cannot "
        "read (Unterminated string starting at: line 1"
    ), reason
    # At once: a body that is not JSON is not retried.
    assert model.requests == 1
    figures("Model answers malformed JSON", 1, 0, 1, 0)


# --------------------------------------------- a repository that never answers


async def cloning(url: str) -> None:
    """Return once a git process of the worker is cloning ``url``."""
    await until(lambda: bool(processes_holding(url)), 60, f"a git process cloning {url}")


async def test_a_clone_that_never_ends_is_killed_at_the_git_time_limit(
    temporal_client: Client,
) -> None:
    """A server that answers a few kilobytes a second for ever (no stall:
    only the limit, GIT_TIMEOUT_MINUTES, ends it)."""
    address = temporal_client.service_client.config.target_host
    async with silent_git_server(trickle=True) as url:
        with scripted_openai_server(["true"]) as model:
            environment = {
                **service_environment(address, model.url),
                **LOOPBACK_REPO_ENVIRONMENT,
                "GIT_TIMEOUT_MINUTES": "1",
            }
            async with service(WORKER, environment) as worker:
                await worker.wait_for("Worker polling")
                handle = await start(
                    with_plugins(temporal_client), RunRequest("Look.", repo=repo_of(url))
                )
                await cloning(url)
                async with asyncio.timeout(120):
                    reason = await failure_of(handle)
                # Killed with its helpers, the worker still running.
                await until(lambda: not processes_holding(url), 10, f"no git left: {url}")
                assert worker.process.returncode is None

    assert "\n" not in reason, reason
    assert reason.endswith(
        f"Cannot clone {url}: git did not finish within 1 minute (GIT_TIMEOUT_MINUTES) "
        "and was stopped"
    ), reason
    # The model was never called: the run failed placing its repository.
    assert model.requests == 0
    figures("A --repo whose server never ends its answer", 1, 0, 1, 0)


async def test_a_clone_whose_server_never_answers_fails_when_its_transport_stalls(
    temporal_client: Client,
) -> None:
    """A server that takes the connection and says nothing: git's transport
    gives up after STALL_SECONDS, well before the git limit."""
    address = temporal_client.service_client.config.target_host
    async with silent_git_server() as url:
        with scripted_openai_server(["true"]) as model:
            async with service(
                WORKER, {**service_environment(address, model.url), **LOOPBACK_REPO_ENVIRONMENT}
            ) as worker:
                await worker.wait_for("Worker polling")
                handle = await start(
                    with_plugins(temporal_client), RunRequest("Look.", repo=repo_of(url))
                )
                await cloning(url)
                async with asyncio.timeout(4 * STALL_SECONDS):
                    reason = await failure_of(handle)
                await until(lambda: not processes_holding(url), 10, f"no git left: {url}")

    assert "\n" not in reason, reason
    # git's own line (the transport too slow) is the worker's log's alone:
    # a silent port reads as a closed one (issue 61).
    assert reason.endswith(f"Cannot clone {url}: {NOT_CLONED}"), reason
    figures("A --repo whose server never answers", 1, 0, 1, 0)


async def test_a_worker_killed_mid_clone_leaves_no_git_running(temporal_client: Client) -> None:
    """SIGKILL: nothing of the worker runs, and git and its HTTP helper die
    with it (a parent-death signal), though its server keeps them busy (it
    never stalls, nor ends its answer)."""
    address = temporal_client.service_client.config.target_host
    async with silent_git_server(trickle=True) as url:
        with scripted_openai_server(["true"]) as model:
            async with service(
                WORKER, {**service_environment(address, model.url), **LOOPBACK_REPO_ENVIRONMENT}
            ) as worker:
                await worker.wait_for("Worker polling")
                handle = await start(
                    with_plugins(temporal_client), RunRequest("Look.", repo=repo_of(url))
                )
                await cloning(url)
                worker.process.kill()
                await worker.process.wait()
                await until(
                    lambda: not processes_holding(url),
                    60,
                    f"no git left after the worker was killed: {processes_holding(url)}",
                )
        await handle.terminate("test over")


async def test_a_run_terminated_mid_clone_leaves_no_git_running(temporal_client: Client) -> None:
    """The operation learns of the termination at its next heartbeat and is
    cancelled: git is killed with its helpers, long before the git limit,
    though its server keeps them busy."""
    address = temporal_client.service_client.config.target_host
    async with silent_git_server(trickle=True) as url:
        with scripted_openai_server(["true"]) as model:
            environment = {
                **service_environment(address, model.url),
                **LOOPBACK_REPO_ENVIRONMENT,
                "GIT_TIMEOUT_MINUTES": "60",
            }
            async with service(WORKER, environment) as worker:
                await worker.wait_for("Worker polling")
                handle = await start(
                    with_plugins(temporal_client), RunRequest("Look.", repo=repo_of(url))
                )
                await cloning(url)
                await handle.terminate("the test ends it mid-clone")
                await until(
                    lambda: not processes_holding(url),
                    120,
                    f"no git left after the run was terminated: {processes_holding(url)}",
                )
                assert worker.process.returncode is None
