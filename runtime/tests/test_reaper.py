"""The reaper (sandboxes.py): the sandboxes a run terminated in the middle
left behind are removed past the grace period, never before; an open run's
sandbox, another service's and another namespace's are never touched; ``list``
prints each with its run and its state. On the real local backend (a real
run's workspace) and on the real Docker engine."""

import asyncio
import dataclasses
import json
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from agents.sandbox.sandboxes.docker import DockerSandboxClientOptions, DockerSandboxSessionState
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from sandbox_agent_runtime import backends, sandboxes
from sandbox_agent_runtime.backends import docker as docker_backend
from sandbox_agent_runtime.backends import (
    namespace_key,
    provider_key,
    task_queue_key,
    workflow_key,
)
from sandbox_agent_runtime.observability import SANDBOXES_REAPED
from sandbox_agent_runtime.run_request import RunRequest
from sandbox_agent_runtime.service import current
from sandbox_agent_runtime.shared import END
from sandbox_agent_runtime.starter import start
from sandbox_agent_runtime.testing import project_service
from sandbox_agent_runtime.testing.conversing import Conversing, answered, conversation
from sandbox_agent_runtime.testing.processes import WORKER, service, service_environment
from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server
from sandbox_agent_runtime.testing.support import closed_address, metered_client, running_worker

HOUR = timedelta(hours=1)
NOW = timedelta(0)


@pytest.fixture
def temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The worker's temp dir, where the local sandbox makes each workspace."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    return temp


def labels(workflow_id: str, provider: str, namespace: str, queue: str) -> dict[str, str]:
    return {
        workflow_key(): workflow_id,
        provider_key(): provider,
        namespace_key(): namespace,
        task_queue_key(): queue,
    }


def workspace_of(temp: Path, name: str, said: dict[str, str]) -> Path:
    """A workspace as the local sandbox makes one, with these labels."""
    workspace = temp / f"sandbox-local-{name}"
    workspace.mkdir()
    (temp / f".{workspace.name}.labels.json").write_text(json.dumps(said))
    return workspace


async def test_a_terminated_runs_workspace_is_reaped_past_the_grace_only(
    temporal_client: Client,
    temp: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TEMPORAL_ADDRESS", temporal_client.service_client.config.target_host)
    queue = project_service().task_queue
    model = Conversing([["echo one"], ["echo two"]])
    async with running_worker(temporal_client, model) as (client, _):
        ended = await conversation(client, "First.")
        kept = await conversation(client, "Second.")
        await answered(ended, 1)
        await answered(kept, 1)
        made = sorted(temp.glob("sandbox-local-*"))
        assert len(made) == 2
        # A workspace of another service, and one of this service's queue in
        # another namespace, both of the run we terminate.
        theirs = workspace_of(temp, "theirs", labels(ended.id, "local", "default", "other-queue"))
        elsewhere = workspace_of(temp, "elsewhere", labels(ended.id, "local", "other", queue))
        # And one made before sandboxes named their service's queue.
        unnamed = labels(ended.id, "local", "default", queue)
        del unnamed[task_queue_key()]
        older = workspace_of(temp, "older", unnamed)
        await ended.terminate("an operator, in the middle")

        listed = {each.sandbox.workflow_id: each.state for each in await sandboxes.survey(client)}
        assert listed == {ended.id: "terminated", kept.id: "running"}
        assert await sandboxes.reap(client, HOUR) == []
        assert sorted(temp.glob("sandbox-local-*")) == sorted([*made, theirs, elsewhere, older])

        [removed] = await sandboxes.reap(client, NOW)
        left = sorted(temp.glob("sandbox-local-*"))
        await asyncio.to_thread(sandboxes.main, ["list"])
        # A run that ends as usual removes its workspace and its labels.
        await kept.execute_update(END)
        await kept.result()
        labelled = sorted(temp.glob(".sandbox-local-*.labels.json"))

    assert removed.sandbox.workflow_id == ended.id and removed.state == "terminated"
    assert Path(removed.sandbox.sandbox_id) in made
    assert left == sorted(
        [*(w for w in made if str(w) != removed.sandbox.sandbox_id), theirs, elsewhere, older]
    )
    assert not (temp / f".{Path(removed.sandbox.sandbox_id).name}.labels.json").exists()
    [open_workspace] = [w for w in left if w not in (theirs, elsewhere, older)]
    assert labelled == sorted(temp / f".{w.name}.labels.json" for w in (theirs, elsewhere, older))
    [printed] = capsys.readouterr().out.splitlines()
    assert printed.split("\t")[:4] == ["local", str(open_workspace), kept.id, "running"]


async def test_a_sandbox_of_a_run_the_namespace_does_not_know_is_reaped(
    temporal_client: Client, temp: Path
) -> None:
    queue = project_service().task_queue
    unknown = workspace_of(
        temp, "unknown", labels(f"no-such-run-{uuid.uuid4()}", "local", "default", queue)
    )
    [removed] = await sandboxes.reap(temporal_client, NOW)

    assert removed.state == "unknown" and not unknown.exists()


async def test_a_backend_that_cannot_list_its_sandboxes_yet_is_passed_over(
    temporal_client: Client, temp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = replace(current(), providers={**current().providers, "e2b": "e2b"})
    monkeypatch.setattr(sandboxes, "current", lambda: service)

    assert await sandboxes.reap(temporal_client, NOW) == []


def test_without_temporal_the_command_says_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TEMPORAL_ADDRESS", closed_address())
    with pytest.raises(SystemExit) as stop:
        sandboxes.main(["reap"])

    assert isinstance(stop.value.code, str)
    assert stop.value.code.startswith("Cannot reach Temporal at 127.0.0.1:")
    assert len(stop.value.code.splitlines()) == 1


def test_bad_grace_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        sandboxes.main(["reap", "--grace", "soon"])

    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        f"{current().name}-sandboxes reap: argument --grace: 'soon' is not a whole number "
        "of seconds (0 or more)"
    ]


# Docker: the real engine, its containers labelled as a run labels them.
IMAGE = "sandbox-agent-tests:busybox"


@pytest.fixture
def engine() -> Iterator[Any]:
    docker = pytest.importorskip("docker")
    engine = docker.from_env()
    try:
        engine.ping()
    except docker.errors.DockerException as e:
        pytest.skip(f"no Docker engine: {e}")
    if not engine.images.list(name=IMAGE):
        pytest.skip(f"the engine has no {IMAGE}")
    yield engine


@pytest.fixture
def with_docker(monkeypatch: pytest.MonkeyPatch) -> str:
    """The service with a Docker provider beside its local one, on a task
    queue of this test's own: the engine is shared, and another test's
    containers are never this one's."""
    service = replace(
        current(),
        providers={**current().providers, "docker": "docker"},
        task_queue=f"reaper-{uuid.uuid4()}",
    )
    monkeypatch.setattr(sandboxes, "current", lambda: service)
    monkeypatch.setattr(backends, "current", lambda: service)
    return service.task_queue


async def test_a_terminated_runs_container_is_reaped_past_the_grace_only(
    temporal_client: Client, engine: Any, temp: Path, with_docker: str
) -> None:
    queue = with_docker
    ended = await start(temporal_client, RunRequest("Wait.", follow_ups=True))
    kept = await start(temporal_client, RunRequest("Wait.", follow_ups=True))

    def container(workflow_id: str, namespace: str = "default", on: str = queue) -> Any:
        return engine.containers.run(
            IMAGE,
            ["sleep", "600"],
            detach=True,
            labels=labels(workflow_id, "docker", namespace, on),
        )

    # The ended run's, as its sandbox_client_create activity makes it.
    environment = ActivityEnvironment()
    environment.info = dataclasses.replace(
        environment.info, workflow_id=ended.id, activity_type="docker-sandbox_client_create"
    )
    client = docker_backend.LabelledDockerSandboxClient(engine)
    session = await environment.run(
        client.create, options=DockerSandboxClientOptions(image=IMAGE, network_mode="none")
    )
    state = session.state
    assert isinstance(state, DockerSandboxSessionState)
    made = {
        "ended": engine.containers.get(state.container_id),
        "kept": container(kept.id),
        "theirs": container(ended.id, on="other-queue"),
        "elsewhere": container(ended.id, namespace="other"),
    }
    try:
        await ended.terminate("an operator, in the middle")
        listed = {
            each.sandbox.sandbox_id: each.state for each in await sandboxes.survey(temporal_client)
        }
        assert listed == {made["ended"].id: "terminated", made["kept"].id: "running"}
        assert await sandboxes.reap(temporal_client, HOUR) == []
        [removed] = await sandboxes.reap(temporal_client, NOW)
        left = {c.id for c in engine.containers.list(all=True, filters={"label": workflow_key()})}
    finally:
        await kept.terminate()
        for each in made.values():
            each.remove(force=True) if each.id in _ids(engine) else None

    assert removed.sandbox.sandbox_id == made["ended"].id
    assert {made[name].id for name in ("kept", "theirs", "elsewhere")} <= left
    assert made["ended"].id not in left


def _ids(engine: Any) -> set[str]:
    return {c.id for c in engine.containers.list(all=True)}


async def test_the_workers_schedule_reaps_a_terminated_runs_workspace_by_itself(
    temporal_client: Client, temp: Path
) -> None:
    queue = project_service().task_queue
    model = Conversing([["echo one"], ["echo two"]])
    async with (
        metered_client(temporal_client) as (metered, metrics),
        running_worker(metered, model) as (client, worker),
    ):
        # The reap runs where the sandboxes are: the host's own queue.
        where = worker.own.task_queue if worker.own else queue
        ended = await conversation(client, "First.")
        kept = await conversation(client, "Second.")
        await answered(ended, 1)
        await answered(kept, 1)
        [ended_workspace] = [
            s.sandbox.sandbox_id
            for s in await sandboxes.survey(client)
            if s.sandbox.workflow_id == ended.id
        ]
        # Twice, as two workers of the fleet would: one schedule.
        every = timedelta(seconds=1)
        for _ in range(2):
            made = await sandboxes.schedule_reaping(client, every, where, grace=NOW)
        await ended.terminate("an operator, in the middle")
        try:
            for _ in range(300):
                if not Path(ended_workspace).exists():
                    break
                await asyncio.sleep(0.1)
            left = [s.sandbox.workflow_id for s in await sandboxes.survey(client)]
            reaped = await metrics.total(SANDBOXES_REAPED, provider="local")
            schedules = [s.id async for s in await client.list_schedules()]
        finally:
            await client.get_schedule_handle(made).delete()
            await kept.terminate()

    assert not Path(ended_workspace).exists()
    assert left == [kept.id]
    assert reaped == 1
    assert schedules == [sandboxes.schedule_id()]


async def test_a_worker_with_the_setting_reaps_a_terminated_runs_workspace_by_itself(
    temporal_client: Client, tmp_path: Path
) -> None:
    """The real worker command, SANDBOX_REAP_EVERY_SECONDS set: its schedule
    removes the workspace of a run terminated in the middle."""
    address = temporal_client.service_client.config.target_host
    with scripted_openai_server(["echo one"]) as model:
        environment = {
            **service_environment(address, model.url),
            "TMPDIR": str(tmp_path),
            "SANDBOX_REAP_EVERY_SECONDS": "1",
            "SANDBOX_REAP_GRACE_SECONDS": "0",
        }
        async with service(WORKER, environment) as worker:
            await worker.wait_for("Worker polling")
            handle = await start(temporal_client, RunRequest("Say one.", follow_ups=True))
            await answered(handle, 1)
            [workspace] = list(tmp_path.glob("sandbox-local-*"))
            await handle.terminate("an operator, in the middle")
            for _ in range(300):
                if not workspace.exists():
                    break
                await asyncio.sleep(0.1)
            schedules = [s.id async for s in await temporal_client.list_schedules()]
            for each in schedules:
                await temporal_client.get_schedule_handle(each).delete()

    assert not workspace.exists()
    assert not (tmp_path / f".{workspace.name}.labels.json").exists()
    # One per host: the local backend's workspaces are on the worker's.
    [schedule] = schedules
    assert schedule.startswith(f"{sandboxes.schedule_id()}-")
