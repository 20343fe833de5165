"""The Daytona backend: the agent's shell runs in a remote Daytona sandbox.

The worker needs ``DAYTONA_API_KEY`` (or ``DAYTONA_JWT_TOKEN`` with
``DAYTONA_ORGANIZATION_ID``); ``DAYTONA_API_URL`` and ``DAYTONA_TARGET`` are
read too when set. Nothing here runs on the worker's host.
"""

from agents.extensions.sandbox.daytona import (
    DaytonaSandboxClient,
    DaytonaSandboxClientOptions,
)

# Credentials this backend needs on the worker, beyond the model's.
REQUIRED_ENVIRONMENT: tuple[str, ...] = ("DAYTONA_API_KEY",)

# Minutes of inactivity after which Daytona stops a sandbox by itself. The
# SDK's default (0) never stops it, so a run that dies before its teardown
# would leave a paid sandbox running for good.
AUTO_STOP_MINUTES = 15


def sandbox_client() -> DaytonaSandboxClient:
    """Build the client the worker registers (runs on the worker only)."""
    return DaytonaSandboxClient()


def sandbox_options() -> DaytonaSandboxClientOptions:
    """Options sent with each run (they are recorded in workflow history:
    never put secrets here)."""
    return DaytonaSandboxClientOptions(auto_stop_interval=AUTO_STOP_MINUTES)
