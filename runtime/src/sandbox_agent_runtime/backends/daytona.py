"""The Daytona backend: the agent's shell runs in a remote Daytona sandbox.

The worker needs ``DAYTONA_API_KEY`` (or ``DAYTONA_JWT_TOKEN`` with
``DAYTONA_ORGANIZATION_ID``); ``DAYTONA_API_URL`` and ``DAYTONA_TARGET`` are
read too when set. The agent's commands run on Daytona's machines, never on
the worker's.

Its options are the worker's environment variables ``DAYTONA_SANDBOX_*``:
the
keys its entry in the catalog (catalog.toml) declares, each with its default there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agents.extensions.sandbox.daytona import (
    DEFAULT_DAYTONA_WORKSPACE_ROOT,
    DaytonaSandboxClient,
    DaytonaSandboxClientOptions,
)
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


# Errors from Daytona that no retry can fix (a rejected key, a forbidden
# action, an unknown image or snapshot, invalid parameters): the sandbox
# activity that meets one fails at once, and so does the run. These are the
# Daytona SDK's class names, which is how Temporal records the error type.
NON_RETRYABLE_ERRORS: tuple[str, ...] = (
    "DaytonaAuthenticationError",
    "DaytonaForbiddenError",
    "DaytonaNotFoundError",
    "DaytonaBadRequestError",
)

# Where the agent's workspace lives in the sandbox (Daytona's default).
WORKSPACE_ROOT = DEFAULT_DAYTONA_WORKSPACE_ROOT

# Its credentials (any one set of these variables, and where to get them), its
# options (DAYTONA_SANDBOX_<KEY>) and whether its sandboxes live on the worker's host
# (host_bound()): the catalog's (catalog.toml).
REQUIRED_ENVIRONMENT, CREDENTIALS_URL, OPTIONS, host_bound = declared(__name__)


def options() -> dict[str, Any]:
    """The worker's options for Daytona (``OPTIONS``)."""
    return chosen_options("daytona")


# Labels on every sandbox, naming the run (its workflow id) and the sandbox
# provider that made it, so an operator can find sandboxes that a run left
# behind (docs/operations.md). The worker sets them from the activity that
# creates the sandbox (or creates it again, when it was gone on resume).
workflow_label = workflow_key
provider_label = provider_key


class LabelledDaytonaSandboxClient(DaytonaSandboxClient):
    """The SDK's Daytona client, whose sandboxes carry the run's labels."""

    async def _build_create_params(self, **arguments: Any) -> Any:
        params = await super()._build_create_params(**arguments)
        info = activity.info()
        params.labels = {
            **(params.labels or {}),
            workflow_label(): info.workflow_id,
            provider_label(): info.activity_type.rsplit("-sandbox_", 1)[0],
            **service_labels(),
        }
        return params


def sandbox_client(settings: WorkerSettings) -> DaytonaSandboxClient:
    """Build the client the worker registers (runs on the worker only); it
    takes none of the worker's settings."""
    return LabelledDaytonaSandboxClient()


def sandbox_options() -> DaytonaSandboxClientOptions:
    """Options sent with each run (they are recorded in workflow history:
    never put secrets here)."""
    chosen = options()
    return DaytonaSandboxClientOptions(
        auto_stop_interval=int(chosen["auto_stop_interval_minutes"]),
        create_timeout=int(chosen["create_timeout_seconds"]),
        pause_on_exit=bool(chosen["pause_on_exit"]),
        image=chosen["image"] or None,
        sandbox_snapshot_name=chosen["snapshot"] or None,
    )
