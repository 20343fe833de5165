"""The agent edits files with ``apply_patch``, through the workflow; a file
too large to read whole is never written back cut, and is never read whole
by the worker (bounded_sandbox.py)."""

from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.worker import Replayer

from sandbox_agent_runtime.bounded_sandbox import CUT_MARK
from sandbox_agent_runtime.shared import LONGEST_READ
from sandbox_agent_runtime.starter import start
from sandbox_agent_runtime.testing import project
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
from sandbox_agent_runtime.testing.support import (
    SETTINGS,
    activities,
    running_worker,
    sandboxes_for_tests,
)
from sandbox_agent_runtime.worker import agents_plugin

# Files of 3 MB and 600 kB, written, read and replayed: seconds.
pytestmark = pytest.mark.long


def patch(path: str, old: str, new: str) -> str:
    return f"*** Begin Patch\n*** Update File: {path}\n@@\n-{old}\n+{new}\n*** End Patch\n"


async def test_a_file_read_cut_is_not_written_back_and_the_agent_is_told_why(
    temporal_client: Client,
) -> None:
    # 3 MB of numbered lines: apply_patch reads it cut to LONGEST_READ.
    model = ScriptedModel(
        [
            "seq 1 450000 | sed 's/^/line /' > big.txt && wc -c < big.txt",
            patch("big.txt", "line 1", "LINE 1"),
            "head -1 big.txt && wc -c < big.txt",
        ]
    )
    async with running_worker(temporal_client, model) as (client, _):
        handle = await start(client, "Edit the first line of big.txt.")
        await handle.result()

    created, refused, after = model.results
    size = created.split("Output:\n")[1].strip()
    assert int(size) > 3 * LONGEST_READ
    assert refused.startswith("Refusing to write ")
    assert "it holds a file as it was read, cut" in refused and "Nothing was written" in refused
    assert after.split("Output:\n")[1].split() == ["line", "1", size]  # untouched
    operations = [a.name for a in await activities(handle)]
    assert not any(name.endswith("sandbox_session_write") for name in operations)
    # The notes of the cut reads live in the workflow: a worker that did
    # not see the read (one that replays the run) refuses the same write.
    replayer = Replayer(
        workflows=[project().workflow],
        plugins=[agents_plugin(SETTINGS, sandboxes=sandboxes_for_tests())],
    )
    await replayer.replay_workflow(await handle.fetch_history())


async def test_a_file_that_merely_contains_a_cut_note_is_written(temporal_client: Client) -> None:
    # 600 kB, read whole, quoting a note as a file read cut would carry.
    note = f"{CUT_MARK.decode()}3 of the 10 bytes of this file (x.txt) were left out here ...]"
    model = ScriptedModel(
        [
            f"(echo first; echo '{note}'; head -c 600000 /dev/zero | tr '\\0' x) > notes.txt",
            patch("notes.txt", "first", "FIRST"),
            "head -2 notes.txt && wc -c < notes.txt",
        ]
    )
    async with running_worker(temporal_client, model) as (client, _):
        handle = await start(client, "Edit the first line of notes.txt.")
        await handle.result()

    _, patched, after = model.results
    assert patched.startswith("Updated ")
    assert after.split("Output:\n")[1].splitlines()[:2] == ["FIRST", note]


def resident_memory() -> int:
    """This process's resident memory now, in kB (VmRSS)."""
    status = Path("/proc/self/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1])


def peak_memory_since_reset() -> int:
    """This process's peak resident memory since /proc/self/clear_refs was
    last given 5, in kB."""
    status = Path("/proc/self/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1])


async def test_a_sparse_gibibyte_is_read_cut_without_being_read_whole(
    temporal_client: Client,
) -> None:
    # A line, then 1 GiB that takes no disk: apply_patch reads the file,
    # which the worker (this process) cuts to LONGEST_READ as it reads.
    model = ScriptedModel(
        [
            "echo first > sparse.bin && truncate -s 1G sparse.bin",
            patch("sparse.bin", "first", "FIRST"),
        ]
    )
    before = resident_memory()
    Path("/proc/self/clear_refs").write_text("5")  # the peak starts again from now
    async with running_worker(temporal_client, model) as (client, _):
        handle = await start(client, "Edit the first line of sparse.bin.")
        await handle.result()
    peak = peak_memory_since_reset()

    [_, refused] = model.results
    assert refused.startswith("Refusing to write "), refused
    # Read whole, the file alone would add 1 GiB (kB here, as /proc counts).
    assert peak - before < 400_000, f"this process grew by {peak - before:,} kB"
