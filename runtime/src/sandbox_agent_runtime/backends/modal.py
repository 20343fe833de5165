"""The Modal backend: the agent's shell runs in a remote Modal sandbox.

The worker needs ``MODAL_TOKEN_ID`` and ``MODAL_TOKEN_SECRET`` (Modal reads
them when it first talks to its API; a ``modal token`` profile on a laptop is
not enough for the worker, which checks the variables at start). Every
sandbox is created in one Modal app (its ``app_name`` option): stopping that
app ends them all. The agent's commands run on Modal's machines, never on the
worker's.

Its options are the worker's environment variables ``MODAL_SANDBOX_*``: the
keys its entry in the catalog (catalog.toml) declares, each with its default there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agents.extensions.sandbox.modal import (
    ModalImageSelector,
    ModalSandboxClient,
    ModalSandboxClientOptions,
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


# Errors from Modal that no retry can fix (a rejected token, an unknown image
# or app, a request Modal calls invalid, a workspace without the rights): the
# sandbox activity that meets one fails at once, and so does the run. These
# are the Modal SDK's class names (modal.exception), which is how Temporal
# records the error type.
NON_RETRYABLE_ERRORS: tuple[str, ...] = (
    "AuthError",
    "NotFoundError",
    "InvalidError",
    "PermissionDeniedError",
)

# Where the agent's workspace lives in the sandbox (the SDK's default).
WORKSPACE_ROOT = "/workspace"

# Its credentials (any one set of these variables, and where to get them), its
# options (MODAL_SANDBOX_<KEY>) and whether its sandboxes live on the worker's host
# (host_bound()): the catalog's (catalog.toml).
REQUIRED_ENVIRONMENT, CREDENTIALS_URL, OPTIONS, host_bound = declared(__name__)


def options() -> dict[str, Any]:
    """The worker's options for Modal (``OPTIONS``)."""
    return chosen_options("modal")


def sandbox_lifetime_seconds() -> int:
    """Seconds a Modal sandbox may live before Modal ends it."""
    return int(options()["timeout_seconds"])


# Tags on every sandbox, naming the run (its workflow id) and the sandbox
# provider that made it, so an operator can find sandboxes that a run left
# behind (docs/operations.md). The worker sets them from the activity that
# creates the sandbox.
workflow_tag = workflow_key
provider_tag = provider_key


class TaggedModalSandboxClient(ModalSandboxClient):
    """The SDK's Modal client, whose sandboxes carry the run's tags."""

    async def create(
        self,
        *,
        snapshot: SnapshotSpec | SnapshotBase | None = None,
        manifest: Manifest | None = None,
        options: ModalSandboxClientOptions,
    ) -> SandboxSession:
        session = await super().create(snapshot=snapshot, manifest=manifest, options=options)
        # Runs inside the `<provider>-sandbox_client_create` activity.
        info = activity.info()
        tags = {
            workflow_tag(): info.workflow_id,
            provider_tag(): info.activity_type.removesuffix("-sandbox_client_create"),
            **service_labels(),
        }
        # The SDK's session keeps Modal's own handle of the sandbox.
        sandbox = getattr(session._inner, "_sandbox", None)
        try:
            if sandbox is not None:
                await sandbox.set_tags.aio(tags)
        except Exception as e:
            # A sandbox without its tags is still the run's, and still ends at
            # its lifetime or with its app: failing here would retry the
            # activity and create a second sandbox, leaving this one behind.
            activity.logger.warning("Could not tag Modal sandbox: %s: %s", type(e).__name__, e)
        return session


def sandbox_client(settings: WorkerSettings) -> ModalSandboxClient:
    """Build the client the worker registers (runs on the worker only), with
    the image of its settings (MODAL_SANDBOX_IMAGE)."""
    image = str(settings.backend_options["modal"]["image"])
    return TaggedModalSandboxClient(image=ModalImageSelector.from_tag(image) if image else None)


def sandbox_options() -> ModalSandboxClientOptions:
    """Options sent with each run (they are recorded in workflow history:
    never put secrets here)."""
    chosen = options()
    return ModalSandboxClientOptions(
        app_name=str(chosen["app_name"]), timeout=int(chosen["timeout_seconds"])
    )
