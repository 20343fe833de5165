{%- set backends = cookiecutter | backends -%}
{%- set bound = cookiecutter | host_bound_backends -%}
{%- set approvals = cookiecutter.approval != "none" -%}
"""Configuration mistakes stop the service early, with a reason a person can act on.

The runtime's own suite tries every setting it declares with values it cannot
use (its reference, linked from docs/configuration.md, lists them); here, the
commands this service runs refuse a bad value in one line, this service's
code reads no environment, and its guide points at the runtime's reference."""

import ast
import re
import subprocess
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.worker import Replayer

from sandbox_agent_runtime import (
    EXIT_CANNOT_SERVE,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    agents_plugin,
    start,
    starter_main,
    worker_main,
)
from sandbox_agent_runtime.testing import (
{%- if approvals %}
    APPROVER_ENVIRONMENT,
{%- endif %}
    CODEC_SERVER,
    CREDENTIALS,
    GIT_TIMEOUT,
    LONGEST_GIT_TIMEOUT,
    LONGEST_SESSION,
    SESSION_IDLE_TIMEOUT,
    SESSION_LIFETIME,
    SETTINGS,
    STARTER,
    WORKER,
    BadSetting,
    ScriptedModel,
    activities,
    closed_address,
    free_address,
    longest_model_timeout,
    missing_credentials,
    refusal_without_credentials,
    running_worker,
    sandboxes_for_tests,
    service_environment,
    settings_with,
    without_credentials,
    worker_variables,
)

import {{ cookiecutter.package_name }}
from {{ cookiecutter.package_name }}.service import SANDBOX_PROVIDER, TASK_QUEUE
from {{ cookiecutter.package_name }}.tools import ACTIVITIES
from {{ cookiecutter.package_name }}.workflow import SandboxAgentWorkflow

HUGE = "9" * 20
# A key of PAYLOAD_ENCRYPTION_KEYS's form (32 bytes in base64).
KEY = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="


def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's credentials{{ " and approvers" if approvals }}, and none of its other variables."""
    for name in worker_variables():
        monkeypatch.delenv(name, raising=False)
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
{%- if approvals %}
    for name, value in APPROVER_ENVIRONMENT.items():
        monkeypatch.setenv(name, value)
{%- endif %}
    # Nothing listens there: a worker that tried to connect would fail differently.
    monkeypatch.setenv("TEMPORAL_ADDRESS", closed_address())


def refusal_of(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> str:
    """The line the worker's main() exits with, given ``name=value``."""
    clean_environment(monkeypatch)
    monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as exited:
        worker_main(SandboxAgentWorkflow, ACTIVITIES, [])
    # A string exit code: Python prints it on stderr and exits with status 1.
    message = exited.value.code
    assert isinstance(message, str), message
    return message


@pytest.mark.parametrize(("name", "value"), [("WORKER_RUNS_IN_FLIGHT", "²"), ("OPENAI_API", "")])
def test_a_bad_value_stops_this_services_worker_with_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str, value: str
) -> None:
    message = refusal_of(monkeypatch, name, value)

    assert "\n" not in message, message
    assert message.startswith(f"{name}={value!r} is not allowed: use "), message
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    ("environ", "field", "parsed"),
    [
        ({}, "runs_in_flight", 1000),
        ({"WORKER_RUNS_IN_FLIGHT": " 10_000 "}, "runs_in_flight", 10_000),
        ({"SANDBOX_COMMAND_TIME_LIMIT_SECONDS": "86400"}, "command_time_limit", 86_400),
        (
            {"MODEL_ACTIVITY_TIMEOUT_SECONDS": str(longest_model_timeout())},
            "model_activity_timeout",
            timedelta(seconds=longest_model_timeout()),
        ),
        ({"HEALTH_BIND_ADDRESS": "0.0.0.0:8080"}, "health_address", ("0.0.0.0", 8080)),
        ({"PROMETHEUS_BIND_ADDRESS": "[::]:9464"}, "metrics_address", ("[::]", 9464)),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4318"},
            "traces_endpoint",
            "http://otel:4318",
        ),
        ({}, "session_idle_timeout", SESSION_IDLE_TIMEOUT),
        ({}, "session_lifetime", SESSION_LIFETIME),
        ({}, "git_timeout", GIT_TIMEOUT),
        ({}, "openai_api", "responses"),
        ({"OPENAI_API": " chat_completions "}, "openai_api", "chat_completions"),
        ({}, "model_calls_per_second", None),
        ({"MODEL_CALLS_PER_SECOND": " 0.5 "}, "model_calls_per_second", 0.5),
        ({"MODEL_CALLS_PER_SECOND": "10000"}, "model_calls_per_second", 10_000),
        ({"GIT_TIMEOUT_MINUTES": " 1 "}, "git_timeout", timedelta(minutes=1)),
        (
            {"GIT_TIMEOUT_MINUTES": str(LONGEST_GIT_TIMEOUT)},
            "git_timeout",
            timedelta(minutes=LONGEST_GIT_TIMEOUT),
        ),
        ({"SESSION_IDLE_TIMEOUT": " 5 "}, "session_idle_timeout", timedelta(seconds=5)),
        (
            {"SESSION_LIFETIME": str(LONGEST_SESSION)},
            "session_lifetime",
            timedelta(seconds=LONGEST_SESSION),
        ),
        # A conversation may end the moment it would release its sandbox.
        (
            {"SESSION_IDLE_TIMEOUT": "60", "SESSION_LIFETIME": "60"},
            "session_lifetime",
            timedelta(seconds=60),
        ),
{%- if bound %}
        ({"WORKER_HOST_ID": "build-7.a_b"}, "host_id", "build-7.a_b"),
{%- endif %}
{%- if "docker" in backends %}
        ({"DOCKER_ENGINE_SHARED": "YES"}, "docker_engine_shared", True),
{%- endif %}
    ],
)
def test_a_value_in_its_bounds_is_taken(
    environ: dict[str, str], field: str, parsed: object
) -> None:
    assert getattr(settings_with(environ), field) == parsed


@pytest.mark.parametrize(
    ("environ", "refused", "allowed"),
    [
        # Both set: the lifetime is the one refused, naming the idle timeout.
        (
            {"SESSION_IDLE_TIMEOUT": "3600", "SESSION_LIFETIME": "60"},
            "SESSION_LIFETIME='60'",
            "no smaller than SESSION_IDLE_TIMEOUT (3600)",
        ),
        # The idle timeout alone, past the default lifetime: it is refused.
        (
            {"SESSION_IDLE_TIMEOUT": str(int(SESSION_LIFETIME.total_seconds()) + 1)},
            f"SESSION_IDLE_TIMEOUT='{int(SESSION_LIFETIME.total_seconds()) + 1}'",
            f"no larger than SESSION_LIFETIME ({int(SESSION_LIFETIME.total_seconds())})",
        ),
    ],
)
def test_a_lifetime_shorter_than_the_idle_timeout_is_refused_naming_both(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], refused: str, allowed: str
) -> None:
    clean_environment(monkeypatch)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as exited:
        worker_main(SandboxAgentWorkflow, ACTIVITIES, [])

    message = exited.value.code
    assert isinstance(message, str), message
    assert message.startswith(f"{refused} is not allowed: use "), message
    assert allowed in message, message


def test_worker_without_credentials_exits_at_once_with_one_clear_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    message = refusal_without_credentials(monkeypatch)

    lines = message.splitlines()
    assert len(lines) == 1, message
    assert lines[0].startswith("Missing credentials: set OPENAI_API_KEY")
    for name, value in CREDENTIALS.items():
        assert name in lines[0]
        assert value not in lines[0]
    assert "https://platform.openai.com/api-keys" in lines[0]
    assert capsys.readouterr().out == ""


def test_credentials_check_names_only_what_is_missing_and_never_a_value() -> None:
    assert missing_credentials(CREDENTIALS) is None
    for empty in ("", "  "):
        without_model = {**CREDENTIALS, "OPENAI_API_KEY": empty}
        assert missing_credentials(without_model) == (
            "Missing credentials: set OPENAI_API_KEY (https://platform.openai.com/api-keys). "
            "See .env.example."
        )


@pytest.mark.process
@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("WORKER_RUNS_IN_FLIGHT", "²"),
        ("SANDBOX_COMMAND_TIME_LIMIT_SECONDS", HUGE),
        ("MODEL_ACTIVITY_TIMEOUT_SECONDS", "-5"),
        ("HEALTH_BIND_ADDRESS", ""),
        ("SESSION_LIFETIME", "1"),
    ],
)
def test_the_worker_command_exits_1_with_one_line_and_no_traceback(name: str, value: str) -> None:
    environment = {
        **service_environment(closed_address(), "http://127.0.0.1:1"),
        **CREDENTIALS,
        name: value,
    }
    ran = subprocess.run(WORKER, env=environment, capture_output=True, text=True, timeout=120)

    assert ran.returncode == 1, ran
    assert "Traceback" not in ran.stderr
    [line] = ran.stderr.splitlines()
    assert line.startswith(f"{name}={value!r} is not allowed: use "), line
    assert ran.stdout == ""


@pytest.mark.parametrize("value", ["²", "", "localhost:8233", "ftp://ui", f"https://ui:{HUGE}"])
def test_a_bad_temporal_ui_url_stops_the_starter_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    monkeypatch.setenv("TEMPORAL_UI_URL", value)
    with pytest.raises(SystemExit) as exited:
        starter_main(["Do nothing."])

    assert exited.value.code == EXIT_USAGE
    printed = capsys.readouterr()
    [line] = printed.err.splitlines()
    assert line.startswith(f"ERROR: TEMPORAL_UI_URL={value!r} is not allowed: use "), line
    assert printed.out == ""


# A credential a bad value carries, which no process may print; and a key
# of PAYLOAD_ENCRYPTION_KEYS's form made of it (base64 text, 32 bytes).
CREDENTIAL = "SeCrEt7x9Kq2w"
CREDENTIAL_KEY = f"{CREDENTIAL}{'A' * (43 - len(CREDENTIAL))}="
# Each setting that can hold a credential, with a bad value carrying one,
# for each command that reads it, and the status that command exits with.
WITH_A_CREDENTIAL = [
    ("worker", "OBJECT_STORE_URL", f"s3://AKIAEXAMPLE:{CREDENTIAL}@bucket/agents", 1),
    ("worker", "OBJECT_STORE_URL", f"s3://bucket/agents?X-Amz-Signature={CREDENTIAL}", 1),
    # An S3 secret key holds '/' and '+'.
    ("worker", "OBJECT_STORE_URL", f"https://AKIAEXAMPLE:{CREDENTIAL}/k+y@minio/bucket", 1),
    ("worker", "OTEL_EXPORTER_OTLP_ENDPOINT", f"grpc://user:{CREDENTIAL}@collector:4317", 1),
    ("worker", "PAYLOAD_ENCRYPTION_KEYS", f"a b={CREDENTIAL_KEY}", 1),
    ("worker", "TEMPORAL_ADDRESS", f"user:{CREDENTIAL}@127.0.0.1:no-port", 1),
    ("starter", "OBJECT_STORE_URL", f"file://user:{CREDENTIAL}@host/objects", EXIT_USAGE),
    ("starter", "TEMPORAL_UI_URL", f"ftp://user:{CREDENTIAL}@ui.example", EXIT_USAGE),
    ("starter", "PAYLOAD_ENCRYPTION_KEYS", f"A={CREDENTIAL_KEY},A={CREDENTIAL_KEY}", EXIT_USAGE),
    ("starter", "TEMPORAL_ADDRESS", f"user:{CREDENTIAL}@127.0.0.1:1", EXIT_UNREACHABLE),
    ("codec-server", "OBJECT_STORE_URL", f"s3://k:{CREDENTIAL}@bucket", EXIT_CANNOT_SERVE),
    ("codec-server", "CODEC_SERVER_TOKEN", f"{CREDENTIAL} and a space", EXIT_CANNOT_SERVE),
    (
        "codec-server",
        "CODEC_SERVER_ALLOWED_ORIGINS",
        f"https://user:{CREDENTIAL}@ui.example/path",
        EXIT_CANNOT_SERVE,
    ),
    ("codec-server", "PAYLOAD_ENCRYPTION_KEYS", CREDENTIAL_KEY, EXIT_CANNOT_SERVE),
]
COMMANDS = {"worker": WORKER, "starter": [*STARTER, "Do nothing."], "codec-server": CODEC_SERVER}


@pytest.mark.process
@pytest.mark.parametrize(("command", "name", "value", "status"), WITH_A_CREDENTIAL)
def test_a_bad_setting_that_holds_a_credential_is_refused_without_printing_it(
    command: str, name: str, value: str, status: int
) -> None:
    environment = {**service_environment(closed_address(), "http://127.0.0.1:1"), **CREDENTIALS}
    if command == "codec-server":  # what it needs besides
        environment.update(
            CODEC_SERVER_BIND_ADDRESS=free_address(), PAYLOAD_ENCRYPTION_KEYS=f"A={KEY}"
        )
    environment[name] = value
    ran = subprocess.run(
        COMMANDS[command], env=environment, capture_output=True, text=True, timeout=120
    )

    assert CREDENTIAL not in ran.stdout + ran.stderr, ran
    assert ran.returncode == status, ran
    assert "Traceback" not in ran.stderr
    [line] = ran.stderr.splitlines()
    assert name in line, line
    assert ran.stdout == ""


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("s3://KEY:SECRET@bucket/x", "s3://***@bucket/x"),
        ("s3://KEY:SE/CR+ET@bucket/x", "s3://***@bucket/x"),
        ("s3://bucket/x?X-Amz-Signature=SECRET", "s3://bucket/x?***"),
        ("https://collector/v1#SECRET", "https://collector/v1#***"),
        ("KEY:SECRET@localhost:7233", "***@localhost:7233"),
        # No '@': a ':' no port follows is a KEY:SECRET.
        ("s3://KEY:SECRET/bucket/x", "s3://***/bucket/x"),
        ("http://127.0.0.1:9000/x", "http://127.0.0.1:9000/x"),
        # An '@' in the query: all of it may be the secret.
        ("s3://bucket/x?token=SE@CRET", "s3://***"),
        ("s3://KEY:SE?CRET@bucket/x", "s3://***"),
        # Nothing to mask.
        ("file:///srv/objects", "file:///srv/objects"),
        ("localhost:7233", "localhost:7233"),
        ("", ""),
    ],
)
def test_a_url_is_shown_with_its_credentials_masked(value: str, shown: str) -> None:
    assert without_credentials(value) == shown


# Where a module reads the environment: os.environ, os.getenv, and their kin.
READS = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}


def reads_the_environment(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Attribute) and node.attr in READS:
            return True
        if (
            isinstance(node, ast.ImportFrom)
            and node.module == "os"
            and any(alias.name in READS for alias in node.names)
        ):
            return True
    return False


def test_this_services_code_reads_no_environment() -> None:
    # Every setting is read by the runtime, once, at start (its own suite
    # proves where); the service's modules take theirs from it.
    service = Path({{ cookiecutter.package_name }}.__file__).parent
    assert not [path.name for path in service.rglob("*.py") if reads_the_environment(path)]


def test_the_configuration_guide_points_at_the_runtimes_reference_and_names_this_service() -> None:
    guide = (Path(__file__).parents[1] / "docs" / "configuration.md").read_text()
    section = guide.partition("\n## Settings\n")[2].partition("\n## ")[0]
    assert re.search(r"\]\(https://\S+/runtime/docs/settings\.md\)", section), section
    # What is this service's own: its names, in its guide.
    assert f"| `TASK_QUEUE` | `{TASK_QUEUE}` |" in guide
    assert f"| `{SANDBOX_PROVIDER}` |" in guide


def test_a_bad_setting_is_one_error_type() -> None:
    with pytest.raises(BadSetting):
        settings_with({"WORKER_RUNS_IN_FLIGHT": "²"})


async def test_a_run_replays_whatever_model_timeout_its_workers_had(
    temporal_client: Client,
) -> None:
    patient = replace(SETTINGS, model_activity_timeout=timedelta(seconds=95))
    async with running_worker(temporal_client, ScriptedModel(["true"]), settings=patient) as (
        client,
        _,
    ):
        handle = await start(client, "Run true.")
        await handle.result()
    calls = [step for step in await activities(handle) if step.is_model_call]
    assert calls
    assert {step.start_to_close_timeout for step in calls} == {timedelta(seconds=95)}

    # A worker with another timeout (the default) replays the run as it was.
    assert SETTINGS.model_activity_timeout != patient.model_activity_timeout
    replayer = Replayer(
        workflows=[SandboxAgentWorkflow],
        plugins=[agents_plugin(SETTINGS, sandboxes=sandboxes_for_tests())],
    )
    replayed = await replayer.replay_workflow(
        await handle.fetch_history(), raise_on_replay_failure=False
    )
    assert replayed.replay_failure is None
