"""The Vercel backend: its client, its options and its credentials come from
the worker's settings, and Vercel's errors that no retry fixes end a run at once. The
tests cannot reach Vercel, and its SDK always calls api.vercel.com (it takes
no other address): its errors are raised by a local stand-in."""

import httpx
import pytest
from agents.extensions.sandbox.vercel import VercelSandboxClient
from temporalio.client import Client
from vercel.sandbox import (
    SandboxAuthError,
    SandboxNotFoundError,
    SandboxPermissionError,
    SandboxValidationError,
)

from sandbox_agent_runtime.backends import vercel
from sandbox_agent_runtime.settings import missing_credentials
from sandbox_agent_runtime.testing import project_service
from sandbox_agent_runtime.testing.processes import refusal_of_the_worker_command_without
from sandbox_agent_runtime.testing.support import (
    CREDENTIALS,
    SETTINGS,
    CompletedRun,
    assert_a_rejection_fails_the_run_at_once,
    assert_scheduled_not_to_retry,
    refusal_without_credentials,
    use_options_of,
)


def test_vercel_client_and_options_come_from_the_workers_settings() -> None:
    assert isinstance(vercel.sandbox_client(SETTINGS), VercelSandboxClient)

    # Unset, each option takes its default: Node 22, a sandbox as long-lived
    # as the longest run.
    options = vercel.sandbox_options()
    assert options.runtime == "node22"
    assert (
        options.timeout_ms
        == int(project_service().workflow_execution_timeout.total_seconds()) * 1000
    )
    # Credentials never travel with the options: those land in history.
    assert not options.env
    assert options.project_id is None
    assert options.team_id is None

    # Each set, as a worker reads them at start (VERCEL_SANDBOX_*).
    use_options_of(
        {"VERCEL_SANDBOX_RUNTIME": "python3.13", "VERCEL_SANDBOX_TIMEOUT_SECONDS": "18000"}
    )
    options = vercel.sandbox_options()
    assert options.runtime == "python3.13"
    assert options.timeout_ms == 18_000_000


def test_a_sandbox_outlives_the_longest_run() -> None:
    assert (
        project_service().workflow_execution_timeout.total_seconds()
        <= vercel.sandbox_lifetime_seconds()
    )


def test_a_worker_without_credentials_asks_for_a_vercel_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    message = refusal_without_credentials(monkeypatch)

    assert "VERCEL_OIDC_TOKEN or VERCEL_TOKEN with VERCEL_PROJECT_ID with VERCEL_TEAM_ID" in message
    assert vercel.CREDENTIALS_URL in message


def test_a_vercel_token_with_its_project_and_team_stands_in_for_the_oidc_token() -> None:
    token_instead = {
        **{name: value for name, value in CREDENTIALS.items() if name != "VERCEL_OIDC_TOKEN"},
        "VERCEL_TOKEN": "test-token",
        "VERCEL_PROJECT_ID": "prj_test",
        "VERCEL_TEAM_ID": "team_test",
    }
    assert missing_credentials(token_instead) is None
    del token_instead["VERCEL_TEAM_ID"]
    assert "VERCEL_TEAM_ID" in str(missing_credentials(token_instead))


@pytest.mark.process
def test_the_worker_command_without_a_vercel_token_exits_1_at_once() -> None:
    line = refusal_of_the_worker_command_without("VERCEL_OIDC_TOKEN", CREDENTIALS)

    assert line.startswith("Missing credentials: set VERCEL_OIDC_TOKEN or VERCEL_TOKEN with")
    assert vercel.CREDENTIALS_URL in line


async def test_vercel_errors_that_no_retry_fixes_end_a_sandbox_operation_at_once(
    completed_run: CompletedRun,
) -> None:
    errors = (
        SandboxAuthError,
        SandboxPermissionError,
        SandboxNotFoundError,
        SandboxValidationError,
    )
    assert sorted(vercel.NON_RETRYABLE_ERRORS) == sorted(error.__name__ for error in errors)
    # Every sandbox operation of a run is scheduled not to retry them.
    await assert_scheduled_not_to_retry(completed_run, vercel.NON_RETRYABLE_ERRORS)


async def test_a_vercel_that_rejects_the_workers_token_fails_the_run_at_once(
    temporal_client: Client,
) -> None:
    # What the Vercel API answers a worker whose token it does not accept.
    rejection = "The request is missing an authentication token"
    request = httpx.Request("POST", "https://api.vercel.com/v1/sandboxes")
    error = SandboxAuthError(httpx.Response(401, request=request), rejection)
    await assert_a_rejection_fails_the_run_at_once(temporal_client, vercel, error, rejection)
