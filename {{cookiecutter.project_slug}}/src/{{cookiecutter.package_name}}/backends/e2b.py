"""The E2B backend: the agent's shell runs in a remote E2B sandbox.

The worker needs ``E2B_API_KEY``; E2B reads it when a sandbox is created.
Nothing here runs on the worker's host.
"""

from agents.extensions.sandbox.e2b import E2BSandboxClient, E2BSandboxClientOptions

# Credentials this backend needs on the worker, beyond the model's.
REQUIRED_ENVIRONMENT: tuple[str, ...] = ("E2B_API_KEY",)

# Seconds an E2B sandbox may live. E2B ends it after that even if the run's
# teardown never happens, so a crashed run cannot leave it running.
SANDBOX_LIFETIME_SECONDS = 3600


def sandbox_client() -> E2BSandboxClient:
    """Build the client the worker registers (runs on the worker only)."""
    return E2BSandboxClient()


def sandbox_options() -> E2BSandboxClientOptions:
    """Options sent with each run (they are recorded in workflow history:
    never put secrets here)."""
    return E2BSandboxClientOptions(
        sandbox_type="e2b",
        timeout=SANDBOX_LIFETIME_SECONDS,
        on_timeout="kill",
    )
