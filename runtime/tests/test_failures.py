"""A run that cannot finish fails, with a reason a person can read; it never
hangs. A failure that goes away is retried, and the run completes."""

import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest
from agents.sandbox.errors import ExecTransportError, WorkspaceStartError
from temporalio.client import Client
from temporalio.common import RetryPolicy

from sandbox_agent_runtime.run_request import RunRequest
from sandbox_agent_runtime.starter import run, start
from sandbox_agent_runtime.testing import project_service
from sandbox_agent_runtime.testing.failing_sandbox import (
    FailingSandbox,
    UndeletableSandbox,
    busy_sandbox,
    deleted_sandbox,
    unreachable_image,
)
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server
from sandbox_agent_runtime.testing.support import (
    STARTER_SETTINGS,
    CompletedRun,
    activities,
    failure_of,
    openai_model,
    running_worker,
)
from sandbox_agent_runtime.worker import MODEL_RETRY_POLICY


def back_off(policy: RetryPolicy) -> timedelta:
    """How long a step that fails every time waits between its attempts, in all."""
    waits = (
        policy.initial_interval * policy.backoff_coefficient**retry
        for retry in range(policy.maximum_attempts - 1)
    )
    return sum((min(wait, policy.maximum_interval or wait) for wait in waits), timedelta())


async def test_every_run_has_an_execution_timeout_as_a_backstop(
    completed_run: CompletedRun,
) -> None:
    description = await completed_run.handle.describe()

    config = description.raw_description.execution_config
    assert (
        config.workflow_execution_timeout.ToTimedelta()
        == project_service().workflow_execution_timeout
    )


async def test_every_step_gives_up_after_a_few_attempts(completed_run: CompletedRun) -> None:
    # A sandbox operation is attempted at most 5 times, over about 15 s of
    # back-off; a model call at most 8 times, over about 3 minutes. Unlimited
    # attempts (0) would let a run that cannot finish retry for ever.
    steps = await activities(completed_run.handle)
    sandbox = [step.retry_policy for step in steps if step.is_sandbox_operation]
    model = [step.retry_policy for step in steps if step.is_model_call]
    assert sandbox and model
    for policy in sandbox:
        assert policy.maximum_attempts == 5
        assert back_off(policy) == timedelta(seconds=15)
    for policy in model:
        assert policy.maximum_attempts == 8
        assert round(back_off(policy) / timedelta(minutes=1)) == 3


@pytest.mark.long  # MAX_TURNS turns
async def test_a_run_that_exceeds_its_turn_budget_fails_saying_so(
    temporal_client: Client,
) -> None:
    endless = ScriptedModel(["true"] * (project_service().max_turns + 1))
    async with running_worker(temporal_client, endless) as (client, _):
        handle = await start(client, "Keep going.")
        reason = await failure_of(handle)

    assert (
        reason == f"The agent could not finish: Max turns ({project_service().max_turns}) exceeded"
    )


@pytest.mark.long  # MAX_TURNS turns
async def test_a_run_that_fails_keeps_its_reason_when_its_sandbox_cannot_be_removed(
    temporal_client: Client,
) -> None:
    endless = ScriptedModel(["true"] * (project_service().max_turns + 1))
    sandbox = UndeletableSandbox(inherit_host_environment=False)
    async with running_worker(temporal_client, endless, sandbox) as (client, _):
        handle = await start(client, "Keep going.")
        reason = await failure_of(handle)

    assert (
        reason == f"The agent could not finish: Max turns ({project_service().max_turns}) exceeded"
    )
    # The removal was tried, and refused.
    [delete] = [a for a in await activities(handle) if a.name.endswith("sandbox_client_delete")]
    assert delete.failed


async def test_a_model_that_rejects_the_api_key_fails_the_run_without_retrying(
    temporal_client: Client,
) -> None:
    with scripted_openai_server([], error_status=401) as server:
        async with running_worker(temporal_client, openai_model(server.url)) as (client, _):
            handle = await start(client, "Say hello.")
            reason = await failure_of(handle)

    assert reason.startswith(
        "The agent could not finish: the model call failed with an error that retrying cannot fix:"
    )
    assert "401" in reason and "Incorrect API key provided" in reason
    assert server.requests == 1


async def test_a_model_that_keeps_failing_fails_the_run_when_its_retries_run_out(
    temporal_client: Client,
) -> None:
    # The service's retry policy gives up after a fixed number of attempts;
    # the test gives up after two, and without the waits, to stay quick.
    assert MODEL_RETRY_POLICY.maximum_attempts > 0
    quick = dataclasses.replace(
        MODEL_RETRY_POLICY,
        initial_interval=timedelta(milliseconds=10),
        maximum_interval=timedelta(milliseconds=10),
        maximum_attempts=2,
    )
    with scripted_openai_server([], error_status=503) as server:
        async with running_worker(
            temporal_client, openai_model(server.url), model_retry_policy=quick
        ) as (client, _):
            handle = await start(client, "Say hello.")
            reason = await failure_of(handle)

    assert reason.startswith(
        "The agent could not finish: the model call kept failing until its retries ran out:"
    )
    assert "503" in reason
    assert server.requests == 2


async def test_a_command_that_keeps_failing_fails_the_run_after_5_attempts(
    temporal_client: Client,
) -> None:
    # The sixth attempt would succeed: a policy allowing it, or unlimited
    # attempts, lets this run complete.
    sandbox = FailingSandbox(command_errors=[busy_sandbox() for _ in range(5)])
    async with running_worker(temporal_client, ScriptedModel(["true"]), sandbox) as (client, _):
        handle = await start(client, "Do nothing.")
        reason = await failure_of(handle)

    assert reason == (
        f"The agent could not finish: the sandbox operation {project_service().sandbox_provider}-sandbox_session_pty_exec_start"
        " kept failing until its retries ran out: the sandbox is busy"
    )
    assert sandbox.commands_attempted == 5


async def test_a_sandbox_that_cannot_be_created_fails_the_run_without_retrying(
    temporal_client: Client,
) -> None:
    sandbox = FailingSandbox(create_errors=[unreachable_image()])
    async with running_worker(temporal_client, ScriptedModel(["true"]), sandbox) as (client, _):
        handle = await start(client, "Do nothing.")
        reason = await failure_of(handle)

    assert reason == (
        f"The agent could not finish: the sandbox operation {project_service().sandbox_provider}-sandbox_client_create"
        " failed with an error that retrying cannot fix: the sandbox image does not exist"
    )
    assert sandbox.create_errors == []


async def test_a_command_the_sandbox_marks_as_terminal_fails_the_run_without_retrying(
    temporal_client: Client,
) -> None:
    sandbox = FailingSandbox(command_errors=[deleted_sandbox()])
    async with running_worker(temporal_client, ScriptedModel(["true"]), sandbox) as (client, _):
        handle = await start(client, "Do nothing.")
        reason = await failure_of(handle)

    assert reason == (
        f"The agent could not finish: the sandbox operation {project_service().sandbox_provider}-sandbox_session_pty_exec_start"
        " failed with an error that retrying cannot fix: the sandbox was deleted"
    )
    assert sandbox.commands_attempted == 1


# A real retry's back-off (a second): under -m faults, out of the first run.
@pytest.mark.faults
async def test_a_command_that_fails_once_is_retried_and_the_run_completes(
    temporal_client: Client,
) -> None:
    hiccup = ExecTransportError(command=["echo"], message="connection reset", retryable=True)
    sandbox = FailingSandbox(command_errors=[hiccup])
    async with running_worker(temporal_client, ScriptedModel(["echo $((6 * 7))"]), sandbox) as (
        client,
        _,
    ):
        handle = await start(client, "Multiply six by seven in the shell.")
        answer = (await handle.result()).answer

    assert "42" in answer
    commands = [
        a.attempt
        for a in await activities(handle)
        if a.name == f"{project_service().sandbox_provider}-sandbox_session_pty_exec_start"
    ]
    assert commands == [2]
    assert sandbox.commands_attempted == 2


# A real retry's back-off (a second): under -m faults, out of the first run.
@pytest.mark.faults
async def test_a_sandbox_that_fails_to_start_once_is_retried_and_the_run_completes(
    temporal_client: Client,
) -> None:
    hiccup = WorkspaceStartError(path=Path("/workspace"), message="busy", retryable=True)
    sandbox = FailingSandbox(create_errors=[hiccup])
    async with running_worker(temporal_client, ScriptedModel(["echo ready"]), sandbox) as (
        client,
        _,
    ):
        handle = await start(client, "Say ready from the shell.")
        answer = (await handle.result()).answer

    assert "ready" in answer
    creates = [
        a.attempt
        for a in await activities(handle)
        if a.name == f"{project_service().sandbox_provider}-sandbox_client_create"
    ]
    assert creates == [2]


async def test_the_starter_prints_why_a_run_failed_and_exits_1(
    temporal_client: Client,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("TEMPORAL_ADDRESS", temporal_client.service_client.config.target_host)
    sandbox = FailingSandbox(create_errors=[unreachable_image()])
    async with running_worker(temporal_client, ScriptedModel(["true"]), sandbox):
        status = await run(RunRequest("Do nothing."), STARTER_SETTINGS)

    err = capsys.readouterr().err.strip().splitlines()
    assert status == 1
    assert len(err) == 1
    assert err[0].startswith("Workflow ")
    assert err[0].endswith(
        " failed: The agent could not finish: the sandbox operation "
        f"{project_service().sandbox_provider}-sandbox_client_create failed with an error that retrying cannot fix:"
        " the sandbox image does not exist"
    )
