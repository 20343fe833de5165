"""Where to connect comes from the environment or a profile file, never from code.

The same ``temporalio.envconfig`` settings steer the worker and the starter,
so moving from the dev server to Temporal Cloud is a change of environment.
The test server has only the namespace ``default``: a test that chooses
another learns, from the one line that says it does not exist, that the
service at the chosen address was asked for it.
"""

from pathlib import Path

import pytest
from temporalio.client import Client

from {{ cookiecutter.package_name }}.connection import ConnectionFailed, connect

from .support import closed_address

TEMPORAL_VARIABLES = (
    "TEMPORAL_ADDRESS",
    "TEMPORAL_NAMESPACE",
    "TEMPORAL_API_KEY",
    "TEMPORAL_TLS",
    "TEMPORAL_PROFILE",
    "TEMPORAL_CONFIG_FILE",
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
