"""Where the worker and the starter find the Temporal service.

Both read the standard ``temporalio.envconfig`` settings: the ``TEMPORAL_*``
environment variables (``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``,
``TEMPORAL_API_KEY``, ``TEMPORAL_TLS*``, ``TEMPORAL_PROFILE``) and the profiles
of the ``temporal.toml`` configuration file. With none of them set they use a
local dev server: ``localhost:7233``, namespace ``default``.

A namespace the service does not have fails here, in one line: otherwise every
call would fail with "not found", which the starter would take for a missing
workflow and the worker reports with a traceback.

So does a setting that cannot work (an address that is not host:port, a
profile the config file lacks, a config file that is not TOML, a TLS file that
cannot be read), at once and naming the setting and its value: the starter
and the worker print that line instead of a traceback, and the starter exits
as for a service it cannot reach, the worker as one that cannot start.
"""

import os
from collections.abc import Sequence

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client, Plugin
from temporalio.converter import DataConverter
from temporalio.envconfig import ClientConfig, ClientConnectConfig
from temporalio.runtime import Runtime
from temporalio.service import RPCError, RPCStatusCode

from sandbox_agent_runtime.display import without_credentials, without_secrets

DEFAULT_ADDRESS = "localhost:7233"
# The variables naming the TLS files that envconfig reads.
TLS_FILE_VARIABLES = (
    "TEMPORAL_TLS_CLIENT_CERT_PATH",
    "TEMPORAL_TLS_CLIENT_KEY_PATH",
    "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
)


class ConnectionFailed(Exception):
    """The Temporal service could not be reached, or has no such namespace,
    or a setting for it cannot work."""


def config_file() -> str:
    """The profile file, as a message names it."""
    path = os.environ.get("TEMPORAL_CONFIG_FILE")
    if path:
        return f"TEMPORAL_CONFIG_FILE={path!r}"
    return "the default config file (temporalio/temporal.toml in the user config directory)"


def setting(value: str, *variables: str) -> str:
    """The setting that gave ``value``, as a message names it: the variable
    of ``variables`` that holds it, or else the profile in use."""
    for variable in variables:
        if os.environ.get(variable) == value:
            return f"{variable}={without_credentials(value)!r}"
    profile = os.environ.get("TEMPORAL_PROFILE") or "default"
    return f"{without_credentials(value)!r} of profile {profile!r} in {config_file()}"


def one_line(error: Exception, prefix: str) -> str:
    """The SDK's message in one line, without ``prefix``: a TOML error's
    place and what is wrong there, not the lines of the file between them."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()] or [repr(error)]
    text = lines[0] if len(lines) == 1 else f"{lines[0]}: {lines[-1]}"
    return text.removeprefix(prefix)


def load_config() -> ClientConnectConfig:
    """The settings, or ConnectionFailed naming the one that cannot work."""
    try:
        return ClientConfig.load_client_connect_config()
    except OSError as e:
        # Reading a TLS file: missing, a directory, or not readable.
        raise ConnectionFailed(
            f"Cannot read the TLS file {setting(str(e.filename), *TLS_FILE_VARIABLES)}: "
            f"{e.strerror}. Set it to a readable PEM file, or unset it."
        ) from e
    except RuntimeError as e:
        # The SDK's ConfigError, which it does not export (a RuntimeError of
        # its native bridge).
        raise config_error(e) from e


def config_error(error: RuntimeError) -> ConnectionFailed:
    """What the SDK's ConfigError means, found by loading the file alone."""
    try:
        profiles = ClientConfig.load().profiles
    except RuntimeError as e:
        return ConnectionFailed(
            f"Cannot read the Temporal config file {config_file()}: "
            f"{one_line(e, 'Configuration loading error: ')}. "
            "Correct it, or set TEMPORAL_CONFIG_FILE to a valid TOML file."
        )
    wanted = os.environ.get("TEMPORAL_PROFILE")
    if wanted and wanted not in profiles:
        has = ", ".join(map(repr, sorted(profiles))) or "no profiles"
        return ConnectionFailed(
            f"TEMPORAL_PROFILE={wanted!r} names no profile of {config_file()}, which has "
            f"{has}: set it to a profile the file has, or unset it to use the default."
        )
    # Settings that conflict: a TLS file given both as a path and as data.
    return ConnectionFailed(
        f"Invalid Temporal settings: {one_line(error, 'Invalid configuration: ')}."
    )


async def connect(
    plugins: Sequence[Plugin] = (),
    runtime: Runtime | None = None,
    data_converter: DataConverter | None = None,
) -> Client:
    """Connect to the configured Temporal service (on ``runtime``, if given:
    the worker's, when it serves metrics), with ``data_converter`` if given
    (one with the object store's external storage)."""
    config = load_config()
    config.setdefault("target_host", DEFAULT_ADDRESS)
    # As messages name it: an address holds no credential, but one may be
    # pasted into it (user:key@host:7233).
    address = without_credentials(config["target_host"])
    namespace = config.get("namespace", "default")

    def unreachable(error: Exception) -> ConnectionFailed:
        # The SDK's message may repeat the address, credentials and all.
        said = without_secrets(str(error), config["target_host"])
        return ConnectionFailed(
            f"Cannot reach Temporal at {address} (namespace {namespace}): {said}. "
            "Start a dev server with `uv run temporal server start-dev`, "
            "or set TEMPORAL_ADDRESS."
        )

    def invalid(error: ValueError) -> ConnectionFailed:
        reason = str(error)
        if reason.startswith("invalid target URL: "):
            return ConnectionFailed(
                f"Invalid Temporal address {setting(config['target_host'], 'TEMPORAL_ADDRESS')} "
                f"({reason.removeprefix('invalid target URL: ')}): give host:port, a host "
                "name or IP address and a port from 1 to 65535, such as localhost:7233."
            )
        return ConnectionFailed(
            f"Invalid Temporal settings for {address}: {reason}. "
            "Check the TEMPORAL_TLS_* variables, or the tls table of the profile."
        )

    try:
        client = await Client.connect(
            **config,
            plugins=list(plugins),
            runtime=runtime,
            data_converter=data_converter or DataConverter.default,
        )
    except ValueError as e:
        # The address or the TLS settings, refused before connecting.
        raise invalid(e) from e
    except RuntimeError as e:
        raise unreachable(e) from e
    try:
        await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=client.namespace), retry=True
        )
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            raise ConnectionFailed(
                f"Temporal at {address} has no namespace {namespace!r}: set "
                "TEMPORAL_NAMESPACE to one it has, or create it with "
                f"`temporal operator namespace create --namespace {namespace}`."
            ) from e
        if e.status == RPCStatusCode.UNAVAILABLE:
            raise unreachable(e) from e
        # Anything else (a key that may not describe namespaces, say) is
        # left to the calls that need it.
    return client
