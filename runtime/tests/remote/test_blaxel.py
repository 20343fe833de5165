"""The Blaxel backend: its client, its options and its credentials come from
the worker's settings, the options travel with a run (the SDK's own cannot), and
Blaxel's refusals end a run at once. The tests cannot reach Blaxel: a
stand-in for its HTTP API, on loopback, answers the worker's real Blaxel
client (the SDK always calls api.blaxel.ai; the test moves its HTTP client
with the SDK's own ``with_base_url``, which the worker never calls)."""

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from agents.extensions.sandbox.blaxel import BlaxelSandboxClient, BlaxelSandboxSessionState
from agents.sandbox.manifest import Manifest
from agents.sandbox.snapshot import resolve_snapshot
from blaxel.core.authentication import auth as blaxel_credentials
from blaxel.core.authentication.types import CredentialsError
from blaxel.core.client import client as blaxel_api
from blaxel.core.common.settings import settings as blaxel_settings
from blaxel.core.sandbox import SandboxAPIError, SandboxInstance
from temporalio.client import Client
from temporalio.openai_agents.sandbox._temporal_activity_models import CreateSessionArgs

from sandbox_agent_runtime.backends import blaxel
from sandbox_agent_runtime.testing import project_service
from sandbox_agent_runtime.testing.processes import refusal_of_the_worker_command_without
from sandbox_agent_runtime.testing.support import (
    CREDENTIALS,
    SETTINGS,
    CompletedRun,
    assert_scheduled_not_to_retry,
    assert_the_sandbox_fails_the_run_at_once,
    http_stand_in,
    refusal_without_credentials,
    use_options_of,
)


def test_blaxel_client_and_options_come_from_the_workers_settings() -> None:
    assert isinstance(blaxel.sandbox_client(SETTINGS), BlaxelSandboxClient)

    # Unset, each option takes its default: Blaxel's base image in us-pdx-1,
    # a sandbox as long-lived as the longest run.
    options = blaxel.sandbox_options()
    assert options.image is None
    assert options.region == "us-pdx-1"
    assert options.ttl == f"{int(project_service().workflow_execution_timeout.total_seconds())}s"
    assert options.exposed_ports == ()
    # Credentials never travel with the options: those land in history.
    assert set(type(options).model_fields) == {"type", "image", "region", "ttl", "exposed_ports"}


def test_the_options_travel_with_a_run_to_the_activity_that_creates_its_sandbox() -> None:
    # What the workflow sends and the worker's activity reads back: the
    # Temporal plugin's arguments, through JSON as they are recorded.
    sent = CreateSessionArgs(client_options=blaxel.sandbox_options())
    received = CreateSessionArgs.model_validate_json(sent.model_dump_json())

    assert received.client_options == blaxel.sandbox_options()


def test_a_sandbox_outlives_the_longest_run() -> None:
    assert (
        project_service().workflow_execution_timeout.total_seconds()
        <= blaxel.sandbox_lifetime_seconds()
    )
    # Blaxel refuses a lifetime under 5 minutes.
    assert blaxel.sandbox_lifetime_seconds() >= 300


async def test_each_run_s_options_reach_blaxel(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: dict[str, Any] = {}

    async def create_in_blaxel(config: dict[str, Any], **_: Any) -> Any:
        asked.update(config)
        raise RuntimeError("Blaxel is out of reach")

    monkeypatch.setattr(SandboxInstance, "create_if_not_exists", create_in_blaxel)
    client = blaxel.sandbox_client(SETTINGS)
    with pytest.raises(RuntimeError, match="out of reach"):
        await client.create(options=blaxel.sandbox_options())
    assert "image" not in asked
    assert asked["region"] == "us-pdx-1"
    assert asked["ttl"] == f"{int(project_service().workflow_execution_timeout.total_seconds())}s"

    # Each option set, as a worker reads them at start (BLAXEL_SANDBOX_*).
    # Longer than the longest run, within what the provider allows.
    longer = min(
        int(project_service().workflow_execution_timeout.total_seconds()) + 60,
        blaxel.OPTIONS["ttl_seconds"].high,
    )
    use_options_of(
        {
            "BLAXEL_SANDBOX_IMAGE": "python:3.12-slim",
            "BLAXEL_SANDBOX_REGION": "eu-lon-1",
            "BLAXEL_SANDBOX_TTL_SECONDS": str(longer),
        }
    )
    asked.clear()
    with pytest.raises(RuntimeError, match="out of reach"):
        await client.create(options=blaxel.sandbox_options())
    assert asked["image"] == "python:3.12-slim"
    assert asked["region"] == "eu-lon-1"
    assert asked["ttl"] == f"{longer}s"


def test_a_worker_without_credentials_asks_for_a_blaxel_key_and_workspace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    message = refusal_without_credentials(monkeypatch)

    assert f"BL_API_KEY with BL_WORKSPACE ({blaxel.CREDENTIALS_URL})" in message


@pytest.mark.process
@pytest.mark.parametrize("missing", ["BL_API_KEY", "BL_WORKSPACE"])
def test_the_worker_command_without_a_blaxel_credential_exits_1_at_once(missing: str) -> None:
    line = refusal_of_the_worker_command_without(missing, CREDENTIALS)

    assert line.startswith(
        f"Missing credentials: set BL_API_KEY with BL_WORKSPACE ({blaxel.CREDENTIALS_URL})"
    )


async def test_blaxel_errors_that_no_retry_fixes_end_a_sandbox_operation_at_once(
    completed_run: CompletedRun,
) -> None:
    assert sorted(blaxel.NON_RETRYABLE_ERRORS) == sorted(
        error.__name__
        for error in (blaxel.BlaxelRefused, blaxel.BlaxelSandboxGone, CredentialsError)
    )
    # Every sandbox operation of a run is scheduled not to retry them.
    await assert_scheduled_not_to_retry(completed_run, blaxel.NON_RETRYABLE_ERRORS)


@pytest.mark.parametrize(
    ("status", "retried"),
    [(400, False), (401, False), (403, False), (404, False), (422, False)]
    + [(408, True), (409, True), (429, True), (500, True), (503, True)],
)
def test_only_blaxel_s_refusals_are_not_retried(status: int, retried: bool) -> None:
    error = SandboxAPIError("what Blaxel said", status_code=status)
    with pytest.raises(Exception) as raised, blaxel.refusals_not_retried():
        raise error

    assert (raised.value is error) == retried
    if not retried:
        assert isinstance(raised.value, blaxel.BlaxelRefused)
        assert str(raised.value) == f"Blaxel answered {status}: what Blaxel said"


@pytest.fixture
def blaxel_credentials_set(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The Blaxel SDK with credentials, as in a worker started with them
    (the SDK reads them once, when it is imported), and its API client put
    back where it was afterwards."""
    monkeypatch.setenv("BL_API_KEY", "test-key")
    monkeypatch.setenv("BL_WORKSPACE", "test-workspace")
    credentials = blaxel_credentials(blaxel_settings.env, blaxel_settings.base_url)
    before = blaxel_settings.auth
    monkeypatch.setattr(blaxel_settings, "auth", credentials)
    blaxel_api.with_auth(credentials)
    try:
        yield
    finally:
        blaxel_api.with_auth(before)
        blaxel_api.with_base_url(blaxel_settings.base_url)


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        pytest.param(401, "Invalid API key", id="rejected-key"),
        pytest.param(400, "Invalid region eu-nowhere-9", id="unknown-region"),
    ],
)
async def test_a_misconfigured_blaxel_sandbox_fails_the_run_at_once_saying_why(
    temporal_client: Client, blaxel_credentials_set: None, status: int, reason: str
) -> None:
    # Blaxel's API, answering as it does a request it refuses.
    with http_stand_in(status, {"code": status, "error": "Refused", "message": reason}) as api:
        blaxel_api.with_base_url(api.url)
        began = time.monotonic()
        # The worker's own Blaxel client, as it builds it at start.
        client = blaxel.sandbox_client(SETTINGS)
        await assert_the_sandbox_fails_the_run_at_once(
            temporal_client, blaxel, client, f"Blaxel answered {status}: {reason}"
        )

    assert time.monotonic() - began < 30
    # The client asked Blaxel for a sandbox, once: nothing was retried.
    assert api.asked == ["POST /sandboxes?createIfNotExist=true"]
    [headers] = api.headers
    assert headers["X-Blaxel-Authorization"] == "Bearer test-key"
    assert headers["X-Blaxel-Workspace"] == "test-workspace"


def state_of(sandbox_name: str) -> BlaxelSandboxSessionState:
    """What a run's history holds of its Blaxel sandbox."""
    return BlaxelSandboxSessionState(
        session_id=uuid.uuid4(),
        manifest=Manifest(root=blaxel.WORKSPACE_ROOT),
        snapshot=resolve_snapshot(None, "test"),
        sandbox_name=sandbox_name,
    )


@pytest.mark.parametrize(
    ("status", "body", "said"),
    [
        pytest.param(404, {"code": 404, "error": "Not found"}, "not found", id="deleted"),
        pytest.param(
            200,
            {"metadata": {"name": "agents-0123456789ab"}, "spec": {}, "status": "TERMINATED"},
            "TERMINATED",
            id="terminated",
        ),
    ],
)
async def test_a_sandbox_blaxel_deleted_is_never_replaced_by_an_empty_one(
    blaxel_credentials_set: None, status: int, body: dict[str, Any], said: str
) -> None:
    # Another worker takes up the run's sandbox, which Blaxel has deleted.
    with http_stand_in(status, body) as api:
        blaxel_api.with_base_url(api.url)
        client = blaxel.sandbox_client(SETTINGS)
        with pytest.raises(blaxel.BlaxelSandboxGone) as gone:
            await client.resume(state_of("agents-0123456789ab"))

    assert str(gone.value).startswith(
        f"Blaxel's sandbox agents-0123456789ab is {said}: the run's workspace is gone"
    )
    # Blaxel was only asked about it: no sandbox was created in its place.
    assert api.asked == ["GET /sandboxes/agents-0123456789ab"]
