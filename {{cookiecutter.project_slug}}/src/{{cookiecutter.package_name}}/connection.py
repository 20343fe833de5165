"""Where the worker and the starter find the Temporal service.

Both read the standard ``temporalio.envconfig`` settings: the ``TEMPORAL_*``
environment variables (``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``,
``TEMPORAL_API_KEY``, ``TEMPORAL_TLS*``, ``TEMPORAL_PROFILE``) and the profiles
of the ``temporal.toml`` configuration file. With none of them set they use a
local dev server: ``localhost:7233``, namespace ``default``.
"""

from collections.abc import Sequence

from temporalio.client import Client, Plugin
from temporalio.envconfig import ClientConfig
from temporalio.runtime import Runtime

DEFAULT_ADDRESS = "localhost:7233"


class ConnectionFailed(Exception):
    """The Temporal service could not be reached."""


async def connect(plugins: Sequence[Plugin] = (), runtime: Runtime | None = None) -> Client:
    """Connect to the configured Temporal service (on ``runtime``, if given:
    the worker's, when it serves metrics)."""
    config = ClientConfig.load_client_connect_config()
    config.setdefault("target_host", DEFAULT_ADDRESS)
    address = config["target_host"]
    namespace = config.get("namespace", "default")
    try:
        return await Client.connect(**config, plugins=list(plugins), runtime=runtime)
    except RuntimeError as e:
        raise ConnectionFailed(
            f"Cannot reach Temporal at {address} (namespace {namespace}): {e}. "
            "Start a dev server with `uv run temporal server start-dev`, "
            "or set TEMPORAL_ADDRESS."
        ) from e
