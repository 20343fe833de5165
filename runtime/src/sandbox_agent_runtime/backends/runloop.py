"""The Runloop backend: the agent's shell runs in a remote Runloop devbox.

The worker needs ``RUNLOOP_API_KEY``; the client reads it (and
``RUNLOOP_BASE_URL`` when set) when the worker builds it. The agent's
commands run on Runloop's machines, never on the worker's.

Its options are the worker's environment variables ``RUNLOOP_SANDBOX_*``: the
keys its entry in the catalog (catalog.toml) declares, each with its default there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agents.extensions.sandbox.runloop import (
    DEFAULT_RUNLOOP_WORKSPACE_ROOT,
    RunloopLaunchParameters,
    RunloopSandboxClient,
    RunloopSandboxClientOptions,
)
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


# Errors from Runloop that no retry can fix (a rejected key, a forbidden
# action, an unknown blueprint or devbox, a request Runloop refuses): the
# sandbox activity that meets one fails at once, and so does the run. These
# are the Runloop SDK's class names (runloop_api_client), which is how
# Temporal records the error type.
NON_RETRYABLE_ERRORS: tuple[str, ...] = (
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "BadRequestError",
    "UnprocessableEntityError",
)

# Where the agent's workspace lives in the devbox (the SDK's default: the
# home of Runloop's `user` account, under which a workspace must live).
WORKSPACE_ROOT = DEFAULT_RUNLOOP_WORKSPACE_ROOT

# Its credentials (any one set of these variables, and where to get them), its
# options (RUNLOOP_SANDBOX_<KEY>) and whether its sandboxes live on the worker's host
# (host_bound()): the catalog's (catalog.toml).
REQUIRED_ENVIRONMENT, CREDENTIALS_URL, OPTIONS, host_bound = declared(__name__)


def options() -> dict[str, Any]:
    """The worker's options for Runloop (``OPTIONS``)."""
    return chosen_options("runloop")


def sandbox_lifetime_seconds() -> int:
    """Seconds a devbox may live before Runloop shuts it down."""
    return int(options()["keep_alive_seconds"])


# Metadata on every devbox, naming the run (its workflow id) and the sandbox
# provider that made it, so an operator can find devboxes that a run left
# behind (docs/operations.md). The worker sets them from the activity that
# creates the devbox.
workflow_metadata = workflow_key
provider_metadata = provider_key


class LabelledRunloopSandboxClient(RunloopSandboxClient):
    """The SDK's Runloop client, whose devboxes carry the run's metadata."""

    async def create(
        self,
        *,
        snapshot: SnapshotSpec | SnapshotBase | None = None,
        manifest: Manifest | None = None,
        options: RunloopSandboxClientOptions | None,
    ) -> SandboxSession:
        # Runs inside the `<provider>-sandbox_client_create` activity.
        info = activity.info()
        options = options or RunloopSandboxClientOptions()
        metadata = {
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


def sandbox_client(settings: WorkerSettings) -> RunloopSandboxClient:
    """Build the client the worker registers (runs on the worker only); it
    takes none of the worker's settings."""
    return LabelledRunloopSandboxClient()


def sandbox_options() -> RunloopSandboxClientOptions:
    """Options sent with each run (they are recorded in workflow history:
    never put secrets here)."""
    chosen = options()
    return RunloopSandboxClientOptions(
        blueprint_name=chosen["blueprint"] or None,
        launch_parameters=RunloopLaunchParameters(
            keep_alive_time_seconds=int(chosen["keep_alive_seconds"])
        ),
    )
