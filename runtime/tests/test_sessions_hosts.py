"""A conversation whose host is gone for good goes on on another host, from
the workspace's last snapshot in the object store (workflow.py: ``_wait``,
``_recovery``; workspace/: the snapshot and restore operations).

The hosts are real workers, each with a host id (and so a task queue) of its
own and a temp dir of its own, where the service's own sandbox makes its
workspaces and, without an object store, keeps its snapshots: in this
process, tempfile's directory is the temp dir of the host that runs (the
hosts here run one after the other, as a host and its replacement do); in
``test_a_scale_down_of_two_worker_processes_loses_no_conversation``, two
worker processes with their own TMPDIR and, where this machine allows it,
mount namespaces in which the other's is empty (test_affinity_processes.py).
A host "stopped for good" is its worker stopped at once (what it was doing
cancelled, as by a crash) and its temp dir deleted: its workspaces, and any
snapshot on its disk, are gone. The object store is a real S3 API on
loopback (moto's server: ``s3_service``) or a ``file://`` directory that
both hosts share; the model is scripted (conversing.py). The workflow waits
2 s for a host (``ImpatientSandboxAgentWorkflow``) instead of
SANDBOX_HOST_WAIT's two minutes.

These tests prove that, with a store:

- a host that answered the first prompt and is then gone leaves nothing
  behind that the follow-up needs: the follow-up runs on another host, sees
  every file of the first prompt, and lists as its outputs only what it made
  itself, whether the conversation had released its sandbox before the host
  went, was holding it when the follow-up came, or went idle while the host
  was gone; its history says what was restored and from when (the restore
  step's summary, the memo's ``restored``: the snapshot taken at the answer);
- a host that dies in the middle of a prompt (between two commands, or while
  a command runs) costs the prompt's work since the last snapshot, never the
  run: the prompt is redone on another host from the answer's snapshot, the
  model is told which calls' effects were lost, and the answer is right (the
  lost command's effect is there once, not twice, nor missing);
- without a store the same hosts gone end the run as before
  (``SandboxHostGone``, naming the host): the snapshot the host kept on its
  own disk went with it, and is never restored elsewhere.

A Kubernetes scale-down, or a pod replaced on another node, is exactly
this for the local and Docker backends: the pod's worker gets SIGTERM (or is
killed) and its volume, where its workspaces live, is gone with it or stays
behind on a node no worker of the queue runs on; its conversations go on on
the pods left (docs/kubernetes.md). The last test does it with two real
worker processes, SIGTERM and a deleted TMPDIR, several conversations at
once.
"""

import asyncio
import json
import os
import re
import shutil
import signal
import tempfile
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from agents import ModelResponse
from sandbox_agent.service import TASK_QUEUE
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from sandbox_agent_runtime.affinity import host_queue
from sandbox_agent_runtime.object_store import (
    ObjectStore,
    data_converter,
    external_storage,
    parse,
    worker_storage,
)
from sandbox_agent_runtime.run_request import (
    ENDED,
    RELEASED,
    RunAnswer,
    RunRequest,
)
from sandbox_agent_runtime.settings import WorkerSettings
from sandbox_agent_runtime.shared import END, RESTORE, SNAPSHOT
from sandbox_agent_runtime.starter import start
from sandbox_agent_runtime.testing.conversing import (
    Conversing,
    answered,
    follow_up,
    printed,
    session_memos,
    until,
)
from sandbox_agent_runtime.testing.handovers import workspaces_used
from sandbox_agent_runtime.testing.long_workflow import ImpatientSandboxAgentWorkflow
from sandbox_agent_runtime.testing.object_stores import client_with, objects_in
from sandbox_agent_runtime.testing.plugin import BUCKET
from sandbox_agent_runtime.testing.processes import (
    HOSTS,
    on_host,
    private_mounts,
    service,
    service_environment,
)
from sandbox_agent_runtime.testing.scripted_model import steps_done, user_messages
from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server
from sandbox_agent_runtime.testing.support import (
    DROPPED_RUNS_CLOSED,
    RETRIED_AT_ONCE,
    SETTINGS,
    activities,
    bound_provider,
    failure_of,
    running_worker,
    with_plugins,
)
from sandbox_agent_runtime.workspace import IN_STORE, ON_HOST

# Workers here are stopped part-way through runs: see `collect_dropped_runs` (conftest.py).
pytestmark = [
    pytest.mark.usefixtures("collect_dropped_runs"),
    pytest.mark.filterwarnings(DROPPED_RUNS_CLOSED),
]

# A provider whose sandbox lives on the worker's host.
BOUND_PROVIDER = bound_provider()

# Long enough that no sandbox is released unless a test means it to be.
NEVER = timedelta(minutes=10)

# What ImpatientSandboxAgentWorkflow waits for a host before taking it for gone.
HOST_WAIT = ImpatientSandboxAgentWorkflow.host_wait

# The names of the snapshot and restore operations of the provider's sandbox.
SNAPSHOT_STEP = f"{BOUND_PROVIDER}-{SNAPSHOT}"
RESTORE_STEP = f"{BOUND_PROVIDER}-{RESTORE}"

# The service the runtime runs: its name names its directories on a host.
SERVICE_NAME = "sandbox-agent"

# The start of the note the model gets when a prompt is redone after a restore.
LOST_NOTE = "[The host that held this workspace"


class Hosts:
    """The temp dirs of the hosts of a test, under ``root``: the one of the
    host that runs is tempfile's (so the service's own sandbox makes its
    workspaces there, and a host without a store keeps its snapshots there)."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        self.monkeypatch = monkeypatch

    def temp(self, host: str) -> Path:
        return self.root / host

    def enter(self, host: str) -> Path:
        """Make ``host`` the one that runs from now on: its temp dir is tempfile's."""
        temp = self.temp(host)
        temp.mkdir(parents=True, exist_ok=True)
        self.monkeypatch.setattr(tempfile, "tempdir", str(temp))
        return temp

    def gone(self, host: str) -> None:
        """``host``'s disk is gone: its workspaces, and snapshots on it, with it."""
        shutil.rmtree(self.temp(host))

    def workspaces(self, host: str) -> list[Path]:
        """The workspaces the sandbox made on ``host``."""
        return sorted(self.temp(host).glob("sandbox-local-*"))


@pytest.fixture
def hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Hosts:
    return Hosts(tmp_path / "hosts", monkeypatch)


@pytest.fixture(params=["s3", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    """An object store of each kind: a prefix of the tests' bucket on a real
    S3 API (moto's server, on loopback), and a directory both hosts reach."""
    if request.param == "file":
        return parse(f"file://{tmp_path}/object-store")
    request.getfixturevalue("s3_service")
    return parse(f"s3://{BUCKET}/test-{uuid.uuid4().hex[:8]}", region="us-east-1")


def host_settings(store: ObjectStore | None, idle: timedelta = NEVER) -> WorkerSettings:
    """The tests' worker settings with ``store`` and this SESSION_IDLE_TIMEOUT."""
    return replace(SETTINGS, object_store=store, session_idle_timeout=idle)


@asynccontextmanager
async def on(
    client: Client,
    hosts: Hosts,
    host: str,
    model: Conversing,
    settings: WorkerSettings,
) -> AsyncIterator[Client]:
    """A worker of ``host`` (``worker-of-<host>``), with the object store of
    ``settings`` if any, as the worker process holds it; a client of it.
    Leaving stops it at once, cancelling what it does, as a crash would."""
    hosts.enter(host)
    async with worker_storage(settings.object_store) as storage:
        stored = client_with(client, data_converter(storage, client.data_converter))
        async with running_worker(
            stored,
            model,
            provider=BOUND_PROVIDER,
            host=host,
            identity=f"worker-of-{host}",
            settings=settings,
            workflows=[ImpatientSandboxAgentWorkflow],
            graceful_shutdown_timeout=timedelta(0),
            model_retry_policy=RETRIED_AT_ONCE,
        ) as (plugged, _):
            yield plugged


async def conversation(client: Client, prompt: str) -> WorkflowHandle[Any, RunAnswer]:
    """Start a conversation of the impatient workflow, as the starter starts the service's."""
    return await client.start_workflow(
        ImpatientSandboxAgentWorkflow.run,
        RunRequest(prompt, BOUND_PROVIDER, follow_ups=True),
        id=f"{TASK_QUEUE}-{uuid.uuid4()}",
        task_queue=TASK_QUEUE,
    )


async def results_of(handle: WorkflowHandle[Any, Any], step: str) -> list[dict[str, Any]]:
    """What each completed ``step`` of the run returned, in order (JSON)."""
    names: dict[int, str] = {}
    results = []
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            names[event.event_id] = (
                event.activity_task_scheduled_event_attributes.activity_type.name
            )
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            completed = event.activity_task_completed_event_attributes
            if names[completed.scheduled_event_id] == step:
                results.append(json.loads(completed.result.payloads[0].data))
    return results


async def summaries_of(handle: WorkflowHandle[Any, Any], step: str) -> list[str]:
    """The summary each ``step`` of the run was scheduled with, in order."""
    return [
        json.loads(event.user_metadata.summary.data)
        async for event in handle.fetch_history_events()
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and event.activity_task_scheduled_event_attributes.activity_type.name == step
    ]


async def restored_note(handle: WorkflowHandle[Any, Any]) -> str:
    """The one ``restored`` the run's session memo ever held (its history)."""
    [restored] = [memo["restored"] for memo in await session_memos(handle) if memo["restored"]]
    return str(restored)


def snapshot_time(text: str) -> str:
    """The time of the snapshot that ``text`` says was restored."""
    found = re.search(r"snapshot of (\S+?)(?: |\)|$)", text)
    assert found, text
    return found.group(1)


async def ran_on(handle: WorkflowHandle[Any, Any], step: str) -> list[tuple[str, str]]:
    """The worker and the task queue of each ``step`` of the run that ran
    (not refused by a worker of another host: affinity.HostFirst), one
    offered on the run's own queue for a host counting as sent to that
    host's queue."""
    return [
        (each.worker, each.queue)
        for each in await activities(handle)
        if each.name == step and each.attempt and not each.refused
    ]


async def snapshot_objects(store: ObjectStore) -> list[str]:
    """The keys of the snapshots in ``store``."""
    return [key for key in await objects_in(store) if "snapshots/" in key]


# ------------------------------------------------- a host gone after the answer

# The first prompt writes a file; the follow-up reads it, makes another and
# says where it runs. Redone after a restore (a note the model counts as a
# prompt), the follow-up's commands run again.
AFTER_THE_ANSWER = [
    ["echo first > one.txt && echo made"],
    ["cat one.txt && echo second > two.txt && pwd"],
    [],
]


# How the conversation stands when its host is gone: it released its
# sandbox before the host went (the follow-up restores it on any host); it
# holds it, and the follow-up comes before it goes idle (the follow-up's
# first step waits for the host, which is gone: the prompt is redone on
# another host); it holds it, and goes idle while the host is gone (the
# release cannot reach the host: the sandbox is let go, the snapshot stays).
WHEN = {
    "released-before-the-host-went": timedelta(seconds=1),
    "holding-its-sandbox": NEVER,
    "idle-while-the-host-is-gone": timedelta(seconds=3),
}


@pytest.mark.long  # waits for the host
@pytest.mark.parametrize("when", list(WHEN))
async def test_a_follow_up_after_its_host_is_gone_runs_on_another_host_with_every_file(
    temporal_client: Client, hosts: Hosts, store: ObjectStore, when: str
) -> None:
    settings = host_settings(store, idle=WHEN[when])
    async with on(temporal_client, hosts, "host-a", Conversing(AFTER_THE_ANSWER), settings) as a:
        handle = await conversation(a, "Write a file.")
        first = await answered(handle, 1)
        if when == "released-before-the-host-went":
            await until(handle, lambda state: state.state == RELEASED)
    # Host A is gone for good, its disk with it (and the workspace it held, if any).
    held_on_a = hosts.workspaces("host-a")
    hosts.gone("host-a")
    in_the_store = await snapshot_objects(store)

    model = Conversing(AFTER_THE_ANSWER)
    async with on(temporal_client, hosts, "host-b", model, settings) as b:
        handle = b.get_workflow_handle(handle.id, result_type=RunAnswer)
        if when == "idle-while-the-host-is-gone":
            await until(handle, lambda state: state.state == RELEASED)
        assert await follow_up(handle, "Show the file, make another, say where you are.") == 2
        second = await answered(handle, 2)
        assert await handle.execute_update(END, result_type=str) == ENDED
        result = await handle.result()

    assert first.answer is not None and printed(first.answer) == ["made"]
    # The follow-up read the first prompt's file, in a workspace on host B.
    assert second.answer is not None and result == second.answer
    content, workspace = printed(second.answer)
    assert content == "first"
    assert Path(workspace).parent == hosts.temp("host-b")
    assert len(held_on_a) == (0 if when == "released-before-the-host-went" else 1)
    # Its outputs are what it made: the restored files are its baseline.
    assert [file.path for file in second.answer.outputs.files] == ["two.txt"]
    # Its model input held the first prompt and the follow-up (and, redone
    # from the snapshot, the note saying so).
    [given, *_] = [each for each in model.inputs if len(user_messages(each)) >= 2]
    assert user_messages(given)[:2] == [
        "Write a file.",
        "Show the file, make another, say where you are.",
    ]
    assert "echo first > one.txt" in str(given)

    # The snapshot taken at the first answer, on host A, in the store (after
    # the one taken once the inputs were placed; before the follow-up's)...
    snapshots = await results_of(handle, SNAPSHOT_STEP)
    assert [worker for worker, _ in await ran_on(handle, SNAPSHOT_STEP)] == [
        "worker-of-host-a",
        "worker-of-host-a",
        "worker-of-host-b",
    ]
    at_the_answer = snapshots[1]
    assert at_the_answer["where"] == IN_STORE and at_the_answer["key"]
    assert any(key.endswith(at_the_answer["key"]) for key in in_the_store)
    # ...is what host B restored, as history says: once, on host B.
    assert await ran_on(handle, RESTORE_STEP) == [("worker-of-host-b", host_queue("host-b"))]
    [summary] = await summaries_of(handle, RESTORE_STEP)
    assert summary == f"restore from the snapshot of {at_the_answer['taken']}"
    restored = await restored_note(handle)
    assert snapshot_time(restored) == at_the_answer["taken"]
    datetime.fromisoformat(at_the_answer["taken"])
    if when == "holding-its-sandbox":
        # The follow-up's first step waited for host A, then was redone on B.
        assert restored.startswith("host 'host-a' is gone: the workspace restored from")
        assert "on host-b" in restored
        assert any(LOST_NOTE in text for text in user_messages(given))
    else:
        assert restored == f"the workspace restored from its snapshot of {at_the_answer['taken']}"
        assert not any(LOST_NOTE in text for each in model.inputs for text in user_messages(each))
    states = [memo["state"] for memo in await session_memos(handle)]
    assert states[-1] == ENDED
    assert (RELEASED in states) == (when != "holding-its-sandbox")
    # END removed host B's sandbox.
    assert hosts.workspaces("host-b") == []


# ------------------------------------------------------ a host gone mid-prompt

# The first prompt writes a line; the follow-up adds one, then prints the
# file and where it runs. Its first command runs on host A, which then dies.
# Redone from the answer's snapshot, the follow-up adds its line again: the
# file holds each line once.
MID_PROMPT = [
    ["echo one > log.txt && echo made"],
    [
        # On host A it runs on (up to 20 s) until the host dies under it.
        'echo two >> log.txt && case "$PWD" in */host-a/*) sleep {sleep};; esac && echo added',
        "cat log.txt && pwd",
    ],
    [],
]


def mid_prompt(sleep: int) -> list[list[str]]:
    return [[command.format(sleep=sleep) for command in prompt] for prompt in MID_PROMPT]


class StallsBetweenTheCommands(Conversing):
    """Conversing, except that once the follow-up's first command has run it
    never answers again: the host dies between two commands (its worker,
    stopped, cancels the model call it waits in)."""

    def __init__(self, prompts: Sequence[Sequence[str]]) -> None:
        super().__init__(prompts)
        self.stalled = asyncio.Event()

    async def get_response(
        self, system_instructions: str | None, input: str | list[Any], *args: Any, **kwargs: Any
    ) -> ModelResponse:
        if len(user_messages(input)) == 2 and steps_done(input) > self.ends[0]:
            self.stalled.set()
            await asyncio.Future()  # until the worker stops and cancels it
        return await super().get_response(system_instructions, input, *args, **kwargs)


async def first_command_of_the_follow_up_runs(hosts: Hosts, model: Conversing) -> None:
    """Return once the follow-up's first command has written its line on
    host A (it runs on), or has run and the model waits (StallsBetweenTheCommands)."""
    async with asyncio.timeout(20):
        while True:
            if isinstance(model, StallsBetweenTheCommands) and model.stalled.is_set():
                return
            logs = [workspace / "log.txt" for workspace in hosts.workspaces("host-a")]
            if not isinstance(model, StallsBetweenTheCommands) and any(
                log.exists() and "two" in log.read_text() for log in logs
            ):
                return
            await asyncio.sleep(0.05)


@pytest.mark.long  # waits for the host
@pytest.mark.parametrize("dies", ["between-two-commands", "while-a-command-runs"])
async def test_a_host_that_dies_mid_prompt_has_the_prompt_redone_on_another_host_from_the_snapshot(
    temporal_client: Client, hosts: Hosts, store: ObjectStore, dies: str
) -> None:
    prompts = mid_prompt(20)
    settings = host_settings(store)
    on_a = (
        StallsBetweenTheCommands(prompts) if dies == "between-two-commands" else Conversing(prompts)
    )
    async with on(temporal_client, hosts, "host-a", on_a, settings) as a:
        handle = await conversation(a, "Start a log.")
        await answered(handle, 1)
        assert await follow_up(handle, "Add to the log, then show it.") == 2
        await first_command_of_the_follow_up_runs(hosts, on_a)
    hosts.gone("host-a")

    model = Conversing(prompts)
    async with on(temporal_client, hosts, "host-b", model, settings) as b:
        handle = b.get_workflow_handle(handle.id, result_type=RunAnswer)
        second = await answered(handle, 2)
        await handle.execute_update(END)
        result = await handle.result()

    # Redone on host B from the answer's snapshot: the first prompt's line,
    # and the follow-up's once.
    assert second.answer is not None and result == second.answer
    *log, workspace = printed(second.answer)
    assert log == ["one", "two"]
    assert Path(workspace).parent == hosts.temp("host-b")
    assert [file.path for file in second.answer.outputs.files] == ["log.txt"]
    # The model was told which call's effects were lost, after the
    # conversation up to the follow-up (the lost call not in it).
    [redone, *_] = [each for each in model.inputs if len(user_messages(each)) == 3]
    *before, note = user_messages(redone)
    assert before == ["Start a log.", "Add to the log, then show it."]
    assert note.startswith(LOST_NOTE + " (host-a) is gone.")
    assert "echo two >> log.txt" in note
    assert str(redone).count("echo two >> log.txt") == 1  # in the note alone

    # History says what was restored, from when and why.
    at_the_answer = (await results_of(handle, SNAPSHOT_STEP))[1]
    assert at_the_answer["where"] == IN_STORE
    assert [worker for worker, _ in await ran_on(handle, SNAPSHOT_STEP)][:2] == [
        "worker-of-host-a"
    ] * 2
    assert await ran_on(handle, RESTORE_STEP) == [("worker-of-host-b", host_queue("host-b"))]
    [summary] = await summaries_of(handle, RESTORE_STEP)
    assert summary == f"restore from the snapshot of {at_the_answer['taken']}"
    restored = await restored_note(handle)
    assert restored.startswith(
        f"host 'host-a' is gone: the workspace restored from its snapshot of "
        f"{at_the_answer['taken']} on host-b, and the prompt redone from there"
    )
    # Host A's sandbox was never reached again, nor did host B run A's workspace.
    a_workspaces = {
        root for root in await workspaces_used(handle) if Path(root).parent == hosts.temp("host-a")
    }
    assert len(a_workspaces) == 1
    for worker, queue in await ran_on(handle, f"{BOUND_PROVIDER}-sandbox_session_pty_exec_start"):
        assert (worker, queue) in {
            ("worker-of-host-a", host_queue("host-a")),
            ("worker-of-host-b", host_queue("host-b")),
        }
    assert hosts.workspaces("host-b") == []


# --------------------------------------------------------------- no store


@pytest.mark.long  # waits for the host
@pytest.mark.parametrize("gone", ["after-the-answer", "mid-prompt"])
async def test_without_a_store_a_host_gone_ends_the_run_as_before(
    temporal_client: Client, hosts: Hosts, gone: str
) -> None:
    prompts = mid_prompt(20)
    settings = host_settings(None)
    on_a = StallsBetweenTheCommands(prompts)
    async with on(temporal_client, hosts, "host-a", on_a, settings) as a:
        handle = await conversation(a, "Start a log.")
        await answered(handle, 1)
        if gone == "mid-prompt":
            await follow_up(handle, "Add to the log, then show it.")
            await first_command_of_the_follow_up_runs(hosts, on_a)
        # The snapshot at the answer is on host A's own disk.
        kept_on_a = sorted(hosts.temp("host-a").rglob("*.tar.gz"))
    hosts.gone("host-a")

    async with on(temporal_client, hosts, "host-b", Conversing(prompts), settings) as b:
        handle = b.get_workflow_handle(handle.id, result_type=RunAnswer)
        if gone == "after-the-answer":
            await follow_up(handle, "Add to the log, then show it.")
        reason = await failure_of(handle)

    assert reason.startswith("The agent could not finish: its sandbox's host 'host-a' is gone")
    assert f"task queue {host_queue('host-a')!r}" in reason
    # The snapshot was taken on host A, kept there, and never restored.
    snapshots = await results_of(handle, SNAPSHOT_STEP)
    assert len(snapshots) == 2 and {each["where"] for each in snapshots} == {ON_HOST}
    assert hosts.temp("host-a") / f"{SERVICE_NAME}-snapshots" / snapshots[-1]["key"] in kept_on_a
    assert not any(path.exists() for path in kept_on_a)
    assert await ran_on(handle, RESTORE_STEP) == []
    assert all(not memo["restored"] for memo in await session_memos(handle))
    # Nothing ran on host B's sandbox: it has no workspace.
    assert hosts.workspaces("host-b") == []


# ----------------------------------------- a scale-down of two worker processes

CONVERSATIONS_PER_PHASE = 2


@pytest.mark.process
async def test_a_scale_down_of_two_worker_processes_loses_no_conversation(
    temporal_client: Client, tmp_path: Path, s3_service: dict[str, str]
) -> None:
    """Kubernetes scales a StatefulSet down by its last pod: here host B,
    which holds conversations while both hosts serve (some started while it
    served alone). It gets SIGTERM, and its volume is gone. Every
    conversation's follow-up then runs on host A, with its files."""
    isolated = private_mounts()
    store = parse(f"s3://{BUCKET}/test-{uuid.uuid4().hex[:8]}", region="us-east-1")
    client = with_plugins(client_with(temporal_client, data_converter(external_storage(store))))
    address = temporal_client.service_client.config.target_host
    with scripted_openai_server(["echo first > one.txt && echo made"]) as model:
        environment = {
            **service_environment(address, model.url),
            "OBJECT_STORE_URL": store.url,
            "SESSION_IDLE_TIMEOUT": "1",
            "WORKER_RUNS_IN_FLIGHT": "2",
        }
        for host in HOSTS:
            (tmp_path / host).mkdir()

        def on_host_env(host: str) -> dict[str, str]:
            return {**environment, "WORKER_HOST_ID": host, "TMPDIR": str(tmp_path / host)}

        async with service(on_host("host-b", tmp_path, isolated), on_host_env("host-b")) as b:
            await b.wait_for("Worker polling")
            handles = [
                await start(client, RunRequest("Write a file.", BOUND_PROVIDER, follow_ups=True))
                for _ in range(CONVERSATIONS_PER_PHASE)
            ]
            async with asyncio.timeout(40):
                for handle in handles:
                    await until(handle, lambda state: state.state == RELEASED)
            async with service(on_host("host-a", tmp_path, isolated), on_host_env("host-a")) as a:
                await a.wait_for("Worker polling")
                handles += [
                    await start(
                        client, RunRequest("Write a file.", BOUND_PROVIDER, follow_ups=True)
                    )
                    for _ in range(CONVERSATIONS_PER_PHASE)
                ]
                async with asyncio.timeout(40):
                    for handle in handles:
                        await until(handle, lambda state: state.state == RELEASED)
                # The scale-down: host B's pod gets SIGTERM, its volume goes.
                b.process.send_signal(signal.SIGTERM)
                assert await b.exit_status() == 0, b.output
                shutil.rmtree(tmp_path / "host-b")
                model.commands.append("cat one.txt && pwd")
                async with asyncio.timeout(40):
                    for handle in handles:
                        await follow_up(handle, "Show the file.")
                    seconds = [await answered(handle, 2) for handle in handles]
                    for handle in handles:
                        await handle.execute_update(END)
                    results = [await handle.result() for handle in handles]

    for second, result in zip(seconds, results, strict=True):
        assert second.answer == result
        assert "Output:\nfirst\n" in str(result.answer), result.answer
    first_prompts_on = set()
    for handle in handles:
        steps = [
            step
            for step in await activities(handle)
            if step.is_sandbox_operation and not step.refused
        ]
        restores = [step for step in steps if step.name == RESTORE_STEP]
        # Each follow-up restored the answer's snapshot on host A...
        assert [(step.worker.rpartition("@")[2], step.queue) for step in restores] == [
            ("host-a", host_queue("host-a"))
        ]
        # ...after its first prompt ran on one host, all of it, to the
        # sandbox's release.
        released = [step.name for step in steps].index(f"{BOUND_PROVIDER}-sandbox_client_delete")
        [host] = {step.worker.rpartition("@")[2] for step in steps[: released + 1]}
        first_prompts_on.add(host)
        assert "restored from its snapshot of" in await restored_note(handle)
    # Host B held conversations when it went (those it served alone, at least).
    assert "host-b" in first_prompts_on
    assert not (tmp_path / "host-b").exists()
    assert os.listdir(tmp_path / "host-a") == []
