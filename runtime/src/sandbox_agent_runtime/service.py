"""What a service decides and the runtime is given: its names, its sandbox
backends, its approvals and the limits of its runs.

A generated project describes itself once, as a ``Service`` (its
``service.py``), and hands it to the runtime with ``configure()`` when its
package is imported, as a Django project hands over its settings. Every
module of the runtime reads it with ``current()``: the worker, the workflow
(in Temporal's workflow sandbox too: this module is passed through, so the
worker's one configuration is the one its runs see), the starter and the
codec server. Nothing here is read from the environment: the worker's own
settings (addresses, capacity, keys) are settings.py's.

A process runs one service. Configuring it again with an equal ``Service``
changes nothing (the workflow sandbox imports the project's package afresh
for each run it starts); with another, ``configure()`` refuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

# Who approves what the agent runs: nobody; each shell command (and input to a
# running one); each command and each file edit (approvals.py).
Approval = Literal["none", "commands", "commands_and_writes"]
APPROVALS: tuple[Approval, ...] = ("none", "commands", "commands_and_writes")

# Every sandbox backend the runtime has (backends/), by the name a service
# gives it.
BACKENDS = (
    "local",
    "daytona",
    "e2b",
    "docker",
    "modal",
    "runloop",
    "vercel",
    "cloudflare",
    "blaxel",
)

# The backends whose sandbox can live on the host of the worker that created
# it (a local workspace; a container on the host's own Docker engine): a
# service with one of them keeps every sandbox operation of such a run on
# that host (affinity.py).
HOST_BOUND = ("local", "docker")


@dataclass(frozen=True)
class Service:
    """A service, as its project describes it."""

    # The project's distribution name: the prefix of its commands
    # ("<name>-worker", "<name>-starter", ...), of the labels its sandboxes
    # carry, and the version its unversioned workers report.
    name: str
    # The queue the worker polls and the starter sends runs to.
    task_queue: str
    # Every sandbox provider the worker registers, by name, with its backend
    # (one of BACKENDS); the first is the one a run uses unless it names
    # another. The name prefixes each of its sandbox activities
    # ("<provider>-sandbox_session_start").
    providers: Mapping[str, str]
    # Whether a person approves what the agent runs, and how long a request
    # waits for one before it is rejected.
    approval: Approval = "none"
    approval_timeout: timedelta = timedelta(hours=1)
    # The worker's environment variables the agent's sandbox sees (only
    # their names travel with a run).
    sandbox_secrets: tuple[str, ...] = ()
    # The most model turns one prompt may take, across its chain.
    max_turns: int = 20
    # The longest a run without follow-ups may take.
    workflow_execution_timeout: timedelta = timedelta(hours=1)
    # The start-to-close timeout of each sandbox operation.
    sandbox_activity_timeout: timedelta = timedelta(minutes=5)

    def __post_init__(self) -> None:
        if not self.providers:
            raise ValueError("a Service needs at least one sandbox provider")
        for provider, backend in self.providers.items():
            if backend not in BACKENDS:
                raise ValueError(
                    f"provider {provider!r}: backend {backend!r} is not one of {', '.join(BACKENDS)}"
                )
        if self.approval not in APPROVALS:
            raise ValueError(f"approval {self.approval!r} is not one of {', '.join(APPROVALS)}")

    @property
    def sandbox_provider(self) -> str:
        """The provider a run uses unless it names another."""
        return next(iter(self.providers))

    @property
    def backends(self) -> list[str]:
        """Every backend the worker registers, each once, in provider order."""
        return list(dict.fromkeys(self.providers.values()))

    @property
    def approvals(self) -> bool:
        """Whether anything the agent runs waits for a person."""
        return self.approval != "none"

    @property
    def host_bound(self) -> bool:
        """Whether a run's sandbox may live on one worker's host (affinity.py)."""
        return any(backend in HOST_BOUND for backend in self.providers.values())

    def command(self, role: str) -> str:
        """The name of one of the project's commands: "<name>-starter"."""
        return f"{self.name}-{role}"


_configured: Service | None = None


def configure(service: Service) -> None:
    """Make ``service`` the one this process runs (once; again with an equal
    one changes nothing)."""
    global _configured
    if _configured is not None and _configured != service:
        raise RuntimeError(
            f"this process already runs the service {_configured.name!r}: "
            "the runtime serves one service per process"
        )
    _configured = service


def current() -> Service:
    """The service this process runs."""
    if _configured is None:
        raise RuntimeError(
            "no service is configured: import your project's package (its service.py "
            "calls sandbox_agent_runtime.configure()) before using the runtime"
        )
    return _configured
