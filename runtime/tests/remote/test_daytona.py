"""The Daytona backend: its client, its options and its credentials come from
the worker's settings, and Daytona's errors that no retry fixes end a run at once. The
tests cannot reach Daytona: its SDK's errors are raised by a local stand-in."""

import dataclasses
from typing import Any

import pytest
from agents.extensions.sandbox.daytona import DaytonaSandboxClient
from daytona import (
    DaytonaAuthenticationError,
    DaytonaAuthorizationError,
    DaytonaNotFoundError,
    DaytonaValidationError,
)
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from sandbox_agent_runtime.backends import daytona, namespace_key, task_queue_key
from sandbox_agent_runtime.settings import BadSetting, missing_credentials
from sandbox_agent_runtime.testing import project_service
from sandbox_agent_runtime.testing.support import (
    CREDENTIALS,
    SETTINGS,
    CompletedRun,
    assert_a_rejection_fails_the_run_at_once,
    assert_scheduled_not_to_retry,
    provider_of,
    refusal_without_credentials,
    settings_with,
    use_options_of,
)


# Whose a sandbox is (backends.service_labels()): an ActivityEnvironment's run is in
# the namespace "default".
def the_services() -> dict[str, str]:
    return {namespace_key(): "default", task_queue_key(): project_service().task_queue}


def test_daytona_client_and_options_come_from_the_workers_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DAYTONA_API_KEY", "test-key")
    assert isinstance(daytona.sandbox_client(SETTINGS), DaytonaSandboxClient)

    # Unset, each option takes its default.
    options = daytona.sandbox_options()
    assert options.auto_stop_interval == 15
    assert options.create_timeout == 60
    assert options.pause_on_exit is False
    assert options.image is None
    assert options.sandbox_snapshot_name is None
    # Credentials never travel with the options: those land in history.
    assert not options.env_vars

    # Each set, as a worker reads them at start (DAYTONA_SANDBOX_*).
    use_options_of(
        {
            "DAYTONA_SANDBOX_AUTO_STOP_INTERVAL_MINUTES": "30",
            "DAYTONA_SANDBOX_CREATE_TIMEOUT_SECONDS": " 120 ",
            "DAYTONA_SANDBOX_PAUSE_ON_EXIT": "true",
            "DAYTONA_SANDBOX_IMAGE": "python:3.12-slim",
        }
    )
    options = daytona.sandbox_options()
    assert options.auto_stop_interval == 30
    assert options.create_timeout == 120
    assert options.pause_on_exit is True
    assert options.image == "python:3.12-slim"
    use_options_of({"DAYTONA_SANDBOX_SNAPSHOT": "agent-tools"})
    assert daytona.sandbox_options().sandbox_snapshot_name == "agent-tools"


def test_an_image_and_a_snapshot_together_stop_the_worker() -> None:
    with pytest.raises(BadSetting) as refused:
        settings_with(
            {"DAYTONA_SANDBOX_IMAGE": "python:3.12-slim", "DAYTONA_SANDBOX_SNAPSHOT": "tools"}
        )

    assert str(refused.value) == (
        "DAYTONA_SANDBOX_IMAGE and DAYTONA_SANDBOX_SNAPSHOT are both set: a sandbox starts "
        "from one of them, not both; unset one."
    )


async def test_each_sandbox_carries_the_labels_of_its_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DAYTONA_API_KEY", "test-key")
    client = daytona.sandbox_client(SETTINGS)
    asked: list[Any] = []

    async def create_in_daytona(params: Any, **options: Any) -> Any:
        asked.append(params)
        raise RuntimeError("Daytona is out of reach")

    monkeypatch.setattr(client._daytona, "create", create_in_daytona)
    # As in the worker's `<provider>-sandbox_client_create` activity of run "run-1".
    provider = provider_of(daytona)
    environment = ActivityEnvironment()
    environment.info = dataclasses.replace(
        environment.info, workflow_id="run-1", activity_type=f"{provider}-sandbox_client_create"
    )
    try:
        with pytest.raises(RuntimeError, match="out of reach"):
            await environment.run(client.create, options=daytona.sandbox_options())
    finally:
        await client.close()

    [params] = asked
    assert params.labels == {
        daytona.workflow_label(): "run-1",
        daytona.provider_label(): provider,
        **the_services(),
    }


def test_a_worker_without_credentials_asks_for_a_daytona_key_or_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    message = refusal_without_credentials(monkeypatch)

    assert "DAYTONA_API_KEY" in message
    assert "DAYTONA_JWT_TOKEN with DAYTONA_ORGANIZATION_ID" in message
    assert daytona.CREDENTIALS_URL in message


def test_a_daytona_token_with_its_organization_stands_in_for_the_key() -> None:
    token_instead_of_key = {
        **{name: value for name, value in CREDENTIALS.items() if name != "DAYTONA_API_KEY"},
        "DAYTONA_JWT_TOKEN": "test-token",
        "DAYTONA_ORGANIZATION_ID": "test-org",
    }
    assert missing_credentials(token_instead_of_key) is None
    del token_instead_of_key["DAYTONA_ORGANIZATION_ID"]
    assert "DAYTONA_ORGANIZATION_ID" in str(missing_credentials(token_instead_of_key))


async def test_daytona_errors_that_no_retry_fixes_end_a_sandbox_operation_at_once(
    completed_run: CompletedRun,
) -> None:
    # Temporal records an activity's error type as the exception's class
    # name, which for some of these differs from the name they are imported by.
    errors = (
        DaytonaAuthenticationError,
        DaytonaAuthorizationError,
        DaytonaNotFoundError,
        DaytonaValidationError,
    )
    assert sorted(daytona.NON_RETRYABLE_ERRORS) == sorted(error.__name__ for error in errors)
    # Every sandbox operation of a run is scheduled not to retry them.
    await assert_scheduled_not_to_retry(completed_run, daytona.NON_RETRYABLE_ERRORS)


async def test_a_daytona_that_rejects_the_workers_key_fails_the_run_at_once(
    temporal_client: Client,
) -> None:
    # What the Daytona API answers a worker whose key it does not accept.
    rejection = "Invalid API key"
    error = DaytonaAuthenticationError(rejection, status_code=401)
    await assert_a_rejection_fails_the_run_at_once(temporal_client, daytona, error, rejection)
