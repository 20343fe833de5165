"""Configuration mistakes stop the service early, with a reason a person can act on.

Each backend's own settings are tested in its own module (test_<backend>.py)."""

import pytest

from {{ cookiecutter.package_name }} import worker
from {{ cookiecutter.package_name }}.affinity import HOST_ID_VARIABLE
from {{ cookiecutter.package_name }}.versioning import BUILD_ID, DEPLOYMENT_NAME

from .support import CREDENTIALS, refusal_without_credentials


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
