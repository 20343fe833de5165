"""The local backend: a shell on the worker's own host, which sees none of
the worker's environment, whose commands are bounded in time (and in nothing
else), whose workspace outlives its worker where the host keeps its name and
its TMPDIR (a Kubernetes pod of a project's StatefulSet), and whose
workspace, once gone, ends a run. (A sandbox that cannot be created fails its
run at once whatever the backend: a project's tests/test_failures.py.)"""

import asyncio
import shutil
import signal
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from agents.sandbox.sandboxes.unix_local import UnixLocalSandboxClient
from temporalio.client import Client

from sandbox_agent_runtime.affinity import host_queue
from sandbox_agent_runtime.backends import local
from sandbox_agent_runtime.testing import project_service
from sandbox_agent_runtime.testing.handovers import STEPS, stalled_on, workspaces_used
from sandbox_agent_runtime.testing.processes import WORKER, service, service_environment
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server
from sandbox_agent_runtime.testing.support import (
    DROPPED_RUNS_CLOSED,
    SETTINGS,
    activities,
    failure_of,
    provider_of,
    running_worker,
    start_in,
    with_plugins,
)


def alive(pid: int) -> bool:
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False


# A runaway command, left to run its second: under -m faults, out of the first run.
@pytest.mark.faults
@pytest.mark.skipif(sys.platform != "linux", reason="GNU timeout and /proc are Linux's")
async def test_a_command_past_the_time_limit_is_killed_with_what_it_started(
    temporal_client: Client, tmp_path: Path
) -> None:
    # A command that started a process in the background, then spins.
    started = tmp_path / "background.pid"
    spin = f"sleep 300 & echo $! > {started}; while :; do :; done"
    limited = replace(SETTINGS, command_time_limit=1)
    async with running_worker(temporal_client, ScriptedModel([spin]), settings=limited) as (
        client,
        _,
    ):
        handle = await start_in(client, local, "Spin.")
        answer = (await handle.result()).answer

    assert "Process exited with code 137" in answer
    assert "[killed: it ran past the sandbox's limit of 1 s per command" in answer
    # GNU timeout ends the command's process group: the background one too.
    assert not alive(int(started.read_text()))


async def test_a_command_reads_every_file_of_the_workers_user(
    temporal_client: Client, tmp_path: Path
) -> None:
    # What the local backend cannot bound (docs/operations.md): a command
    # runs as the worker's user, so it reads what that user can, a project's
    # .env among them. Only the worker's own environment is out of its reach.
    dotenv = tmp_path / ".env"
    dotenv.write_text("OPENAI_API_KEY=sk-in-the-project-env\n")
    async with running_worker(temporal_client, ScriptedModel([f"cat {dotenv}"])) as (client, _):
        handle = await start_in(client, local, "Read the project's settings.")
        answer = (await handle.result()).answer

    assert "sk-in-the-project-env" in answer


def test_local_client_is_a_shell_on_the_workers_host() -> None:
    assert isinstance(local.sandbox_client(SETTINGS), UnixLocalSandboxClient)
    assert local.REQUIRED_ENVIRONMENT == ()


async def test_the_sandbox_shell_does_not_see_the_workers_environment(
    temporal_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The local backend's shell runs on the worker's host, beside its secrets.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-worker-secret-canary")
    monkeypatch.setenv("WORKER_ONLY_SETTING", "worker-only-canary")
    async with running_worker(temporal_client, ScriptedModel(["env"])) as (client, _):
        handle = await start_in(client, local, "Show me your environment.")
        environment = (await handle.result()).answer

    assert "PATH=" in environment  # the command did run and print the environment
    assert "OPENAI_API_KEY" not in environment
    assert "sk-worker-secret-canary" not in environment
    assert "worker-only-canary" not in environment


@pytest.mark.usefixtures("collect_dropped_runs")
@pytest.mark.filterwarnings(DROPPED_RUNS_CLOSED)
async def test_a_run_whose_workspace_is_wiped_fails_instead_of_going_on_without_its_files(
    temporal_client: Client,
) -> None:
    # The worker comes back on the same host, but the disk its workspace was
    # on did not (a container recreated, a temporary directory cleaned up).
    run = await stalled_on(temporal_client, "host-a", provider_of(local))
    [workspace] = await workspaces_used(run)
    shutil.rmtree(workspace)
    async with running_worker(
        temporal_client, ScriptedModel(STEPS), provider=provider_of(local), host="host-a"
    ):
        reason = await failure_of(run)

    assert f"The run's workspace {workspace} is not on this host's disk any more" in reason


@pytest.mark.process
async def test_a_worker_killed_and_restarted_as_its_pod_goes_on_in_the_same_workspace(
    temporal_client: Client, tmp_path: Path
) -> None:
    # What a pod of a StatefulSet keeps when it restarts or is replaced: its
    # name, the worker's WORKER_HOST_ID, and its volume, the worker's TMPDIR
    # (a project's tests/test_deploy.py proves its StatefulSet gives both).
    pod_name = f"{project_service().name}-worker-0"
    volume = tmp_path / "workspaces"
    volume.mkdir()
    commands = ["printf 'written before the kill\\n' > note.txt", "cat note.txt"]
    address = temporal_client.service_client.config.target_host
    with scripted_openai_server(commands) as model:
        # The model holds its answer to the first command's output until the
        # worker that asked for it has been killed.
        model.hold_at_step = 1
        environment = {
            **service_environment(address, model.url),
            "WORKER_HOST_ID": pod_name,
            "TMPDIR": str(volume),
        }
        async with service(WORKER, environment) as first_worker:
            handle = await start_in(
                with_plugins(temporal_client), local, "Write a note, then read it."
            )
            assert await asyncio.to_thread(model.reached.wait, 300), first_worker.output
            [workspace] = volume.glob(f"{local.WORKSPACE_PREFIX}*")
            first_worker.process.send_signal(signal.SIGKILL)
            assert await first_worker.exit_status() == -signal.SIGKILL
            model.release.set()
            # The model call in flight is given up once its heartbeat is
            # missed, then made again to the new worker: a minute, more on a
            # busy machine.
            async with service(WORKER, environment):
                async with asyncio.timeout(300):
                    answer = (await handle.result()).answer

    # The second command read what the first wrote, in the workspace on the
    # volume, each on a worker of the pod's host, through its queue.
    assert "written before the kill" in answer
    assert await workspaces_used(handle) == {str(workspace)}
    commands_run = [
        step
        for step in await activities(handle)
        if step.name.endswith("-sandbox_session_pty_exec_start")
    ]
    assert [step.worker.partition("@")[2] for step in commands_run] == [pod_name, pod_name]
    assert len({step.worker for step in commands_run}) == 2
    assert {step.queue for step in commands_run} == {host_queue(pod_name)}
    # The run removed its workspace at its end.
    assert not workspace.exists()
