"""Every declared setting of every command is tried with the bad values its
declaration gives: each is refused in one line naming the variable, before
the command does anything. The reference page and the data a render's
``.env.example`` is made from are what the declarations make."""

import ast
import dataclasses
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

import sandbox_agent_runtime
from sandbox_agent_runtime import service as services
from sandbox_agent_runtime.service import current
from sandbox_agent_runtime.settings import (
    DECLARED,
    SETTINGS,
    BadSetting,
    api_settings,
    codec_server_settings,
    starter_settings,
    worker_settings,
)
from sandbox_agent_runtime.settings.declared import COMMANDS, Command, read_by
from sandbox_agent_runtime.settings.reference import data, page
from sandbox_agent_runtime.testing import approver
from sandbox_agent_runtime.testing.support import CREDENTIALS

RUNTIME = Path(__file__).parents[1]
KEY = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
# What each command needs besides to read its settings, and its reader.
READERS: dict[Command, tuple[Callable[[Mapping[str, str]], object], dict[str, str]]] = {
    "worker": (worker_settings, {}),
    "starter": (starter_settings, {}),
    "codec server": (codec_server_settings, {"PAYLOAD_ENCRYPTION_KEYS": f"A={KEY}"}),
    "API": (api_settings, {"API_TOKENS": f"ci-bot:{'0' * 64}"}),
}


@pytest.fixture(params=["plain", "every condition"])
def service(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The stand-in's service as it is, and with every condition a setting
    is read under: approvals, and the docker backend (host-bound)."""
    if request.param == "every condition":
        plain = current()
        every = dataclasses.replace(
            plain, approval="commands", providers={**plain.providers, "docker": "docker"}
        )
        monkeypatch.setattr(services, "_configured", every)
    yield request.param


def environment(command: Command) -> dict[str, str]:
    """What ``command`` needs to read its settings and start, no more."""
    base = {**READERS[command][1], **(approver.ENVIRONMENT if current().approvals else {})}
    return {**CREDENTIALS, **base} if command == "worker" else base


def test_every_command_reads_its_settings_as_declared_and_takes_their_defaults(
    service: str,
) -> None:
    for command in COMMANDS:
        read, _ = READERS[command]
        read(environment(command))
    if service == "every condition":
        assert {"APPROVERS", "WORKER_HOST_ID", "DOCKER_SANDBOX_MEMORY"} <= set(read_by("worker"))
        assert "APPROVER_KEY_FILE" in read_by("starter")
    else:
        assert "APPROVERS" not in read_by("worker")
        assert "DOCKER_SANDBOX_MEMORY" not in read_by("worker")


def test_every_setting_set_to_nothing_is_refused_and_has_bad_values() -> None:
    for setting in SETTINGS:
        assert setting.bad_values()[0] == "", setting.name
        assert len(setting.bad_values()) >= 2, setting.name


def refusal(command: Command, name: str, value: str) -> str:
    """The line ``command`` refuses ``name=value`` with."""
    read, _ = READERS[command]
    environ = environment(command)
    together = DECLARED[name].together
    if together:
        environ[together[0]] = together[1]
    environ[name] = value
    with pytest.raises(BadSetting) as refused:
        read(environ)
    return str(refused.value)


def test_every_declared_setting_of_every_command_refuses_its_bad_values_in_one_line_naming_it(
    service: str,
) -> None:
    tried = 0
    for command in COMMANDS:
        for name in read_by(command):
            setting = DECLARED[name]
            for value in setting.bad_values():
                message = refusal(command, name, value)
                assert "\n" not in message and len(message) < 500, (command, message)
                assert name in message.split(" ", 1)[0] or message.startswith(f"{name} "), (
                    command,
                    value,
                    message,
                )
                if setting.secret:
                    assert len(value) < 16 or value[:16] not in message, (command, message)
                tried += 1
    assert tried > 100


def test_the_reference_page_is_what_the_declarations_make() -> None:
    # Made with: uv run python -m sandbox_agent_runtime.settings.reference > docs/settings.md
    assert (RUNTIME / "docs" / "settings.md").read_text() == page()
    # and --json > docs/settings.json
    assert (RUNTIME / "docs" / "settings.json").read_text() == data()


def test_the_reference_page_names_every_setting_with_its_bounds() -> None:
    text = page()
    for setting in SETTINGS:
        [row] = [line for line in text.splitlines() if line.startswith(f"| `{setting.name}`")][:1]
        if setting.kind == "number":
            assert f" {setting.low} to " in row, row
            assert str(setting.default) in row, row


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


def test_the_environment_is_read_in_the_settings_and_in_the_connection_alone() -> None:
    package = Path(sandbox_agent_runtime.__file__).parent
    # The tests' helpers (sandbox_agent_runtime.testing) set up the
    # environment of the processes they start: no service reads them.
    readers = {
        path.relative_to(package).as_posix()
        for path in sorted(package.rglob("*.py"))
        if "testing" not in path.relative_to(package).parts and reads_the_environment(path)
    }
    assert readers - {"connection.py"} <= {
        f"settings/{p.name}" for p in package.glob("settings/*.py")
    }
    assert "connection.py" in readers
    assert "settings/worker.py" in readers
