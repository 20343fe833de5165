"""A run takes the material it is given and hands back what it made: inputs,
a git repository, the agent's own files, outputs, structured answers.

With a real dev server, the service's real worker, the real local sandbox
and a scripted model: ``--input`` files and directories are in the
workspace before the agent's first turn; every file the run created or
changed (and only those) is written under ``--output DIR``, never anywhere
else, whatever the workspace holds; a ``--repo`` comes with its changes as a
patch that applies to its ref; the agent's ``default_manifest`` is merged
with the run's inputs; an ``output_type`` answer is printed as JSON; large
files travel through the object store, not history; a run handed from a
stopped worker to another keeps them all. Bad input stops the starter with
one line and exit status 3 before anything starts (docs/inputs-and-outputs.md).
"""

import asyncio
import hashlib
import io
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from agents import ModelResponse
from agents.sandbox.session import SandboxSession
from agents.sandbox.session.sandbox_client import BaseSandboxClient
from temporalio.client import Client, WorkflowHandle
from temporalio.openai_agents.testing import ResponseBuilders

from sandbox_agent_runtime import archives
from sandbox_agent_runtime.archives import (
    BadInput,
    inputs_of,
    pack_input,
    size_text,
    write_outputs,
)
from sandbox_agent_runtime.object_store import (
    ObjectStore,
    data_converter,
    parse,
    worker_storage,
)
from sandbox_agent_runtime.run_request import (
    Input,
    OutputFile,
    Outputs,
    RunAnswer,
    RunRequest,
)
from sandbox_agent_runtime.shared import (
    COLLECT,
    INLINE_FILES_LIMIT,
    LONGEST_LISTING,
    MOST_FILES,
    MOST_SKIPPED,
    PLACE,
    STORE_THRESHOLD,
)
from sandbox_agent_runtime.starter import (
    EXIT_COMPLETED,
    EXIT_FILES_NOT_WRITTEN,
    EXIT_USAGE,
    attach,
    run,
    start,
)
from sandbox_agent_runtime.testing import project_service
from sandbox_agent_runtime.testing.handovers import StallsAfterTheFirstCommand
from sandbox_agent_runtime.testing.object_stores import client_with, objects_in, payloads_in
from sandbox_agent_runtime.testing.plugin import BUCKET
from sandbox_agent_runtime.testing.processes import STARTER, WORKER, service, service_environment
from sandbox_agent_runtime.testing.repositories import LOOPBACK_REPOS, bare_copy, serving
from sandbox_agent_runtime.testing.scripted_model import (
    Call,
    ScriptedModel,
    steps_done,
    tool_outputs,
)
from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server
from sandbox_agent_runtime.testing.support import (
    DROPPED_RUNS_CLOSED,
    RETRIED_AT_ONCE,
    SETTINGS,
    STARTER_SETTINGS,
    activities,
    failure_of,
    running_worker,
    sandboxes_for_tests,
    started_id,
)
from sandbox_agent_runtime.testing.workspace_agents import (
    NOTES,
    AgentWithFilesWorkflow,
    StructuredAnswerWorkflow,
)
from sandbox_agent_runtime.workspace import clone_dir
from sandbox_agent_runtime.workspace.git import NOT_CLONED

# A table of 12 rows.
ROWS = "".join(f"{row},x\n" for row in range(12))


def files_under(directory: Path) -> dict[str, bytes]:
    """Every regular file under ``directory`` (links not followed), by its
    relative path: what a run's outputs wrote there."""
    found = {}
    for root, _, names in os.walk(directory):
        for name in names:
            path = Path(root) / name
            if stat.S_ISREG(path.lstat().st_mode):
                found[path.relative_to(directory).as_posix()] = path.read_bytes()
    return found


def material(tmp_path: Path) -> tuple[Path, Path]:
    """A file (``data.csv``, ROWS) and a directory tree (``tree/``) to hand a run."""
    data = tmp_path / "material" / "data.csv"
    tree = tmp_path / "material" / "tree"
    (tree / "sub" / "deeper").mkdir(parents=True)
    (tree / "empty").mkdir()
    data.write_text(ROWS)
    (tree / "a.txt").write_text("a\n")
    (tree / "sub" / "b.txt").write_text("b\n")
    (tree / "sub" / "deeper" / "c.bin").write_bytes(bytes(range(256)))
    return data, tree


def printed_output(tool_output: str) -> str:
    """What a command printed, from the tool output the model is given
    (a few lines about the command, then ``Output:``)."""
    return tool_output.split("Output:\n", 1)[1]


async def test_inputs_go_in_and_only_what_the_run_made_or_changed_comes_out(
    starter_env: Client, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, tree = material(tmp_path)
    model = ScriptedModel(
        [
            "wc -l < data.csv > summary.txt",
            "find tree | LC_ALL=C sort > tree.txt && echo changed >> tree/sub/b.txt",
        ]
    )
    out = tmp_path / "out" / "new"
    request = RunRequest(
        "Count the rows of data.csv.", inputs=inputs_of([str(data), str(tree)], has_store=False)
    )
    async with running_worker(starter_env, model):
        status = await run(request, STARTER_SETTINGS, output=out)
    printed = capsys.readouterr()

    assert status == 0, printed
    # The file's rows were counted where the agent found it, and the
    # directory arrived with its whole tree, the empty directory too.
    written = files_under(out)
    assert written["summary.txt"].strip() == b"12"
    assert written["tree.txt"].decode().splitlines() == [
        "tree",
        "tree/a.txt",
        "tree/empty",
        "tree/sub",
        "tree/sub/b.txt",
        "tree/sub/deeper",
        "tree/sub/deeper/c.bin",
    ]
    # What the run created or changed, at its path; nothing it left as it was.
    assert written["tree/sub/b.txt"] == b"b\nchanged\n"
    assert sorted(written) == ["summary.txt", "tree.txt", "tree/sub/b.txt"]
    # The starter showed the inputs going in and the outputs coming out,
    # and listed what it wrote.
    lines = printed.out.splitlines()
    assert f"  sandbox  input data.csv ({size_text(len(ROWS))}), tree/ (260 B)" in lines
    size = size_text(sum(len(content) for content in written.values()))
    assert f"  sandbox  output 3 files ({size})" in lines
    assert f"Outputs: 3 files ({size})" in lines
    at = lines.index(f"Wrote 3 files to {out}:")
    assert lines[at + 1 : at + 4] == ["  summary.txt", "  tree.txt", "  tree/sub/b.txt"]
    assert printed.err == ""


async def test_attach_writes_the_files_of_a_run_that_already_ended(
    starter_env: Client, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, _ = material(tmp_path)
    model = ScriptedModel(["wc -l < data.csv > summary.txt"])
    async with running_worker(starter_env, model) as (client, _):
        handle = await start(client, RunRequest("Count.", inputs=[pack_input(data)]))
        await handle.result()
    capsys.readouterr()

    # No worker runs now: what is written comes from the run's result alone.
    status = await attach(handle.id, STARTER_SETTINGS, output=tmp_path / "out")
    printed = capsys.readouterr()

    assert status == 0, printed
    assert files_under(tmp_path / "out") == {"summary.txt": b"12\n"}
    assert f"Wrote 1 file to {tmp_path / 'out'}:" in printed.out.splitlines()


def test_the_inputs_are_refused_over_the_limit_without_a_store_and_named_alike(
    tmp_path: Path,
) -> None:
    large = tmp_path / "large.bin"
    large.write_bytes(b"\0" * (INLINE_FILES_LIMIT + 1))
    with pytest.raises(BadInput, match="set OBJECT_STORE_URL"):
        inputs_of([str(large)], has_store=False)
    assert inputs_of([str(large)], has_store=True)[0].size == INLINE_FILES_LIMIT + 1

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "data.csv").write_text(ROWS)
    (tmp_path / "b" / "data.csv").write_text(ROWS)
    with pytest.raises(BadInput, match="two inputs are named 'data.csv'"):
        inputs_of([str(tmp_path / "a" / "data.csv"), str(tmp_path / "b" / "data.csv")], False)


async def test_outputs_over_the_limit_without_a_store_are_listed_not_written(
    starter_env: Client, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    too_large = INLINE_FILES_LIMIT + 50_000
    model = ScriptedModel([f"head -c {too_large} /dev/zero > large.bin"])
    out = tmp_path / "out"
    async with running_worker(starter_env, model):
        status = await run(RunRequest("Make a large file."), STARTER_SETTINGS, output=out)
    printed = capsys.readouterr()

    # The run completed, with its answer; its files did not travel.
    assert status == EXIT_FILES_NOT_WRITTEN, printed
    assert "\nAnswer:\n" in printed.out
    lines = printed.out.splitlines()
    assert f"Outputs: 1 file ({size_text(too_large)})" in lines
    assert (
        f"Outputs not kept: the run's outputs weigh {size_text(too_large)}, over "
        f"{size_text(INLINE_FILES_LIMIT)}, the limit without an object store: set OBJECT_STORE_URL"
    ) in lines
    assert printed.err.splitlines() == [f"Nothing written to {out}: the files did not travel"]
    assert not out.exists()


# ------------------------------------------------------------ hostile contents


async def test_hostile_workspace_contents_never_leave_the_output_directory(
    starter_env: Client, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Beside DIR: a file and a directory that nothing may write to.
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # DIR already holds a link to each: a file written there would go through it.
    out = tmp_path / "out"
    out.mkdir()
    (out / "x.txt").symlink_to(victim)
    (out / "sub").symlink_to(elsewhere)
    # A directory the agent links to from its workspace, and writes into.
    linked = tmp_path / "linked"
    model = ScriptedModel(
        [
            "mkdir -p sub deep && echo climbed > deep/../x.txt && echo below > sub/inner.txt",
            "ln -s /etc/passwd absolute-link && ln -s ../../escape relative-link && mkfifo fifo",
            f"mkdir -p {linked} && ln -s {linked} linked-dir && echo through > linked-dir/under.txt",
            "echo fine > kept.txt",
        ]
    )
    async with running_worker(starter_env, model):
        status = await run(RunRequest("Make a mess."), STARTER_SETTINGS, output=out)
    printed = capsys.readouterr()

    # Two of its files were refused in DIR: not a success.
    assert status == EXIT_FILES_NOT_WRITTEN, printed
    # Only regular files were written, each inside DIR, none through a link.
    assert files_under(out) == {"kept.txt": b"fine\n"}
    assert victim.read_text() == "untouched\n"
    assert list(elsewhere.iterdir()) == []
    assert (out / "x.txt").is_symlink() and (out / "sub").is_symlink()
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "elsewhere",
        "linked",
        "out",
        "victim.txt",
    ]
    # What the workspace held and the starter did not take, each said.
    lines = printed.out.splitlines()
    assert "  skipped  absolute-link: a link (to /etc/passwd), not a file" in lines
    assert "  skipped  relative-link: a link (to ../../escape), not a file" in lines
    assert "  skipped  fifo: a special file (device, FIFO or socket)" in lines
    assert f"  skipped  linked-dir: a link (to {linked}), not a file" in lines
    refused = printed.err.splitlines()
    assert f"  refused  x.txt: a link or a directory is in its place in {out}" in refused
    assert f"  refused  sub/inner.txt: sub is not a directory of {out}" in refused
    assert len(refused) == 2, refused


# What the agent leaves for delivery: a directory named as a temporary file
# for x would be, beside x, then more files, one of them larger than the rest.
SPOILING = [
    "mkdir .x.partial && echo inner > .x.partial/inner && echo x > x && echo y > y.txt"
    " && head -c 200000 /dev/zero > big.bin"
]
SPOILT = {".x.partial/inner": b"inner\n", "x": b"x\n", "y.txt": b"y\n", "big.bin": bytes(200_000)}


def files_bounded_to(size: int, command: list[str]) -> list[str]:
    """``command``, run where no file it writes may grow past ``size`` bytes
    (a write past it fails with EFBIG, as on a full disk or over a quota:
    Python ignores SIGXFSZ)."""
    bound = (
        "import os, resource, sys; size = int(sys.argv[1]); "
        "resource.setrlimit(resource.RLIMIT_FSIZE, (size, size)); os.execv(sys.argv[2], sys.argv[2:])"
    )
    return [sys.executable, "-c", bound, str(size), *command]


@pytest.mark.process
async def test_delivery_names_each_file_it_cannot_write_and_writes_every_other(
    temporal_client: Client, tmp_path: Path
) -> None:
    async with running_worker(temporal_client, ScriptedModel(SPOILING)) as (client, _):
        handle = await start(client, RunRequest("Leave these."))
        await handle.result()
    address = temporal_client.service_client.config.target_host
    environment = service_environment(address, "http://127.0.0.1:1")
    environment.pop("OBJECT_STORE_URL", None)

    def attached(out: Path, bounded: int | None = None) -> subprocess.CompletedProcess[str]:
        command = [*STARTER, "--attach", handle.id, "--output", str(out)]
        return subprocess.run(
            command if bounded is None else files_bounded_to(bounded, command),
            env=environment,
            capture_output=True,
            text=True,
            timeout=120,
        )

    # Every file, the directory named like a temporary file included: each
    # temporary name is made fresh beside its file, and none is left.
    whole = await asyncio.to_thread(attached, tmp_path / "whole")
    assert whole.returncode == EXIT_COMPLETED, whole
    assert files_under(tmp_path / "whole") == SPOILT
    assert sorted(os.listdir(tmp_path / "whole")) == [".x.partial", "big.bin", "x", "y.txt"]

    # A file that cannot be written (here: too large for the process) is
    # refused, with why; every other file is written, nothing half-written stays.
    bounded = await asyncio.to_thread(attached, tmp_path / "bounded", 100_000)
    assert bounded.returncode == EXIT_FILES_NOT_WRITTEN, bounded
    assert "Traceback" not in bounded.stderr
    assert bounded.stderr.splitlines() == ["  refused  big.bin: cannot be written (File too large)"]
    assert files_under(tmp_path / "bounded") == {k: v for k, v in SPOILT.items() if k != "big.bin"}
    assert sorted(os.listdir(tmp_path / "bounded")) == [".x.partial", "x", "y.txt"]

    # None written (a directory in the place of each): each named, and not a success.
    taken = tmp_path / "taken"
    for name in SPOILT:
        (taken / name).mkdir(parents=True)
    refused = await asyncio.to_thread(attached, taken)
    assert refused.returncode == EXIT_FILES_NOT_WRITTEN, refused
    assert f"Wrote 0 files to {taken}:" in refused.stdout.splitlines()
    assert refused.stderr.splitlines() == [
        f"  refused  {name}: a link or a directory is in its place in {taken}"
        for name in sorted(SPOILT)
    ]
    assert files_under(taken) == {}


def forged_archive(members: list[tuple[tarfile.TarInfo, bytes]]) -> str:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            info.size = len(data) if info.isfile() else 0
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return archives.encoded(buffer.getvalue())


def member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


def test_a_forged_outputs_archive_cannot_write_outside_the_directory(tmp_path: Path) -> None:
    # A run result no worker made: its names climb out, are absolute, are
    # links or devices, or are not the files it lists.
    out = tmp_path / "out"
    regular = {
        "../evil.txt": b"climbed out",
        "nested/../../evil-too.txt": b"climbed out, nested",
        f"{tmp_path}/absolute-evil.txt": b"absolute",
        "ok.txt": b"fine",
        "link/through.txt": b"under a link",
        "tampered.txt": b"not what was listed",
        "unlisted.txt": b"not listed at all",
    }
    members = [(member(name), data) for name, data in regular.items()]
    members.insert(0, (member("link", tarfile.SYMTYPE, str(tmp_path)), b""))
    members.append((member("device", tarfile.CHRTYPE), b""))
    listed = [
        OutputFile(name, len(data), archives.sha256(data))
        for name, data in regular.items()
        if name != "unlisted.txt"
    ]
    listed = [
        replace(file, sha256=archives.sha256(b"listed")) if file.path == "tampered.txt" else file
        for file in listed
    ]
    outputs = Outputs(files=listed, archive=forged_archive(members))

    written, refused = write_outputs(outputs, out)

    # The link was never made, so the file named under it is a plain file in DIR.
    assert written == ["ok.txt", "link/through.txt"]
    assert files_under(out) == {"ok.txt": b"fine", "link/through.txt": b"under a link"}
    assert not (out / "link").is_symlink()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out"]
    assert refused == [
        "link: not a regular file",
        "../evil.txt: '../evil.txt' climbs out of its directory with '..'",
        "nested/../../evil-too.txt: 'nested/../../evil-too.txt' climbs out of its "
        "directory with '..'",
        f"{tmp_path}/absolute-evil.txt: '{tmp_path}/absolute-evil.txt' is an absolute path",
        "tampered.txt: not among the files the run listed",
        "unlisted.txt: not among the files the run listed",
        "device: not a regular file",
    ]


# ------------------------------------------------- limits in number, memory


def waited_for(command: str) -> Call:
    """``command`` as an ``exec_command`` call whose result the tool gives
    only once it has ended (up to 5 minutes), not after 10 s of it: the
    outputs are collected from what it left, not from what it was leaving."""
    return Call("exec_command", json.dumps({"cmd": command, "yield_time_ms": 300_000}))


async def test_thirty_thousand_files_the_agent_leaves_are_withheld_and_the_answer_arrives(
    starter_env: Client, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Their list alone (a path, a size and a checksum each) would pass the
    # 2 MB Temporal takes in one payload. The command is waited for to its
    # end (on a busy machine it takes longer than the tool's usual 10 s).
    made = "mkdir many && cd many && seq 1 30000 | xargs touch && echo made"
    model = ScriptedModel([waited_for(made)])
    out = tmp_path / "out"
    async with running_worker(starter_env, model):
        status = await run(RunRequest("Make files."), STARTER_SETTINGS, output=out)
    printed = capsys.readouterr()

    # The run completed with its answer; the files were counted in the
    # sandbox, and neither read nor listed.
    assert status == EXIT_FILES_NOT_WRITTEN, printed
    assert "\nAnswer:\n" in printed.out and "made" in printed.out
    assert (
        "Outputs not kept: the run left 30,000 more files in the workspace than it was "
        f"given, over {MOST_FILES:,} (MOST_FILES)"
    ) in printed.out.splitlines()
    assert printed.err.splitlines() == [f"Nothing written to {out}: the files did not travel"]


async def test_what_is_left_out_is_named_up_to_a_hundred_and_the_rest_counted(
    starter_env: Client,
) -> None:
    links = MOST_SKIPPED + 50
    model = ScriptedModel(
        [waited_for(f"seq 1 {links} | while read n; do ln -s /etc/passwd link-$n; done")]
    )
    async with running_worker(starter_env, model) as (client, _):
        answer = await (await start(client, RunRequest("Make links."))).result()

    skipped = answer.outputs.skipped
    assert len(skipped) == MOST_SKIPPED + 1
    assert all(entry.endswith(": a link (to /etc/passwd), not a file") for entry in skipped[:-1])
    assert skipped[-1] == "and 50 more entries left out, not named"


async def test_inputs_whose_list_of_files_would_not_fit_in_a_payload_fail_the_run_in_one_line(
    temporal_client: Client,
) -> None:
    model = ScriptedModel(["ls"])
    # Each input within the limit (the worker takes it), the two over it together.
    half = MOST_FILES // 2 + 1
    request = RunRequest(
        "Look.", inputs=[forged_input("first", half), forged_input("second", half)]
    )
    async with running_worker(temporal_client, model) as (client, _):
        reason = await failure_of(await start(client, request))

    assert reason.endswith(
        f"Once its inputs are placed, the workspace holds {2 * half:,} files, over "
        f"{MOST_FILES:,} (MOST_FILES)"
    ), reason
    assert "\n" not in reason
    assert model.input_sizes == []


def peak_memory(pid: int | str = "self") -> int:
    """The peak resident memory of process ``pid`` so far, in bytes (VmHWM)."""
    status = Path(f"/proc/{pid}/status").read_text()
    [line] = [line for line in status.splitlines() if line.startswith("VmHWM:")]
    return int(line.split()[1]) * 1024


@pytest.mark.process
async def test_a_sparse_gibibyte_in_the_workspace_is_withheld_without_the_worker_reading_it(
    temporal_client: Client, tmp_path: Path
) -> None:
    # A file of 1 GiB that takes no disk: read, it would take 1 GiB of the
    # worker's memory (and more, as a tar archive and its copies).
    commands = ["truncate -s 1G sparse.bin && ls -l sparse.bin"]
    address = temporal_client.service_client.config.target_host
    with scripted_openai_server(commands) as model:
        environment = service_environment(address, model.url)
        async with (
            service(WORKER, environment) as worker,
            service([*STARTER, "--output", str(tmp_path / "out"), "Go."], environment) as asking,
        ):
            status = await asking.exit_status(timeout=300)
            peak = peak_memory(worker.process.pid)

    # The worker starts at about 300 MB; reading the file would take it past 1 GiB.
    assert peak < 800_000_000, f"the worker's memory peaked at {peak:,} bytes"
    assert status == EXIT_FILES_NOT_WRITTEN, asking.output
    assert "Answer:" in asking.output
    assert (
        "Outputs not kept: the workspace grew by 1.1 GB since its inputs were placed, over "
        "1.0 MB, the limit without an object store: set OBJECT_STORE_URL"
    ) in asking.output


# ------------------------------------------------------- the agent's own files


async def start_as(
    client: Client, workflow_class: type[AgentWithFilesWorkflow], request: RunRequest
) -> WorkflowHandle[Any, RunAnswer]:
    """Start a run of a test's variant of the workflow, as the starter would."""
    return await client.start_workflow(
        workflow_class.run,
        request,
        id=f"{project_service().task_queue}-{uuid.uuid4()}",
        task_queue=project_service().task_queue,
        execution_timeout=project_service().workflow_execution_timeout,
    )


async def test_the_agents_own_files_are_in_the_workspace_beside_the_runs_inputs(
    temporal_client: Client, tmp_path: Path
) -> None:
    data, _ = material(tmp_path)
    model = ScriptedModel(["ls -1 && cat notes.txt data.csv > both.txt"])
    async with running_worker(temporal_client, model, workflows=[AgentWithFilesWorkflow]) as (
        client,
        _,
    ):
        handle = await start_as(
            client, AgentWithFilesWorkflow, RunRequest("Look.", inputs=[pack_input(data)])
        )
        result = await handle.result()

    assert printed_output(result.answer).split() == ["data.csv", "notes.txt"]
    # The agent's file and the input, side by side; neither is an output.
    [both] = result.outputs.files
    assert both.path == "both.txt"
    written, _ = write_outputs(result.outputs, tmp_path / "out")
    assert (tmp_path / "out" / "both.txt").read_bytes() == NOTES + ROWS.encode()


async def test_an_input_named_like_one_of_the_agents_files_fails_the_run_in_one_line(
    temporal_client: Client, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("the run's own notes\n")
    model = ScriptedModel(["cat notes.txt"])
    async with running_worker(temporal_client, model, workflows=[AgentWithFilesWorkflow]) as (
        client,
        _,
    ):
        request = RunRequest("Look.", inputs=[pack_input(tmp_path / "notes.txt")])
        handle = await start_as(client, AgentWithFilesWorkflow, request)
        reason = await failure_of(handle)

    assert reason == (
        "The run's input 'notes.txt' has the name of an entry of the agent's "
        "default_manifest (agent.py): rename the input, or the entry."
    )
    # Refused before anything was made: no sandbox, no model turn.
    assert [step.name for step in await activities(handle) if step.is_sandbox_operation] == []
    assert model.input_sizes == []


# ------------------------------------------------------------- structured


class AnswersWithWhatItPrinted(ScriptedModel):
    """Runs its commands, then answers with what the last one printed,
    alone: JSON, for an agent with an output_type."""

    def _respond(self, input: str | list[Any]) -> ModelResponse:
        if steps_done(input) < len(self.commands):
            return super()._respond(input)
        return ResponseBuilders.output_message(printed_output(tool_outputs(input)[-1]).strip())


SUMMARISE = ["""printf '{"rows": %d, "columns": ["n", "x"]}' "$(wc -l < data.csv)" """]


async def test_an_agent_with_an_output_type_answers_with_its_json(
    temporal_client: Client, tmp_path: Path
) -> None:
    data, _ = material(tmp_path)
    model = AnswersWithWhatItPrinted(SUMMARISE)
    async with running_worker(temporal_client, model, workflows=[StructuredAnswerWorkflow]) as (
        client,
        _,
    ):
        handle = await start(client, RunRequest("Summarise.", inputs=[pack_input(data)]))
        result = await handle.result()

    assert result.structured
    assert result.answer == {"rows": 12, "columns": ["n", "x"]}


@pytest.mark.process
async def test_the_starter_prints_a_structured_answer_as_json(
    temporal_client: Client, tmp_path: Path
) -> None:
    data, _ = material(tmp_path)
    address = temporal_client.service_client.config.target_host
    environment = service_environment(address, "http://127.0.0.1:1")
    model = AnswersWithWhatItPrinted(SUMMARISE)
    async with running_worker(temporal_client, model, workflows=[StructuredAnswerWorkflow]):
        ran = await asyncio.to_thread(
            subprocess.run,
            [*STARTER, "--input", str(data), "Summarise data.csv."],
            env=environment,
            capture_output=True,
            text=True,
            timeout=120,
        )

    assert ran.returncode == 0, ran
    answer = ran.stdout.split("\nAnswer:\n", 1)[1].split("\nFollow up: ", 1)[0]
    assert json.loads(answer) == {"rows": 12, "columns": ["n", "x"]}


# ---------------------------------------------------------------- repository


def git(*arguments: str, cwd: Path) -> str:
    """Run git as a person would on this machine (no config of theirs)."""
    environment = {
        **os.environ,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Tester",
        "GIT_AUTHOR_EMAIL": "tester@example.com",
        "GIT_COMMITTER_NAME": "Tester",
        "GIT_COMMITTER_EMAIL": "tester@example.com",
    }
    done = subprocess.run(
        ["git", *arguments], cwd=cwd, env=environment, capture_output=True, text=True, check=True
    )
    return done.stdout


@dataclass(frozen=True)
class Repository:
    """A git repository on this machine, what its README says at each ref,
    and its bare copy (``served``) served over HTTP on loopback at ``url``."""

    path: Path
    readme_at: dict[str, str]
    served: Path
    url: str


# The tests' worker, allowed to clone the repositories they serve on loopback.
CLONING = replace(SETTINGS, repos=LOOPBACK_REPOS)


@pytest.fixture
def repository(tmp_path: Path) -> Iterator[Repository]:
    """``project``, of three commits on ``main``: the first tagged ``v1``,
    the second (a commit, named by its hash) and the third, the branch's latest;
    served on loopback while the test runs (a run is never given a path)."""
    if shutil.which("git") is None:
        pytest.fail("The --repo tests need git on this machine")
    path = tmp_path / "project"
    (path / "src").mkdir(parents=True)
    git("init", "--quiet", "--initial-branch=main", cwd=path)
    (path / "src" / "app.py").write_text("print('hello')\n")
    readme_at = {}
    for version in ("first", "second", "third"):
        readme = f"the {version} version\n"
        (path / "README.md").write_text(readme)
        git("add", "--all", cwd=path)
        git("commit", "--quiet", "--message", version, cwd=path)
        if version == "first":
            git("tag", "v1", cwd=path)
            readme_at["v1"] = readme
        if version == "second":
            readme_at[git("rev-parse", "HEAD", cwd=path).strip()] = readme
    (tmp_path / "served").mkdir()
    served = bare_copy(path, tmp_path / "served")
    with serving(tmp_path / "served") as url:
        yield Repository(path, readme_at, served, f"{url}/{served.name}")


@pytest.mark.parametrize("at", ["tag", "commit"])
async def test_a_repository_is_cloned_at_its_ref_and_its_changes_apply_to_it(
    starter_env: Client,
    repository: Repository,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    at: str,
) -> None:
    [ref] = [ref for ref in repository.readme_at if (ref == "v1") == (at == "tag")]
    model = ScriptedModel(
        [
            "cd project && cat README.md && echo 'fixed by the agent' >> README.md"
            " && echo new > added.txt && rm src/app.py"
        ]
    )
    out = tmp_path / "out"
    request = RunRequest("Fix it.", repo=archives.repo_of(f"{repository.url}@{ref}"))
    async with running_worker(starter_env, model, settings=CLONING):
        status = await run(request, STARTER_SETTINGS, output=out)
    printed = capsys.readouterr()

    assert status == 0, printed
    # The agent worked on the ref asked for, not on the branch's latest.
    before = repository.readme_at[ref]
    assert before in printed.out
    written = files_under(out)
    assert sorted(written) == ["changes.patch", "project/README.md", "project/added.txt"]
    assert written["project/README.md"].decode() == before + "fixed by the agent\n"
    assert "Outputs: 2 files (" in printed.out and ", and changes.patch" in printed.out

    # The patch applies cleanly to a fresh clone at that ref, and makes it
    # what the agent left.
    fresh = tmp_path / "fresh"
    git("clone", "--quiet", str(repository.path), str(fresh), cwd=tmp_path)
    git("checkout", "--quiet", ref, cwd=fresh)
    git("apply", "--check", str(out / "changes.patch"), cwd=fresh)
    git("apply", str(out / "changes.patch"), cwd=fresh)
    assert (fresh / "README.md").read_bytes() == written["project/README.md"]
    assert (fresh / "added.txt").read_bytes() == written["project/added.txt"]
    assert not (fresh / "src" / "app.py").exists()
    assert git("status", "--porcelain", cwd=fresh).splitlines() == [
        " M README.md",
        " D src/app.py",
        "?? added.txt",
    ]


async def test_a_git_file_or_directory_in_the_repository_never_leads_git_elsewhere(
    starter_env: Client,
    repository: Repository,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A repository on the worker's host that the run was never given.
    secret = tmp_path / "secret"
    secret.mkdir()
    git("init", "--quiet", cwd=secret)
    (secret / "hidden.txt").write_text("the host's\n")
    git("add", "--all", cwd=secret)
    git("commit", "--quiet", "--message", "hidden", cwd=secret)
    head = git("rev-parse", "HEAD", cwd=secret).strip()
    # The agent points a .git file at it, and copies its .git in as a directory.
    model = ScriptedModel(
        [
            f"cd project && mkdir sub nested && echo 'gitdir: {secret}/.git' > sub/.git"
            f" && echo mine > sub/file.txt && cp -r {secret}/.git nested/.git"
            " && echo also > nested/file.txt",
            # And outside the repository, a repository of its own.
            "mkdir -p notes/.git/hooks && printf '[core]\\n\\tfsmonitor = touch /tmp/x\\n'"
            " > notes/.git/config && echo kept > notes/a.txt",
        ]
    )
    out = tmp_path / "out"
    request = RunRequest("Go.", repo=archives.repo_of(repository.url))
    async with running_worker(starter_env, model, settings=CLONING):
        status = await run(request, STARTER_SETTINGS, output=out)
    printed = capsys.readouterr()

    assert status == 0, printed
    patch = (out / "changes.patch").read_text()
    # Git saw two plain directories: neither the host's repository nor its HEAD.
    assert head not in patch and "Subproject" not in patch, patch
    assert "+++ b/sub/file.txt" in patch and "+++ b/nested/file.txt" in patch
    assert "hidden" not in patch and ".git" not in patch
    lines = printed.out.splitlines()
    for left_out in ("nested/.git", "sub/.git"):
        assert (
            f"  skipped  project/{left_out}: a .git inside the repository, left out of its patch"
        ) in lines
    # Nor does a .git come out anywhere: the user's git would run its config.
    assert files_under(out / "notes") == {"a.txt": b"kept\n"}
    assert (
        "  skipped  notes/.git: a git repository's own files (its config and hooks would run "
        "where it lands)"
    ) in lines


async def test_outputs_that_cannot_be_collected_are_withheld_and_the_answer_arrives(
    starter_env: Client, repository: Repository
) -> None:
    # The worker's clone and the repository it came from are gone (here the
    # agent, on the worker's own host, removes both) when the outputs are
    # collected: the patch cannot be made, for good.
    commit = git("rev-parse", "v1", cwd=repository.path).strip()
    repo = archives.repo_of(f"{repository.url}@v1")
    model = ScriptedModel([f"rm -rf {clone_dir(repo, commit)} {repository.served} && echo removed"])
    async with running_worker(starter_env, model, settings=CLONING) as (client, _):
        answer = await (await start(client, RunRequest("Go.", repo=repo))).result()

    assert "removed" in answer.answer
    withheld = answer.outputs.withheld
    assert withheld.startswith(
        f"they were not collected: the sandbox operation {project_service().sandbox_provider}-{COLLECT} failed "
        "with an error that retrying cannot fix: Cannot clone "
    ), withheld
    assert answer.outputs.archive == "" and answer.outputs.commit == commit


async def test_a_repository_or_ref_that_does_not_exist_fails_the_run_in_one_line(
    temporal_client: Client, repository: Repository, tmp_path: Path
) -> None:
    url = repository.url
    model = ScriptedModel(["ls"])
    async with running_worker(temporal_client, model, settings=CLONING) as (client, _):
        no_ref = await start(client, RunRequest("Look.", repo=archives.repo_of(f"{url}@nope")))
        no_ref_reason = await failure_of(no_ref)
        gone = archives.repo_of(url.replace("project.git", "gone.git"))
        no_repo_reason = await failure_of(await start(client, RunRequest("Look.", repo=gone)))

    assert "\n" not in no_ref_reason and "\n" not in no_repo_reason
    assert no_ref_reason.endswith(f"{url} has no branch, tag or commit 'nope'"), no_ref_reason
    assert no_repo_reason.endswith(f"Cannot clone {gone.url}: {NOT_CLONED}"), no_repo_reason
    # The agent never took a turn.
    assert model.input_sizes == []


async def test_an_input_named_like_the_repository_fails_the_run_in_one_line(
    temporal_client: Client, repository: Repository, tmp_path: Path
) -> None:
    # A client other than the starter (which refuses it: see the bad input
    # test below) asks for both in one directory.
    (tmp_path / "material" / "project").mkdir(parents=True)
    same_name = pack_input(tmp_path / "material" / "project")
    request = RunRequest("Look.", inputs=[same_name], repo=archives.repo_of(repository.url))
    model = ScriptedModel(["ls"])
    async with running_worker(temporal_client, model) as (client, _):
        handle = await start(client, request)
        reason = await failure_of(handle)

    assert reason == (
        "Two of the run's inputs (its repository's directory among them) are named "
        "'project': each needs a name of its own."
    )
    assert [step.name for step in await activities(handle) if step.is_sandbox_operation] == []
    assert model.input_sizes == []


# -------------------------------------------------------------- the store


@pytest.fixture(params=["file", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    """An object store of each kind: a directory, and a prefix of the tests'
    bucket on a real S3 API (moto's server, on loopback)."""
    if request.param == "file":
        return parse(f"file://{tmp_path}/object-store")
    request.getfixturevalue("s3_service")
    return parse(f"s3://{BUCKET}/test-{uuid.uuid4().hex[:8]}", region="us-east-1")


# A file as large as this goes through the store each way.
LARGE = 5_000_000


@pytest.mark.long
async def test_five_megabytes_in_and_out_travel_through_the_store_whole(
    starter_env: Client, store: ObjectStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    large = os.urandom(LARGE)
    (tmp_path / "large.bin").write_bytes(large)
    model = ScriptedModel(
        [
            f"sha256sum large.bin > large.sha256 && head -c {LARGE} /dev/urandom > made.bin"
            " && sha256sum made.bin"
        ]
    )
    out = tmp_path / "out"
    request = RunRequest(
        "Check it, and make another.", inputs=inputs_of([str(tmp_path / "large.bin")], True)
    )
    async with worker_storage(store) as storage:
        stored = client_with(starter_env, data_converter(storage))
        settings = replace(SETTINGS, object_store=store)
        async with running_worker(stored, model, settings=settings) as (client, _):
            starter_settings = replace(STARTER_SETTINGS, object_store=store)
            status = await run(request, starter_settings, output=out)
            printed = capsys.readouterr()
            history = await client.get_workflow_handle(started_id(printed.out)).fetch_history()

    assert status == 0, printed
    # Whole on the way in (the agent's checksum of what it found) and out.
    written = files_under(out)
    assert written["large.sha256"].split()[0].decode() == hashlib.sha256(large).hexdigest()
    made = written["made.bin"]
    assert len(made) == LARGE
    assert f"{hashlib.sha256(made).hexdigest()}  made.bin" in printed.out
    # No payload of history is anywhere near their size: the run's request,
    # the placing's input, the collecting's result and the run's answer are
    # references to the store.
    payloads = [payload for event in history.events for payload in payloads_in(event)]
    assert max(payload.ByteSize() for payload in payloads) < STORE_THRESHOLD
    references = [payload for payload in payloads if payload.external_payloads]
    assert len([ref for ref in references if ref.external_payloads[0].size_bytes > LARGE]) >= 4
    assert sum(len(data) > LARGE for data in (await objects_in(store)).values()) >= 4


# --------------------------------------------------------------- durability

# A run of two commands: the first reads an input and writes a file, the
# second reads that file and the directory input.
COUNT_THEN_READ = [
    "wc -l < data.csv > summary.txt",
    "cat summary.txt tree/sub/b.txt > seen.txt",
]


def assert_counted_and_read(written: dict[str, bytes]) -> None:
    assert written == {"summary.txt": b"12\n", "seen.txt": b"12\nb\n"}


async def handed_on(
    temporal_client: Client,
    tmp_path: Path,
    first_model: ScriptedModel,
    stalled: asyncio.Event,
    sandbox: BaseSandboxClient[Any] | None = None,
) -> WorkflowHandle[Any, RunAnswer]:
    """A run of COUNT_THEN_READ with inputs, on a first worker that stops
    at once (cancelling what it was doing, as a crash would) once
    ``stalled`` is set, then on a second worker to its end."""
    data, tree = material(tmp_path)
    request = RunRequest("Count, then read.", inputs=inputs_of([str(data), str(tree)], False))
    async with running_worker(
        temporal_client,
        first_model,
        sandbox,
        identity="first-worker",
        graceful_shutdown_timeout=timedelta(0),
        model_retry_policy=RETRIED_AT_ONCE,
    ) as (client, _):
        handle = await start(client, request)
        await asyncio.wait_for(stalled.wait(), timeout=20)
    async with running_worker(
        temporal_client, ScriptedModel(COUNT_THEN_READ), identity="second-worker"
    ):
        await handle.result()
    return handle


@pytest.mark.usefixtures("collect_dropped_runs")
@pytest.mark.filterwarnings(DROPPED_RUNS_CLOSED)
async def test_a_run_handed_on_after_its_inputs_were_placed_keeps_them_and_delivers_outputs(
    temporal_client: Client, tmp_path: Path
) -> None:
    # The first worker placed the inputs and ran the first command, then
    # went away while it waited for the model.
    stalling = StallsAfterTheFirstCommand(COUNT_THEN_READ)
    handle = await handed_on(temporal_client, tmp_path, stalling, stalling.stalled)

    result = await handle.result()
    write_outputs(result.outputs, tmp_path / "out")
    assert_counted_and_read(files_under(tmp_path / "out"))
    # Placed once, by the first worker; collected by the second.
    steps = await activities(handle)
    [place] = [
        step for step in steps if step.name == f"{project_service().sandbox_provider}-{PLACE}"
    ]
    [collect] = [
        step for step in steps if step.name == f"{project_service().sandbox_provider}-{COLLECT}"
    ]
    assert (place.worker, place.attempt) == ("first-worker", 1)
    assert collect.worker == "second-worker"


def stalls_in_collect(stalled: asyncio.Event) -> BaseSandboxClient[Any]:
    """The tests' sandbox, whose sessions never finish reading the workspace
    a second time (the first is when the inputs are placed, the second when
    the outputs are collected, in the session made then or in one resumed
    since): ``stalled`` is set then."""
    client = sandboxes_for_tests()[project_service().sandbox_provider]
    reads = 0

    def stalling(session: SandboxSession) -> SandboxSession:
        persist = session.persist_workspace

        async def persist_workspace() -> io.IOBase:
            nonlocal reads
            reads += 1
            if reads > 1:
                stalled.set()
                await asyncio.Future()  # until the worker stops and cancels it
            return await persist()

        session.persist_workspace = persist_workspace  # type: ignore[method-assign]
        return session

    create, resume = client.create, client.resume

    async def create_stalling(*args: Any, **kwargs: Any) -> SandboxSession:
        return stalling(await create(*args, **kwargs))

    async def resume_stalling(*args: Any, **kwargs: Any) -> SandboxSession:
        return stalling(await resume(*args, **kwargs))

    client.create = create_stalling  # type: ignore[method-assign]
    client.resume = resume_stalling  # type: ignore[method-assign]
    return client


@pytest.mark.usefixtures("collect_dropped_runs")
@pytest.mark.filterwarnings(DROPPED_RUNS_CLOSED)
async def test_a_run_whose_worker_stops_while_collecting_its_outputs_still_delivers_them(
    temporal_client: Client, tmp_path: Path
) -> None:
    stalled = asyncio.Event()
    model = ScriptedModel(COUNT_THEN_READ)
    handle = await handed_on(temporal_client, tmp_path, model, stalled, stalls_in_collect(stalled))

    result = await handle.result()
    write_outputs(result.outputs, tmp_path / "out")
    assert_counted_and_read(files_under(tmp_path / "out"))
    # The collecting was cut off on the first worker and done again on the
    # second; the inputs were placed once.
    steps = await activities(handle)
    [place] = [
        step for step in steps if step.name == f"{project_service().sandbox_provider}-{PLACE}"
    ]
    [collect] = [
        step for step in steps if step.name == f"{project_service().sandbox_provider}-{COLLECT}"
    ]
    assert (place.worker, place.attempt) == ("first-worker", 1)
    assert (collect.worker, collect.attempt) == ("second-worker", 2)


@pytest.mark.process
async def test_a_worker_killed_after_placing_the_inputs_leaves_inputs_and_outputs_intact(
    temporal_client: Client, tmp_path: Path
) -> None:
    data, tree = material(tmp_path)
    out = tmp_path / "out"
    address = temporal_client.service_client.config.target_host
    asked = [*STARTER, "--input", str(data), "--input", str(tree), "--output", str(out), "Count."]
    with scripted_openai_server(COUNT_THEN_READ) as model:
        # The model holds its answer to the first command's output until the
        # worker that asked for it has been killed.
        model.hold_at_step = 1
        environment = service_environment(address, model.url)
        async with (
            service(WORKER, environment) as first_worker,
            service(asked, environment) as asking,
        ):
            assert await asyncio.to_thread(model.reached.wait, 120), asking.output
            first_worker.process.send_signal(signal.SIGKILL)
            assert await first_worker.exit_status() == -signal.SIGKILL
            model.release.set()
            # The model call in flight is given up once its heartbeat is
            # missed, then made again to the new worker.
            async with service(WORKER, environment):
                status = await asking.exit_status(timeout=300)

    assert status == 0, asking.output
    assert f"  sandbox  input data.csv ({size_text(len(ROWS))}), tree/ (260 B)" in asking.output
    assert f"Wrote 2 files to {out}:" in asking.output
    assert_counted_and_read(files_under(out))


# ------------------------------------------------------------ bad input


@pytest.mark.process
async def test_the_starter_refuses_bad_input_in_one_line_leaving_nothing_behind(
    temporal_client: Client, tmp_path: Path
) -> None:
    # Temporal answers: a starter that went past a bad input would start a run.
    address = temporal_client.service_client.config.target_host
    environment = service_environment(address, "http://127.0.0.1:1")
    environment.pop("OBJECT_STORE_URL", None)
    a_file = tmp_path / "a-file.txt"
    a_file.write_text("kept\n")
    for each in ("a", "b"):
        (tmp_path / each).mkdir()
        (tmp_path / each / "data.csv").write_text(ROWS)
    large = tmp_path / "large.bin"
    large.write_bytes(b"\0" * (INLINE_FILES_LIMIT + 1))
    (tmp_path / "link").symlink_to(a_file)
    os.mkfifo(tmp_path / "fifo")
    out = tmp_path / "out"
    cases: list[tuple[list[str], str]] = [
        (["--input", "/no/such"], "ERROR: --input /no/such: no such file or directory."),
        (
            [
                "--input",
                str(tmp_path / "a" / "data.csv"),
                "--input",
                str(tmp_path / "b" / "data.csv"),
            ],
            "ERROR: --input: two inputs are named 'data.csv'; each must have its own name.",
        ),
        (
            ["--input", str(large)],
            f"ERROR: --input {large}: it weighs 1,048,577 bytes, over 1,048,576, the most a run "
            "takes without an object store: set OBJECT_STORE_URL (docs/object-store.md) for up "
            "to 105 MB.",
        ),
        (
            ["--input", str(tmp_path / "link")],
            f"ERROR: --input {tmp_path / 'link'}: {tmp_path / 'link'} is a symbolic link; "
            "send what it points to.",
        ),
        (
            ["--input", str(tmp_path / "fifo")],
            f"ERROR: --input {tmp_path / 'fifo'}: {tmp_path / 'fifo'} is not a regular file "
            "or a directory.",
        ),
        (
            ["--input", str(tmp_path / "a"), "--repo", "https://example.com/org/a.git@v1"],
            "ERROR: --repo https://example.com/org/a.git@v1: its directory 'a' is the name of "
            "an --input too; each must have its own name.",
        ),
        (
            ["--repo", "two words"],
            "ERROR: --repo 'two words': give a git URL, optionally @ a branch, tag or commit "
            "(https://github.com/org/repo@v1.2, git@github.com:org/repo@main).",
        ),
    ]

    def starter(arguments: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*STARTER, *arguments, "Look."],
            env=environment,
            capture_output=True,
            text=True,
            timeout=120,
        )

    runs_before = (await temporal_client.count_workflows()).count
    ran = await asyncio.gather(
        *(asyncio.to_thread(starter, [*arguments, "--output", str(out)]) for arguments, _ in cases),
        asyncio.to_thread(starter, ["--output", str(a_file)]),
    )

    for (arguments, line), done in zip(cases, ran, strict=False):
        assert done.returncode == EXIT_USAGE, done
        assert done.stdout == "" and done.stderr.splitlines() == [line], (arguments, done)
    # --output naming a file: argparse's usage, then the one line.
    refused = ran[-1]
    assert refused.returncode == EXIT_USAGE, refused
    assert "Traceback" not in refused.stderr and refused.stdout == ""
    assert refused.stderr.splitlines()[-1].endswith(
        f"error: --output {a_file}: it exists and is not a directory"
    )
    # Nothing left behind: no DIR made, the file kept, no run started.
    assert not out.exists()
    assert a_file.read_text() == "kept\n"
    assert (await temporal_client.count_workflows()).count == runs_before


# Runs a command, then prints its exit status and its peak resident set
# (KiB), from a small process of its own: Linux counts in a process's peak the
# memory of the one it was started from (the tests' process, large).
MEASURED = (
    "import os, subprocess, sys; "
    "child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL); "
    "_, status, usage = os.wait4(child.pid, 0); "
    "print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)"
)


def peak_memory_of(command: list[str], environment: dict[str, str]) -> tuple[int, str, int]:
    """Run ``command`` to its end: its exit status, what it printed on
    stderr, and its peak resident set in bytes."""
    done = subprocess.run(
        [sys.executable, "-c", MEASURED, *command],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    status, peak = done.stdout.split()
    return int(status), done.stderr, int(peak) * 1024


@pytest.mark.process
async def test_inputs_are_counted_before_a_byte_is_read_and_refused_past_any_limit(
    temporal_client: Client, tmp_path: Path
) -> None:
    address = temporal_client.service_client.config.target_host
    environment = service_environment(address, "http://127.0.0.1:1")
    environment.pop("OBJECT_STORE_URL", None)
    # 1 GiB that takes no room on disk, and would take 1 GiB of memory to read whole.
    sparse = tmp_path / "sparse.bin"
    with sparse.open("wb") as file:
        file.truncate(1024**3)
    # A directory of one empty file too many, and two of just over half as
    # many each, over it together (directories are not counted).
    many, first, second = tmp_path / "many", tmp_path / "first", tmp_path / "second"
    for directory, count in (
        (many, MOST_FILES + 1),
        (first, MOST_FILES // 2 + 1),
        (second, MOST_FILES // 2 + 1),
    ):
        directory.mkdir()
        for number in range(count):
            (directory / str(number)).touch()
    # Few files, with long names: their list alone is over LONGEST_LISTING.
    named = tmp_path / "named"
    named.mkdir()
    names = sorted(f"{number:04d}{'x' * 246}" for number in range(2_100))
    for name in names:
        (named / name).touch()
    # Counted, its list of paths stops once past the limit.
    listed = len("named")
    for name in names:
        listed += len(f"named/{name}")
        if listed > LONGEST_LISTING:
            break
    cases: list[tuple[list[str], str]] = [
        (
            [str(sparse)],
            f"ERROR: --input {sparse}: it weighs 1.1 GB, over 1.0 MB, the most a run takes "
            "without an object store: set OBJECT_STORE_URL (docs/object-store.md) for up to 105 MB.",
        ),
        (
            [str(many)],
            f"ERROR: --input {many}: it holds {MOST_FILES + 1:,} files; a run "
            f"takes at most {MOST_FILES:,} (MOST_FILES).",
        ),
        (
            [str(first), str(second)],
            f"ERROR: --input: the inputs hold in all {MOST_FILES + 2:,} files; "
            f"a run takes at most {MOST_FILES:,} (MOST_FILES).",
        ),
        (
            [str(named)],
            f"ERROR: --input {named}: its paths weigh at least {listed:,} bytes; a run's list "
            f"of files takes at most {LONGEST_LISTING:,} (LONGEST_LISTING).",
        ),
        (
            # A file whose size (0, for the kernel's files) is not what reading it gives:
            # it would be sent torn.
            ["/proc/self/status"],
            "ERROR: --input /proc/self/status: /proc/self/status changed while it was read; "
            "send it once it no longer changes.",
        ),
    ]

    def starter(paths: list[str]) -> tuple[int, str, int]:
        # Temporal answers: a starter that went past the input would start a
        # run, and exit (--no-wait).
        inputs = [argument for path in paths for argument in ("--input", path)]
        return peak_memory_of([*STARTER, "--no-wait", *inputs, "Look."], environment)

    runs_before = (await temporal_client.count_workflows()).count
    ran = await asyncio.gather(*(asyncio.to_thread(starter, paths) for paths, _ in cases))

    # The sparse file was never read whole: the starter's memory stayed far below its size.
    _, _, peak = ran[0]
    assert peak < 300_000_000, f"the starter's peak memory: {peak:,} bytes"
    for (paths, line), (status, printed, _) in zip(cases, ran, strict=True):
        assert (status, printed.splitlines()) == (EXIT_USAGE, [line]), paths
    assert (await temporal_client.count_workflows()).count == runs_before


def forged_input(name: str, files: int) -> Input:
    """An ``Input`` no starter would send: a directory of ``files`` empty files."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(member(name, tarfile.DIRTYPE))
        for number in range(files):
            tar.addfile(member(f"{name}/{number}"), io.BytesIO())
    data = buffer.getvalue()
    return Input(name, "directory", 0, files, archives.encoded(data), archives.sha256(data))


def test_the_worker_refuses_a_forged_input_for_good_in_one_line() -> None:
    # Each is an UnsafeName: the place step fails once, not retried (UnsafeInput).
    garbage = b"not a tar archive"
    not_tar = Input("data", "file", 0, 1, archives.encoded(garbage), archives.sha256(garbage))
    with pytest.raises(archives.UnsafeName, match="^input 'data': not a tar archive"):
        archives.input_archive(not_tar)
    with pytest.raises(archives.TooMuch) as too_many:
        archives.input_archive(forged_input("many", MOST_FILES + 1))
    assert str(too_many.value) == (
        f"input 'many': over {MOST_FILES:,} files, the most a run takes (MOST_FILES)"
    )
    # Just within (directories are not counted): placed.
    assert archives.input_archive(forged_input("many", MOST_FILES))


async def test_a_forged_input_over_the_limits_fails_the_run_at_once_in_one_line(
    temporal_client: Client,
) -> None:
    # A client other than the starter sends what the starter refuses.
    model = ScriptedModel(["ls"])
    async with running_worker(temporal_client, model) as (client, _):
        request = RunRequest("Look.", inputs=[forged_input("many", MOST_FILES + 1)])
        handle = await start(client, request)
        reason = await failure_of(handle)

    assert "\n" not in reason
    assert reason.endswith(
        f"input 'many': over {MOST_FILES:,} files, the most a run takes (MOST_FILES)"
    ), reason
    # Placing failed once, for good; the agent never took a turn.
    [place] = [step for step in await activities(handle) if step.name.endswith(PLACE)]
    assert place.attempt == 1
    assert model.input_sizes == []
