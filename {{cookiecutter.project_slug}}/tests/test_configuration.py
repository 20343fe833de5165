{% set backends = cookiecutter | backends -%}
{% set secrets = cookiecutter | secret_env_vars -%}
"""Configuration mistakes stop the service early, with a reason a person can act on."""

import pytest
{%- if "daytona" in backends %}
from agents.extensions.sandbox.daytona import DaytonaSandboxClient
{%- endif %}
{%- if "e2b" in backends %}
from agents.extensions.sandbox.e2b import E2BSandboxClient
{%- endif %}
{%- if "local" in backends %}
from agents.sandbox.sandboxes.unix_local import UnixLocalSandboxClient
{%- endif %}
{%- if "daytona" in backends %}
from daytona import (
    DaytonaAuthenticationError,
    DaytonaAuthorizationError,
    DaytonaNotFoundError,
    DaytonaValidationError,
)
{%- endif %}
{%- if "docker" in backends %}
from docker.errors import ImageNotFound, NotFound  # type: ignore[import-untyped]
{%- endif %}
{%- if "e2b" in backends %}
from e2b import (
    AuthenticationException,
    InvalidArgumentException,
    NotFoundException,
    SandboxNotFoundException,
    TemplateException,
)
{%- endif %}
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError

from {{ cookiecutter.package_name }} import (
    worker,
)
from {{ cookiecutter.package_name }}.backends import (
{%- for backend in backends | sort %}
    {{ backend }},
{%- endfor %}
)
from {{ cookiecutter.package_name }}.starter import (
    start,
)

from .scripted_model import ScriptedModel
{%- if cookiecutter | remote_backends %}
from .support import (
    REJECTION,
    CompletedRun,
    RejectingSandbox,
    ScheduledStep,
    running_worker,
    scheduled_steps,
)
{%- else %}
from .support import REJECTION, RejectingSandbox, running_worker
{%- endif %}

# Every variable the worker could take a credential from.
CREDENTIALS = {
    "OPENAI_API_KEY": "sk-test",
{%- if "daytona" in backends %}
    "DAYTONA_API_KEY": "test-key",
{%- endif %}
{%- if "e2b" in backends %}
    "E2B_API_KEY": "test-key",
{%- endif %}
{%- for name in secrets %}
    {{ name | tojson }}: "test-value",
{%- endfor %}
}


{%- if cookiecutter | remote_backends %}


def assert_not_retried(steps: list[ScheduledStep], errors: tuple[str, ...]) -> None:
    sandbox_steps = [step for step in steps if step.is_sandbox_operation]
    assert sandbox_steps
    for step in sandbox_steps:
        assert set(errors) <= set(step.retry_policy.non_retryable_error_types or ())
{%- endif %}


def test_worker_without_credentials_exits_at_once_with_one_clear_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # No credentials at all. The Temporal address leads nowhere, so a worker
    # that tried to connect would fail differently.
    for alternatives, _ in worker.REQUIRED_CREDENTIALS:
        for names in alternatives:
            for name in names:
                monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
    with pytest.raises(SystemExit) as exited:
        worker.main([])

    # A string exit code: Python prints it on stderr and exits with status 1.
    message = exited.value.code
    assert isinstance(message, str)
    lines = message.splitlines()
    assert len(lines) == 1, message
    assert lines[0].startswith("Missing credentials: set OPENAI_API_KEY")
    for name in CREDENTIALS:
        assert name in lines[0]
    assert "https://platform.openai.com/api-keys" in lines[0]
{%- if "daytona" in backends %}
    assert "DAYTONA_JWT_TOKEN with DAYTONA_ORGANIZATION_ID" in lines[0]
    assert daytona.CREDENTIALS_URL in lines[0]
{%- endif %}
{%- if "e2b" in backends %}
    assert e2b.CREDENTIALS_URL in lines[0]
{%- endif %}
    assert capsys.readouterr().out == ""


def test_credentials_check_names_only_what_is_missing() -> None:
    assert worker.missing_credentials(CREDENTIALS) is None
    without_model = {**CREDENTIALS, "OPENAI_API_KEY": ""}
    assert worker.missing_credentials(without_model) == (
        "Missing credentials: set OPENAI_API_KEY (https://platform.openai.com/api-keys). "
        "See .env.example."
    )
{%- if "daytona" in backends %}
    token_instead_of_key = {
        **{name: value for name, value in CREDENTIALS.items() if name != "DAYTONA_API_KEY"},
        "DAYTONA_JWT_TOKEN": "test-token",
        "DAYTONA_ORGANIZATION_ID": "test-org",
    }
    assert worker.missing_credentials(token_instead_of_key) is None
    del token_instead_of_key["DAYTONA_ORGANIZATION_ID"]
    assert "DAYTONA_ORGANIZATION_ID" in str(worker.missing_credentials(token_instead_of_key))
{%- endif %}
{%- for backend in backends %}
{%- if backend == "daytona" %}


def test_daytona_client_and_options_come_from_the_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DAYTONA_API_KEY", "test-key")
    assert isinstance(daytona.sandbox_client(), DaytonaSandboxClient)

    options = daytona.sandbox_options()
    assert options.auto_stop_interval == {{ cookiecutter.daytona_auto_stop_interval_minutes | int }}
    assert options.create_timeout == {{ cookiecutter.daytona_create_timeout_seconds | int }}
    assert options.pause_on_exit is {{ "True" if cookiecutter.daytona_pause_on_exit else "False" }}
{%- if cookiecutter.daytona_image %}
    assert options.image == {{ cookiecutter.daytona_image | tojson }}
{%- else %}
    assert options.image is None
{%- endif %}
{%- if cookiecutter.daytona_snapshot %}
    assert options.sandbox_snapshot_name == {{ cookiecutter.daytona_snapshot | tojson }}
{%- else %}
    assert options.sandbox_snapshot_name is None
{%- endif %}
    # Credentials never travel with the options: those land in history.
    assert not options.env_vars


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
    assert_not_retried(await scheduled_steps(completed_run.handle), daytona.NON_RETRYABLE_ERRORS)
{%- elif backend == "e2b" %}


def test_e2b_client_and_options_come_from_the_answers() -> None:
    assert isinstance(e2b.sandbox_client(), E2BSandboxClient)

    options = e2b.sandbox_options()
    assert options.sandbox_type == {{ cookiecutter.e2b_sandbox_type | tojson }}
{%- if cookiecutter.e2b_template %}
    assert options.template == {{ cookiecutter.e2b_template | tojson }}
{%- else %}
    assert options.template is None
{%- endif %}
    assert options.timeout == {{ cookiecutter.e2b_timeout_seconds | int }}
    assert options.on_timeout == {{ cookiecutter.e2b_on_timeout | tojson }}
    assert options.pause_on_exit is {{ "True" if cookiecutter.e2b_pause_on_exit else "False" }}
    # Credentials never travel with the options: those land in history.
    assert not options.envs


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
    assert_not_retried(await scheduled_steps(completed_run.handle), e2b.NON_RETRYABLE_ERRORS)
{%- elif backend == "docker" %}


def test_docker_options_come_from_the_answers() -> None:
    options = docker.sandbox_options()
    assert options.image == {{ cookiecutter.docker_image | tojson }}
{%- if cookiecutter.docker_network == "none" %}
    assert options.network_mode == "none"
{%- else %}
    assert options.network_mode is None  # Docker's default network, bridge
{%- endif %}
    # The worker labels each container when it creates it (test_docker.py).
    assert options.labels == {}
    assert docker.REQUIRED_ENVIRONMENT == ()


async def test_docker_errors_that_no_retry_fixes_end_a_sandbox_operation_at_once(
    completed_run: CompletedRun,
) -> None:
    errors = (docker.ImageUnavailable, docker.ContainerRefused, ImageNotFound, NotFound)
    assert sorted(docker.NON_RETRYABLE_ERRORS) == sorted(error.__name__ for error in errors)
    # Every sandbox operation of a run is scheduled not to retry them.
    assert_not_retried(await scheduled_steps(completed_run.handle), docker.NON_RETRYABLE_ERRORS)
{%- elif backend == "local" %}


def test_local_client_is_a_shell_on_the_workers_host() -> None:
    assert isinstance(local.sandbox_client(), UnixLocalSandboxClient)
    assert local.REQUIRED_ENVIRONMENT == ()
{%- endif %}
{%- endfor %}


async def test_a_sandbox_that_rejects_the_worker_fails_the_run_at_once(
    temporal_client: Client,
) -> None:
    async with running_worker(
        temporal_client, ScriptedModel(["true"]), sandbox=RejectingSandbox()
    ) as (client, _):
        handle = await start(client, "Do nothing.")
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()

    cause: BaseException | None = failure.value
    reasons = []
    while cause is not None:
        reasons.append(str(cause))
        cause = cause.__cause__
    assert any(REJECTION in reason for reason in reasons), reasons

    # The sandbox was asked once: the error was not retried.
    attempts = [
        event.activity_task_started_event_attributes.attempt
        async for event in handle.fetch_history_events()
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]
    failures = [
        event
        async for event in handle.fetch_history_events()
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED
    ]
    assert len(failures) == 1
    assert attempts[-1] == 1
