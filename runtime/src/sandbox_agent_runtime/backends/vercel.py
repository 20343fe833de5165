"""The Vercel backend: the agent's shell runs in a remote Vercel sandbox.

The worker needs ``VERCEL_OIDC_TOKEN`` (a project's OIDC token: it names its
project and team), or ``VERCEL_TOKEN`` with ``VERCEL_PROJECT_ID`` and
``VERCEL_TEAM_ID``; Vercel's SDK reads them when a sandbox is created. The
agent's commands run on Vercel's machines, never on the worker's.

Its options are the worker's environment variables ``VERCEL_SANDBOX_*``: the
keys ``OPTIONS`` lists (below), each with its default there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from agents.extensions.sandbox.vercel import VercelSandboxClient, VercelSandboxClientOptions
from agents.extensions.sandbox.vercel.sandbox import DEFAULT_VERCEL_WORKSPACE_ROOT

from sandbox_agent_runtime.backends import Option, chosen_options, number, one_of

if TYPE_CHECKING:
    # Only for the type: the workflow imports this module (for the options of
    # each run) in Temporal's workflow sandbox, where the worker's settings have
    # no place (the workflow never reads them).
    from sandbox_agent_runtime.settings_types import WorkerSettings


# Credentials this backend needs on the worker, beyond the model's: any one
# of these sets of environment variables, each variable set and non-empty.
REQUIRED_ENVIRONMENT: tuple[tuple[str, ...], ...] = (
    ("VERCEL_OIDC_TOKEN",),
    ("VERCEL_TOKEN", "VERCEL_PROJECT_ID", "VERCEL_TEAM_ID"),
)
CREDENTIALS_URL = "https://vercel.com/account/settings/tokens"

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

# The longest Vercel lets a sandbox live (Pro and Enterprise; 45 minutes on Hobby).
LONGEST_LIFETIME_SECONDS = 18_000

# Every option of this backend: VERCEL_SANDBOX_<KEY>, with its default.
OPTIONS: dict[str, Option] = {
    # The runtime image every sandbox starts from.
    "runtime": one_of("node22", "python3.13"),
    # Seconds a Vercel sandbox may live (by default the service's
    # workflow_execution_timeout, at most LONGEST_LIFETIME_SECONDS). Vercel
    # stops it then whatever happens to the run, so a crashed run cannot
    # leave one running (and billed) for longer. Vercel counts it from the
    # sandbox's creation, so it is at least the workflow execution timeout:
    # a sandbox that Vercel stops mid-run takes the run's workspace with it.
    "timeout_seconds": number(
        None,
        60,
        LONGEST_LIFETIME_SECONDS,
        "seconds",
        outlives_the_run=True,
    ),
}


def options() -> dict[str, Any]:
    """The worker's options for Vercel (``OPTIONS``)."""
    return chosen_options("vercel")


def sandbox_lifetime_seconds() -> int:
    """Seconds a Vercel sandbox may live before Vercel stops it."""
    return int(options()["timeout_seconds"])


def sandbox_client(settings: WorkerSettings) -> VercelSandboxClient:
    """Build the client the worker registers (runs on the worker only); it
    takes none of the worker's settings. Vercel's sandboxes carry no labels:
    see docs/operations.md for finding those a run left behind."""
    return VercelSandboxClient()


def sandbox_options() -> VercelSandboxClientOptions:
    """Options sent with each run (they are recorded in workflow history:
    never put secrets here)."""
    chosen = options()
    runtime: Literal["node22", "python3.13"] = chosen["runtime"]
    return VercelSandboxClientOptions(
        runtime=runtime, timeout_ms=int(chosen["timeout_seconds"]) * 1000
    )


def host_bound(settings: WorkerSettings) -> bool:
    """A Vercel sandbox is reached over the network from any worker: a run
    goes on on any worker, whichever created its sandbox (affinity.py)."""
    return False
