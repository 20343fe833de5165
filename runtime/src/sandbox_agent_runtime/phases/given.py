"""What a run is given by its service and its workflow type, read once when
it begins (workflow.py) and handed to the phases that need it."""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from sandbox_agent_runtime.affinity import SandboxHost
from sandbox_agent_runtime.backends import Backend
from sandbox_agent_runtime.chain import LastingSandboxClient, sandbox_client


@dataclass(frozen=True)
class Given:
    # The most model turns a prompt may take, across its chain.
    max_turns: int
    # Whether calls wait for a person (approvals.py), and for how long.
    approvals: bool
    approval_wait: timedelta
    # Whether the service's sandboxes live on a worker's host (affinity.py),
    # and how long an operation waits for that host's workers.
    host_bound: bool
    host_wait: timedelta
    # How long one sandbox operation may take.
    activity_timeout: timedelta
    # The variables the worker forwards to the sandbox, by name.
    secrets: tuple[str, ...]
    # The service's sandbox provider, and every backend it registers, by
    # provider name (backends/).
    primary_provider: str
    backends: Mapping[str, Backend]

    def sandbox(self, provider: str, host: SandboxHost | None) -> LastingSandboxClient:
        """A client of a sandbox of ``provider`` on ``host`` (None: any
        worker reaches it), its operations run by the service's settings
        and retried but for the errors a backend says no retry fixes."""
        non_retryable = [
            error for backend in self.backends.values() for error in backend.NON_RETRYABLE_ERRORS
        ]
        return sandbox_client(provider, host, self.activity_timeout, self.host_wait, non_retryable)
