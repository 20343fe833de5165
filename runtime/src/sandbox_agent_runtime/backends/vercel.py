"""The Vercel backend: the agent's shell runs in a remote Vercel sandbox.

The worker needs ``VERCEL_OIDC_TOKEN`` (a project's OIDC token: it names its
project and team), or ``VERCEL_TOKEN`` with ``VERCEL_PROJECT_ID`` and
``VERCEL_TEAM_ID``; Vercel's SDK reads them when a sandbox is created. The
agent's commands run on Vercel's machines, never on the worker's.

Its options are the worker's environment variables ``VERCEL_SANDBOX_*``: the
keys its entry in the catalog (catalog.toml) declares, each with its default there.

Vercel's API takes no labels, tags or metadata for a sandbox, so nothing on
one says which service, namespace or run made it: the reaper does not list
Vercel's sandboxes (it has no ``sandboxes()``), and one a run left behind
stops at its lifetime (``timeout_seconds``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from agents.extensions.sandbox.vercel import VercelSandboxClient, VercelSandboxClientOptions
from agents.extensions.sandbox.vercel.sandbox import DEFAULT_VERCEL_WORKSPACE_ROOT

from sandbox_agent_runtime.backends import chosen_options, declared

if TYPE_CHECKING:
    # Only for the type: the workflow imports this module (for the options of
    # each run) in Temporal's workflow sandbox, where the worker's settings have
    # no place (the workflow never reads them).
    from sandbox_agent_runtime.settings_types import WorkerSettings


# Errors from Vercel that no retry can fix (a rejected token, a forbidden
# action, an unknown sandbox or snapshot, a request Vercel calls invalid): the
# sandbox activity that meets one fails at once, and so does the run. These
# are the Vercel SDK's class names (vercel.sandbox), which is how Temporal
# records the error type.
NON_RETRYABLE_ERRORS: tuple[str, ...] = (
    "SandboxAuthError",
    "SandboxPermissionError",
    "SandboxNotFoundError",
    "SandboxValidationError",
)

# Where the agent's workspace lives in the sandbox (the SDK's default, the
# working directory of Vercel's sandbox image).
WORKSPACE_ROOT = DEFAULT_VERCEL_WORKSPACE_ROOT

# Its credentials (any one set of these variables, and where to get them), its
# options (VERCEL_SANDBOX_<KEY>) and whether its sandboxes live on the worker's host
# (host_bound()): the catalog's (catalog.toml).
REQUIRED_ENVIRONMENT, CREDENTIALS_URL, OPTIONS, host_bound = declared(__name__)


def options() -> dict[str, Any]:
    """The worker's options for Vercel (``OPTIONS``)."""
    return chosen_options("vercel")


def sandbox_lifetime_seconds() -> int:
    """Seconds a Vercel sandbox may live before Vercel stops it."""
    return int(options()["timeout_seconds"])


def sandbox_client(settings: WorkerSettings) -> VercelSandboxClient:
    """Build the client the worker registers (runs on the worker only); it
    takes none of the worker's settings. Vercel's sandboxes carry no labels
    (its API takes none): see docs/operations.md for finding those a run
    left behind."""
    return VercelSandboxClient()


def sandbox_options() -> VercelSandboxClientOptions:
    """Options sent with each run (they are recorded in workflow history:
    never put secrets here)."""
    chosen = options()
    runtime: Literal["node22", "python3.13"] = chosen["runtime"]
    return VercelSandboxClientOptions(
        runtime=runtime, timeout_ms=int(chosen["timeout_seconds"]) * 1000
    )
