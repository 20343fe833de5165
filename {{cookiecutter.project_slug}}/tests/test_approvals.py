"""A person approves what the agent runs (approvals.py), with the real
worker, the real local sandbox and a scripted model: approved commands run,
rejected ones never do and the model reads why, nobody's answer rejects at
the timeout, a worker restart loses nothing, and the starter asks on a
terminal or prints the commands that decide."""

import asyncio
import os
import pty
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.worker import Replayer

from {{ cookiecutter.package_name }}.approvals import Decision
from {{ cookiecutter.package_name }}.observability import APPROVAL_WAIT, APPROVALS
from {{ cookiecutter.package_name }}.shared import DECIDE, PENDING, SANDBOX_PROVIDER
from {{ cookiecutter.package_name }}.starter import start
from {{ cookiecutter.package_name }}.worker import agents_plugin
from {{ cookiecutter.package_name }}.workflow import SandboxAgentWorkflow

from .hosts import start_as, workspaces_used
from .long_workflow import ImpatientApprovalWorkflow
from .processes import STARTER, service, service_environment
from .scripted_model import ScriptedModel, tool_outputs
from .support import (
    DROPPED_RUNS_CLOSED,
    metered_client,
    running_worker,
    sandboxes_for_tests,
)

# How long a test waits for a request to show.
SHOWS_WITHIN = 15


class KeepsInputs(ScriptedModel):
    """The scripted model, keeping every input it was given."""

    def __init__(self, commands: list[str]) -> None:
        super().__init__(commands)
        self.inputs: list[Any] = []

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> Any:
        self.inputs.append(input)
        return await super().get_response(system_instructions, input, *args, **kwargs)


async def requests_of(handle: WorkflowHandle[Any, Any], count: int = 1) -> list[dict[str, Any]]:
    """The requests waiting in a run, once there are ``count``."""
    async with asyncio.timeout(SHOWS_WITHIN):
        while True:
            found = await handle.query(PENDING, result_type=list)
            if len(found) >= count:
                return [dict(request) for request in found]
            await asyncio.sleep(0.05)


async def decide(handle: WorkflowHandle[Any, Any], call_id: str, approve: bool, **more: Any) -> str:
    result = await handle.execute_update(
        DECIDE, Decision(call_id, approve, **more), result_type=str
    )
    return str(result)


async def refusal(handle: WorkflowHandle[Any, Any], call_id: str) -> str:
    """Why the run refused a decision on ``call_id``."""
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await decide(handle, call_id, True)
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
        assert request["detail"] == "printf 'it ran\\n' > made.txt && cat made.txt"
        # The Web UI shows what the run waits for (its current details).
        metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
        assert metadata.current_details.startswith(
            f"Waiting for a person to approve exec_command (call {request['call_id']})"
        ), metadata.current_details
        assert await decide(handle, request["call_id"], True) == "approved"
        answer = await handle.result()
    assert answer.endswith("it ran\n"), answer


async def test_a_rejected_command_never_runs_and_the_model_reads_why(
    temporal_client: Client,
) -> None:
    model = KeepsInputs(["touch rejected.txt", "ls -a"])
    async with running_worker(temporal_client, model, approve=False) as (client, _):
        handle = await start(client, "Make a file, then list them.")
        [first] = await requests_of(handle)
        await decide(handle, first["call_id"], False, reason="not that file")
        second = await requests_of(handle)
        assert [request["detail"] for request in second] == ["ls -a"]
        await decide(handle, second[0]["call_id"], True)
        answer = await handle.result()
    # The model read the reason as the command's result; the file was never made.
    assert any("not that file" in output for output in tool_outputs(model.inputs[1])), model.inputs[
        1
    ]
    assert "rejected.txt" not in answer and "." in answer.split(), answer
    # The run replays, its decisions included.
    await Replayer(
        workflows=[SandboxAgentWorkflow], plugins=[agents_plugin(sandboxes=sandboxes_for_tests())]
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
        handle = await start_as(client, ImpatientApprovalWorkflow, SANDBOX_PROVIDER)
        answer = await handle.result()
        assert answer == "Rejected: no one approved it within 1 s.", answer
        assert await metrics.total(APPROVALS, decision="timed_out") == 1
        # It waited the timeout, 1 s, by the wait's histogram (in ms).
        waits = {
            labels["le"]: count
            for labels, count in (await metrics.scrape())[APPROVAL_WAIT]
            if labels.get("decision") == "timed_out" and "le" in labels
        }
        assert (waits["500"], waits["2500"]) == (0, 1), waits


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
        await decide(handle, first["call_id"], True)
        await requests_of(handle)  # the second command waits
    # That worker is gone; the next one rebuilds the run from its history.
    async with running_worker(temporal_client, ScriptedModel(commands), approve=False) as (
        client,
        _,
    ):
        handle = client.get_workflow_handle(handle.id)
        [second] = await requests_of(handle)
        await decide(handle, second["call_id"], True)
        answer = await handle.result()
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
        assert "no request 'call_bogus' waits" in await refusal(handle, "call_bogus")
        await decide(handle, request["call_id"], True)
        assert "was already decided" in await refusal(handle, request["call_id"])
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
        await decide(handle, request["call_id"], True, always=True)
        # The second command runs without waiting for anyone.
        answer = await handle.result()
    assert answer.endswith("two\n"), answer
    assert await updates_in(handle) == 1


class Terminal:
    """A process on a pseudo-terminal: what it printed, and a keyboard."""

    def __init__(self, fd: int, process: asyncio.subprocess.Process) -> None:
        self.fd, self.process, self.output = fd, process, ""

    async def read_until(self, text: str, timeout: float = 30) -> None:
        async with asyncio.timeout(timeout):
            while text not in self.output:
                try:
                    chunk = await asyncio.to_thread(os.read, self.fd, 4096)
                except OSError:
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"ended before {text!r}: {self.output}")
                self.output += chunk.decode(errors="replace")

    def type(self, line: str) -> None:
        os.write(self.fd, f"{line}\n".encode())


@pytest.mark.process
async def test_the_starter_asks_on_a_terminal_and_sends_each_answer(
    temporal_client: Client, starter_env: Client, tmp_path: Path
) -> None:
    commands = ["touch yes.txt", "touch no.txt", "ls"]
    async with running_worker(temporal_client, ScriptedModel(commands), approve=False):
        environment = {
            **service_environment(starter_env.service_client.config.target_host, ""),
            **{name: value for name, value in os.environ.items() if name.startswith("TEMPORAL_")},
        }
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
    answer = screen.output.partition("Answer:")[2]
    assert "yes.txt" in answer and "no.txt" not in answer, screen.output


@pytest.mark.process
async def test_off_a_terminal_the_starter_prints_the_commands_that_decide(
    temporal_client: Client, starter_env: Client
) -> None:
    async with running_worker(
        temporal_client, ScriptedModel(["echo decided-later"]), approve=False
    ):
        environment = {
            **service_environment(starter_env.service_client.config.target_host, ""),
            **{name: value for name, value in os.environ.items() if name.startswith("TEMPORAL_")},
        }
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
