"""Where the worker and the starter find the Temporal service.

Both read the standard ``temporalio.envconfig`` settings: the ``TEMPORAL_*``
environment variables (``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``,
``TEMPORAL_API_KEY``, ``TEMPORAL_TLS*``, ``TEMPORAL_PROFILE``) and the profiles
of the ``temporal.toml`` configuration file. With none of them set they use a
local dev server: ``localhost:7233``, namespace ``default``.

A namespace the service does not have fails here, in one line: otherwise every
call would fail with "not found", which the starter would take for a missing
workflow and the worker reports with a traceback.
"""

from collections.abc import Sequence

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client, Plugin
from temporalio.envconfig import ClientConfig
from temporalio.runtime import Runtime
from temporalio.service import RPCError, RPCStatusCode

DEFAULT_ADDRESS = "localhost:7233"


class ConnectionFailed(Exception):
    """The Temporal service could not be reached, or has no such namespace."""


async def connect(plugins: Sequence[Plugin] = (), runtime: Runtime | None = None) -> Client:
    """Connect to the configured Temporal service (on ``runtime``, if given:
    the worker's, when it serves metrics)."""
    config = ClientConfig.load_client_connect_config()
    config.setdefault("target_host", DEFAULT_ADDRESS)
    address = config["target_host"]
    namespace = config.get("namespace", "default")

    def unreachable(error: Exception) -> ConnectionFailed:
        return ConnectionFailed(
            f"Cannot reach Temporal at {address} (namespace {namespace}): {error}. "
            "Start a dev server with `uv run temporal server start-dev`, "
            "or set TEMPORAL_ADDRESS."
        )

    try:
        client = await Client.connect(**config, plugins=list(plugins), runtime=runtime)
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
