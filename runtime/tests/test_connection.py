"""Where to connect comes from the environment or a profile file, never from code.

The same ``temporalio.envconfig`` settings steer the worker and the starter,
so moving from the dev server to Temporal Cloud is a change of environment.
The test server has only the namespace ``default``: a test that chooses
another learns, from the one line that says it does not exist, that the
service at the chosen address was asked for it.
"""

import subprocess
from pathlib import Path

import pytest
from temporalio.client import Client

from sandbox_agent_runtime.connection import (
    TLS_FILE_VARIABLES,
    ConnectionFailed,
    connect,
)
from sandbox_agent_runtime.testing.processes import PROJECT, STARTER, service_environment
from sandbox_agent_runtime.testing.support import closed_address

TEMPORAL_VARIABLES = (
    "TEMPORAL_ADDRESS",
    "TEMPORAL_NAMESPACE",
    "TEMPORAL_API_KEY",
    "TEMPORAL_TLS",
    "TEMPORAL_PROFILE",
    "TEMPORAL_CONFIG_FILE",
    *TLS_FILE_VARIABLES,
)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No TEMPORAL_* settings and no profile file from the machine running the tests."""
    for name in TEMPORAL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TEMPORAL_CONFIG_FILE", str(tmp_path / "absent.toml"))
    return monkeypatch


async def test_a_profile_file_chooses_address_and_namespace(
    temporal_client: Client, clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    address = temporal_client.service_client.config.target_host
    profiles = tmp_path / "temporal.toml"
    profiles.write_text(
        "[profile.default]\n"
        f'address = "{closed_address()}"\n'
        "\n"
        "[profile.staging]\n"
        f'address = "{address}"\n'
        'namespace = "agents-staging"\n'
    )
    clean_env.setenv("TEMPORAL_CONFIG_FILE", str(profiles))
    clean_env.setenv("TEMPORAL_PROFILE", "staging")

    with pytest.raises(ConnectionFailed) as failed:
        await connect()

    assert str(failed.value).startswith(f"Temporal at {address} has no namespace 'agents-staging'")


async def test_environment_variables_choose_address_and_namespace(
    temporal_client: Client, clean_env: pytest.MonkeyPatch
) -> None:
    address = temporal_client.service_client.config.target_host
    clean_env.setenv("TEMPORAL_ADDRESS", address)
    clean_env.setenv("TEMPORAL_NAMESPACE", "agents-from-env")

    with pytest.raises(ConnectionFailed) as failed:
        await connect()

    assert str(failed.value).startswith(f"Temporal at {address} has no namespace 'agents-from-env'")


async def test_a_namespace_the_service_does_not_have_is_one_clear_error(
    temporal_client: Client, clean_env: pytest.MonkeyPatch
) -> None:
    # Each call would fail "not found" instead: the starter would report a
    # missing workflow, the worker a traceback.
    address = temporal_client.service_client.config.target_host
    clean_env.setenv("TEMPORAL_ADDRESS", address)
    clean_env.setenv("TEMPORAL_NAMESPACE", "nowhere")

    with pytest.raises(ConnectionFailed) as failed:
        await connect()

    message = str(failed.value)
    assert message.startswith(f"Temporal at {address} has no namespace 'nowhere': ")
    assert "set TEMPORAL_NAMESPACE" in message
    assert "\n" not in message

    clean_env.setenv("TEMPORAL_NAMESPACE", temporal_client.namespace)
    assert (await connect()).namespace == temporal_client.namespace


async def test_an_api_key_turns_tls_on_and_tls_false_turns_it_off(
    temporal_client: Client, clean_env: pytest.MonkeyPatch
) -> None:
    # Temporal Cloud needs only address, namespace and key: a key implies TLS.
    # The dev server speaks plain text, so the TLS handshake it gets fails.
    address = temporal_client.service_client.config.target_host
    clean_env.setenv("TEMPORAL_ADDRESS", address)
    clean_env.setenv("TEMPORAL_API_KEY", "not-a-real-key")
    with pytest.raises(ConnectionFailed, match=f"Cannot reach Temporal at {address}"):
        await connect()

    clean_env.setenv("TEMPORAL_TLS", "false")
    client = await connect()
    assert client.service_client.config.api_key == "not-a-real-key"
    assert client.service_client.config.tls is False


async def test_with_nothing_set_it_looks_for_a_dev_server_on_localhost(
    clean_env: pytest.MonkeyPatch,
) -> None:
    async def nothing_listens(**config: object) -> Client:
        raise RuntimeError("connection refused")

    clean_env.setattr(Client, "connect", nothing_listens)

    with pytest.raises(ConnectionFailed) as failed:
        await connect()

    message = str(failed.value)
    assert message.startswith("Cannot reach Temporal at localhost:7233 (namespace default)")


async def test_an_unreachable_address_is_one_clear_error(clean_env: pytest.MonkeyPatch) -> None:
    address = closed_address()
    clean_env.setenv("TEMPORAL_ADDRESS", address)

    with pytest.raises(ConnectionFailed) as failed:
        await connect()

    message = str(failed.value)
    assert message.startswith(f"Cannot reach Temporal at {address} (namespace default)")
    assert "\n" not in message


async def one_line_failure() -> str:
    """What connect() fails with: one line, with no traceback to read."""
    with pytest.raises(ConnectionFailed) as failed:
        await connect()
    message = str(failed.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    ("address", "wrong"),
    [
        ("127.0.0.1:99999", "invalid port number"),
        ("not a host:x", "invalid international domain name"),
        (":7233", "empty host"),
    ],
)
async def test_an_address_that_is_not_host_and_port_is_one_clear_error(
    clean_env: pytest.MonkeyPatch, address: str, wrong: str
) -> None:
    # Refused before any connection is tried: at once, not after retries.
    clean_env.setenv("TEMPORAL_ADDRESS", address)

    message = await one_line_failure()

    assert message.startswith(f"Invalid Temporal address TEMPORAL_ADDRESS={address!r} ({wrong}): ")
    assert "give host:port" in message


async def test_a_profile_the_config_file_lacks_is_one_clear_error(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    profiles = tmp_path / "temporal.toml"
    profiles.write_text('[profile.default]\naddress = "localhost:7233"\n[profile.staging]\n')
    clean_env.setenv("TEMPORAL_CONFIG_FILE", str(profiles))
    clean_env.setenv("TEMPORAL_PROFILE", "nowhere")

    message = await one_line_failure()

    assert message == (
        f"TEMPORAL_PROFILE='nowhere' names no profile of TEMPORAL_CONFIG_FILE={str(profiles)!r}, "
        "which has 'default', 'staging': set it to a profile the file has, "
        "or unset it to use the default."
    )


@pytest.mark.parametrize(
    ("content", "wrong"),
    [
        ("[profile.default\n", "TOML parse error at line 1, column 17: unclosed table"),
        (
            "[profile.default]\naddress = 7233\n",
            "TOML parse error at line 2, column 11: invalid type: integer `7233`, expected a string",
        ),
        (None, "Is a directory"),
    ],
    ids=["not-toml", "not-a-string", "a-directory"],
)
async def test_a_config_file_that_cannot_be_read_is_one_clear_error(
    clean_env: pytest.MonkeyPatch, tmp_path: Path, content: str | None, wrong: str
) -> None:
    config_file = tmp_path / "temporal.toml"
    if content is None:
        config_file.mkdir()
    else:
        config_file.write_text(content)
    clean_env.setenv("TEMPORAL_CONFIG_FILE", str(config_file))

    message = await one_line_failure()

    assert message.startswith(
        f"Cannot read the Temporal config file TEMPORAL_CONFIG_FILE={str(config_file)!r}: {wrong}"
    )
    assert message.endswith("Correct it, or set TEMPORAL_CONFIG_FILE to a valid TOML file.")


@pytest.mark.parametrize("variable", TLS_FILE_VARIABLES)
async def test_a_tls_file_that_does_not_exist_is_one_clear_error(
    clean_env: pytest.MonkeyPatch, tmp_path: Path, variable: str
) -> None:
    missing = str(tmp_path / "missing.pem")
    clean_env.setenv(variable, missing)

    message = await one_line_failure()

    assert message == (
        f"Cannot read the TLS file {variable}={missing!r}: No such file or directory. "
        "Set it to a readable PEM file, or unset it."
    )


async def test_a_tls_file_of_a_profile_that_does_not_exist_names_the_profile(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    missing = str(tmp_path / "missing.pem")
    profiles = tmp_path / "temporal.toml"
    profiles.write_text(f"[profile.cloud.tls]\nserver_ca_cert_path = {missing!r}\n")
    clean_env.setenv("TEMPORAL_CONFIG_FILE", str(profiles))
    clean_env.setenv("TEMPORAL_PROFILE", "cloud")

    message = await one_line_failure()

    assert message.startswith(
        f"Cannot read the TLS file {missing!r} of profile 'cloud' in "
        f"TEMPORAL_CONFIG_FILE={str(profiles)!r}: No such file or directory."
    )


@pytest.mark.process
def test_the_starter_reports_a_setting_that_cannot_work_in_one_line_and_exits_2(
    tmp_path: Path,
) -> None:
    # 2 is the status the README documents for a service the starter cannot
    # reach; a setting that cannot work is reported the same way, at once.
    environment = {
        **service_environment(closed_address(), "http://127.0.0.1:1"),
        "TEMPORAL_CONFIG_FILE": str(tmp_path / "absent.toml"),
    }
    misconfigured = [
        ({"TEMPORAL_ADDRESS": "127.0.0.1:99999"}, "Invalid Temporal address TEMPORAL_ADDRESS="),
        ({"TEMPORAL_PROFILE": "nowhere"}, "TEMPORAL_PROFILE='nowhere' names no profile of "),
    ]
    for setting, line in misconfigured:
        starter = subprocess.run(
            [*STARTER, "Say it."],
            cwd=PROJECT,
            env={**environment, **setting},
            capture_output=True,
            text=True,
            timeout=60,
        )

        assert starter.returncode == 2, starter
        assert "Traceback" not in starter.stdout + starter.stderr, starter
        assert starter.stdout == "", starter
        [printed] = starter.stderr.splitlines()
        assert printed.startswith(line), starter
