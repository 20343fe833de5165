"""The local backend: the agent's shell runs on the worker's own host.

Every command the agent runs executes as the worker's user, in a fresh
temporary directory that is removed at the end of the run. That is handy for
development and for trusted workloads; for anything you would not run on the
worker's machine yourself, generate the service with a remote sandbox
backend instead.
"""

from agents.sandbox.sandboxes.unix_local import (
    UnixLocalSandboxClient,
    UnixLocalSandboxClientOptions,
)

# Credentials this backend needs on the worker, beyond the model's: none.
REQUIRED_ENVIRONMENT: tuple[tuple[str, ...], ...] = ()
CREDENTIALS_URL = ""

# The SDK's own errors say which of them no retry can fix; there is no
# service behind this backend to add any.
NON_RETRYABLE_ERRORS: tuple[str, ...] = ()

# The SDK's default root, which the local client turns into a fresh temporary
# directory for each run (removed at the end of the run).
WORKSPACE_ROOT = "/workspace"


def sandbox_client() -> UnixLocalSandboxClient:
    """Build the client the worker registers (runs on the worker only)."""
    # By default the local sandbox hands the worker's whole environment to the
    # agent's shell, OPENAI_API_KEY included. Give it only a minimal, harmless
    # set (PATH, HOME, locale, ...) instead.
    return UnixLocalSandboxClient(inherit_host_environment=False)


def host_bound() -> bool:
    """A workspace is a directory on this host's disk: every operation of a
    run's sandbox runs on this host (affinity.py)."""
    return True


def sandbox_options() -> UnixLocalSandboxClientOptions:
    """Options sent with each run (they are recorded in workflow history)."""
    return UnixLocalSandboxClientOptions()
