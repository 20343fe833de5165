"""Sandbox backends: everything specific to where the agent's sandbox runs.

Each module is one backend behind one interface (``Backend``); what is said of
a backend beyond its code (credentials, options with bounds and defaults,
extra, SDK modules, whether its sandboxes live on the worker's host) is
declared once, in the catalog, which the template reads too. A backend's
module is imported only when a service registers it, so a service installs
only its own backends' SDKs. Its options are the worker's settings
(``<BACKEND>_SANDBOX_<OPTION>``), read at start and recorded in each run's
history.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

from agents.sandbox.session.sandbox_client import BaseSandboxClient, BaseSandboxClientOptions
from temporalio import activity, workflow

from sandbox_agent_runtime.catalog import CATALOG, KINDS
from sandbox_agent_runtime.service import current

if TYPE_CHECKING:
    # Only for the type: the workflow imports this module (for the options of
    # each run) in Temporal's workflow sandbox, where the worker's settings have
    # no place (the workflow never reads them).
    from sandbox_agent_runtime.settings_types import WorkerSettings


class Backend(Protocol):
    # Credentials the worker needs for this backend, beyond the model's: any
    # one of these sets of environment variables, each set and non-empty; and
    # where to get them (the catalog's, ``declared()``).
    REQUIRED_ENVIRONMENT: tuple[tuple[str, ...], ...]
    CREDENTIALS_URL: str
    # The backend SDK's error types that no retry can fix: a sandbox
    # operation that raises one fails at once, and so does the run.
    NON_RETRYABLE_ERRORS: tuple[str, ...]
    # Where the agent's workspace lives in the sandbox.
    WORKSPACE_ROOT: str
    # Every option of this backend: an environment variable of the worker each
    # (``variable()``), with its default and what it allows (the catalog's).
    OPTIONS: dict[str, Option]

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
        run's sandbox must run there (the catalog's, ``declared()``;
        affinity.py; runs on the worker only)."""
        ...


@dataclass(frozen=True)
class Option:
    """One option of a backend, read from the worker's environment variable
    ``<BACKEND>_SANDBOX_<KEY>``: a whole number (``low`` to ``high``
    ``unit``), yes or no, one of ``choices``, or text matching ``pattern``
    (``allowed`` says what that is, in words)."""

    kind: Literal["number", "yes_no", "choice", "text"]
    # Its value when the variable is unset: a value, or a function of the
    # service that gives it. None, for a number: the service's workflow
    # execution timeout in seconds, at most ``high``.
    default: int | bool | str | Callable[[], str] | None
    low: int = 0
    high: int = 0
    unit: str = ""
    choices: tuple[str, ...] = ()
    pattern: str = ""
    allowed: str = ""
    # A sandbox's lifetime, which its provider counts from its creation and
    # enforces whatever the run is doing: at least the longest run, or the
    # provider ends the sandbox, workspace and all, in the middle of one.
    outlives_the_run: bool = False
    # Another option of the same backend that cannot be set with this one.
    excludes: str = ""

    def default_value(self) -> int | bool | str:
        """The value when the variable is unset."""
        if self.default is None:
            return min(run_timeout_seconds(), self.high)
        if callable(self.default):
            return self.default()
        return self.default

    def shown(self, value: int | bool | str) -> str:
        """``value`` as a message says it."""
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value) if value != "" else "the provider's own"

    def description(self) -> str:
        """What a value may be, as a refusal says it."""
        if self.kind == "number":
            return f"a whole number of {self.unit} from {self.low} to {self.high}"
        if self.kind == "yes_no":
            return "true or false"
        if self.kind == "choice":
            return f"{', '.join(self.choices[:-1])} or {self.choices[-1]}"
        return self.allowed

    def parse(self, value: str) -> int | bool | str:
        """The option's value as the variable says it; ValueError when it is
        not one (its message: ``description()``)."""
        text = value.strip()
        if self.kind == "number":
            if re.fullmatch(r"[0-9]{1,15}", text) and self.low <= int(text) <= self.high:
                return int(text)
        elif self.kind == "yes_no":
            if text.lower() in YES or text.lower() in NO:
                return text.lower() in YES
        elif self.kind == "choice":
            if text in self.choices:
                return text
        elif re.fullmatch(self.pattern, text) and len(text) <= 255:
            return text
        raise ValueError(self.description())


YES = ("true", "1", "yes")
NO = ("false", "0", "no")


def number(
    default: int | None, low: int, high: int, unit: str, *, outlives_the_run: bool = False
) -> Option:
    """A whole number from ``low`` to ``high`` (None: the run's timeout)."""
    return Option("number", default, low, high, unit, outlives_the_run=outlives_the_run)


def yes_no(default: bool) -> Option:
    """True or false (also yes/no, 1/0)."""
    return Option("yes_no", default)


def one_of(*choices: str) -> Option:
    """One of ``choices``, the first by default."""
    return Option("choice", choices[0], choices=choices)


def text(
    default: str | Callable[[], str], pattern: str, allowed: str, *, excludes: str = ""
) -> Option:
    """Text that matches ``pattern`` (at most 255 characters)."""
    return Option("text", default, pattern=pattern, allowed=allowed, excludes=excludes)


def declared_option(table: Mapping[str, Any]) -> Option:
    """An option as the catalog declares it (catalog.toml says how): an
    image and a name are text of a given form, by default "" (the
    provider's own)."""
    kind = table["kind"]
    if kind == "number":
        default = table.get("default")
        return number(
            default,
            table["low"],
            table["high"],
            table["unit"],
            outlives_the_run=table.get("lifetime", False),
        )
    if kind == "yes_no":
        return yes_no(table["default"])
    if kind == "choice":
        return one_of(*table["choices"])
    if kind == "image":
        image = KINDS["image"]
        default = table.get("default", "")
        return text(default, image["pattern"], image["allowed"], excludes=table.get("excludes", ""))
    if kind == "name":
        name = KINDS["name"]
        return text("", name["pattern"], f"{table['what']} {name['allowed']}")
    default = service_name if table.get("default_is_service_name") else table["default"]
    return text(default, table["pattern"], table["allowed"])


def service_name() -> str:
    """The name of the service this process runs."""
    return current().name


HostBound = Callable[["WorkerSettings"], bool]


def declared(
    module: str,
) -> tuple[tuple[tuple[str, ...], ...], str, dict[str, Option], HostBound]:
    """What the catalog declares of the backend whose module is ``module``
    (its ``__name__``): its required environment, its credentials' URL, its
    options, and its ``host_bound()``."""
    name = module.rpartition(".")[2]
    entry = CATALOG[name]
    options = {key: declared_option(table) for key, table in entry.options.items()}

    def host_bound(settings: WorkerSettings) -> bool:
        return lives_on_the_workers_host(name, settings)

    return entry.required_environment, entry.credentials_url, options, host_bound


def lives_on_the_workers_host(name: str, settings: WorkerSettings) -> bool:
    """Whether a sandbox of the backend ``name`` that this worker creates
    lives on this worker's host (its disk, its Docker engine), so that every
    later operation of the run's sandbox must run there (affinity.py; runs on
    the worker only): as the catalog declares (``host_bound``), unless the
    backend's module says every worker shares where its sandboxes live (its
    ``shared_by_every_worker(settings)``: a Docker engine they all reach)."""
    shared = getattr(backend_module(name), "shared_by_every_worker", None)
    return CATALOG[name].host_bound and not (shared is not None and shared(settings))


def variable(backend: str, key: str) -> str:
    """The worker's environment variable of a backend's option:
    "DAYTONA_SANDBOX_IMAGE" for Daytona's "image"."""
    return f"{backend.upper()}_SANDBOX_{key.upper()}"


# The options the worker's settings chose, by backend (use_options()).
_chosen: dict[str, dict[str, Any]] = {}


def use_options(options: Mapping[str, Mapping[str, Any]]) -> None:
    """Make ``options`` (by backend: settings.WorkerSettings.backend_options)
    the ones every sandbox this process creates from now on is given."""
    _chosen.clear()
    _chosen.update({backend: dict(chosen) for backend, chosen in options.items()})


def chosen_options(backend: str) -> dict[str, Any]:
    """The options of ``backend`` the worker's settings chose, or their
    defaults (a process whose worker has not read its settings: a test's)."""
    if backend in _chosen:
        return dict(_chosen[backend])
    return {key: option.default_value() for key, option in backend_module(backend).OPTIONS.items()}


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


def namespace_key() -> str:
    """The key naming the Temporal namespace of the run that made a sandbox:
    "<service>.namespace"."""
    return f"{current().name}.namespace"


def task_queue_key() -> str:
    """The key naming the task queue of the service that made a sandbox:
    "<service>.task-queue". A sandbox without it is not this service's
    (``found()``): the reaper leaves it alone."""
    return f"{current().name}.task-queue"


def service_labels() -> dict[str, str]:
    """The labels (tags, metadata) naming whose a sandbox created now, in an
    activity, is: its run's namespace and the service's task queue."""
    return {
        namespace_key(): activity.info().workflow_namespace or "",
        task_queue_key(): current().task_queue,
    }


def run_labels() -> dict[str, str]:
    """The labels (tags, metadata) of a sandbox created now, in the
    ``<provider>-sandbox_client_create`` activity: its run's workflow id, the
    provider, and ``service_labels()``."""
    info = activity.info()
    return {
        workflow_key(): info.workflow_id or "",
        provider_key(): info.activity_type.removesuffix("-sandbox_client_create"),
        **service_labels(),
    }


@dataclass(frozen=True)
class Found:
    """A sandbox of this service that a backend holds (sandboxes.py)."""

    provider: str
    # The backend's own id: a container's, a workspace's path.
    sandbox_id: str
    workflow_id: str
    namespace: str
    created: datetime


def found(labels: Mapping[str, str], sandbox_id: str, created: datetime) -> Found | None:
    """The sandbox ``labels`` describe, if they name a run of this service
    (its task queue, a workflow id and a provider); else None."""
    workflow_id = labels.get(workflow_key(), "")
    provider = labels.get(provider_key(), "")
    if labels.get(task_queue_key()) != current().task_queue or not workflow_id or not provider:
        return None
    return Found(provider, sandbox_id, workflow_id, labels.get(namespace_key(), ""), created)


def sandbox_backends() -> dict[str, Backend]:
    """Every sandbox provider the worker registers, with its backend.

    Returns:
        The backends by provider name, in the service's order (the first is
        the default: ``Service.sandbox_provider``).
    """
    return {provider: backend_module(name) for provider, name in current().providers.items()}


def run_timeout_seconds() -> int:
    """The service's workflow execution timeout in whole seconds: the
    default lifetime of a remote sandbox, which must outlive the run."""
    return int(current().workflow_execution_timeout.total_seconds())
