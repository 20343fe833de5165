"""The worker: runs the agent's workflow, its model calls and its sandbox.

It polls the service's task queue, the model calls' own queue (always, for
the calls a worker with MODEL_CALLS_QUEUE=own left there, whatever its own
setting) and, for a host-bound backend, its host's queue. Ctrl+C (or SIGTERM) stops it: activities
in flight get ``SHUTDOWN_GRACE`` to finish, what is left is cancelled, and the
status is 0. Work it did not finish is not lost: Temporal hands it to the next
worker on the same queue. A worker that dies without warning is noticed when
its model call misses a heartbeat or its sandbox operation times out.
"""

import argparse
import asyncio
import ctypes
import signal
import sys
import warnings
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from datetime import timedelta
from functools import cache
from importlib import metadata
from types import TracebackType
from typing import Any, NoReturn

from agents.models.interface import ModelProvider
from agents.sandbox.session.sandbox_client import BaseSandboxClient
from temporalio.bridge.proto.workflow_activation import (
    RemoveFromCache,
    WorkflowActivation,
    WorkflowActivationJob,
)
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.converter import ExternalStorage
from temporalio.openai_agents import OpenAIAgentsPlugin
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from sandbox_agent_runtime import affinity, approvers, versioning
from sandbox_agent_runtime.backends import Backend, sandbox_backends, use_options
from sandbox_agent_runtime.bounded_sandbox import BoundedSandboxClient
from sandbox_agent_runtime.callback_sender import CallbackSender
from sandbox_agent_runtime.capacity import (
    HeartbeatAtStart,
    check_the_agents_model,
    make_room_for_connections,
    model_heartbeat_timeout,
    model_provider,
    worker_options,
)
from sandbox_agent_runtime.chain import nested_runs_counted
from sandbox_agent_runtime.connection import ConnectionFailed, connect
from sandbox_agent_runtime.costs import CountsActions, use_action_rate
from sandbox_agent_runtime.encryption import codec_of
from sandbox_agent_runtime.exits import exit_after
from sandbox_agent_runtime.health import (
    HealthServer,
    HealthUnavailable,
    serving_health,
)
from sandbox_agent_runtime.mcp_servers import McpServers
from sandbox_agent_runtime.model_api import RESPONSES, ChecksTheAnswer, NamesAMissingApi
from sandbox_agent_runtime.model_queue import OWN, model_calls_task_queue, model_task_queue
from sandbox_agent_runtime.object_store import (
    ObjectStoreUnreachable,
    check_reachable,
    data_converter,
    worker_storage,
)
from sandbox_agent_runtime.observability import (
    ModelCallWait,
    SandboxOperationMeter,
    TelemetryUnavailable,
    count_runs_from_zero,
    metrics_runtime,
    tracing_plugins,
)
from sandbox_agent_runtime.payloads import with_agent_payloads
from sandbox_agent_runtime.sandboxes import ReapSandboxes, reap_sandboxes, schedule_reaping
from sandbox_agent_runtime.service import current
from sandbox_agent_runtime.settings import (
    BadSetting,
    WorkerSettings,
    keep_litellm_offline,
    worker_settings,
)
from sandbox_agent_runtime.shared import MODEL_TOPIC, WORKFLOW_TYPE
from sandbox_agent_runtime.streaming import (
    StreamingParameters,
    StreamingProvider,
)
from sandbox_agent_runtime.workspace import (
    WorkspaceProvider,
    snapshot_store,
)

SHUTDOWN_GRACE = timedelta(seconds=30)

# The team's tool activities (tools.py of the project), which the worker
# registers beside the agents plugin's.
ToolActivities = Sequence[Callable[..., Any]]


def distribution() -> str:
    """The service's distribution: the project, as installed (its name)."""
    return current().name


@cache
def _build_of(name: str) -> str:
    return f"{name}-{metadata.version(name)}"


def unversioned_build() -> str:
    """The build an unversioned worker reports to Temporal (with its pollers,
    and in each workflow task it completes): "<service>-<its version>". It
    routes nothing and does not change when the code does: a versioned worker
    reports TEMPORAL_WORKER_BUILD_ID. Left unset, the SDK
    would hash the bytecode of every loaded module: with the Agents SDK some
    1,800 modules, seconds of CPU at each start."""
    return _build_of(distribution())


# The workflow sandbox loads the workflow's module afresh for each run it
# starts, and every module of the project's and the runtime's that it
# imports, unless passed through. The whole runtime is passed through, the
# workflow and its phases with it: imported once per worker instead of once
# per run, which saves each run CPU on the worker's event loop and memory for
# as long as it is cached (measured in the template's docs/capacity.md,
# "Where a run's CPU and memory go"). They hold nothing a run changes
# (constants, dataclasses, functions, classes whose instances a run makes;
# the service, configured once per process; AgentWorkflow keeps a run's state
# in its instance) and their workflow code is proven by the recorded
# histories. The project's workflow module and the modules it imports stay
# under the sandbox's checks (passing them too would save a little more).
PASSED_THROUGH = (__package__,)


def workflow_runner() -> SandboxedWorkflowRunner:
    """The workflow sandbox of the worker, which passes the runtime through.

    Returns:
        The runner, for a worker's or a replayer's ``workflow_runner``.
    """
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSED_THROUGH)
    )


# A model call that keeps failing (the provider is down, the rate limit does
# not lift) ends the run after about three minutes of retries instead of
# backing off for ever. Errors the provider says retrying cannot fix (a bad
# key: 401, a bad request: 400) are not retried at all, and a Retry-After
# header from the provider overrides these intervals. Nor is a success that
# holds no answer (OPENAI_BASE_URL at a web page, a proxy that cuts answers
# short, an error object in a 200: model_api.ChecksTheAnswer): it fails the
# run at once, in one line; an answer cut short that a parser meets
# elsewhere (JSONDecodeError) fails it at once too, naming the parse error.
MODEL_RETRY_POLICY = RetryPolicy(
    initial_interval=timedelta(seconds=2),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=8,
    non_retryable_error_types=["JSONDecodeError"],
)


class BackendUnavailable(Exception):
    """The worker cannot build the client of one of its sandbox backends."""


def agents_plugin(
    settings: WorkerSettings,
    sandboxes: Mapping[str, BaseSandboxClient[Any]] | None = None,
    model_provider: ModelProvider | None = None,
    model_retry_policy: RetryPolicy = MODEL_RETRY_POLICY,
    traced: bool = False,
    mcp_servers: McpServers = (),
) -> OpenAIAgentsPlugin:
    """The plugin that runs model calls and sandbox operations as activities.

    Args:
        settings: the worker's settings (timeouts, limits, each backend's options).
        sandboxes: the sandbox clients by provider name; None builds each of
            the service's backends (tests pass their own).
        model_provider: the model provider; None is OpenAI's (tests pass a
            scripted one).
        model_retry_policy: how a failed model call is retried.
        traced: whether the agent's spans also go to OpenTelemetry (its
            tracing plugins must be set up first).
        mcp_servers: the service's MCP servers (its tools.py's MCP_SERVERS),
            each operation an activity named after its server (mcp_servers.py).

    Returns:
        The plugin, for a worker's or a replayer's ``plugins``.
    """
    if sandboxes is None:
        sandboxes = {
            provider: backend_client(provider, backend, settings)
            for provider, backend in sandbox_backends().items()
        }
    # The plugin's MCP providers are deprecated for an API that temporalio
    # 1.35 lacks (mcp_servers.py).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        plugin = _plugin(
            settings, sandboxes, model_provider, model_retry_policy, traced, mcp_servers
        )
    # The plugin's data converter, reading model inputs cheaply.
    plugin.data_converter = with_agent_payloads
    # A prompt's nested runs (a guardrail's, an agent's called as a tool)
    # count into its usage and budget, in a worker and a replayer alike.
    plugin.run_context = counting_nested_runs(plugin.run_context)
    # A run's Temporal actions, counted in a worker and a replayer alike
    # (costs.py): a replay counts what the run counted.
    plugin.interceptors = [*(plugin.interceptors or []), CountsActions()]
    return plugin


def counting_nested_runs(
    run_context: Callable[[], AbstractAsyncContextManager[None]] | None,
) -> Callable[[], AbstractAsyncContextManager[None]]:
    """The plugin's ``run_context``, inside which ``Runner.run`` also counts
    a prompt's nested runs (chain.nested_runs_counted)."""

    @asynccontextmanager
    async def counting() -> AsyncIterator[None]:
        async with run_context() if run_context is not None else nullcontext():
            with nested_runs_counted():
                yield

    return counting


def _plugin(
    settings: WorkerSettings,
    sandboxes: Mapping[str, BaseSandboxClient[Any]],
    model_provider: ModelProvider | None,
    model_retry_policy: RetryPolicy,
    traced: bool,
    mcp_servers: McpServers,
) -> OpenAIAgentsPlugin:
    return OpenAIAgentsPlugin(
        model_params=StreamingParameters(
            start_to_close_timeout=settings.model_activity_timeout,
            heartbeat_timeout=model_heartbeat_timeout(settings.runs_in_flight),
            retry_policy=model_retry_policy,
            # On their own queue, whose rate the server holds across the
            # fleet (MODEL_CALLS_PER_SECOND, MODEL_CALLS_QUEUE=own); else
            # None: the run's, and handed out with its workflow task.
            task_queue=model_calls_task_queue(settings.model_calls_queue),
            # Model calls stay ordinary activities, so each one shows in the Web
            # UI and the starter's progress, heartbeats, and is retried on its
            # own (use_local_activity=True would trade that for a little speed).
            # Streamed (Runner.run_streamed: streaming.py), what the model
            # writes goes to the run's stream in batches; a run that
            # streams goes on streaming whatever this worker's setting.
            streaming_topic=MODEL_TOPIC,
            streaming_batch_interval=settings.stream_batch,
            stream_new_runs=streams(settings),
        ),
        # A model that cannot stream gives its turns whole (streaming.py);
        # None: OpenAI's, which streams.
        model_provider=StreamingProvider(model_provider) if model_provider else None,
        # One set of sandbox activities per provider, each prefixed with the
        # provider's name; the workflow picks the provider by that name. Each
        # client cuts what it returns to a size Temporal can record, and bounds
        # each command in time. Beside the SDK's operations, each provider
        # places a run's inputs, collects its outputs, and snapshots and
        # restores a conversation's workspace (workspace/): in the object
        # store, else (a service with a host-bound backend) on this host's
        # disk for a sandbox bound to this host.
        sandbox_clients=[
            WorkspaceProvider(
                provider,
                BoundedSandboxClient(client, settings.command_time_limit),
                has_store=settings.object_store is not None,
                # Remote sandboxes: snapshots in the object store, or none.
                snapshots=snapshot_store(
                    settings.object_store,
                    current().host_bound and host_bound(provider, settings),
                    codec_of(settings.keys),
                ),
                idle_timeout=settings.session_idle_timeout,
                lifetime=settings.session_lifetime,
                git_timeout=settings.git_timeout,
                repos=settings.repos,
            )
            for provider, client in sandboxes.items()
        ],
        # The only worker environment variables the sandbox may read.
        resolvable_worker_env_vars=current().sandbox_secrets,
        use_otel_instrumentation=traced,
        # Built on the worker from its environment: their credentials stay here.
        mcp_server_providers=list(mcp_servers),
    )


def streams(settings: WorkerSettings) -> bool:
    """Whether this worker streams new runs: STREAM_MODEL_TURNS, and an
    endpoint that speaks the Responses API (Chat Completions gives whole
    turns)."""
    return settings.stream_model_turns and settings.openai_api == "responses"


def streaming_line(settings: WorkerSettings) -> str:
    """The worker's line at its start when new runs do not stream, else ""."""
    if not settings.stream_model_turns:
        return "Model turns come whole (STREAM_MODEL_TURNS=false): new runs do not stream."
    if not streams(settings):
        return (
            "Model turns come whole: the endpoint speaks Chat Completions "
            "(OPENAI_API=chat_completions), so new runs do not stream."
        )
    return ""


def host_bound(provider: str, settings: WorkerSettings) -> bool:
    """Whether ``provider``'s sandboxes live on this worker's host (its
    backend says: backends/), so that without an object store their
    snapshots can stay on this host's disk (workspace.snapshot_store())."""
    return sandbox_backends()[provider].host_bound(settings)


def backend_client(
    provider: str, backend: Backend, settings: WorkerSettings
) -> BaseSandboxClient[Any]:
    """A backend's client, built before the worker connects, so a backend
    that cannot be built stops the worker at once with one clear line."""
    try:
        return backend.sandbox_client(settings)
    except Exception as e:
        raise BackendUnavailable(
            f"Cannot start the {provider!r} sandbox backend: {type(e).__name__}: {e}"
        ) from e


class ServiceWorker:
    """The worker's pollers, started and stopped together, and whether they
    are ready: ``shared`` on the service's task queue (the runs, the
    sandboxes any worker reaches, and model calls without a queue of their
    own), ``models`` on the model calls' queue and ``own`` on its host's queue (the operations of the
    sandboxes on this host), None when no sandbox it creates
    lives on its host (always, for a service without a host-bound backend).

    As ``async with Worker`` does, a poller that fails while the block runs
    stops the block (its task is cancelled) and its error is raised from the
    block. Unlike it, a poller that fails while the worker stops never
    cancels the code that stops it: the SDK's context manager (temporalio
    1.35) counts the caller as stopping only once the stop is complete, so an
    error raised as a poller stopped cancelled the caller's wait, and the
    caller saw a bare CancelledError instead of the error. Here the stop
    awaits every poller and raises the first poller's error, whole."""

    def __init__(self, shared: Worker, models: Worker, own: Worker | None = None) -> None:
        self.shared, self.models, self.own = shared, models, own
        self._runs: list[asyncio.Task[None]] = []
        self._block: asyncio.Task[Any] | None = None
        self._draining = False

    @property
    def pollers(self) -> list[Worker]:
        """The pollers, in the order they start (they stop in reverse: no new
        run lands here while the model calls and this host's sandbox
        operations in flight finish)."""
        return [*([self.own] if self.own else []), self.models, self.shared]

    @property
    def ready(self) -> bool:
        """Whether every poller runs (the SDK checked the namespace and
        started polling) and the worker has not begun to drain."""
        return not self._draining and all(poller.is_running for poller in self.pollers)

    async def __aenter__(self) -> "ServiceWorker":
        self._block = asyncio.current_task()
        for poller in self.pollers:
            run = asyncio.create_task(poller.run())
            run.add_done_callback(self._stop_the_block_on_failure)
            self._runs.append(run)
        return self

    def _stop_the_block_on_failure(self, run: "asyncio.Task[None]") -> None:
        if self._draining or run.cancelled() or run.exception() is None:
            return
        if self._block is not None:
            self._block.cancel()

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        # Not ready from here on: draining. The shared poller
        # stops first (pollers).
        self._draining = True
        for poller, run in reversed(list(zip(self.pollers, self._runs, strict=True))):
            # A poller that failed before it started never completes a stop:
            # its run, done either way, is what is waited for.
            stopping = asyncio.create_task(poller.shutdown())
            await asyncio.wait([run])
            stopping.cancel()
            await evict_cached_runs(poller)
        failures = [run.exception() for run in self._runs if not run.cancelled()]
        failure = next((each for each in failures if each is not None), None)
        if failure is not None and (kind is None or kind is asyncio.CancelledError):
            raise failure


async def evict_cached_runs(poller: Worker) -> None:
    """End the runs a stopped ``poller`` still caches as the SDK evicts a
    run (its tasks cancelled, its commands dropped). Temporal's Core evicts
    no idle cached run at shutdown (temporalio 1.35, sdk-python#1849): its
    coroutines were left for the garbage collector, which closed them later
    in whatever run's thread it ran, where their ``finally`` blocks sent
    commands into that run (sdk-python#494), which then failed to replay."""
    # Private names of temporalio 1.35; tests/test_streaming.py fails if they move.
    workflows = poller._workflow_worker  # noqa: SLF001
    if workflows is None:
        return
    cached = workflows._running_workflows  # noqa: SLF001
    for run_id, running in list(cached.items()):
        eviction = RemoveFromCache(
            message="The worker stopped.", reason=RemoveFromCache.EvictionReason.LANG_REQUESTED
        )
        activation = WorkflowActivation(
            run_id=run_id, jobs=[WorkflowActivationJob(remove_from_cache=eviction)]
        )
        try:
            await asyncio.to_thread(running.activate, activation)
        except Exception as e:  # one whose tasks did not end: left as before
            print(f"Run {run_id} could not be evicted as the worker stopped: {e}", file=sys.stderr)
        cached.pop(run_id, None)


def build_worker(
    client: Client,
    settings: WorkerSettings,
    *,
    workflows: Sequence[type],
    tool_activities: ToolActivities,
    max_cached_workflows: int | None = None,
    graceful_shutdown_timeout: timedelta = SHUTDOWN_GRACE,
    identity: str | None = None,
) -> ServiceWorker:
    """A worker for this service's task queue, as ``settings`` say: on their
    host (a service with a host-bound backend), polling as their Worker
    Deployment Version (or unversioned), with room for their runs in flight.

    Args:
        client: the Temporal client, with the plugins (``agents_plugin``).
        settings: the worker's settings.
        workflows: the workflow types to run (the service's; tests may run others).
        tool_activities: the service's tool activities.
        max_cached_workflows: how many runs to cache; None for the settings' room.
        graceful_shutdown_timeout: how long work in flight may finish at shutdown.
        identity: the worker's name; None for Temporal's default.

    Returns:
        The worker; ``async with`` it to run it.
    """
    # The backends' options every sandbox it creates is given (the workflow
    # reads them: backends/).
    use_options(settings.backend_options)
    # What a Temporal action costs the service's runs (costs.py).
    use_action_rate(settings.temporal_usd_per_million_actions)
    version = settings.version
    options = worker_options(settings.runs_in_flight)
    if max_cached_workflows is not None:
        options["max_cached_workflows"] = max_cached_workflows
    # The shared queue's slots, one per run in flight, whether a run's model
    # calls take them too (going with its own work) or not: a run waits on
    # one activity at a time, and a run past WORKER_RUNS_IN_FLIGHT waits on
    # the queue, not in the model client's pool.
    shared_options = {**options}
    # Model calls run on either poller: a call is where the worker that
    # scheduled it sent it, whatever this worker's setting.
    model_calls = [ModelCallWait(), HeartbeatAtStart(), NamesAMissingApi(settings.openai_api)]
    # A run's callback when it ends (callbacks.py), signed with this worker's key.
    callback = CallbackSender(settings.callback_key, settings.callbacks).post_run_callback
    if not current().host_bound:
        shared = Worker(
            client,
            task_queue=current().task_queue,
            workflows=[*workflows, ReapSandboxes],
            workflow_runner=workflow_runner(),
            activities=[reap_sandboxes, callback, *tool_activities],
            interceptors=[
                SandboxOperationMeter(),
                *model_calls,
                ChecksTheAnswer(),
            ],
            graceful_shutdown_timeout=graceful_shutdown_timeout,
            identity=identity,
            **(
                {"build_id": unversioned_build()}
                if version is None
                else {"deployment_config": versioning.deployment_config(version)}
            ),
            **shared_options,
        )
        models = model_calls_worker(client, settings, graceful_shutdown_timeout, identity)
        return ServiceWorker(shared, models)
    host = settings.host_id
    host_bound = {
        provider: backend.host_bound(settings) for provider, backend in sandbox_backends().items()
    }
    meter = SandboxOperationMeter(host)
    identity = identity or affinity.worker_identity(host)
    shared = Worker(
        client,
        task_queue=current().task_queue,
        workflows=[*workflows, ReapSandboxes],
        workflow_runner=workflow_runner(),
        # The reaper's is offered here first too, as a host's operations are.
        activities=[
            *affinity.host_activities(host, host_bound),
            reap_sandboxes,
            callback,
            *tool_activities,
        ],
        # Outermost first: an operation for another host is refused before
        # it is counted or run.
        interceptors=[
            affinity.HostFirst(host),
            meter,
            *model_calls,
            ChecksTheAnswer(),
        ],
        graceful_shutdown_timeout=graceful_shutdown_timeout,
        identity=identity,
        **(
            {"build_id": unversioned_build()}
            if version is None
            else {"deployment_config": versioning.deployment_config(version)}
        ),
        **shared_options,
    )
    models = model_calls_worker(client, settings, graceful_shutdown_timeout, identity)
    if not any(host_bound.values()):
        return ServiceWorker(shared, models, None)
    # The host's own queue carries only sandbox operations (the agents
    # plugin registers them on every worker): as many at once as runs. It is
    # never versioned: whichever build a run is on, its sandbox is on this
    # host, so a chain that moves to a new build at continue-as-new still
    # reaches its sandbox, through any worker of the host.
    own = Worker(
        client,
        task_queue=affinity.host_queue(host),
        build_id=unversioned_build(),
        # The reaper's, for the sandboxes on this host (sandboxes.py).
        activities=[reap_sandboxes],
        max_concurrent_activities=options["max_concurrent_activities"],
        interceptors=[meter],
        graceful_shutdown_timeout=graceful_shutdown_timeout,
        identity=identity,
    )
    return ServiceWorker(shared, models, own)


def model_calls_worker(
    client: Client,
    settings: WorkerSettings,
    graceful_shutdown_timeout: timedelta,
    identity: str | None,
) -> Worker:
    """The poller of the model calls' queue: one call at a
    time per run in flight, at most MODEL_CALLS_PER_SECOND a second across
    the fleet. Every worker runs it, with the queue or without: a worker
    whose calls go with their runs still takes those a worker with the
    queue left there (during a rollout of MODEL_CALLS_QUEUE, or after one). Unversioned, as a host's queue is, so that one rate holds for
    every build (the agents plugin registers the model activities on every
    worker, and any build's worker makes a call the same way); a versioned
    worker's poller still reports its version, for the Web UI."""
    options = worker_options(settings.runs_in_flight)
    version = settings.version
    return Worker(
        client,
        task_queue=model_task_queue(),
        **(
            {"build_id": unversioned_build()}
            if version is None
            else {"deployment_config": versioning.reporting_only(version)}
        ),
        max_concurrent_activities=options["max_concurrent_activities"],
        max_heartbeat_throttle_interval=options["max_heartbeat_throttle_interval"],
        max_task_queue_activities_per_second=settings.model_calls_per_second,
        interceptors=[
            ModelCallWait(),
            HeartbeatAtStart(),
            NamesAMissingApi(settings.openai_api),
            ChecksTheAnswer(),
        ],
        graceful_shutdown_timeout=graceful_shutdown_timeout,
        identity=identity,
    )


async def run_worker(
    settings: WorkerSettings,
    workflow: type,
    tool_activities: ToolActivities,
    mcp_servers: McpServers = (),
) -> None:
    """Run the worker of ``workflow`` and ``tool_activities`` until it is
    stopped (SIGINT, SIGTERM)."""
    # The health endpoint answers (live, not ready) while the worker starts.
    async with serving_health(settings.health_address) as health:
        # The object store takes payloads before the worker polls, and its
        # client stays open for as long as the worker runs.
        if settings.object_store is not None:
            await check_reachable(settings.object_store)
        async with worker_storage(settings.object_store) as storage:
            await serve(settings, health, storage, workflow, tool_activities, mcp_servers)


async def serve(
    settings: WorkerSettings,
    health: HealthServer | None,
    storage: ExternalStorage | None,
    workflow: type,
    tool_activities: ToolActivities,
    mcp_servers: McpServers = (),
) -> None:
    # Metrics and traces, when configured, are set up before the client.
    runtime = metrics_runtime(settings.metrics_address)
    tracing = tracing_plugins(settings.traces_endpoint)
    runs = settings.runs_in_flight
    provider = model_provider(runs, use_responses=settings.openai_api == RESPONSES)
    plugin = agents_plugin(
        settings, model_provider=provider, traced=bool(tracing), mcp_servers=mcp_servers
    )
    client = await connect(
        plugins=[plugin, *tracing],
        runtime=runtime,
        data_converter=data_converter(storage, codec=codec_of(settings.keys)),
    )
    build_id = settings.version.build_id if settings.version else unversioned_build()
    task_queue = current().task_queue
    count_runs_from_zero(runtime, client.namespace, task_queue, WORKFLOW_TYPE, build_id)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with build_worker(
        client, settings, workflows=(workflow,), tool_activities=tool_activities
    ) as worker:
        if health is not None:
            health.ready = lambda: worker.ready
        if settings.reap_every:
            # One schedule for the fleet; one per host for sandboxes on a host.
            own_queue = worker.own.task_queue if worker.own else task_queue
            host_id = settings.host_id if worker.own else ""
            await schedule_reaping(
                client, settings.reap_every, own_queue, host_id, settings.reap_grace
            )
        registered = sandbox_backends()
        providers = ", ".join(repr(provider) for provider in registered)
        # Only a service with a host-bound backend has a host queue.
        own = worker.own
        host = f", {own.task_queue!r} (sandboxes on host {settings.host_id!r})" if own else ""
        version = versioning.version_label(settings.version)
        versioned = f" as version {version!r}" if version else ""
        rate = settings.model_calls_per_second
        fleet = f", at most {rate:g} a second across the fleet" if rate else ""
        models = (
            f"model calls{fleet}"
            if settings.model_calls_queue == OWN
            else "model calls left there by a worker with MODEL_CALLS_QUEUE=own; this "
            "worker's go with their runs"
        )
        print(
            f"Worker polling task queue {task_queue!r}{host} and "
            f"{worker.models.task_queue!r} ({models}){versioned} with sandbox "
            f"{'providers' if len(registered) > 1 else 'provider'} {providers}. "
            f"Up to {runs} runs in flight. Ctrl+C to stop."
        )
        if streaming_line(settings):
            print(streaming_line(settings))
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


def main(
    workflow: type,
    tool_activities: ToolActivities,
    argv: Sequence[str] | None = None,
    mcp_servers: McpServers = (),
) -> None:
    """Run the worker until it is stopped; exit 1 with one line when it cannot start.

    Args:
        workflow: the service's workflow type.
        tool_activities: the service's tool activities (its tools.py).
        argv: the command's arguments; None for ``sys.argv``.
        mcp_servers: the service's MCP servers (its tools.py's MCP_SERVERS).
    """
    argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0]).parse_args(argv)
    hide_from_other_processes()
    keep_litellm_offline()
    try:
        # Every setting, and the credentials, before connecting: a mistake
        # stops the worker here instead of failing its first run.
        settings = worker_settings()
        if current().approvals:
            approvers.trust(settings.approvers)
        make_room_for_connections(settings.runs_in_flight)
        # The agent's model: priced for a money budget, and through
        # LiteLLM, loaded now or named with what to install.
        check_the_agents_model(workflow)
    except BadSetting as e:
        sys.exit(str(e))
    try:
        asyncio.run(run_worker(settings, workflow, tool_activities, mcp_servers))
    except (
        BackendUnavailable,
        ConnectionFailed,
        ObjectStoreUnreachable,
        TelemetryUnavailable,
        HealthUnavailable,
    ) as e:
        sys.exit(str(e))


def cli(workflow: type, tool_activities: ToolActivities, mcp_servers: McpServers = ()) -> NoReturn:
    """The installed worker command (a project's worker.py calls it): ``main()``,
    then exit with its status.

    Args:
        workflow: the service's workflow type.
        tool_activities: the service's tool activities (its tools.py).
        mcp_servers: the service's MCP servers (its tools.py's MCP_SERVERS).
    """
    exit_after(lambda: main(workflow, tool_activities, mcp_servers=mcp_servers))
