"""A run leaves nothing behind on the worker: no workspace, no snapshot."""

import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowFailureError

from sandbox_agent_runtime.starter import start
from sandbox_agent_runtime.testing.failing_sandbox import FailingSandbox, deleted_sandbox
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
from sandbox_agent_runtime.testing.support import running_worker


@dataclass
class WorkerDisk:
    temp: Path  # where the sandbox makes its workspace (the system temp dir)
    state: Path  # where the SDK writes workspace snapshots by default

    def leftovers(self) -> list[Path]:
        return sorted(p for root in (self.temp, self.state) for p in root.rglob("*"))


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
