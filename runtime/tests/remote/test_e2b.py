"""The E2B backend: its client, its options and its credentials come from the
worker's settings, and E2B's errors that no retry fixes end a run at once. The tests
cannot reach E2B: its SDK's errors are raised by a local stand-in."""

import dataclasses
from typing import Any

import pytest
from agents.extensions.sandbox.e2b import E2BSandboxClient
from agents.extensions.sandbox.e2b import sandbox as e2b_sdk
from e2b import (
    AuthenticationException,
    InvalidArgumentException,
    NotFoundException,
    SandboxNotFoundException,
    TemplateException,
)
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from sandbox_agent_runtime.backends import e2b, namespace_key, task_queue_key
from sandbox_agent_runtime.settings import BadSetting
from sandbox_agent_runtime.testing import project_service
from sandbox_agent_runtime.testing.support import (
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


def test_e2b_client_and_options_come_from_the_workers_settings() -> None:
    assert isinstance(e2b.sandbox_client(SETTINGS), E2BSandboxClient)

    # Unset, each option takes its default: a sandbox lives as long as the longest run.
    options = e2b.sandbox_options()
    assert options.sandbox_type == "e2b"
    assert options.template is None
    assert options.timeout == int(project_service().workflow_execution_timeout.total_seconds())
    assert options.on_timeout == "kill"
    assert options.pause_on_exit is False
    # Credentials never travel with the options: those land in history.
    assert not options.envs

    # Each set, as a worker reads them at start (E2B_SANDBOX_*).
    # Longer than the longest run, within what the provider allows.
    longer = min(
        int(project_service().workflow_execution_timeout.total_seconds()) + 60,
        e2b.OPTIONS["timeout_seconds"].high,
    )
    use_options_of(
        {
            "E2B_SANDBOX_TYPE": "e2b_code_interpreter",
            "E2B_SANDBOX_TEMPLATE": "my-team/agent-tools",
            "E2B_SANDBOX_TIMEOUT_SECONDS": str(longer),
            "E2B_SANDBOX_ON_TIMEOUT": "pause",
            "E2B_SANDBOX_PAUSE_ON_EXIT": "yes",
        }
    )
    options = e2b.sandbox_options()
    assert options.sandbox_type == "e2b_code_interpreter"
    assert options.template == "my-team/agent-tools"
    assert options.timeout == longer
    assert options.on_timeout == "pause"
    assert options.pause_on_exit is True


def test_a_lifetime_shorter_than_the_longest_run_stops_the_worker() -> None:
    run = int(project_service().workflow_execution_timeout.total_seconds())
    with pytest.raises(BadSetting) as refused:
        settings_with({"E2B_SANDBOX_TIMEOUT_SECONDS": str(run - 1)})

    message = str(refused.value)
    assert message.startswith(f"E2B_SANDBOX_TIMEOUT_SECONDS='{run - 1}' is not allowed"), message
    assert f"set it to at least {run}" in message


def test_a_sandbox_outlives_the_longest_run() -> None:
    assert (
        project_service().workflow_execution_timeout.total_seconds()
        <= e2b.sandbox_lifetime_seconds()
    )


async def test_each_sandbox_carries_the_metadata_of_its_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: dict[str, Any] = {}

    async def create_in_e2b(*args: Any, **request: Any) -> Any:
        asked.update(request)
        raise RuntimeError("E2B is out of reach")

    monkeypatch.setattr(e2b_sdk, "_sandbox_create", create_in_e2b)
    # As in the worker's `<provider>-sandbox_client_create` activity of run "run-1".
    provider = provider_of(e2b)
    environment = ActivityEnvironment()
    environment.info = dataclasses.replace(
        environment.info, workflow_id="run-1", activity_type=f"{provider}-sandbox_client_create"
    )
    with pytest.raises(RuntimeError, match="out of reach"):
        await environment.run(e2b.sandbox_client(SETTINGS).create, options=e2b.sandbox_options())

    assert asked["metadata"] == {
        e2b.workflow_metadata(): "run-1",
        e2b.provider_metadata(): provider,
        **the_services(),
    }


def test_a_worker_without_credentials_asks_for_an_e2b_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    message = refusal_without_credentials(monkeypatch)

    assert "E2B_API_KEY" in message
    assert e2b.CREDENTIALS_URL in message


async def test_e2b_errors_that_no_retry_fixes_end_a_sandbox_operation_at_once(
    completed_run: CompletedRun,
) -> None:
    errors = (
        AuthenticationException,
        NotFoundException,
        SandboxNotFoundException,
        InvalidArgumentException,
        TemplateException,
    )
    assert sorted(e2b.NON_RETRYABLE_ERRORS) == sorted(error.__name__ for error in errors)
    # Every sandbox operation of a run is scheduled not to retry them.
    await assert_scheduled_not_to_retry(completed_run, e2b.NON_RETRYABLE_ERRORS)


async def test_an_e2b_that_rejects_the_workers_key_fails_the_run_at_once(
    temporal_client: Client,
) -> None:
    # What the E2B API answers a worker whose key it does not accept.
    rejection = "Invalid API key"
    error = AuthenticationException(rejection)
    await assert_a_rejection_fails_the_run_at_once(temporal_client, e2b, error, rejection)
