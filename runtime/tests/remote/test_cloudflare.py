"""The Cloudflare backend: its client takes the Sandbox Service Worker's
address from the worker's environment, never from a run's options, and a
Worker that refuses a sandbox ends a run at once. The tests cannot reach
Cloudflare: a stand-in for the Worker's HTTP API, on loopback, answers the
worker's real Cloudflare client."""

import time

import pytest
from agents.extensions.sandbox.cloudflare import CloudflareSandboxClient
from agents.sandbox.errors import ConfigurationError
from temporalio.client import Client

from sandbox_agent_runtime import worker
from sandbox_agent_runtime.backends import cloudflare
from sandbox_agent_runtime.testing import project
from sandbox_agent_runtime.testing.processes import refusal_of_the_worker_command_without
from sandbox_agent_runtime.testing.support import (
    CREDENTIALS,
    CompletedRun,
    assert_scheduled_not_to_retry,
    assert_the_sandbox_fails_the_run_at_once,
    http_stand_in,
    refusal_without_credentials,
    settings_with,
)

WORKER_URL = "https://sandbox.agents-team.workers.dev"


def test_the_workers_address_reaches_the_client_and_not_the_options() -> None:
    settings = settings_with({"CLOUDFLARE_SANDBOX_WORKER_URL": f" {WORKER_URL}/ "})
    client = cloudflare.sandbox_client(settings)
    assert isinstance(client, CloudflareSandboxClient)
    assert isinstance(client, cloudflare.WorkerAddressedCloudflareSandboxClient)
    assert client.worker_url == WORKER_URL

    options = cloudflare.sandbox_options()
    # Neither the address nor the key travel with the options: those land in history.
    assert options.worker_url == ""
    assert options.api_key is None


@pytest.mark.parametrize("url", ["sandbox.workers.dev", "ftp://sandbox.workers.dev", "https://"])
def test_a_worker_with_a_bad_worker_address_stops_with_one_line(
    monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CLOUDFLARE_SANDBOX_WORKER_URL", url)
    monkeypatch.setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
    with pytest.raises(SystemExit) as exited:
        worker.main(project().workflow, project().tool_activities, [])

    message = exited.value.code
    assert isinstance(message, str)
    [line] = message.splitlines()
    allowed = "is not allowed: use an http:// or https:// URL"
    assert f"CLOUDFLARE_SANDBOX_WORKER_URL={url!r} {allowed}" in line


def test_a_worker_without_the_workers_address_asks_for_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    message = refusal_without_credentials(monkeypatch)

    assert "CLOUDFLARE_SANDBOX_WORKER_URL" in message
    assert cloudflare.CREDENTIALS_URL in message


@pytest.mark.process
def test_the_worker_command_without_the_workers_address_exits_1_at_once() -> None:
    line = refusal_of_the_worker_command_without("CLOUDFLARE_SANDBOX_WORKER_URL", CREDENTIALS)

    assert line.startswith(
        f"Missing credentials: set CLOUDFLARE_SANDBOX_WORKER_URL ({cloudflare.CREDENTIALS_URL})"
    )


async def test_cloudflare_errors_that_no_retry_fixes_end_a_sandbox_operation_at_once(
    completed_run: CompletedRun,
) -> None:
    assert [ConfigurationError.__name__] == list(cloudflare.NON_RETRYABLE_ERRORS)
    # Every sandbox operation of a run is scheduled not to retry them.
    await assert_scheduled_not_to_retry(completed_run, cloudflare.NON_RETRYABLE_ERRORS)


@pytest.mark.parametrize(
    ("status", "answer", "reason"),
    [
        pytest.param(
            401,
            {"error": "Invalid API key", "code": "UNAUTHORIZED"},
            "HTTP 401: UNAUTHORIZED: Invalid API key",
            id="rejected-key",
        ),
        pytest.param(
            500,
            {"error": "Container image not found", "code": "INTERNAL_ERROR"},
            "HTTP 500: INTERNAL_ERROR: Container image not found",
            id="worker-without-its-container",
        ),
    ],
)
async def test_a_misconfigured_cloudflare_worker_fails_the_run_at_once_saying_why(
    temporal_client: Client,
    monkeypatch: pytest.MonkeyPatch,
    status: int,
    answer: dict[str, str],
    reason: str,
) -> None:
    # The team's Sandbox Service Worker, answering as it does a request it refuses.
    with http_stand_in(status, answer) as service:
        # The SDK reads the Worker's key itself.
        monkeypatch.setenv("CLOUDFLARE_SANDBOX_API_KEY", "test-key")
        began = time.monotonic()
        # The worker's own Cloudflare client, as it builds it at start.
        client = cloudflare.sandbox_client(
            settings_with({"CLOUDFLARE_SANDBOX_WORKER_URL": service.url})
        )
        await assert_the_sandbox_fails_the_run_at_once(temporal_client, cloudflare, client, reason)

    assert time.monotonic() - began < 30
    # The client asked the Worker for a sandbox once, with the worker's key:
    # nothing was retried.
    assert service.asked == ["POST /v1/sandbox"]
    assert service.authorizations == ["Bearer test-key"]
