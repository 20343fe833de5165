"""The Cloudflare backend: the agent's shell runs in a Cloudflare sandbox,
through your team's own deployed Sandbox Service Worker.

The worker needs ``CLOUDFLARE_SANDBOX_WORKER_URL``, the address of that
Worker, and ``CLOUDFLARE_SANDBOX_API_KEY`` when the Worker asks for a key.
Both stay on the worker: each run's options carry neither (they are recorded
in workflow history), and the worker's client fills in the address when it
creates a sandbox. What a sandbox runs on (its container image, its instance
type) and how long an idle one lives are the Worker's own settings, in its
Wrangler configuration. The agent's commands run on Cloudflare's machines,
never on the worker's. It takes no options.

The Sandbox Service Worker's API neither lists sandboxes nor takes labels
for one: the reaper does not list Cloudflare's sandboxes (it has no
``sandboxes()``), and one a run left behind sleeps when idle, as the
Worker's configuration says.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agents.extensions.sandbox.cloudflare import (
    CloudflareSandboxClient,
    CloudflareSandboxClientOptions,
)
from agents.sandbox.manifest import Manifest
from agents.sandbox.session import SandboxSession
from agents.sandbox.snapshot import SnapshotBase, SnapshotSpec

from sandbox_agent_runtime.backends import chosen_options, declared

if TYPE_CHECKING:
    # Only for the type: the workflow imports this module (for the options of
    # each run) in Temporal's workflow sandbox, where the worker's settings have
    # no place (the workflow never reads them).
    from sandbox_agent_runtime.settings_types import WorkerSettings


# Errors that no retry can fix: the SDK raises ConfigurationError for a
# Worker that refuses to create a sandbox (a rejected key, a bad request, a
# failing Worker) or cannot be reached at its address. The sandbox activity
# that meets one fails at once, and so does the run. Temporal records an
# error's type as its class name (agents.sandbox.errors).
NON_RETRYABLE_ERRORS: tuple[str, ...] = ("ConfigurationError",)

# Where the agent's workspace lives in the sandbox: the only root the SDK
# supports (its persistence is fixed to /workspace).
WORKSPACE_ROOT = "/workspace"

# Its credentials (any one set of these variables, and where to get them), its
# options (none) and whether its sandboxes live on the worker's host
# (host_bound()): the catalog's (catalog.toml).
REQUIRED_ENVIRONMENT, CREDENTIALS_URL, OPTIONS, host_bound = declared(__name__)


def options() -> dict[str, Any]:
    """The options of Cloudflare: it has none."""
    return chosen_options("cloudflare")


class WorkerAddressedCloudflareSandboxClient(CloudflareSandboxClient):
    """The SDK's Cloudflare client, sending every sandbox to the Worker at
    ``url`` (the worker's CLOUDFLARE_SANDBOX_WORKER_URL)."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.worker_url = url.rstrip("/")

    async def create(
        self,
        *,
        snapshot: SnapshotSpec | SnapshotBase | None = None,
        manifest: Manifest | None = None,
        options: CloudflareSandboxClientOptions,
    ) -> SandboxSession:
        return await super().create(
            snapshot=snapshot,
            manifest=manifest,
            options=options.model_copy(update={"worker_url": self.worker_url}),
        )


def sandbox_client(settings: WorkerSettings) -> CloudflareSandboxClient:
    """Build the client the worker registers (runs on the worker only), for
    the Worker at the address of the worker's ``settings`` (reading the settings
    refuses one that is not an http(s) address, in one line)."""
    return WorkerAddressedCloudflareSandboxClient(settings.cloudflare_worker_url)


def sandbox_options() -> CloudflareSandboxClientOptions:
    """Options sent with each run (they are recorded in workflow history:
    never put secrets here). The Worker's address is the worker's to fill
    in (WorkerAddressedCloudflareSandboxClient); the key stays in its
    environment."""
    return CloudflareSandboxClientOptions(worker_url="")
