"""The E2B backend: the agent's shell runs in a remote E2B sandbox.

The worker needs ``E2B_API_KEY``; E2B reads it when a sandbox is created.
The agent's commands run on E2B's machines, never on the worker's.

Its options are the worker's environment variables ``E2B_SANDBOX_*``: the
keys its entry in the catalog (catalog.toml) declares, each with its default there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from agents.extensions.sandbox.e2b import E2BSandboxClient, E2BSandboxClientOptions
from agents.sandbox.manifest import Manifest
from agents.sandbox.session import SandboxSession
from agents.sandbox.snapshot import SnapshotBase, SnapshotSpec
from temporalio import activity

from sandbox_agent_runtime.backends import (
    chosen_options,
    declared,
    provider_key,
    service_labels,
    workflow_key,
)

if TYPE_CHECKING:
    # Only for the type: the workflow imports this module (for the options of
    # each run) in Temporal's workflow sandbox, where the worker's settings have
    # no place (the workflow never reads them).
    from sandbox_agent_runtime.settings_types import WorkerSettings


# Errors from E2B that no retry can fix (a rejected key, an unknown template
# or sandbox, invalid parameters): the sandbox activity that meets one fails
# at once, and so does the run. These are the E2B SDK's class names, which is
# how Temporal records the error type.
NON_RETRYABLE_ERRORS: tuple[str, ...] = (
    "AuthenticationException",
    "NotFoundException",
    "SandboxNotFoundException",
    "InvalidArgumentException",
    "TemplateException",
)

# Where the agent's workspace lives in the sandbox (E2B's default).
WORKSPACE_ROOT = "/workspace"

# Its credentials (any one set of these variables, and where to get them), its
# options (E2B_SANDBOX_<KEY>) and whether its sandboxes live on the worker's host
# (host_bound()): the catalog's (catalog.toml).
REQUIRED_ENVIRONMENT, CREDENTIALS_URL, OPTIONS, host_bound = declared(__name__)


def options() -> dict[str, Any]:
    """The worker's options for E2B (``OPTIONS``)."""
    return chosen_options("e2b")


def sandbox_lifetime_seconds() -> int:
    """Seconds an E2B sandbox may live before E2B ends it."""
    return int(options()["timeout_seconds"])


# Metadata on every sandbox, naming the run (its workflow id) and the
# sandbox provider that made it, so an operator can find sandboxes that a run
# left behind (docs/operations.md). The worker sets them from the activity
# that creates the sandbox.
workflow_metadata = workflow_key
provider_metadata = provider_key


class LabelledE2BSandboxClient(E2BSandboxClient):
    """The SDK's E2B client, whose sandboxes carry the run's metadata."""

    async def create(
        self,
        *,
        snapshot: SnapshotSpec | SnapshotBase | None = None,
        manifest: Manifest | None = None,
        options: E2BSandboxClientOptions,
    ) -> SandboxSession:
        # Runs inside the `<provider>-sandbox_client_create` activity.
        info = activity.info()
        metadata: dict[str, Any] = {
            **(options.metadata or {}),
            workflow_metadata(): info.workflow_id,
            provider_metadata(): info.activity_type.removesuffix("-sandbox_client_create"),
            **service_labels(),
        }
        return await super().create(
            snapshot=snapshot,
            manifest=manifest,
            options=options.model_copy(update={"metadata": metadata}),
        )


def sandbox_client(settings: WorkerSettings) -> E2BSandboxClient:
    """Build the client the worker registers (runs on the worker only); it
    takes none of the worker's settings."""
    return LabelledE2BSandboxClient()


def sandbox_options() -> E2BSandboxClientOptions:
    """Options sent with each run (they are recorded in workflow history:
    never put secrets here)."""
    chosen = options()
    on_timeout: Literal["kill", "pause"] = chosen["on_timeout"]
    return E2BSandboxClientOptions(
        sandbox_type=str(chosen["type"]),
        template=chosen["template"] or None,
        timeout=int(chosen["timeout_seconds"]),
        on_timeout=on_timeout,
        pause_on_exit=bool(chosen["pause_on_exit"]),
    )
