"""The Modal backend: its client, its options and its credentials come from
the worker's settings, and Modal's errors that no retry fixes end a run at once. The
tests cannot reach Modal: a stand-in for its API (gRPC over HTTP/2, on
loopback) answers the worker's real Modal client."""

import asyncio
import dataclasses
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

import h2.config
import h2.connection
import h2.events
import modal
import pytest
from agents.extensions.sandbox.modal import (
    ModalImageSelector,
    ModalSandboxClient,
    ModalSandboxSession,
    ModalSandboxSessionState,
)
from agents.sandbox.manifest import Manifest
from agents.sandbox.snapshot import resolve_snapshot
from modal.exception import AuthError, InvalidError, NotFoundError, PermissionDeniedError
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from sandbox_agent_runtime import current
from sandbox_agent_runtime.backends import modal as modal_backend
from sandbox_agent_runtime.backends import namespace_key, task_queue_key
from sandbox_agent_runtime.testing import project_service
from sandbox_agent_runtime.testing.processes import refusal_of_the_worker_command_without
from sandbox_agent_runtime.testing.support import (
    CREDENTIALS,
    SETTINGS,
    CompletedRun,
    assert_a_rejection_fails_the_run_at_once,
    assert_scheduled_not_to_retry,
    assert_the_sandbox_fails_the_run_at_once,
    provider_of,
    refusal_without_credentials,
    settings_with,
    use_options_of,
)


# Whose a sandbox is (backends.service_labels()): an ActivityEnvironment's run is in
# the namespace "default".
def the_services() -> dict[str, str]:
    return {namespace_key(): "default", task_queue_key(): project_service().task_queue}


def test_modal_client_and_options_come_from_the_workers_settings() -> None:
    client = modal_backend.sandbox_client(SETTINGS)
    assert isinstance(client, ModalSandboxClient)
    # Unset, each option takes its default: the Agents SDK's default image,
    # an app named after the service, a sandbox as long-lived as the longest run.
    assert client._default_image is None
    options = modal_backend.sandbox_options()
    assert options.app_name == current().name
    assert options.timeout == int(project_service().workflow_execution_timeout.total_seconds())

    # Each set, as a worker reads them at start (MODAL_SANDBOX_*).
    # Longer than the longest run, within what the provider allows.
    longer = min(
        int(project_service().workflow_execution_timeout.total_seconds()) + 60,
        modal_backend.OPTIONS["timeout_seconds"].high,
    )
    chosen = {
        "MODAL_SANDBOX_APP_NAME": "agents.prod",
        "MODAL_SANDBOX_IMAGE": "python:3.12-slim",
        "MODAL_SANDBOX_TIMEOUT_SECONDS": str(longer),
    }
    client = modal_backend.sandbox_client(settings_with(chosen))
    assert client._default_image == ModalImageSelector.from_tag("python:3.12-slim")
    use_options_of(chosen)
    options = modal_backend.sandbox_options()
    assert options.app_name == "agents.prod"
    assert options.timeout == longer


def test_a_sandbox_outlives_the_longest_run() -> None:
    assert (
        project_service().workflow_execution_timeout.total_seconds()
        <= modal_backend.sandbox_lifetime_seconds()
    )


async def test_each_sandbox_carries_the_tags_of_its_run(monkeypatch: pytest.MonkeyPatch) -> None:
    tagged: dict[str, str] = {}

    async def set_tags(tags: dict[str, str]) -> None:
        tagged.update(tags)

    # The SDK's own session around Modal's handle of a sandbox it created.
    sandbox: Any = SimpleNamespace(set_tags=SimpleNamespace(aio=set_tags))
    session_id = uuid.uuid4()
    state = ModalSandboxSessionState(
        session_id=session_id,
        manifest=Manifest(),
        snapshot=resolve_snapshot(None, str(session_id)),
        app_name=str(modal_backend.options()["app_name"]),
    )
    created = ModalSandboxClient()._wrap_session(
        ModalSandboxSession.from_state(state, sandbox=sandbox)
    )

    async def create_in_modal(self: Any, **request: Any) -> Any:
        return created

    monkeypatch.setattr(ModalSandboxClient, "create", create_in_modal)
    # As in the worker's `<provider>-sandbox_client_create` activity of run "run-1".
    provider = provider_of(modal_backend)
    environment = ActivityEnvironment()
    environment.info = dataclasses.replace(
        environment.info, workflow_id="run-1", activity_type=f"{provider}-sandbox_client_create"
    )
    session = await environment.run(
        modal_backend.sandbox_client(SETTINGS).create, options=modal_backend.sandbox_options()
    )

    assert session is created
    assert tagged == {
        modal_backend.workflow_tag(): "run-1",
        modal_backend.provider_tag(): provider,
        **the_services(),
    }


def test_a_worker_without_credentials_asks_for_a_modal_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    message = refusal_without_credentials(monkeypatch)

    assert "MODAL_TOKEN_ID with MODAL_TOKEN_SECRET" in message
    assert modal_backend.CREDENTIALS_URL in message


@pytest.mark.process
@pytest.mark.parametrize("missing", ["MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET"])
def test_the_worker_command_without_a_modal_token_exits_1_at_once(missing: str) -> None:
    line = refusal_of_the_worker_command_without(missing, CREDENTIALS)

    assert line.startswith("Missing credentials: set MODAL_TOKEN_ID with MODAL_TOKEN_SECRET")
    assert modal_backend.CREDENTIALS_URL in line


async def test_modal_errors_that_no_retry_fixes_end_a_sandbox_operation_at_once(
    completed_run: CompletedRun,
) -> None:
    errors = (AuthError, NotFoundError, InvalidError, PermissionDeniedError)
    assert sorted(modal_backend.NON_RETRYABLE_ERRORS) == sorted(error.__name__ for error in errors)
    # Every sandbox operation of a run is scheduled not to retry them.
    await assert_scheduled_not_to_retry(completed_run, modal_backend.NON_RETRYABLE_ERRORS)


async def test_a_modal_that_rejects_the_workers_token_fails_the_run_at_once(
    temporal_client: Client,
) -> None:
    # What the Modal API answers a worker whose token it does not accept.
    rejection = "Token ID is malformed"
    await assert_a_rejection_fails_the_run_at_once(
        temporal_client, modal_backend, AuthError(rejection), rejection
    )


# gRPC status codes the stand-in answers with (grpc/status.proto).
INVALID_ARGUMENT, NOT_FOUND, UNAUTHENTICATED = 3, 5, 16


@asynccontextmanager
async def modal_api_stand_in(status: int, message: str) -> AsyncIterator[list[str]]:
    """A stand-in for Modal's API on loopback that answers every call with
    gRPC ``status`` and ``message``, and the Modal client of this process
    pointed at it; yields the methods it was asked for, in order."""
    asked: list[str] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        connection.initiate_connection()
        writer.write(connection.data_to_send())
        while data := await reader.read(65_536):
            for event in connection.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    asked.append(dict(event.headers or [])[b":path"].decode())
                    # A gRPC "trailers-only" answer: the status, and no message.
                    answer = [
                        (":status", "200"),
                        ("content-type", "application/grpc"),
                        ("grpc-status", str(status)),
                        ("grpc-message", message),
                    ]
                    connection.send_headers(event.stream_id, answer, end_stream=True)
            writer.write(connection.data_to_send())
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    with pytest.MonkeyPatch.context() as environment:
        environment.setenv("MODAL_SERVER_URL", f"http://127.0.0.1:{port}")
        environment.setenv("MODAL_TOKEN_ID", "ak-test")
        environment.setenv("MODAL_TOKEN_SECRET", "as-test")
        # Modal keeps one client per process, made from the environment the
        # first time it is needed: make it again, here and after.
        modal.Client.set_env_client(None)
        try:
            async with server:
                yield asked
        finally:
            modal.Client.set_env_client(None)


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        pytest.param(UNAUTHENTICATED, "Token ID is malformed", id="rejected-token"),
        pytest.param(INVALID_ARGUMENT, "Invalid app name", id="invalid-app"),
        pytest.param(NOT_FOUND, "Environment 'main' not found", id="unknown-environment"),
    ],
)
async def test_a_misconfigured_modal_sandbox_fails_the_run_at_once_saying_why(
    temporal_client: Client, status: int, reason: str
) -> None:
    async with modal_api_stand_in(status, reason) as asked:
        began = time.monotonic()
        # The worker's own Modal client, as it builds it at start.
        await assert_the_sandbox_fails_the_run_at_once(
            temporal_client, modal_backend, modal_backend.sandbox_client(SETTINGS), reason
        )

    assert time.monotonic() - began < 30
    # The client asked Modal for the run's app, once: nothing was retried.
    assert asked == ["/modal.client.ModalClient/AppGetOrCreate"]
