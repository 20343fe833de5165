"""A run leaves nothing behind on the worker, however it ends: no workspace,
no snapshot; or, when its sandbox could not be removed, it says which."""

import asyncio
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import CancelledError

from sandbox_agent_runtime.run_request import WAITING, Conversation
from sandbox_agent_runtime.shared import CONVERSATION, END, SANDBOX_LEFT_MEMO
from sandbox_agent_runtime.starter import start
from sandbox_agent_runtime.testing import project_service
from sandbox_agent_runtime.testing.conversing import (
    Conversing,
    answered,
    conversation,
    follow_up,
)
from sandbox_agent_runtime.testing.failing_sandbox import (
    FailingSandbox,
    UncountableSandbox,
    UndeletableSandbox,
    UnstoppableSandbox,
    deleted_sandbox,
)
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
from sandbox_agent_runtime.testing.support import SETTINGS, activities, failure_of, running_worker


@dataclass
class WorkerDisk:
    temp: Path  # where the sandbox makes its workspace (the system temp dir)
    state: Path  # where the SDK writes workspace snapshots by default

    def leftovers(self) -> list[Path]:
        return sorted(p for root in (self.temp, self.state) for p in root.rglob("*"))

    def files(self) -> list[Path]:
        """The files left (a snapshot's directories may stay, empty)."""
        return [path for path in self.leftovers() if not path.is_dir()]


@pytest.fixture
def worker_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[WorkerDisk]:
    """The worker's temp dir and snapshot dir, pointed at empty dirs to watch."""
    disk = WorkerDisk(temp=tmp_path / "tmp", state=tmp_path / "state")
    disk.temp.mkdir()
    disk.state.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(disk.temp))
    monkeypatch.setenv("XDG_STATE_HOME", str(disk.state))
    yield disk


async def test_a_run_removes_its_workspace_and_writes_no_snapshot(
    temporal_client: Client, worker_disk: WorkerDisk
) -> None:
    model = ScriptedModel(["echo draft > draft.txt && pwd"])
    async with running_worker(temporal_client, model) as (client, _):
        handle = await start(client, "Write a draft and tell me where it is.")
        answer = (await handle.result()).answer

    # The workspace was a fresh directory in the watched temp dir...
    assert f"{worker_disk.temp}/sandbox-local-" in answer
    # ...and the run removed it, and wrote no snapshot.
    assert worker_disk.leftovers() == []


async def test_a_failed_run_removes_its_workspace_too(
    temporal_client: Client, worker_disk: WorkerDisk
) -> None:
    sandbox = FailingSandbox(command_errors=[deleted_sandbox()])
    async with running_worker(temporal_client, ScriptedModel(["true"]), sandbox) as (client, _):
        handle = await start(client, "Do nothing.")
        with pytest.raises(WorkflowFailureError):
            await handle.result()

    assert sandbox.commands_attempted == 1  # the workspace existed when the run failed
    assert worker_disk.leftovers() == []


async def test_a_conversation_whose_workspace_cannot_be_counted_answers_and_ends_without_a_snapshot(
    temporal_client: Client, worker_disk: WorkerDisk
) -> None:
    model = Conversing([["echo draft > draft.txt && echo written"]])
    async with running_worker(temporal_client, model, UncountableSandbox()) as (client, _):
        handle = await conversation(client, "Write a draft.")
        while (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
            state = await handle.query(CONVERSATION, result_type=Conversation)
            if state.state == WAITING:
                await handle.execute_update(END)
                break
            await asyncio.sleep(0.05)
        answer = await handle.result()

    # The census failed: the snapshot was not taken (and the outputs were
    # withheld, saying why), and the conversation went on to its end.
    assert answer.answer == "prompt 1: written\n"
    assert "could not be counted" in answer.outputs.withheld
    assert worker_disk.files() == []


async def test_a_sandbox_whose_stop_fails_for_good_is_deleted_all_the_same(
    temporal_client: Client, worker_disk: WorkerDisk
) -> None:
    sandbox = UnstoppableSandbox(inherit_host_environment=False)
    async with running_worker(
        temporal_client, ScriptedModel(["echo draft > draft.txt"]), sandbox
    ) as (
        client,
        _,
    ):
        handle = await start(client, "Write a draft.")
        await handle.result()
        [stop] = [a for a in await activities(handle) if a.name.endswith("-sandbox_session_stop")]

    assert stop.failed
    assert worker_disk.files() == []


async def test_a_conversation_cancelled_while_it_waits_removes_its_workspace_and_snapshot(
    temporal_client: Client, worker_disk: WorkerDisk
) -> None:
    model = Conversing([["echo draft > draft.txt && pwd"]])
    async with running_worker(temporal_client, model) as (client, _):
        handle = await conversation(client, "Write a draft and tell me where it is.")
        first = await answered(handle, 1)
        held = worker_disk.files()
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()

    assert isinstance(failed.value.cause, CancelledError)
    # Waiting, it held its workspace and its snapshot...
    assert first.answer is not None and f"{worker_disk.temp}/sandbox-local-" in first.answer.answer
    assert any(path.name.endswith(".tar.gz") for path in held), held
    # ...and cancelled, it left neither.
    assert worker_disk.files() == []


async def test_a_conversation_whose_follow_up_fails_for_good_removes_its_workspace(
    temporal_client: Client, worker_disk: WorkerDisk
) -> None:
    sandbox = FailingSandbox()
    model = Conversing([["echo draft > draft.txt"], ["cat draft.txt"]])
    async with running_worker(temporal_client, model, sandbox) as (client, _):
        handle = await conversation(client, "Write a draft.")
        await answered(handle, 1)
        sandbox.command_errors = [deleted_sandbox()]
        await follow_up(handle, "Show it.")
        reason = await failure_of(handle)

    assert reason.endswith("failed with an error that retrying cannot fix: the sandbox was deleted")
    assert worker_disk.files() == []


async def test_a_sandbox_a_run_could_not_remove_is_named_in_its_memo(
    temporal_client: Client, worker_disk: WorkerDisk
) -> None:
    sandbox = UndeletableSandbox(inherit_host_environment=False)
    model = Conversing([["pwd"]])
    async with running_worker(temporal_client, model, sandbox) as (client, _):
        handle = await conversation(client, "Where are you?")
        await answered(handle, 1)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        left = await (await handle.describe()).memo_value(SANDBOX_LEFT_MEMO)

    # The run ends as it was told (cancelled), and says which sandbox it
    # left behind, and why.
    assert isinstance(failed.value.cause, CancelledError)
    assert left["provider"] == project_service().sandbox_provider
    assert left["session"] and left["host"] == SETTINGS.host_id  # the local backend's host
    assert left["why"] == (
        f"the sandbox operation {project_service().sandbox_provider}-sandbox_client_delete failed "
        "with an error that retrying cannot fix: the sandbox service refused to delete it"
    )
