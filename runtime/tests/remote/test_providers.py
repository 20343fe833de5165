"""One worker, several sandbox providers: a run picks one by name."""

import uuid

import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from sandbox_agent_runtime import starter
from sandbox_agent_runtime.backends import sandbox_backends
from sandbox_agent_runtime.run_request import RunRequest
from sandbox_agent_runtime.shared import WORKFLOW_TYPE
from sandbox_agent_runtime.starter import attach, run, start
from sandbox_agent_runtime.testing import project_service
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
from sandbox_agent_runtime.testing.support import (
    STARTER_SETTINGS,
    activities,
    closed_address,
    running_worker,
    started_id,
)


def test_the_starter_offers_the_providers_the_worker_registers() -> None:
    assert tuple(sandbox_backends()) == tuple(project_service().providers)


@pytest.mark.parametrize("provider", list(sandbox_backends()))
async def test_each_registered_provider_runs_the_agent(
    temporal_client: Client, provider: str
) -> None:
    model = ScriptedModel(["echo $((6 * 7))"])
    async with running_worker(temporal_client, model) as (client, _):
        handle = await start(client, "Multiply six by seven in the shell.", provider=provider)
        answer = (await handle.result()).answer

    assert "42" in answer
    sandbox_activities = [a.name for a in await activities(handle) if a.is_sandbox_operation]
    assert f"{provider}-sandbox_client_create" in sandbox_activities
    assert all(name.startswith(f"{provider}-") for name in sandbox_activities)


async def test_a_run_without_a_provider_uses_the_primary_one(temporal_client: Client) -> None:
    model = ScriptedModel(["true"])
    async with running_worker(temporal_client, model) as (client, _):
        handle = await start(client, "Do nothing.")
        await handle.result()

    scheduled = [a.name for a in await activities(handle)]
    assert f"{project_service().sandbox_provider}-sandbox_client_create" in scheduled


async def test_an_unknown_provider_fails_the_run_with_a_clear_reason(
    temporal_client: Client,
) -> None:
    model = ScriptedModel(["true"])
    async with running_worker(temporal_client, model) as (client, _):
        handle = await client.start_workflow(
            WORKFLOW_TYPE,
            RunRequest("Do nothing.", "nowhere"),
            id=f"unknown-provider-{uuid.uuid4()}",
            task_queue=project_service().task_queue,
        )
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()

    cause = failure.value.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == "UnknownSandboxProvider"
    assert cause.non_retryable
    assert "'nowhere'" in cause.message
    for name in sandbox_backends():
        assert name in cause.message


async def test_the_starter_runs_in_the_provider_it_is_given_and_attach_shows_it(
    starter_env: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    provider = list(sandbox_backends())[-1]
    async with running_worker(starter_env, ScriptedModel(["echo $((6 * 7))"])):
        assert await run(RunRequest("Multiply six by seven.", provider), STARTER_SETTINGS) == 0
        started = capsys.readouterr().out
        assert await attach(started_id(started), STARTER_SETTINGS) == 0
        attached = capsys.readouterr().out

    for out in (started, attached):
        assert f"  sandbox  provider {provider!r}\n" in out
        # Its sandbox operations show as such, not as unknown activities.
        assert "  sandbox  creating the sandbox\n" in out
        assert "  sandbox  $ echo $((6 * 7))\n" in out


def test_the_starter_refuses_an_unknown_provider_before_starting_a_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Nothing listens here: a starter that tried to start the run would
    # exit 2, unable to connect.
    monkeypatch.setenv("TEMPORAL_ADDRESS", closed_address())
    with pytest.raises(SystemExit) as refused:
        starter.main(["--provider", "nowhere", "Do nothing."])

    err = capsys.readouterr().err
    assert refused.value.code == 3
    assert "argument --provider: invalid choice: 'nowhere'" in err
    for name in sandbox_backends():
        assert repr(name) in err
