"""Sandbox backends: everything specific to where the agent's sandbox runs.

Each module of this package is one backend, and every one offers the same
interface (``Backend`` below): the client the worker registers, the options
the workflow sends with every run, the credentials the worker needs, the
errors no retry can fix and where the workspace lives. ``SANDBOX_BACKENDS``
says which provider name the worker registers each one under; the worker and
the workflow read it and know nothing else about where the sandbox lives.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from agents.sandbox.session.sandbox_client import BaseSandboxClient, BaseSandboxClientOptions

from sandbox_agent_runtime import shared
{%- set names = cookiecutter | backends | sort %}
{%- if (cookiecutter.package_name ~ names | join(", ")) | length <= 68 %}
from sandbox_agent_runtime.backends import {{ names | join(", ") }}
{%- else %}
from sandbox_agent_runtime.backends import (
{%- for name in names %}
    {{ name }},
{%- endfor %}
)
{%- endif %}

if TYPE_CHECKING:
    # Only for the type: the workflow imports this module (for the options of
    # each run) in Temporal's workflow sandbox, where the worker's settings have
    # no place (the workflow never reads them).
    from sandbox_agent_runtime.settings import WorkerSettings


class Backend(Protocol):
    # Credentials the worker needs for this backend, beyond the model's: any
    # one of these sets of environment variables, each set and non-empty.
    REQUIRED_ENVIRONMENT: tuple[tuple[str, ...], ...]
    # Where to get them.
    CREDENTIALS_URL: str
    # The backend SDK's error types that no retry can fix: a sandbox
    # operation that raises one fails at once, and so does the run.
    NON_RETRYABLE_ERRORS: tuple[str, ...]
    # Where the agent's workspace lives in the sandbox.
    WORKSPACE_ROOT: str

    def sandbox_client(self, settings: WorkerSettings) -> BaseSandboxClient[Any]:
        """Build the client the worker registers, with the worker's
        ``settings`` (runs on the worker only)."""
        ...

    def sandbox_options(self) -> BaseSandboxClientOptions:
        """Options sent with each run (recorded in workflow history)."""
        ...
{%- if cookiecutter | host_bound_backends %}

    def host_bound(self, settings: WorkerSettings) -> bool:
        """Whether a sandbox this worker creates lives on this worker's host
        (its disk, its Docker engine), so that every later operation of the
        run's sandbox must run there (affinity.py; runs on the worker only)."""
        ...
{%- endif %}


# Every sandbox provider the worker registers, by its name in shared.py, with
# its backend. A run names the one it uses; SANDBOX_PROVIDER unless it says
# otherwise.
SANDBOX_BACKENDS: dict[str, Backend] = {
{%- for constant, backend in cookiecutter | providers %}
    shared.{{ constant }}: {{ backend }},
{%- endfor %}
}
