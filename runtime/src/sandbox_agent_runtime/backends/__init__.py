"""Sandbox backends: everything specific to where the agent's sandbox runs.

Each module of this package is one backend, and every one offers the same
interface (``Backend`` below): the client the worker registers, the options
the workflow sends with every run, the credentials the worker needs, the
errors no retry can fix, where the workspace lives, whether its sandboxes
live on the worker's host, and the options a service may give it.
``sandbox_backends()`` says which provider name the worker registers each one
under (the service's providers); the worker and the workflow read it and
know nothing else about where the sandbox lives.

A backend's module is imported only when a service registers it: each
backend's SDK is an extra of the runtime (``sandbox-agent-runtime[daytona]``),
which a service without that backend need not install.

A backend's options (``Service.backend_options[<backend>]``) are checked
against the keys its module's ``OPTIONS`` lists: any other key is refused
(``BadOption``), in one line naming it and the keys allowed.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, cast

from agents.sandbox.session.sandbox_client import BaseSandboxClient, BaseSandboxClientOptions
from temporalio import workflow

from sandbox_agent_runtime.service import current

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
    # Every option a service may give this backend, with its default (None:
    # one the module derives from the service, its docstring says how).
    OPTIONS: dict[str, Any]

    def sandbox_client(self, settings: WorkerSettings) -> BaseSandboxClient[Any]:
        """Build the client the worker registers, with the worker's
        ``settings`` (runs on the worker only)."""
        ...

    def sandbox_options(self) -> BaseSandboxClientOptions:
        """Options sent with each run (recorded in workflow history)."""
        ...

    def host_bound(self, settings: WorkerSettings) -> bool:
        """Whether a sandbox this worker creates lives on this worker's host
        (its disk, its Docker engine), so that every later operation of the
        run's sandbox must run there (affinity.py; runs on the worker only)."""
        ...

    def options(self) -> dict[str, Any]:
        """The service's options for this backend over its defaults;
        ``BadOption`` for a key it does not take."""
        ...


class BadOption(ValueError):
    """A backend option the service gives that the backend does not take;
    its message is one line naming the option and the ones allowed."""


def backend_module(name: str) -> Backend:
    """The module of the backend ``name`` (one of service.BACKENDS),
    imported on first use."""
    module = f"{__name__}.{name}"
    # Passed through: in Temporal's workflow sandbox (a worker's, or any
    # replayer's, whatever its runner) the module is the worker's own, imported
    # once, never loaded afresh in the middle of a run (which the sandbox
    # warns of). It holds nothing a run changes.
    # The builtin __import__ (importlib's would go around the sandbox's importer).
    with workflow.unsafe.imports_passed_through():
        __import__(module)
    return cast(Backend, sys.modules[module])


def workflow_key() -> str:
    """The key (a label, tag or metadata key, in each backend's own words)
    that names the run, its workflow id, on every sandbox a backend creates:
    "<service>.workflow-id". With ``provider_key()``, an operator finds the
    sandboxes a run left behind (docs/operations.md)."""
    return f"{current().name}.workflow-id"


def provider_key() -> str:
    """The key naming the sandbox provider that made a sandbox:
    "<service>.sandbox-provider"."""
    return f"{current().name}.sandbox-provider"


def sandbox_backends() -> dict[str, Backend]:
    """Every sandbox provider the worker registers, by name, with its
    backend, in the service's order: a run names the one it uses, the
    service's first (``Service.sandbox_provider``) unless it says otherwise."""
    return {provider: backend_module(name) for provider, name in current().providers.items()}


def check_options() -> None:
    """Refuse (``BadOption``) any option the service gives one of its
    backends that the backend does not take: the worker checks at start,
    before any run reads them."""
    for name in current().backends:
        backend_module(name).options()


def options_of(backend: str, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The service's options for ``backend`` over ``defaults`` (every key
    the backend takes); ``BadOption`` for any other key."""
    given = current().options(backend)
    for key in given:
        if key not in defaults:
            allowed = ", ".join(defaults) or "none"
            raise BadOption(
                f"backend_options[{backend!r}] has the option {key!r}, which the {backend} "
                f"backend does not take: it takes {allowed}."
            )
    return {**defaults, **given}


def run_timeout_seconds() -> int:
    """The service's workflow execution timeout in whole seconds: the
    default lifetime of a remote sandbox, which must outlive the run."""
    return int(current().workflow_execution_timeout.total_seconds())
