{%- set backends = cookiecutter | backends -%}
{%- set bound = cookiecutter | host_bound_backends -%}
{%- set approvals = cookiecutter.approval != "none" -%}
"""Configuration mistakes stop the service early, with a reason a person can act on.

Every variable the worker reads (settings.py) is tried with values it cannot
use: each stops the real ``main()`` with one line naming the variable, the
value and what is allowed, and status 1, before the worker connects. The
environment is read in settings.py alone (and Temporal's own variables, in
connection.py), and docs/configuration.md lists every setting as the code
parses it."""

import ast
import re
import subprocess
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.worker import Replayer

import sandbox_agent_runtime
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
    bad_option_values,
    closed_address,
    free_address,
    longest_model_timeout,
    missing_credentials,
    refusal_without_credentials,
    running_worker,
    sandboxes_for_tests,
    service_environment,
    settings_with,
    starter_variables,
    without_credentials,
    worker_variables,
)

import {{ cookiecutter.package_name }}
from {{ cookiecutter.package_name }}.tools import ACTIVITIES
from {{ cookiecutter.package_name }}.workflow import SandboxAgentWorkflow

HUGE = "9" * 20
NUMBER = ["²", "", "-5", HUGE, "1.5", "soon"]
ADDRESS = ["²", "", "8080", "0.0.0.0:-1", f"0.0.0.0:{HUGE}"]
# A key of PAYLOAD_ENCRYPTION_KEYS's form (32 bytes in base64), and the
# variables whose refusal names what is wrong but never shows the value.
KEY = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
SECRET = {"PAYLOAD_ENCRYPTION_KEYS"}
# Values each variable of the worker cannot use: a superscript digit (which
# str.isdigit() takes for one), nothing, a negative, an absurdly large one,
# and whatever else its form rules out.
BAD_VALUES: dict[str, list[str]] = {
    "WORKER_RUNS_IN_FLIGHT": [*NUMBER, "100001"],
    "SANDBOX_COMMAND_TIME_LIMIT_SECONDS": [*NUMBER, "0", "86401"],
    "GIT_TIMEOUT_MINUTES": [*NUMBER, "0", str(LONGEST_GIT_TIMEOUT + 1)],
    "OPENAI_API": ["", "Responses", "completions", "chat", "responses,chat_completions"],
    "REPO_ALLOWED_SCHEMES": ["²", "", "file", "https,ext"],
    "REPO_ALLOWED_HOSTS": ["²", "", "*", "github.com,*", "a/b"],
    "REPO_ALLOWED_NETWORKS": ["²", "", "10.0.0.0/33", "github.com"],
    "MODEL_CALLS_PER_SECOND": [*NUMBER[:4], "0", "0.0001", "1e3", "2/s", "10001"],
    "MODEL_ACTIVITY_TIMEOUT_SECONDS": [*NUMBER, "0", str(longest_model_timeout() + 1)],
    "HEALTH_BIND_ADDRESS": ADDRESS,
    "PROMETHEUS_BIND_ADDRESS": ADDRESS,
    "OTEL_EXPORTER_OTLP_ENDPOINT": [
        "²",
        "",
        "localhost:4318",
        "ftp://collector",
        f"http://x:{HUGE}",
    ],
    "TEMPORAL_DEPLOYMENT_NAME": ["", "my.agents", "two words", "x" * 256],
    "TEMPORAL_WORKER_BUILD_ID": ["", "two words", "x" * 256],
    "OBJECT_STORE_URL": ["²", "", "relative/store", "ftp://store", "s3://", "file://host/x"],
    # Its message never shows the value (keys are secrets): see SECRET.
    "PAYLOAD_ENCRYPTION_KEYS": [
        "²",
        "",
        "A",
        "A=",
        "A=c2hvcnQ=",
        f"A={KEY},A={KEY}",
        f"a b={KEY}",
        KEY,
    ],
    # Past a year; or alone, longer than the default lifetime, or shorter
    # than the default idle timeout.
    "SESSION_IDLE_TIMEOUT": [
        *NUMBER,
        "0",
        str(LONGEST_SESSION + 1),
        str(int(SESSION_LIFETIME.total_seconds()) + 1),
    ],
    "SESSION_LIFETIME": [
        *NUMBER,
        "0",
        str(LONGEST_SESSION + 1),
        str(int(SESSION_IDLE_TIMEOUT.total_seconds()) - 1),
    ],
{%- if bound %}
    "WORKER_HOST_ID": ["²", "", "-5", "x" * 201, "a/b", "two words"],
{%- endif %}
{%- if approvals %}
    "APPROVERS": ["²", "", "-5", "alice", f"alice={'A' * 10_000}"],
{%- endif %}
{%- if "docker" in backends %}
    "DOCKER_ENGINE_SHARED": ["²", "", "-1", "sometimes"],
    "DOCKER_SANDBOX_MEMORY": ["²", "", "-5g", f"{HUGE}g", "1025g", "64m"],
    "DOCKER_SANDBOX_CPUS": ["²", "", "-1", HUGE, "nan", "0"],
    "DOCKER_SANDBOX_PIDS": [*NUMBER, "15"],
    "DOCKER_SANDBOX_WORKSPACE_SIZE": ["²", "", "-1g", f"{HUGE}g", "4g"],
    "DOCKER_SANDBOX_USER": ["²", "", "-1", HUGE, "root", "1:2:3"],
{%- endif %}
    # Each option of each of its backends (<BACKEND>_SANDBOX_*): backends/.
    **bad_option_values(),
}
# The other half of a worker version, for a test of one half's value.
VERSION_HALVES = {
    "TEMPORAL_DEPLOYMENT_NAME": ("TEMPORAL_WORKER_BUILD_ID", "3f2c1ab"),
    "TEMPORAL_WORKER_BUILD_ID": ("TEMPORAL_DEPLOYMENT_NAME", "agents"),
}


def test_every_variable_of_the_worker_is_tried_with_bad_values() -> None:
    assert set(BAD_VALUES) == set(worker_variables())


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
    if name in VERSION_HALVES:
        monkeypatch.setenv(*VERSION_HALVES[name])
    monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as exited:
        worker_main(SandboxAgentWorkflow, ACTIVITIES, [])
    # A string exit code: Python prints it on stderr and exits with status 1.
    message = exited.value.code
    assert isinstance(message, str), message
    return message


@pytest.mark.parametrize(
    ("name", "value"), [(name, value) for name, values in BAD_VALUES.items() for value in values]
)
def test_a_bad_value_stops_the_worker_with_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str, value: str
) -> None:
    message = refusal_of(monkeypatch, name, value)

    assert "\n" not in message and len(message) < 500, message
    assert message.startswith(name), message
    if name in SECRET:
        assert KEY[:16] not in message, message
    else:
        assert repr(value[:80]) in message, message
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


def test_the_environment_is_read_in_settings_and_in_the_connection_alone() -> None:
    runtime = Path(sandbox_agent_runtime.__file__).parent
    # The tests' helpers (sandbox_agent_runtime.testing) set up the
    # environment of the processes they start: no service reads them.
    readers = {
        str(path.relative_to(runtime))
        for path in sorted(runtime.rglob("*.py"))
        if "testing" not in path.relative_to(runtime).parts and reads_the_environment(path)
    }
    assert readers == {"settings.py", "connection.py"}
    service = Path({{ cookiecutter.package_name }}.__file__).parent
    assert not [path.name for path in service.rglob("*.py") if reads_the_environment(path)]


def test_the_configuration_guide_lists_every_setting_with_the_bounds_the_code_has(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    guide = Path(__file__).parents[1] / "docs" / "configuration.md"
    section = guide.read_text().partition("\n## Settings\n")[2].partition("\n## ")[0]
    rows = {
        found.group(1): found.group(0)
        for found in re.finditer(r"^\| `([A-Z0-9_]+)` \|.*\|$", section, re.MULTILINE)
    }
    assert set(rows) == {*worker_variables(), *starter_variables()}
    # Each number a refusal names (bounds, default) is in the setting's row.
    for name in worker_variables():
        value = "" if name in VERSION_HALVES else "²"
        allowed = refusal_of(monkeypatch, name, value).partition("is not allowed: use ")[2]
        for number in re.findall(r"\d+(?:\.\d+)?", allowed):
            assert number in rows[name].replace(",", ""), (name, number, rows[name])


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
