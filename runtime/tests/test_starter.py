"""The starter shows where the run is, what the agent is doing, and how it
ended (its exit statuses: the runtime's test_exit_statuses.py).

It runs against both stand-ins (conftest.py): the default one (the local
backend: the starter shows the sandbox on the worker's host) and the remote
one (a Daytona sandbox, shown reachable from any worker, each command
approved by the tests' stand-in person as the run waits for it).
"""

import asyncio
import io
import json
import re
import subprocess
import sys
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from agents import ModelResponse
from temporalio import workflow
from temporalio.client import Client, WorkflowExecutionStatus

from sandbox_agent_runtime import starter
from sandbox_agent_runtime.backends import sandbox_backends
from sandbox_agent_runtime.chain import Carried
from sandbox_agent_runtime.run_request import RunAnswer, RunRequest
from sandbox_agent_runtime.shared import LONGEST_PROMPT, WORKFLOW_TYPE
from sandbox_agent_runtime.starter import attach, run, start, web_ui_link
from sandbox_agent_runtime.starter import following as starter_following
from sandbox_agent_runtime.starter.approving import decide_lines
from sandbox_agent_runtime.testing import project, project_service
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
from sandbox_agent_runtime.testing.support import (
    RUN_TIME_LIMIT,
    SETTINGS,
    STARTER_SETTINGS,
    closed_address,
    run_time_limit,
    running_worker,
    started_id,
)


def test_the_starter_names_the_workflow_the_worker_registers_and_sends_what_it_takes() -> None:
    # The starter starts runs by the workflow's type name instead of importing
    # it; start() sends one RunRequest (the chain alone hands a run what it
    # carried) and expects a RunAnswer back.
    definition = workflow._Definition.must_from_class(project().workflow)

    assert definition.name == WORKFLOW_TYPE
    assert definition.arg_types == [RunRequest, Carried | None]
    assert definition.ret_type is RunAnswer


def test_the_starter_loads_temporals_client_and_not_the_agents_sdk() -> None:
    # What keeps --help, --no-wait and a followed run's first line to a
    # fraction of a second of CPU (sandbox-agent-template's benchmarks measure them).
    code = f"import sys, {starter.__name__}; print(*sys.modules)"
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = found.stdout.split()

    assert "temporalio.client" in loaded
    heavy = ("agents", "openai", "temporalio.openai_agents", project().workflow.__module__)
    assert [name for name in loaded if name.startswith(heavy)] == []


class HoldsOneRun(ScriptedModel):
    """Answers the run given ``prompt`` only once ``go_on`` is set; ``holding``
    is set when its first call waits. Other runs get their answers at once."""

    def __init__(self, commands: list[str], prompt: str) -> None:
        super().__init__(commands)
        self.prompt = prompt
        self.holding = asyncio.Event()
        self.go_on = asyncio.Event()

    async def get_response(
        self, system_instructions: str | None, input: str | list[Any], *args: Any, **kwargs: Any
    ) -> ModelResponse:
        if self.prompt in json.dumps(input, default=str):
            self.holding.set()
            await self.go_on.wait()
        return await super().get_response(system_instructions, input, *args, **kwargs)


async def printed(capsys: pytest.CaptureFixture[str], text: str, seen: list[str]) -> None:
    """Wait until the starter has printed a line starting with ``text``."""
    while not any(line.startswith(text) for line in seen):
        seen += capsys.readouterr().out.splitlines()
        await asyncio.sleep(0.1)


def answer_in(seen: list[str]) -> str:
    """The answer in the lines the starter printed, before its Usage line."""
    return answer_printed("\n".join(seen) + "\n").rstrip("\n")


def answer_printed(out: str) -> str:
    """The answer the starter printed, which its last line, the usage, follows."""
    answer, usage = out.split("\nAnswer:\n", 1)[1].rsplit("Usage: ", 1)
    # The sandbox's time and the actions, where the backend has a rate (the
    # remote stand-in's Daytona: costs.py).
    assert re.fullmatch(
        r"[\d,]+ model calls?, [\d,]+ input tokens, [\d,]+ output tokens, cost n/a"
        r"(; sandbox [\d,.]+ s, \$[\d.]+; [\d,]+ Temporal actions?, \$[\d.]+; total n/a)?\n",
        usage,
    ), usage
    return answer


@pytest.mark.long  # waits for the starter's notice
async def test_a_run_no_worker_takes_is_shown_waiting_then_completes_when_one_comes(
    starter_env: Client, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(starter_following, "WAIT_NOTICE", timedelta(seconds=1))
    seen: list[str] = []
    following = asyncio.create_task(run(RunRequest("Wait for a worker."), STARTER_SETTINGS))
    await asyncio.wait_for(printed(capsys, "  waiting  ", seen), timeout=30)
    async with running_worker(starter_env, ScriptedModel(["echo done"])):
        status = await asyncio.wait_for(following, timeout=30)

    seen += capsys.readouterr().out.splitlines()
    [waiting] = [line for line in seen if line.startswith("  waiting  ")]
    assert waiting.endswith(
        "s for a worker to take the run's next workflow task: every worker on task queue "
        f"{project_service().task_queue!r} is busy, or none is running; the run waits, "
        "nothing is lost"
    )
    assert status == 0
    assert answer_in(seen).endswith("done")


@pytest.mark.long  # waits for the starter's notice
async def test_a_run_past_the_workers_capacity_waits_for_a_slot_shown_waiting_and_completes(
    starter_env: Client, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(starter_following, "WAIT_NOTICE", timedelta(seconds=1))
    model = HoldsOneRun(["echo done"], prompt="Take the only slot.")
    seen: list[str] = []
    # Room for one activity at a time, taken by another run's model call.
    async with running_worker(starter_env, model, settings=replace(SETTINGS, runs_in_flight=1)) as (
        client,
        _,
    ):
        other = await start(client, "Take the only slot.")
        await asyncio.wait_for(model.holding.wait(), timeout=30)
        following = asyncio.create_task(run(RunRequest("Wait for the slot."), STARTER_SETTINGS))
        await asyncio.wait_for(printed(capsys, "  waiting  ", seen), timeout=30)
        model.go_on.set()
        status = await asyncio.wait_for(following, timeout=30)
        await other.result()

    seen += capsys.readouterr().out.splitlines()
    [waiting] = [line for line in seen if line.startswith("  waiting  ")]
    assert " s for a worker to take its " in waiting
    assert status == 0
    assert answer_in(seen).endswith("done")


async def test_prints_the_link_each_step_as_it_happens_and_the_answer(
    starter_env: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    model = ScriptedModel(["echo step-one", "echo answer-$((40 + 2))"])
    async with running_worker(starter_env, model, host="this-host"):
        status = await run(RunRequest("Say two things."), STARTER_SETTINGS)

    out = capsys.readouterr().out
    workflow_id = started_id(out)
    assert status == 0
    assert f"Web UI: http://localhost:8233/namespaces/default/workflows/{workflow_id}\n" in out
    steps = [line.strip() for line in out.splitlines() if line.startswith("  ")]
    provider = project_service().sandbox_provider
    assert steps[0] == f"sandbox  provider {provider!r}"
    # Where the sandbox lives: on the worker's host, or anywhere (affinity.py).
    if sandbox_backends()[provider].host_bound(SETTINGS):
        assert steps[1] == "sandbox  on host 'this-host'"
    else:
        assert steps[1] == "sandbox  reachable from any worker"
    assert steps[2] == "sandbox  creating the sandbox"
    assert steps.index("model    turn 1") < steps.index("sandbox  $ echo step-one")
    assert steps.index("sandbox  $ echo step-one") < steps.index("model    turn 2")
    assert steps.index("model    turn 2") < steps.index("sandbox  $ echo answer-$((40 + 2))")
    assert steps.index("sandbox  $ echo answer-$((40 + 2))") < steps.index("model    turn 3")
    # The run's outputs (it wrote no file) are collected after the answer.
    assert steps.index("model    turn 3") < steps.index("sandbox  output 0 files (0 B)")
    assert steps[-1] == "sandbox  removing the sandbox"
    # The scripted model answers with the last command's output.
    answer = answer_printed(out)
    assert "removing the sandbox" not in answer
    assert answer.endswith("answer-42\n")


async def test_ui_link_follows_temporal_ui_url(
    starter_env: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = replace(STARTER_SETTINGS, ui_url="https://temporal.example.com/")
    async with run_time_limit(starter_env, project_service().task_queue, RUN_TIME_LIMIT):
        status = await run(RunRequest("Nothing to do."), settings, wait=False)

    out = capsys.readouterr().out
    workflow_id = started_id(out)
    assert status == 0
    link = f"https://temporal.example.com/namespaces/default/workflows/{workflow_id}"
    assert f"Web UI: {link}\n" in out
    await starter_env.get_workflow_handle(workflow_id).terminate(reason="test over")


@pytest.mark.parametrize(
    "address", ["my-ns.a1b2c.tmprl.cloud:7233", "us-east-1.aws.api.temporal.io:7233"]
)
async def test_ui_link_points_to_temporal_cloud_for_a_cloud_address(
    address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TEMPORAL_UI_URL", raising=False)
    # A lazy client never connects: the link comes from address and namespace.
    client = await Client.connect(address, namespace="my-ns.a1b2c", lazy=True)

    link = web_ui_link(client, "run-1", None)

    assert link == "https://cloud.temporal.io/namespaces/my-ns.a1b2c/workflows/run-1"


async def test_no_wait_starts_and_returns_then_attach_follows_the_run_to_its_answer(
    starter_env: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    # No worker yet: the run waits on its task queue, and --no-wait returns at once.
    async with run_time_limit(starter_env, project_service().task_queue, RUN_TIME_LIMIT):
        status = await run(RunRequest("Count to three."), STARTER_SETTINGS, wait=False)
    out = capsys.readouterr().out
    workflow_id = started_id(out)
    assert status == 0
    assert "Answer:" not in out
    description = await starter_env.get_workflow_handle(workflow_id).describe()
    assert description.status == WorkflowExecutionStatus.RUNNING

    async with running_worker(starter_env, ScriptedModel(["seq 3 | paste -sd+"])):
        status = await attach(workflow_id, STARTER_SETTINGS)

    out = capsys.readouterr().out
    assert status == 0
    assert out.startswith(f"Following workflow {workflow_id}\n")
    assert "  sandbox  $ seq 3 | paste -sd+\n" in out
    assert answer_printed(out).endswith("1+2+3\n")


async def test_the_lines_that_suggest_a_next_step_run_the_starter_through_uv(
    starter_env: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    # Outside an activated environment only `uv run`, in the project's
    # directory, finds the project's commands: every hint says it.
    model = ScriptedModel(["echo kept > notes.txt"])
    async with running_worker(starter_env, model):
        status = await run(RunRequest("Write a note.", follow_ups=True), STARTER_SETTINGS)
    out = capsys.readouterr().out
    workflow_id = started_id(out)
    await starter_env.get_workflow_handle(workflow_id).terminate(reason="test over")

    command = f"uv run {project_service().command('starter')}"
    assert status == 0
    assert (
        f'Follow up: {command} --continue {workflow_id} "..."   End: --end {workflow_id}\n' in out
    )
    assert f"Fetch them with: {command} --attach {workflow_id} --output DIR\n" in out
    approve, reject = (line.strip() for line in decide_lines(workflow_id, "call_1"))
    assert approve == f"approve: {command} --approve {workflow_id} call_1"
    assert reject.startswith(f"reject:  {command} --reject {workflow_id} call_1 ")


def test_a_prompt_comes_from_a_file_or_from_standard_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Count the files.\nThen the lines.\n")
    assert starter.prompt_of(starter.parse_arguments(["--prompt-file", str(prompt)])) == (
        "Count the files.\nThen the lines.\n"
    )
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("From a pipe ✓".encode())))
    assert starter.prompt_of(starter.parse_arguments(["--prompt-file", "-"])) == "From a pipe ✓"


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"x" * (LONGEST_PROMPT + 1), f"the prompt is over {LONGEST_PROMPT:,} bytes"),
        (b" \n", "the prompt is empty"),
        (b"\xff\xfe", "not UTF-8 text"),
        (None, "cannot read it"),
    ],
    ids=["too long", "empty", "not UTF-8", "missing"],
)
def test_a_prompt_a_run_cannot_take_is_refused_in_one_line_before_connecting(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    content: bytes | None,
    said: str,
) -> None:
    # Nothing listens there: a starter that tried to connect would say so.
    monkeypatch.setenv("TEMPORAL_ADDRESS", closed_address())
    prompt = tmp_path / "prompt.txt"
    if content is not None:
        prompt.write_bytes(content)
    with pytest.raises(SystemExit) as exited:
        starter.main(["--prompt-file", str(prompt)])
    assert exited.value.code == 3
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and said in error, error


def test_a_prompt_too_long_as_an_argument_is_refused_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TEMPORAL_ADDRESS", closed_address())
    with pytest.raises(SystemExit) as exited:
        starter.main(["é" * LONGEST_PROMPT])  # two bytes each
    assert exited.value.code == 3
    assert f"over {LONGEST_PROMPT:,} bytes ({2 * LONGEST_PROMPT:,})" in capsys.readouterr().err
