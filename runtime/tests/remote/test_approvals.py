"""A person approves what the agent runs (approvals.py), with the real
worker, the real local sandbox and a scripted model: approved commands run,
rejected ones never do and the model reads why, nobody's answer rejects at
the timeout, a worker restart loses nothing, and the starter asks on a
terminal or prints the commands that decide.

And tried as an attacker would: a request shows exactly what would run,
whatever bytes a hostile model puts in it, both in ``--pending`` and on a
real terminal; a process in the sandbox that reaches Temporal cannot decide;
only a decision signed by an approver counts."""

import asyncio
import json
import os
import pty
import sys
import unicodedata
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.worker import Replayer

from sandbox_agent_runtime import starter
from sandbox_agent_runtime.observability import APPROVAL_WAIT, APPROVALS
from sandbox_agent_runtime.owners import service_memo
from sandbox_agent_runtime.run_request import RunAnswer, RunRequest
from sandbox_agent_runtime.shared import DECIDE, END, PENDING
from sandbox_agent_runtime.starter import (
    EXIT_COMPLETED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    approving,
    list_pending,
    start,
)
from sandbox_agent_runtime.testing import project, project_service
from sandbox_agent_runtime.testing.approver import decide, run_id_of, signed
from sandbox_agent_runtime.testing.conversing import Conversing, answered, follow_up, printed
from sandbox_agent_runtime.testing.handovers import start_as, workspaces_used
from sandbox_agent_runtime.testing.long_workflow import (
    ContinuesBetweenPromptsWorkflow,
    ImpatientApprovalWorkflow,
    LongSandboxAgentWorkflow,
)
from sandbox_agent_runtime.testing.processes import STARTER, service, service_environment
from sandbox_agent_runtime.testing.scripted_model import (
    Call,
    KeepsInputs,
    ScriptedModel,
    tool_outputs,
)
from sandbox_agent_runtime.testing.support import (
    DROPPED_RUNS_CLOSED,
    SETTINGS,
    STARTER_SETTINGS,
    metered_client,
    running_worker,
    sandboxes_for_tests,
)
from sandbox_agent_runtime.worker import agents_plugin

# How long a test waits for a request to show.
SHOWS_WITHIN = 15


async def requests_of(handle: WorkflowHandle[Any, Any], count: int = 1) -> list[dict[str, Any]]:
    """The requests waiting in a run, once there are ``count``."""
    async with asyncio.timeout(SHOWS_WITHIN):
        while True:
            found = await handle.query(PENDING, result_type=list)
            if len(found) >= count:
                return [dict(request) for request in found]
            await asyncio.sleep(0.05)


async def refusal(handle: WorkflowHandle[Any, Any], decision: dict[str, Any]) -> str:
    """Why the run refused ``decision``."""
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await handle.execute_update(DECIDE, decision, result_type=str)
    return str(getattr(refused.value.cause, "message", refused.value.cause))


async def updates_in(handle: WorkflowHandle[Any, Any]) -> int:
    """Updates the run's history records (a validator's refusal leaves none)."""
    return len(
        [
            event
            async for event in handle.fetch_history_events()
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
        ]
    )


async def test_an_approved_command_runs_and_its_output_reaches_the_model(
    temporal_client: Client,
) -> None:
    model = ScriptedModel(["printf 'it ran\\n' > made.txt && cat made.txt"])
    async with running_worker(temporal_client, model, approve=False) as (client, _):
        handle = await start(client, "Make a file.")
        [request] = await requests_of(handle)
        assert request["tool"] == "exec_command"
        assert request["detail"] == (
            "$ printf 'it ran\\n' > made.txt && cat made.txt\n"
            "runs in: sh -c (not a login shell), in the workspace"
        )
        # The Web UI shows what the run waits for (its current details).
        metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
        assert metadata.current_details.startswith(
            f"Waiting for a person to approve exec_command (call {request['call_id']})"
        ), metadata.current_details
        assert await decide(handle, request, True) == "approved"
        answer = (await handle.result()).answer
    assert answer.endswith("it ran\n"), answer


async def test_a_rejected_command_never_runs_and_the_model_reads_why(
    temporal_client: Client,
) -> None:
    model = KeepsInputs(["touch rejected.txt", "ls -a"])
    async with running_worker(temporal_client, model, approve=False) as (client, _):
        handle = await start(client, "Make a file, then list them.")
        [first] = await requests_of(handle)
        await decide(handle, first, False, reason="not that file")
        second = await requests_of(handle)
        assert [request["detail"].splitlines()[0] for request in second] == ["$ ls -a"]
        await decide(handle, second[0], True)
        answer = (await handle.result()).answer
    # The model read the reason as the command's result; the file was never made.
    assert any("not that file" in output for output in tool_outputs(model.inputs[1])), model.inputs[
        1
    ]
    assert "rejected.txt" not in answer and "." in answer.split(), answer
    # The run replays, its decisions included.
    await Replayer(
        workflows=[project().workflow],
        plugins=[agents_plugin(SETTINGS, sandboxes=sandboxes_for_tests())],
    ).replay_workflow(await handle.fetch_history())


async def test_a_request_nobody_answers_is_rejected_at_the_timeout_and_the_run_goes_on(
    temporal_client: Client,
) -> None:
    model = ScriptedModel(["touch late.txt"])
    async with (
        metered_client(temporal_client) as (metered, metrics),
        running_worker(metered, model, workflows=[ImpatientApprovalWorkflow], approve=False) as (
            client,
            _,
        ),
    ):
        handle = await start_as(
            client, ImpatientApprovalWorkflow, project_service().sandbox_provider
        )
        answer = (await handle.result()).answer
        assert answer == "Rejected: no one approved it within 1 s.", answer
        assert await metrics.total(APPROVALS, decision="timed_out") == 1
        # It waited the timeout, 1 s, by the wait's histogram (in ms).
        waits = {
            labels["le"]: count
            for labels, count in (await metrics.scrape())[APPROVAL_WAIT]
            if labels.get("decision") == "timed_out" and "le" in labels
        }
        assert (waits["500"], waits["2500"]) == (0, 1), waits


def last_turn(shown: str) -> str:
    """The answer a starter on a terminal showed as it was written: its
    last model turn's text, above "Answer: as written above"."""
    assert "Answer: as written above" in shown, shown
    return shown.rpartition("model    turn")[2].partition("Answer: as written above")[0]


@pytest.mark.usefixtures("collect_dropped_runs")
@pytest.mark.filterwarnings(DROPPED_RUNS_CLOSED)
async def test_a_decision_sent_after_the_worker_restarted_applies_in_the_same_sandbox(
    temporal_client: Client,
) -> None:
    commands = ["printf 'before\\n' > kept.txt", "cat kept.txt"]
    async with running_worker(
        temporal_client,
        ScriptedModel(commands),
        approve=False,
        graceful_shutdown_timeout=timedelta(0),
    ) as (client, _):
        handle = await start(client, "Write, then read.")
        [first] = await requests_of(handle)
        await decide(handle, first, True)
        await requests_of(handle)  # the second command waits
    # That worker is gone; the next one rebuilds the run from its history.
    async with running_worker(temporal_client, ScriptedModel(commands), approve=False) as (
        client,
        _,
    ):
        handle = client.get_workflow_handle(handle.id, result_type=RunAnswer)
        [second] = await requests_of(handle)
        await decide(handle, second, True)
        answer = (await handle.result()).answer
    assert answer.endswith("before\n"), answer
    assert len(await workspaces_used(handle)) == 1


async def test_a_decision_on_an_unknown_or_decided_call_is_refused_and_never_recorded(
    temporal_client: Client,
) -> None:
    async with running_worker(temporal_client, ScriptedModel(["true"]), approve=False) as (
        client,
        _,
    ):
        handle = await start(client, "Do nothing.")
        [request] = await requests_of(handle)
        run_id = await run_id_of(handle)
        bogus = signed(handle.id, run_id, {**request, "call_id": "call_bogus"}, True)
        assert "no request 'call_bogus' waits" in await refusal(handle, bogus)
        await decide(handle, request, True)
        again = signed(handle.id, run_id, request, True)
        assert "was already decided" in await refusal(handle, again)
        await handle.result()
        assert await updates_in(handle) == 1


async def test_always_approves_the_tool_for_the_rest_of_the_run(temporal_client: Client) -> None:
    async with running_worker(
        temporal_client, ScriptedModel(["echo one", "echo two"]), approve=False
    ) as (
        client,
        _,
    ):
        handle = await start(client, "Say one, then two.")
        [request] = await requests_of(handle)
        await decide(handle, request, True, always=True)
        # The second command runs without waiting for anyone.
        answer = (await handle.result()).answer
    assert answer.endswith("two\n"), answer
    assert await updates_in(handle) == 1


async def test_always_holds_in_a_conversation_that_continued_as_new_between_prompts(
    temporal_client: Client,
) -> None:
    """A tool approved for the rest of the run stays approved in the next
    run of its chain, which starts by waiting for the follow-up: the
    follow-up's command runs without asking anyone."""
    model = Conversing([["echo one"], ["echo two"]])
    async with running_worker(
        temporal_client, model, approve=False, workflows=[ContinuesBetweenPromptsWorkflow]
    ) as (client, _):
        handle = await client.start_workflow(
            ContinuesBetweenPromptsWorkflow.run,
            RunRequest("Say one.", follow_ups=True),
            id=f"{project_service().task_queue}-{uuid.uuid4()}",
            task_queue=project_service().task_queue,
        )
        [request] = await requests_of(handle)
        await decide(handle, request, True, always=True)
        await answered(handle, 1)
        # The first run answered, then handed the conversation on.
        while (await handle.describe()).run_id == handle.first_execution_run_id:
            await asyncio.sleep(0.05)
        latest = client.get_workflow_handle(handle.id)
        await follow_up(latest, "Now say two.")
        async with asyncio.timeout(SHOWS_WITHIN):
            second = await answered(latest, 2)
        await latest.execute_update(END)
        await latest.result()
    assert second.answer is not None and printed(second.answer) == ["two"]
    assert await updates_in(latest) == 2  # the follow-up and the end: no decision


def starter_environment(starter_env: Client) -> dict[str, str]:
    """What a user exports to run the starter against the tests' server."""
    return {
        **service_environment(starter_env.service_client.config.target_host, ""),
        **{name: value for name, value in os.environ.items() if name.startswith("TEMPORAL_")},
    }


class Terminal:
    """A process on a pseudo-terminal: what it printed, and a keyboard."""

    def __init__(self, fd: int, process: asyncio.subprocess.Process) -> None:
        self.fd, self.process, self.output = fd, process, ""
        # Every byte the terminal received, as it came.
        self.received = b""
        # Where the text last read until ends: each read looks past it.
        self.read = 0

    async def read_until(self, text: str, timeout: float = 30) -> str:
        """What the terminal shows from the last text read until to ``text``."""
        async with asyncio.timeout(timeout):
            while text not in self.output[self.read :]:
                try:
                    chunk = await asyncio.to_thread(os.read, self.fd, 4096)
                except OSError:
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"ended before {text!r}: {self.output}")
                self.received += chunk
                self.output += chunk.decode(errors="replace")
        start = self.read
        self.read = self.output.index(text, start) + len(text)
        return self.output[start : self.read]

    def type(self, line: str) -> None:
        os.write(self.fd, f"{line}\n".encode())

    def end_of_input(self) -> None:
        """Ctrl-D, at the start of a line."""
        os.write(self.fd, b"\x04")


@asynccontextmanager
async def starter_on_a_terminal(
    environment: dict[str, str], *arguments: str
) -> AsyncIterator[Terminal]:
    """The real starter, its input and output a pseudo-terminal."""
    main, terminal = pty.openpty()
    process = await asyncio.create_subprocess_exec(
        *STARTER, *arguments, stdin=terminal, stdout=terminal, stderr=terminal, env=environment
    )
    os.close(terminal)
    try:
        yield Terminal(main, process)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        os.close(main)


@pytest.mark.process
async def test_the_starter_asks_on_a_terminal_and_sends_each_answer(
    temporal_client: Client, starter_env: Client, tmp_path: Path
) -> None:
    commands = ["touch yes.txt", "touch no.txt", "ls"]
    async with running_worker(temporal_client, ScriptedModel(commands), approve=False):
        environment = starter_environment(starter_env)
        main, terminal = pty.openpty()
        process = await asyncio.create_subprocess_exec(
            *STARTER,
            "Touch two files, then list them.",
            stdin=terminal,
            stdout=terminal,
            stderr=terminal,
            env=environment,
        )
        os.close(terminal)
        screen = Terminal(main, process)
        try:
            await screen.read_until("$ touch yes.txt")
            await screen.read_until("Run this? [y/N/a(lways)/r(eason)]")
            screen.type("y")
            await screen.read_until("$ touch no.txt")
            await screen.read_until("Run this?", timeout=30)
            screen.type("r")
            await screen.read_until("reason:")
            screen.type("not that one")
            await screen.read_until("$ ls")
            screen.type("y")
            await screen.read_until("Usage:")
            status = await asyncio.wait_for(process.wait(), 30)
        finally:
            if process.returncode is None:
                process.kill()
            os.close(main)
    assert status == 0, screen.output
    answer = last_turn(screen.output)
    assert "yes.txt" in answer and "no.txt" not in answer, screen.output


@pytest.mark.process
async def test_off_a_terminal_the_starter_prints_the_commands_that_decide(
    temporal_client: Client, starter_env: Client
) -> None:
    async with running_worker(
        temporal_client, ScriptedModel(["echo decided-later"]), approve=False
    ):
        environment = starter_environment(starter_env)
        async with service([*STARTER, "Say it."], environment) as following:
            await following.wait_for("approve: ")
            line = next(line for line in following.output if "approve: " in line)
            approve = line.split("approve: ", 1)[1].split()
            workflow_id, call_id = approve[-2], approve[-1]
            async with service([*STARTER, "--pending", workflow_id], environment) as pending:
                assert await pending.exit_status() == 0
            assert any("echo decided-later" in line for line in pending.output), pending.output
            async with service(
                [*STARTER, "--approve", workflow_id, "call_bogus"], environment
            ) as bogus:
                assert await bogus.exit_status() == 3
            assert "no request 'call_bogus' waits" in bogus.output[-1], bogus.output
            async with service(
                [*STARTER, "--approve", workflow_id, call_id], environment
            ) as decided:
                assert await decided.exit_status() == 0
            assert await following.exit_status() == 0
    assert following.output[-1].startswith("Usage:"), following.output
    assert any(line == "decided-later" for line in following.output), following.output


ESC = "\x1b"
# What a hostile model asks to run, made to look like something else on a
# terminal; and the part that would run, which the person must be shown (each
# of its lines).
DISPLAY_ATTACKS: list[tuple[str, str | Call, str]] = [
    ("erase line", f"touch x #{ESC}[2K{ESC}[1G   $ ls -la", "touch x"),
    ("cursor up", f"touch x{ESC}[1A{ESC}[2K$ ls -la", "touch x"),
    ("carriage return", "touch x\r$ ls -la", "touch x"),
    ("backspace", "touch x;" + "\b" * 8 + "ls -la  ", "touch x"),
    (
        "OSC 8 link",
        f"{ESC}]8;;https://example.com{ESC}\\ls -la{ESC}]8;;{ESC}\\; touch x",
        "touch x",
    ),
    ("OSC 2 title", f"touch x{ESC}]2;ls -la{ESC}\\", "touch x"),
    ("OSC 52 clipboard", f"ls{ESC}]52;c;dG91Y2ggeA=={ESC}\\; touch x", "touch x"),
    ("SGR 8 concealed", f"ls -la {ESC}[8m; touch x{ESC}[0m", "touch x"),
    ("bidi override", "ls -la #\u202e x hcuot ;", "x hcuot ;"),
    ("zero width", "l\u200bs -la; touch x", "touch x"),
    ("2,100 spaces", "ls -la" + " " * 2_100 + "; touch x", "touch x"),
    (
        "hidden shell",
        Call("exec_command", json.dumps({"cmd": "ls", "shell": "/some/binary"})),
        "/some/binary",
    ),
    (
        "decoy patch field",
        Call(
            "apply_patch",
            json.dumps(
                {
                    "cmd": "ls -la",
                    "operation": {"type": "create_file", "path": "evil.sh", "diff": "+rm -rf ~\n"},
                }
            ),
            custom=True,
        ),
        "add evil.sh\n+rm -rf ~",
    ),
]


def raw_controls(text: str) -> list[str]:
    """The characters of ``text`` that a terminal acts on or shows as
    nothing: controls but the line feed, and Unicode's format characters."""
    return [
        character
        for character in text
        if character != "\n" and unicodedata.category(character) in ("Cc", "Cf", "Zl", "Zp")
    ]


async def test_pending_shows_every_hostile_request_as_it_would_run(
    temporal_client: Client, starter_env: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    model = ScriptedModel([attack for _, attack, _ in DISPLAY_ATTACKS])
    # More calls than a service's MAX_TURNS may allow: the long-run workflow.
    long = [LongSandboxAgentWorkflow]
    async with running_worker(temporal_client, model, approve=False, workflows=long) as (
        client,
        _,
    ):
        handle = await start_as(
            client, LongSandboxAgentWorkflow, project_service().sandbox_provider
        )
        for number, (name, _, runs) in enumerate(DISPLAY_ATTACKS):
            [request] = await requests_of(handle)
            assert request["call_id"] == f"call_{number}", name
            # What every client gets (the Web UI, the CLI, a script) holds
            # no control byte: the run made it visible, not the starter.
            assert raw_controls(request["detail"]) == [], (name, request["detail"])
            metadata = await handle.query(
                "__temporal_workflow_metadata", result_type=WorkflowMetadata
            )
            assert raw_controls(metadata.current_details) == [], name
            capsys.readouterr()
            assert await list_pending(handle.id) == EXIT_COMPLETED
            shown = capsys.readouterr().out
            assert all(line in shown for line in runs.split("\n")), (name, shown)
            assert raw_controls(shown) == [], (name, shown)
            # Whole: nothing of it is cut.
            assert "more characters" not in shown, (name, shown)
            await decide(handle, request, False, reason="not that")
        await handle.result()


async def test_a_long_command_is_shown_whole_and_its_end_too(
    temporal_client: Client, starter_env: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    command = "echo " + "a" * 5_000 + "; touch hidden-at-the-end"
    async with running_worker(temporal_client, ScriptedModel([command]), approve=False) as (
        client,
        _,
    ):
        handle = await start(client, "Say a lot.")
        [request] = await requests_of(handle)
        assert await list_pending(handle.id) == EXIT_COMPLETED
        assert command in capsys.readouterr().out
        await decide(handle, request, False)
        await handle.result()


# Run by the agent in its sandbox: decide every request that waits, as the
# sandbox can reach Temporal, unsigned and then signed with a key of its own;
# write down what the run answered.
SELF_APPROVER = """
import asyncio, sys
from temporalio.client import Client
from sandbox_agent_runtime import approvers
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

async def main(address, workflow_id, log):
    handle = (await Client.connect(address)).get_workflow_handle(workflow_id)
    key = Ed25519PrivateKey.generate()
    while True:
        description = await handle.describe()
        for request in await handle.query("pending", result_type=list):
            signed = approvers.message(workflow_id, description.run_id, request, True, True, "")
            approver, signature = approvers.sign(key, signed)
            for decision in (
                {"call_id": request["call_id"], "approve": True, "always": True},
                {"call_id": request["call_id"], "approve": True, "always": True,
                 "approver": approver, "signature": signature},
            ):
                try:
                    await handle.execute_update("decide", decision)
                    outcome = "accepted"
                except Exception as e:
                    outcome = "refused: " + str(getattr(e.cause, "message", e))
                with open(log, "a") as file:
                    file.write(outcome + "\\n")
            return
        await asyncio.sleep(0.1)

asyncio.run(main(*sys.argv[1:]))
"""


async def test_a_process_in_the_sandbox_cannot_decide_and_the_call_waits_for_a_person(
    temporal_client: Client, tmp_path: Path
) -> None:
    script, log = tmp_path / "approve_myself.py", tmp_path / "outcomes.txt"
    script.write_text(SELF_APPROVER)
    address = temporal_client.service_client.config.target_host
    workflow_id = f"self-approval-{uuid.uuid4()}"
    commands = [
        f"setsid {sys.executable} {script} {address} {workflow_id} {log} >/dev/null 2>&1 &",
        "touch approved-by-nobody",
    ]
    model = KeepsInputs(commands)
    async with running_worker(temporal_client, model, approve=False) as (client, _):
        handle = await start(client, "Approve yourself.", workflow_id=workflow_id)
        [first] = await requests_of(handle)
        await decide(handle, first, True)
        async with asyncio.timeout(SHOWS_WITHIN):
            while len(log.read_text().splitlines() if log.exists() else []) < 2:
                await asyncio.sleep(0.1)
        unsigned, self_signed = log.read_text().splitlines()
        assert unsigned.startswith("refused: the decision is not signed by an approver"), unsigned
        assert self_signed.startswith("refused: the decision is signed by a key that is not"), (
            self_signed
        )
        # The call still waits, for a person, who rejects it.
        [second] = await requests_of(handle)
        assert second["call_id"] == "call_1"
        await decide(handle, second, False, reason="no")
        await handle.result()
    assert await updates_in(handle) == 2
    assert "no" in tool_outputs(model.inputs[-1])[-1]


async def test_a_decision_signed_over_another_request_is_refused(temporal_client: Client) -> None:
    async with running_worker(temporal_client, ScriptedModel(["touch x"]), approve=False) as (
        client,
        _,
    ):
        handle = await start(client, "Touch x.")
        [request] = await requests_of(handle)
        run_id = await run_id_of(handle)
        # Signed by the approver, but over what another request showed.
        shown_otherwise = signed(handle.id, run_id, {**request, "detail": "$ ls"}, True)
        assert "does not match this request" in await refusal(handle, shown_otherwise)
        # Or over a rejection, then sent as an approval.
        flipped = {**signed(handle.id, run_id, request, False), "approve": True}
        assert "does not match this request" in await refusal(handle, flipped)
        await decide(handle, request, False)
        await handle.result()
    assert await updates_in(handle) == 1


async def test_a_malformed_call_is_shown_as_running_nothing_and_the_run_goes_on(
    temporal_client: Client,
) -> None:
    model = ScriptedModel([Call("exec_command", "not JSON"), "echo after"])
    async with running_worker(temporal_client, model, approve=False) as (client, _):
        handle = await start(client, "Make a mistake.")
        [request] = await requests_of(handle)
        assert request["detail"].startswith("runs nothing: the call is malformed"), request
        await decide(handle, request, True)
        [after] = await requests_of(handle)
        await decide(handle, after, True)
        assert (await handle.result()).answer.endswith("after\n")


async def test_the_starter_refuses_to_decide_in_a_run_that_has_ended(
    temporal_client: Client,
    starter_env: Client,
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with running_worker(temporal_client, ScriptedModel(["true"])) as (client, _):
        handle = await start(client, "Do nothing.")
        await handle.result()
    key_file = STARTER_SETTINGS.approver_key_file
    assert await starter.decide(handle.id, "call_0", True, "", False, key_file) == EXIT_USAGE
    assert "has ended (completed)" in capsys.readouterr().err


@pytest.mark.process
async def test_pending_with_no_worker_running_says_so_in_one_line_in_bounded_time(
    temporal_client: Client, starter_env: Client
) -> None:
    # A run no worker runs answers no query.
    waiting = await temporal_client.start_workflow(
        f"{project_service().name}-no-such-worker",
        id=f"nobody-{uuid.uuid4()}",
        task_queue="nobody",
        # This service's run all the same (owners.py), as the starter records it.
        memo=service_memo(),
    )
    environment = starter_environment(starter_env)
    try:
        for command in (["--pending", waiting.id], ["--approve", waiting.id, "call_0"]):
            async with service([*STARTER, *command], environment) as asked:
                assert await asked.exit_status() == EXIT_UNREACHABLE, asked.output
            assert len(asked.output) == 1 and "no worker answered" in asked.output[0], asked.output
    finally:
        await waiting.terminate()


@pytest.mark.process
async def test_on_a_terminal_every_hostile_request_shows_what_would_run_and_no_control_byte(
    temporal_client: Client, starter_env: Client
) -> None:
    model = ScriptedModel([attack for _, attack, _ in DISPLAY_ATTACKS])
    # More calls than a service's MAX_TURNS may allow: the long-run workflow,
    # which the starter follows (and asks for) as it follows any run.
    long = [LongSandboxAgentWorkflow]
    async with running_worker(temporal_client, model, approve=False, workflows=long) as (
        client,
        _,
    ):
        handle = await start_as(
            client, LongSandboxAgentWorkflow, project_service().sandbox_provider
        )
        environment = starter_environment(starter_env)
        async with starter_on_a_terminal(environment, "--attach", handle.id) as screen:
            for name, _, runs in DISPLAY_ATTACKS:
                shown = await screen.read_until("Run this? [y/N/a(lways)/r(eason)]")
                assert all(line in shown for line in runs.split("\n")), (name, shown)
                screen.type("n")
            await screen.read_until("Usage:")
            status = await asyncio.wait_for(screen.process.wait(), 30)
    assert status == 0, screen.output
    # The pseudo-terminal turns each line feed into CR LF; nothing else the
    # starter wrote is a control byte, and no escape sequence reached it.
    received = screen.received.replace(b"\r\n", b"\n").decode()
    assert raw_controls(received) == [], [
        unicodedata.name(c, hex(ord(c))) for c in raw_controls(received)
    ]


@pytest.mark.process
async def test_ctrl_d_at_the_prompt_is_not_now_and_the_starter_says_how_to_decide_later(
    temporal_client: Client, starter_env: Client
) -> None:
    async with running_worker(temporal_client, ScriptedModel(["echo later"]), approve=False) as (
        client,
        _,
    ):
        environment = starter_environment(starter_env)
        async with starter_on_a_terminal(environment, "Say it later.") as screen:
            await screen.read_until("Run this?")
            screen.end_of_input()
            await screen.read_until("not now")
            await screen.read_until("approve: ")
            # Still following: decided elsewhere, the run goes on to its answer.
            workflow_id = screen.output.split("Started workflow ", 1)[1].split()[0]
            handle = client.get_workflow_handle(workflow_id)
            [request] = await requests_of(handle)
            await decide(handle, request, True)
            await screen.read_until("Usage:")
            status = await asyncio.wait_for(screen.process.wait(), 30)
    assert status == 0, screen.output
    assert "later" in last_turn(screen.output), screen.output


async def test_a_quiet_run_is_asked_less_and_less_often_and_soon_once_its_history_moves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The starter's pace (approving.next_ask), faster than its real one.
    monkeypatch.setattr(approving, "ASK_SOON", timedelta(seconds=0.05))
    monkeypatch.setattr(approving, "ASK_AT_LEAST_EVERY", timedelta(seconds=0.8))
    loop = asyncio.get_running_loop()
    moved = asyncio.Event()
    wait = approving.ASK_SOON
    for expected in (0.1, 0.2, 0.4, 0.8, 0.8):
        began = loop.time()
        waited = wait.total_seconds()
        wait = await approving.next_ask(moved, wait)
        # Quiet: it waited the whole wait, and the next is twice as long, up to the longest.
        assert waited <= loop.time() - began < waited + 0.3
        assert wait.total_seconds() == expected
    # The history moves early in the longest wait: asked ASK_SOON later, not
    # at the wait's end, and soon again after.
    began = loop.time()
    loop.call_later(0.1, moved.set)
    assert await approving.next_ask(moved, wait) == approving.ASK_SOON
    assert 0.15 <= loop.time() - began < 0.6
    assert not moved.is_set()
