"""Configuration mistakes stop the service early, with a reason a person can act on.

Each backend's own settings are tested in its own module (test_<backend>.py)."""

from datetime import timedelta

import pytest
from temporalio.client import Client
from temporalio.worker import Replayer

from {{ cookiecutter.package_name }}.machinery import worker
from {{ cookiecutter.package_name }}.machinery.affinity import HOST_ID_VARIABLE
from {{ cookiecutter.package_name }}.machinery.shared import MODEL_ACTIVITY_TIMEOUT
from {{ cookiecutter.package_name }}.machinery.starter import start
from {{ cookiecutter.package_name }}.machinery.versioning import BUILD_ID, DEPLOYMENT_NAME
from {{ cookiecutter.package_name }}.machinery.workflow import SandboxAgentWorkflow

from .scripted_model import ScriptedModel
from .support import (
    CREDENTIALS,
    activities,
    refusal_without_credentials,
    running_worker,
    sandboxes_for_tests,
)


def test_worker_without_credentials_exits_at_once_with_one_clear_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    message = refusal_without_credentials(monkeypatch)

    lines = message.splitlines()
    assert len(lines) == 1, message
    assert lines[0].startswith("Missing credentials: set OPENAI_API_KEY")
    for name in CREDENTIALS:
        assert name in lines[0]
    assert "https://platform.openai.com/api-keys" in lines[0]
    assert capsys.readouterr().out == ""


def test_credentials_check_names_only_what_is_missing() -> None:
    assert worker.missing_credentials(CREDENTIALS) is None
    without_model = {**CREDENTIALS, "OPENAI_API_KEY": ""}
    assert worker.missing_credentials(without_model) == (
        "Missing credentials: set OPENAI_API_KEY (https://platform.openai.com/api-keys). "
        "See .env.example."
    )


@pytest.mark.parametrize("host", ["two words", "a/b", "-leading-dash", "x" * 201])
def test_a_host_id_that_cannot_name_a_task_queue_stops_the_worker_with_one_line(
    monkeypatch: pytest.MonkeyPatch, host: str
) -> None:
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv(HOST_ID_VARIABLE, host)
    with pytest.raises(SystemExit) as exited:
        worker.main([])

    message = str(exited.value.code)
    assert "\n" not in message
    assert message.startswith(f"{HOST_ID_VARIABLE}={host!r} cannot name this worker's host")


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        (
            {DEPLOYMENT_NAME: "agents"},
            f"{DEPLOYMENT_NAME}='agents' is set but {BUILD_ID} is not: set both",
        ),
        (
            {BUILD_ID: "3f2c1ab"},
            f"{BUILD_ID}='3f2c1ab' is set but {DEPLOYMENT_NAME} is not: set both",
        ),
        (
            {DEPLOYMENT_NAME: "my.agents", BUILD_ID: "3f2c1ab"},
            f"{DEPLOYMENT_NAME}='my.agents' is not a valid name",
        ),
        (
            {DEPLOYMENT_NAME: "agents", BUILD_ID: "two words"},
            f"{BUILD_ID}='two words' is not a valid name",
        ),
    ],
)
def test_half_a_worker_version_stops_the_worker_with_one_line(
    monkeypatch: pytest.MonkeyPatch, settings: dict[str, str], says: str
) -> None:
    for name, value in {**CREDENTIALS, **settings}.items():
        monkeypatch.setenv(name, value)
    for name in {DEPLOYMENT_NAME, BUILD_ID} - settings.keys():
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SystemExit) as exited:
        worker.main([])

    message = str(exited.value.code)
    assert "\n" not in message
    assert message.startswith(says), message


def test_model_calls_take_their_timeout_from_the_workers_environment() -> None:
    variable = worker.MODEL_TIMEOUT_VARIABLE
    assert worker.model_activity_timeout({}) == MODEL_ACTIVITY_TIMEOUT
    assert worker.model_activity_timeout({variable: ""}) == MODEL_ACTIVITY_TIMEOUT
    assert worker.model_activity_timeout({variable: "95"}) == timedelta(seconds=95)
    longest = worker.LONGEST_MODEL_TIMEOUT
    assert worker.model_activity_timeout({variable: str(longest)}) == timedelta(seconds=longest)


@pytest.mark.parametrize("value", ["0", "-5", "1.5", "soon", str(worker.LONGEST_MODEL_TIMEOUT + 1)])
def test_a_model_timeout_a_run_has_no_room_for_stops_the_worker_with_one_line(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    for name, setting in {**CREDENTIALS, worker.MODEL_TIMEOUT_VARIABLE: value}.items():
        monkeypatch.setenv(name, setting)
    with pytest.raises(SystemExit) as exited:
        worker.main([])

    message = str(exited.value.code)
    assert "\n" not in message
    assert message.startswith(
        f"{worker.MODEL_TIMEOUT_VARIABLE}={value!r} is not a whole number of seconds "
        f"from 1 to {worker.LONGEST_MODEL_TIMEOUT}"
    ), message


async def test_a_run_replays_whatever_model_timeout_its_workers_had(
    temporal_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(worker.MODEL_TIMEOUT_VARIABLE, "95")
    async with running_worker(temporal_client, ScriptedModel(["true"])) as (client, _):
        handle = await start(client, "Run true.")
        await handle.result()
    calls = [step for step in await activities(handle) if step.is_model_call]
    assert calls
    assert {step.start_to_close_timeout for step in calls} == {timedelta(seconds=95)}

    # A worker with another timeout (the default) replays the run as it was.
    monkeypatch.delenv(worker.MODEL_TIMEOUT_VARIABLE)
    replayer = Replayer(
        workflows=[SandboxAgentWorkflow],
        plugins=[worker.agents_plugin(sandboxes=sandboxes_for_tests())],
    )
    replayed = await replayer.replay_workflow(
        await handle.fetch_history(), raise_on_replay_failure=False
    )
    assert replayed.replay_failure is None
