"""Configuration mistakes stop the service early, with a reason a person can act on.

Each backend's own settings are tested in its own module (test_<backend>.py)."""

import pytest

from {{ cookiecutter.package_name }} import worker

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
