"""The Runloop backend: its client, its options and its credentials come from
the worker's settings, and Runloop's errors that no retry fixes end a run at once. The
tests cannot reach Runloop: a stand-in for its HTTP API, on loopback, answers
the worker's real Runloop client."""

import dataclasses
import time
from typing import Any

import httpx
import pytest
from agents.extensions.sandbox.runloop import RunloopSandboxClient
from runloop_api_client import (
    APIStatusError,
    AuthenticationError,
    BadRequestError,
    NotFoundError,
    PermissionDeniedError,
    UnprocessableEntityError,
)
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from sandbox_agent_runtime.backends import namespace_key, runloop, task_queue_key
from sandbox_agent_runtime.testing import project_service
from sandbox_agent_runtime.testing.processes import refusal_of_the_worker_command_without
from sandbox_agent_runtime.testing.support import (
    CREDENTIALS,
    SETTINGS,
    CompletedRun,
    assert_a_rejection_fails_the_run_at_once,
    assert_scheduled_not_to_retry,
    assert_the_sandbox_fails_the_run_at_once,
    http_stand_in,
    provider_of,
    refusal_without_credentials,
    use_options_of,
)


# Whose a sandbox is (backends.service_labels()): an ActivityEnvironment's run is in
# the namespace "default".
def the_services() -> dict[str, str]:
    return {namespace_key(): "default", task_queue_key(): project_service().task_queue}


def test_runloop_client_and_options_come_from_the_workers_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RUNLOOP_API_KEY", "test-key")
    assert isinstance(runloop.sandbox_client(SETTINGS), RunloopSandboxClient)

    # Unset, each option takes its default: Runloop's image, a devbox as
    # long-lived as the longest run.
    options = runloop.sandbox_options()
    assert options.blueprint_name is None
    assert options.blueprint_id is None
    launch = options.model_dump(mode="json")["launch_parameters"]
    assert launch["keep_alive_time_seconds"] == int(
        project_service().workflow_execution_timeout.total_seconds()
    )
    # Runloop would ignore the lifetime if an idle policy were set.
    assert launch["after_idle"] is None
    # Credentials never travel with the options: those land in history.
    assert not options.env_vars
    assert not options.managed_secrets

    # Each set, as a worker reads them at start (RUNLOOP_SANDBOX_*).
    # Longer than the longest run, within what the provider allows.
    longer = min(
        int(project_service().workflow_execution_timeout.total_seconds()) + 60,
        runloop.OPTIONS["keep_alive_seconds"].high,
    )
    use_options_of(
        {
            "RUNLOOP_SANDBOX_BLUEPRINT": "agent-tools",
            "RUNLOOP_SANDBOX_KEEP_ALIVE_SECONDS": str(longer),
        }
    )
    options = runloop.sandbox_options()
    assert options.blueprint_name == "agent-tools"
    assert options.model_dump(mode="json")["launch_parameters"]["keep_alive_time_seconds"] == longer


def test_a_devbox_outlives_the_longest_run() -> None:
    assert (
        project_service().workflow_execution_timeout.total_seconds()
        <= runloop.sandbox_lifetime_seconds()
    )


async def test_each_devbox_carries_the_metadata_of_its_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RUNLOOP_API_KEY", "test-key")
    client = runloop.sandbox_client(SETTINGS)
    asked: dict[str, Any] = {}

    async def create_in_runloop(**request: Any) -> Any:
        asked.update(request)
        raise RuntimeError("Runloop is out of reach")

    monkeypatch.setattr(client._sdk.devbox, "create", create_in_runloop)
    # As in the worker's `<provider>-sandbox_client_create` activity of run "run-1".
    provider = provider_of(runloop)
    environment = ActivityEnvironment()
    environment.info = dataclasses.replace(
        environment.info, workflow_id="run-1", activity_type=f"{provider}-sandbox_client_create"
    )
    try:
        with pytest.raises(RuntimeError, match="out of reach"):
            await environment.run(client.create, options=runloop.sandbox_options())
    finally:
        await client.close()

    assert asked["metadata"] == {
        runloop.workflow_metadata(): "run-1",
        runloop.provider_metadata(): provider,
        **the_services(),
    }
    assert (
        asked["launch_parameters"]["keep_alive_time_seconds"] == runloop.sandbox_lifetime_seconds()
    )


def test_a_worker_without_credentials_asks_for_a_runloop_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    message = refusal_without_credentials(monkeypatch)

    assert "RUNLOOP_API_KEY" in message
    assert runloop.CREDENTIALS_URL in message


@pytest.mark.process
def test_the_worker_command_without_a_runloop_key_exits_1_at_once() -> None:
    line = refusal_of_the_worker_command_without("RUNLOOP_API_KEY", CREDENTIALS)

    assert line.startswith(f"Missing credentials: set RUNLOOP_API_KEY ({runloop.CREDENTIALS_URL})")


def status_error(kind: type[APIStatusError], status: int, message: str) -> APIStatusError:
    """``kind`` as the Runloop SDK raises it for an answer of ``status``."""
    request = httpx.Request("POST", "https://api.runloop.ai/v1/devboxes")
    return kind(message, response=httpx.Response(status, request=request), body=None)


async def test_runloop_errors_that_no_retry_fixes_end_a_sandbox_operation_at_once(
    completed_run: CompletedRun,
) -> None:
    errors = (
        AuthenticationError,
        PermissionDeniedError,
        NotFoundError,
        BadRequestError,
        UnprocessableEntityError,
    )
    assert sorted(runloop.NON_RETRYABLE_ERRORS) == sorted(error.__name__ for error in errors)
    # Every sandbox operation of a run is scheduled not to retry them.
    await assert_scheduled_not_to_retry(completed_run, runloop.NON_RETRYABLE_ERRORS)


async def test_a_runloop_that_rejects_the_workers_key_fails_the_run_at_once(
    temporal_client: Client,
) -> None:
    # What the Runloop API answers a worker whose key it does not accept.
    rejection = "Invalid API key"
    error = status_error(AuthenticationError, 401, rejection)
    await assert_a_rejection_fails_the_run_at_once(temporal_client, runloop, error, rejection)


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        pytest.param(401, "Invalid API key", id="rejected-key"),
        pytest.param(400, "Blueprint with name agent-tools not found", id="unknown-blueprint"),
        pytest.param(422, "keep_alive_time_seconds must be at most 172800", id="invalid-lifetime"),
    ],
)
async def test_a_misconfigured_runloop_devbox_fails_the_run_at_once_saying_why(
    temporal_client: Client, monkeypatch: pytest.MonkeyPatch, status: int, reason: str
) -> None:
    # Runloop's API, answering as it does a request it refuses.
    with http_stand_in(status, {"message": reason}) as runloop_api:
        monkeypatch.setenv("RUNLOOP_BASE_URL", runloop_api.url)
        monkeypatch.setenv("RUNLOOP_API_KEY", "test-key")
        began = time.monotonic()
        # The worker's own Runloop client, as it builds it at start.
        client = runloop.sandbox_client(SETTINGS)
        try:
            await assert_the_sandbox_fails_the_run_at_once(temporal_client, runloop, client, reason)
        finally:
            await client.close()

    assert time.monotonic() - began < 30
    # The client asked Runloop for a devbox, once: nothing was retried.
    assert runloop_api.asked == ["POST /v1/devboxes/create_and_await_running"]
    assert runloop_api.authorizations == ["Bearer test-key"]
