"""The worker: runs the agent's workflow, its model calls and its sandbox.

    python -m {{ cookiecutter.package_name }}.machinery.worker

It polls the service's task queue and, when a sandbox it creates lives on
its host, that host's own queue too, where the operations of those sandboxes
arrive (affinity.py); ``WORKER_HOST_ID`` names the host (the host name by
default). Ctrl+C (or SIGTERM) stops it: it stops polling, gives activities in flight
``SHUTDOWN_GRACE`` (30 s) to finish, cancels what is left, and exits with
status 0. Work it did not finish is not lost; Temporal hands it to the next
worker on the same task queue, and the operations of a sandbox on this host
to the next worker of this host. A worker that dies without warning (SIGKILL, a
lost machine) is noticed when its model call misses a heartbeat
(capacity.model_heartbeat_timeout(): 20 s at the default capacity) or its
sandbox operation reaches its timeout. With ``HEALTH_BIND_ADDRESS`` set it
answers a readiness and a liveness probe (health.py).
"""

import argparse
import asyncio
import ctypes
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from datetime import timedelta
from importlib import metadata
from types import TracebackType
from typing import Any, NoReturn

from agents.models.interface import ModelProvider
from agents.sandbox.session.sandbox_client import BaseSandboxClient
from temporalio.client import Client
from temporalio.common import RetryPolicy, WorkerDeploymentVersion
from temporalio.openai_agents import (
    ModelActivityParameters,
    OpenAIAgentsPlugin,
    SandboxClientProvider,
)
from temporalio.worker import Worker

from {{ cookiecutter.package_name }}.machinery import {{ "affinity, approvers, registry, versioning" if cookiecutter.approval != "none" else "affinity, registry, versioning" }}
from {{ cookiecutter.package_name }}.machinery.backends import SANDBOX_BACKENDS
from {{ cookiecutter.package_name }}.machinery.bounded_sandbox import (
    BadTimeLimit,
    BoundedSandboxClient,
    command_time_limit,
)
from {{ cookiecutter.package_name }}.machinery.capacity import (
    RUNS_IN_FLIGHT,
    BadCapacity,
    make_room_for_connections,
    model_heartbeat_timeout,
    model_provider,
    runs_in_flight,
    worker_options,
)
from {{ cookiecutter.package_name }}.machinery.connection import ConnectionFailed, connect
from {{ cookiecutter.package_name }}.machinery.exits import exit_after
from {{ cookiecutter.package_name }}.machinery.health import (
    HealthServer,
    HealthUnavailable,
    health_address,
    serving_health,
)
from {{ cookiecutter.package_name }}.machinery.observability import (
    SandboxOperationMeter,
    TelemetryUnavailable,
    metrics_runtime,
    tracing_plugins,
)
from {{ cookiecutter.package_name }}.machinery.payloads import with_agent_payloads
from {{ cookiecutter.package_name }}.machinery.shared import MODEL_ACTIVITY_TIMEOUT, TASK_QUEUE
from {{ cookiecutter.package_name }}.machinery.workflow import SandboxAgentWorkflow
from {{ cookiecutter.package_name }}.runs import SANDBOX_SECRETS, WORKFLOW_EXECUTION_TIMEOUT

SHUTDOWN_GRACE = timedelta(seconds=30)

# The build an unversioned worker reports to Temporal (with its pollers, and
# in each workflow task it completes). It routes nothing and does not change
# when the code does: a versioned worker reports TEMPORAL_WORKER_BUILD_ID
# (versioning.py). Left unset, the SDK would hash the bytecode of every loaded
# module: with the Agents SDK some 1,800 modules, seconds of CPU at each start.
DISTRIBUTION = {{ cookiecutter.project_slug | tojson }}
UNVERSIONED_BUILD = f"{DISTRIBUTION}-{metadata.version(DISTRIBUTION)}"

# A model call that keeps failing (the provider is down, the rate limit does
# not lift) ends the run after about three minutes of retries instead of
# backing off for ever. Errors the provider says retrying cannot fix (a bad
# key: 401, a bad request: 400) are not retried at all, and a Retry-After
# header from the provider overrides these intervals. Nor is an answer that
# is not JSON (OPENAI_BASE_URL at a web page, a proxy that cuts answers
# short): it fails the run at once, naming the parse error.
MODEL_RETRY_POLICY = RetryPolicy(
    initial_interval=timedelta(seconds=2),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=8,
    non_retryable_error_types=["JSONDecodeError"],
)


# Each model call's start-to-close timeout, in whole seconds, when it is not
# MODEL_ACTIVITY_TIMEOUT: a slow model or a proxy may need longer. It is the
# worker's setting: the workflow's model calls take it from the plugin, and
# Temporal does not compare timeouts when it replays a history.
MODEL_TIMEOUT_VARIABLE = "MODEL_ACTIVITY_TIMEOUT_SECONDS"
LONGEST_MODEL_TIMEOUT = min(3600, int(WORKFLOW_EXECUTION_TIMEOUT.total_seconds()))


class BadModelTimeout(ValueError):
    """The model calls' timeout is not a number of seconds a run has room for."""


def model_activity_timeout(environ: Mapping[str, str] = os.environ) -> timedelta:
    """Each model call's timeout: ``MODEL_ACTIVITY_TIMEOUT_SECONDS``, or
    ``MODEL_ACTIVITY_TIMEOUT`` when it is unset."""
    value = environ.get(MODEL_TIMEOUT_VARIABLE) or str(int(MODEL_ACTIVITY_TIMEOUT.total_seconds()))
    if not value.isdigit() or not 1 <= int(value) <= LONGEST_MODEL_TIMEOUT:
        raise BadModelTimeout(
            f"{MODEL_TIMEOUT_VARIABLE}={value!r} is not a whole number of seconds from 1 to "
            f"{LONGEST_MODEL_TIMEOUT} (each model call's timeout: at most an hour, and no longer "
            "than a whole run)."
        )
    return timedelta(seconds=int(value))


class BackendUnavailable(Exception):
    """The worker cannot build the client of one of its sandbox backends."""


# Any one of these sets of environment variables, each set and non-empty; no
# sets at all means nothing is needed.
Alternatives = tuple[tuple[str, ...], ...]

# What the worker needs in its environment before it starts, and where to get
# it. The OpenAI client wants a key even for another OpenAI-compatible
# endpoint (OPENAI_BASE_URL); for one that ignores keys, any value will do.
# Then each sandbox backend's credentials, and the variables forwarded to
# the agent's sandbox.
REQUIRED_CREDENTIALS: list[tuple[Alternatives, str]] = [
    ((("OPENAI_API_KEY",),), "https://platform.openai.com/api-keys"),
    *(
        (backend.REQUIRED_ENVIRONMENT, backend.CREDENTIALS_URL)
        for backend in SANDBOX_BACKENDS.values()
        if backend.REQUIRED_ENVIRONMENT
    ),
    *((((name,),), "forwarded to the agent's sandbox") for name in SANDBOX_SECRETS),
]


def missing_credentials(environ: Mapping[str, str]) -> str | None:
    """One line naming the credentials the worker lacks, or None."""
    missing = [
        f"{' or '.join(' with '.join(names) for names in alternatives)} ({where})"
        for alternatives, where in REQUIRED_CREDENTIALS
        if not any(all(environ.get(name) for name in names) for names in alternatives)
    ]
    if not missing:
        return None
    return f"Missing credentials: set {'; '.join(missing)}. See .env.example."


def agents_plugin(
    sandboxes: Mapping[str, BaseSandboxClient[Any]] | None = None,
    model_provider: ModelProvider | None = None,
    model_retry_policy: RetryPolicy = MODEL_RETRY_POLICY,
    traced: bool = False,
    runs: int = RUNS_IN_FLIGHT,
) -> OpenAIAgentsPlugin:
    """The plugin that runs model calls and sandbox operations as activities.

    The real worker builds each backend's client and uses the OpenAI model
    provider; tests pass their own sandbox clients (by provider name) and a
    scripted model provider. ``traced``: the agent's spans also go to
    OpenTelemetry (observability.tracing_plugins() must have run). ``runs``:
    the worker's runs in flight, which set the model calls' heartbeat timeout.
    """
    if sandboxes is None:
        sandboxes = {
            provider: backend_client(provider, backend.sandbox_client)
            for provider, backend in SANDBOX_BACKENDS.items()
        }
    time_limit = command_time_limit(os.environ)
    plugin = OpenAIAgentsPlugin(
        model_params=ModelActivityParameters(
            start_to_close_timeout=model_activity_timeout(os.environ),
            heartbeat_timeout=model_heartbeat_timeout(runs),
            retry_policy=model_retry_policy,
            # Model calls stay ordinary activities, so each one shows in the Web
            # UI and the starter's progress, heartbeats, and is retried on its
            # own (use_local_activity=True would trade that for a little speed).
        ),
        model_provider=model_provider,
        # One set of sandbox activities per provider, each prefixed with the
        # provider's name; the workflow picks the provider by that name. Each
        # client cuts what it returns to a size Temporal can record, and bounds
        # each command in time.
        sandbox_clients=[
            SandboxClientProvider(provider, BoundedSandboxClient(client, time_limit))
            for provider, client in sandboxes.items()
        ],
        # The only worker environment variables the sandbox may read.
        resolvable_worker_env_vars=SANDBOX_SECRETS,
        use_otel_instrumentation=traced,
    )
    # The plugin's data converter, reading model inputs cheaply (payloads.py).
    plugin.data_converter = with_agent_payloads
    return plugin


def backend_client(
    provider: str, build: Callable[[], BaseSandboxClient[Any]]
) -> BaseSandboxClient[Any]:
    """A backend's client, built before the worker connects, so a backend
    that cannot be built stops the worker at once with one clear line."""
    try:
        return build()
    except Exception as e:
        raise BackendUnavailable(
            f"Cannot start the {provider!r} sandbox backend: {type(e).__name__}: {e}"
        ) from e


class ServiceWorker:
    """The worker's pollers, started and stopped together: ``shared`` on
    TASK_QUEUE (the runs, the model calls, the sandboxes any worker reaches)
    and ``own`` on its host's queue (the operations of the sandboxes on this
    host: affinity.py), None when no sandbox it creates lives on its host."""

    def __init__(self, shared: Worker, own: Worker | None) -> None:
        self.shared, self.own = shared, own
        self._running = AsyncExitStack()
        self._draining = False

    @property
    def ready(self) -> bool:
        """Whether every poller runs (the SDK checked the namespace and
        started polling) and the worker has not begun to drain."""
        pollers = [self.shared] if self.own is None else [self.shared, self.own]
        return not self._draining and all(poller.is_running for poller in pollers)

    @property
    def task_queue(self) -> str:
        return self.shared.task_queue

    async def __aenter__(self) -> "ServiceWorker":
        if self.own is not None:
            await self._running.enter_async_context(self.own)
        await self._running.enter_async_context(self.shared)
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        # Not ready from here on (health.py): draining. The shared poller
        # stops first, so no new run lands here while this host's sandbox
        # operations finish.
        self._draining = True
        await self._running.__aexit__(kind, error, traceback)


def build_worker(
    client: Client,
    runs: int = RUNS_IN_FLIGHT,
    /,
    host: str | None = None,
    version: WorkerDeploymentVersion | None = None,
    **options: object,
) -> ServiceWorker:
    """A worker for this service's task queue and workflow, on ``host``
    (WORKER_HOST_ID or the host name by default), polling as the Worker
    Deployment Version ``version`` (None: unversioned), with room for
    ``runs`` runs in flight unless ``options`` say otherwise (capacity.py)."""
    host = host or affinity.host_id(os.environ)
    for name, value in worker_options(runs).items():
        options.setdefault(name, value)
    options.setdefault("graceful_shutdown_timeout", SHUTDOWN_GRACE)
    options.setdefault("workflows", [SandboxAgentWorkflow])
    options.setdefault("interceptors", [SandboxOperationMeter(host)])
    options.setdefault("identity", affinity.worker_identity(host))
    host_bound = {provider: backend.host_bound() for provider, backend in SANDBOX_BACKENDS.items()}
    shared = Worker(
        client,
        task_queue=TASK_QUEUE,
        activities=[*affinity.host_activities(host, host_bound), *registry.TOOL_ACTIVITIES],
        **(
            {"build_id": UNVERSIONED_BUILD}
            if version is None
            else {"deployment_config": versioning.deployment_config(version)}
        ),
        **options,  # type: ignore[arg-type]
    )
    if not any(host_bound.values()):
        return ServiceWorker(shared, None)
    # The host's own queue carries only sandbox operations (the agents
    # plugin registers them on every worker): as many at once as runs. It is
    # never versioned: whichever build a run is on, its sandbox is on this
    # host, so a chain that moves to a new build at continue-as-new still
    # reaches its sandbox, through any worker of the host.
    shared_only = ("workflows", "max_cached_workflows", "max_heartbeat_throttle_interval")
    own = Worker(
        client,
        task_queue=affinity.host_queue(host),
        build_id=UNVERSIONED_BUILD,
        **{name: value for name, value in options.items() if name not in shared_only},  # type: ignore[arg-type]
    )
    return ServiceWorker(shared, own)


async def run_worker(
    runs: int,
    host: str,
    version: WorkerDeploymentVersion | None,
    health_at: tuple[str, int] | None = None,
) -> None:
    # The health endpoint answers (live, not ready) while the worker starts.
    async with serving_health(health_at) as health:
        await serve(runs, host, version, health)


async def serve(
    runs: int, host: str, version: WorkerDeploymentVersion | None, health: HealthServer | None
) -> None:
    # Metrics and traces, when configured, are set up before the client.
    runtime = metrics_runtime(os.environ)
    tracing = tracing_plugins(os.environ)
    plugin = agents_plugin(model_provider=model_provider(runs), traced=bool(tracing), runs=runs)
    client = await connect(plugins=[plugin, *tracing], runtime=runtime)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with build_worker(client, runs, host, version) as worker:
        if health is not None:
            health.ready = lambda: worker.ready
        providers = ", ".join(repr(provider) for provider in SANDBOX_BACKENDS)
        own = f" and {worker.own.task_queue!r} (sandboxes on host {host!r})" if worker.own else ""
        versioned = f" as version {versioning.version_label(version)!r}" if version else ""
        print(
            f"Worker polling task queue {TASK_QUEUE!r}{own}{versioned} with sandbox "
            f"{'providers' if len(SANDBOX_BACKENDS) > 1 else 'provider'} {providers}. "
            f"Up to {runs} runs in flight. Ctrl+C to stop."
        )
        await stop.wait()
        print("Stopping: letting work in flight finish...")
    print("Worker stopped.")


def hide_from_other_processes() -> bool:
    """Mark the worker's process not dumpable (Linux: ``prctl(PR_SET_DUMPABLE,
    0)``), so that the other processes of its user, the local sandbox's
    commands among them, cannot read its memory or ``/proc/<pid>/environ``,
    where OPENAI_API_KEY and the backends' keys are. Root, or any process with
    CAP_SYS_PTRACE, still can: run the worker as a user of its own. It also
    turns off core dumps of the worker. Returns whether it did."""
    if not sys.platform.startswith("linux"):
        return False
    pr_set_dumpable = 4
    return int(ctypes.CDLL(None).prctl(pr_set_dumpable, 0, 0, 0, 0)) == 0


def main(argv: Sequence[str] | None = None) -> None:
    """Run the worker until it is stopped; exit 1 with one line when it
    cannot start."""
    argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0]).parse_args(argv)
    hide_from_other_processes()
    # Say what is missing before connecting, instead of failing on the first run.
    problem = missing_credentials(os.environ)
    if problem:
        sys.exit(problem)
    try:
        runs = runs_in_flight(os.environ)
        host = affinity.host_id(os.environ)
        version = versioning.worker_version(os.environ)
        command_time_limit(os.environ)
        model_activity_timeout(os.environ)
        health_at = health_address(os.environ)
{%- if cookiecutter.approval != "none" %}
        approvers.trust(approvers.approvers_from(os.environ))
{%- endif %}
        make_room_for_connections(runs)
        asyncio.run(run_worker(runs, host, version, health_at))
    except (
        BadCapacity,
        BadTimeLimit,
        BadModelTimeout,
        affinity.BadHostId,
{%- if cookiecutter.approval != "none" %}
        approvers.BadApprovers,
{%- endif %}
        versioning.BadVersioning,
        BackendUnavailable,
        ConnectionFailed,
        TelemetryUnavailable,
        HealthUnavailable,
    ) as e:
        sys.exit(str(e))


def cli() -> NoReturn:
    """The installed command: ``main()``, then exit with its status without
    the interpreter's shutdown, which the Temporal SDK can crash (exits.py)."""
    exit_after(main)


if __name__ == "__main__":
    cli()
