"""The Docker backend on a real Docker engine: the agent's commands run in a
container of their own, a run outlives its worker in that same container, and
the container is gone when the run ends.

These tests need an engine that answers where the worker would look for one
(``DOCKER_HOST``, or the default socket) and an image: the configured one
when the engine has it, otherwise a small busybox image they build, offline,
from a statically linked ``busybox`` on this machine. They never pull an
image. Without an engine or an image they are skipped, saying why; the rest
of the suite runs the Docker provider on a local stand-in, as for any backend
the tests cannot reach.
"""

import asyncio
import io
import os
import re
import shutil
import socket
import struct
import tarfile
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from agents import Model, ModelResponse
from agents.sandbox.sandboxes.docker import DockerSandboxClientOptions
from agents.sandbox.session import SandboxSession
from docker.errors import ImageNotFound, NotFound  # type: ignore[import-untyped]
from temporalio import activity
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
)

from sandbox_agent_runtime import (
    CONVERSATION,
    END,
    FOLLOW_UP,
    RELEASED,
    WORKING,
    Conversation,
    FollowUp,
    RunRequest,
    ServiceWorker,
    start,
)
from sandbox_agent_runtime.testing import (
    DROPPED_RUNS_CLOSED,
    SETTINGS,
    STEPS,
    CompletedRun,
    Conversing,
    ImpatientSandboxAgentWorkflow,
    LongSandboxAgentWorkflow,
    ScriptedModel,
    activities,
    activities_in,
    answered,
{%- if cookiecutter.approval != "none" %}
    approvals_in,
{%- endif %}
    assert_a_rejection_fails_the_run_at_once,
    assert_scheduled_not_to_retry,
    closed_address,
    decoded_archive,
    docker_backend,
    docker_limits,
    failure_of,
    figures,
    host_queue,
    inputs_of,
    provider_of,
    running_worker,
    runs_of_chain,
    sandbox_workers,
    settings_with,
    stalled_on,
    start_in,
    steps_done,
    tool_outputs,
    until,
    use_options_of,
)

from {{ cookiecutter.package_name }}.runs import WORKFLOW_EXECUTION_TIMEOUT
from {{ cookiecutter.package_name }}.service import TASK_QUEUE

# The name the worker registers the Docker backend under.
PROVIDER = provider_of(docker_backend)

# The image the service's runs start from by default (DOCKER_SANDBOX_IMAGE unset).
IMAGE = str(docker_backend.options()["image"])
# The image the tests build when the engine does not have IMAGE: busybox's
# shell and tools, nothing else.
TEST_IMAGE = "{{ cookiecutter.project_slug }}-tests:busybox"
BUSYBOX_DOCKERFILE = """\
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
"""


@pytest.fixture(scope="session")
def engine() -> Iterator[Any]:
    """The Docker engine, reached as the worker reaches it."""
    try:
        client = docker_backend.sandbox_client(SETTINGS)
    except docker_backend.DockerEngineUnavailable as e:
        pytest.skip(f"Docker tests need a Docker engine: {e}")
    yield client.docker_client
    client.docker_client.close()


@pytest.fixture(scope="session")
def image(engine: Any) -> str:
    """IMAGE if the engine has it; otherwise a busybox image built here."""
    for candidate in (IMAGE, TEST_IMAGE):
        if engine.images.list(name=candidate):
            return candidate
    busybox = shutil.which("busybox")
    if busybox is None or not statically_linked(Path(busybox)):
        pytest.skip(
            f"Docker tests need an image: the engine has no {IMAGE!r} (`docker pull {IMAGE}`) "
            "and this machine no statically linked busybox to build one from "
            "(install busybox-static); the tests never pull"
        )
    build_image(engine, TEST_IMAGE, {"Dockerfile": BUSYBOX_DOCKERFILE, "busybox": Path(busybox)})
    return TEST_IMAGE


def build_image(engine: Any, tag: str, files: dict[str, str | Path]) -> None:
    """Build an image from these files (a Dockerfile and what it copies:
    text, or a file of this machine's), without the network."""
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        for name, content in files.items():
            if isinstance(content, Path):
                tar.add(content, arcname=name)
                continue
            entry = tarfile.TarInfo(name)
            entry.size = len(content.encode())
            tar.addfile(entry, io.BytesIO(content.encode()))
    context.seek(0)
    engine.images.build(fileobj=context, custom_context=True, tag=tag, rm=True)


def statically_linked(executable: Path) -> bool:
    """Whether a 64-bit ELF executable runs without a dynamic loader (it has
    no PT_INTERP program header), so it runs in an empty image."""
    header = executable.read_bytes()
    if header[:5] != b"\x7fELF\x02":
        return False
    (table,) = struct.unpack_from("<Q", header, 0x20)
    entry_size, entries = struct.unpack_from("<HH", header, 0x36)
    program_types = [
        struct.unpack_from("<I", header, table + i * entry_size)[0] for i in range(entries)
    ]
    return 3 not in program_types  # PT_INTERP


class ImageForTests(docker_backend.LabelledDockerSandboxClient):
    """The service's Docker client, making its containers from the image the
    tests have instead of IMAGE (the run's options still name IMAGE)."""

    def __init__(self, engine: Any, image: str) -> None:
        super().__init__(engine)
        self.image = image

    async def create(self, *, options: DockerSandboxClientOptions, **kwargs: Any) -> SandboxSession:
        return await super().create(
            options=options.model_copy(update={"image": self.image}), **kwargs
        )


@pytest.fixture
def sandbox(engine: Any, image: str) -> ImageForTests:
    return ImageForTests(engine, image)


def docker_worker(
    client: Client,
    model: Model,
    sandbox: docker_backend.LabelledDockerSandboxClient,
    **options: Any,
) -> AbstractAsyncContextManager[tuple[Client, ServiceWorker]]:
    """The service's worker with this Docker client registered under PROVIDER."""
    return running_worker(client, model, sandbox, provider=PROVIDER, **options)


def containers_of(engine: Any, handle: WorkflowHandle[Any, Any]) -> list[Any]:
    """The containers labelled with this run, running or not."""
    return list(
        engine.containers.list(
            all=True, filters={"label": f"{docker_backend.workflow_label()}={handle.id}"}
        )
    )


class PausesAfterTheFirstCommand(ScriptedModel):
    """Runs the first command, then waits until ``go_on`` is set before it
    answers again (for ever, if its worker goes away first)."""

    def __init__(self, commands: list[str]) -> None:
        super().__init__(commands)
        self.first_output = ""
        self.first_command_done = asyncio.Event()
        self.go_on = asyncio.Event()

    async def get_response(
        self, system_instructions: str | None, input: str | list[Any], *args: Any, **kwargs: Any
    ) -> ModelResponse:
        outputs = tool_outputs(input)
        if outputs and not self.go_on.is_set():
            self.first_output = outputs[0]
            self.first_command_done.set()
            await self.go_on.wait()
        return await super().get_response(system_instructions, input, *args, **kwargs)


def printed(output: str, name: str) -> str:
    """The value a command printed as ``name=value``."""
    found = re.search(rf"^{name}=(.*)$", output, re.MULTILINE)
    assert found, output
    return found.group(1).strip()


def test_docker_options_come_from_the_workers_settings() -> None:
    # Unset, each option takes its default: no network at all.
    options = docker_backend.sandbox_options()
    assert options.image == "python:3.12-slim"
    assert options.network_mode == "none"
    # The worker labels each container when it creates it (below).
    assert options.labels == {}
    assert docker_backend.REQUIRED_ENVIRONMENT == ()

    # Each set, as a worker reads them at start (DOCKER_SANDBOX_*).
    use_options_of({"DOCKER_SANDBOX_IMAGE": "busybox:1.37", "DOCKER_SANDBOX_NETWORK": "bridge"})
    options = docker_backend.sandbox_options()
    assert options.image == "busybox:1.37"
    assert options.network_mode is None  # Docker's default network, bridge


async def test_docker_errors_that_no_retry_fixes_end_a_sandbox_operation_at_once(
    completed_run: CompletedRun,
) -> None:
    errors = (
        docker_backend.ImageUnavailable,
        docker_backend.ContainerRefused,
        docker_backend.ContainerGone,
        ImageNotFound,
        NotFound,
    )
    assert sorted(docker_backend.NON_RETRYABLE_ERRORS) == sorted(error.__name__ for error in errors)
    # Every sandbox operation of a run is scheduled not to retry them.
    await assert_scheduled_not_to_retry(completed_run, docker_backend.NON_RETRYABLE_ERRORS)


async def test_an_engine_that_cannot_provide_the_image_fails_the_run_at_once(
    temporal_client: Client,
) -> None:
    # The error the backend raises for an image it cannot pull (on a local
    # stand-in: this test needs no engine).
    rejection = "The image 'no-such-image' is not on the Docker engine and could not be pulled"
    error = docker_backend.ImageUnavailable(rejection)
    await assert_a_rejection_fails_the_run_at_once(
        temporal_client, docker_backend, error, rejection
    )


def test_without_an_engine_the_worker_is_told_where_it_looked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The docker SDK reads DOCKER_HOST itself; the settings name it.
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(docker_backend.DockerEngineUnavailable) as unavailable:
        docker_backend.sandbox_client(
            replace(SETTINGS, docker_host="unix:///nonexistent/docker.sock")
        )

    assert str(unavailable.value).startswith(
        "no Docker engine answers at unix:///nonexistent/docker.sock (set DOCKER_HOST"
    )


@pytest.mark.parametrize(
    ("network", "interfaces"),
    [
        # DOCKER_SANDBOX_NETWORK unset, "none": a loopback interface and nothing else.
        (None, "lo"),
        # Docker's bridge network: an interface beside loopback.
        ("bridge", "eth0 lo"),
    ],
)
async def test_commands_run_in_a_container_not_on_the_workers_host(
    temporal_client: Client,
    sandbox: ImageForTests,
    tmp_path: Path,
    network: str | None,
    interfaces: str,
) -> None:
    on_the_host = tmp_path / "only-on-the-host"
    on_the_host.write_text("the worker's file")
    command = (
        "echo directory=$(pwd); echo hostname=$(hostname); "
        f"echo host_file=$(test -e {on_the_host} && echo visible || echo absent); "
        "echo interfaces=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort)"
    )
    settings = settings_with({"DOCKER_SANDBOX_NETWORK": network} if network else {})
    async with docker_worker(
        temporal_client, ScriptedModel([command]), sandbox, settings=settings
    ) as (client, _):
        handle = await start_in(client, docker_backend, "Where am I?")
        answer = (await handle.result()).answer

    assert printed(answer, "directory") == docker_backend.WORKSPACE_ROOT
    assert printed(answer, "hostname") != socket.gethostname()
    assert printed(answer, "host_file") == "absent"
    assert printed(answer, "interfaces") == interfaces


async def test_an_input_goes_into_the_container_and_what_the_run_changed_comes_back(
    temporal_client: Client, sandbox: ImageForTests, tmp_path: Path
) -> None:
    # The workspace is a tmpfs, which the engine's archive API cannot read:
    # the outputs come back through tar in the container (TmpfsWorkspaceSession).
    (tmp_path / "data.txt").write_text("one\ntwo\n")
    command = "wc -l < data.txt > count.txt && echo three >> data.txt"
    inputs = inputs_of([str(tmp_path / "data.txt")], has_store=False)
    request = RunRequest("Count the lines, then add one.", PROVIDER, inputs=inputs)
    async with docker_worker(temporal_client, ScriptedModel([command]), sandbox) as (client, _):
        outputs = (await (await start(client, request)).result()).outputs

    with tarfile.open(fileobj=io.BytesIO(decoded_archive(outputs.archive))) as tar:
        files = {each.name: (tar.extractfile(each) or io.BytesIO()).read() for each in tar}
    assert sorted(files) == sorted(file.path for file in outputs.files) == ["count.txt", "data.txt"]
    assert files["count.txt"].strip() == b"2"
    assert files["data.txt"] == b"one\ntwo\nthree\n"


async def test_each_run_has_a_labelled_container_that_is_gone_when_the_run_ends(
    temporal_client: Client, engine: Any, sandbox: ImageForTests
) -> None:
    model = PausesAfterTheFirstCommand(["hostname", "echo done"])
    async with docker_worker(temporal_client, model, sandbox) as (client, _):
        handle = await start_in(client, docker_backend, "Say your name, then done.")
        await model.first_command_done.wait()
        [container] = containers_of(engine, handle)
        stop_signal = engine.api.inspect_container(container.id)["Config"].get("StopSignal")
        model.go_on.set()
        answer = (await handle.result()).answer

    assert container.labels[docker_backend.workflow_label()] == handle.id
    assert container.labels[docker_backend.provider_label()] == PROVIDER
    # The command ran in that container: a container's hostname is its short id.
    assert container.id[:12] in model.first_output
    assert "done" in answer
    assert containers_of(engine, handle) == []
    # The teardown stops the container with SIGKILL: it does not wait out
    # Docker's 10 s grace period for a shell that ignores SIGTERM.
    assert stop_signal == "SIGKILL"


@pytest.mark.usefixtures("collect_dropped_runs")
@pytest.mark.filterwarnings(DROPPED_RUNS_CLOSED)
@pytest.mark.parametrize(
    ("shared", "second_host"),
    [(False, "host-a"), (True, "host-b")],
    ids=["each-host-its-own-engine-worker-restarted", "one-shared-engine-another-host"],
)
async def test_a_run_whose_worker_stops_resumes_in_the_same_container(
    temporal_client: Client,
    engine: Any,
    sandbox: ImageForTests,
    shared: bool,
    second_host: str,
) -> None:
    # With its own engine per host, the run waits for a worker of the host
    # that holds its container (here one restarted on it); with one engine
    # that every worker shares, any worker goes on with it.
    settings = replace(SETTINGS, docker_engine_shared=shared)
    commands = [
        "printf 'written before the restart\\n' > note.txt && hostname",
        "cat note.txt && hostname",
    ]
    stalling = PausesAfterTheFirstCommand(commands)
    async with docker_worker(
        temporal_client,
        stalling,
        sandbox,
        host="host-a",
        settings=settings,
        identity="first-worker",
        # Stop at once, cancelling the model call in flight, as a crash would.
        graceful_shutdown_timeout=timedelta(0),
    ) as (client, _):
        handle = await start_in(client, docker_backend, "Write a note, then read it back.")
        await stalling.first_command_done.wait()
    # The worker is gone; the run's container is still there.
    [container] = containers_of(engine, handle)

    # A fresh worker, a fresh model and a fresh client: nothing carried over
    # in memory, only the session state recorded in the run's history.
    fresh = ImageForTests(engine, sandbox.image)
    async with docker_worker(
        temporal_client,
        ScriptedModel(commands),
        fresh,
        host=second_host,
        settings=settings,
        identity="second-worker",
    ):
        answer = (await handle.result()).answer

    assert "written before the restart" in answer
    assert container.id[:12] in answer
    attempts = await activities(handle)
    commands_run = [
        a.worker for a in attempts if a.name == f"{PROVIDER}-sandbox_session_pty_exec_start"
    ]
    assert commands_run == ["first-worker", "second-worker"]
    assert [a.name for a in attempts].count(f"{PROVIDER}-sandbox_client_create") == 1
    queues = {a.queue for a in attempts if a.is_sandbox_operation}
    assert queues == ({TASK_QUEUE} if shared else {host_queue("host-a")})
    assert containers_of(engine, handle) == []


@pytest.mark.usefixtures("collect_dropped_runs")
@pytest.mark.filterwarnings(DROPPED_RUNS_CLOSED)
async def test_a_run_whose_engine_host_is_gone_fails_naming_the_host(
    temporal_client: Client, engine: Any, sandbox: ImageForTests
) -> None:
    # Each host has its own engine (the default): the container lives on
    # host A's, and host A never comes back.
    run = await stalled_on(
        temporal_client, "host-a", PROVIDER, sandbox, ImpatientSandboxAgentWorkflow
    )
    [container] = containers_of(engine, run)
    try:
        async with docker_worker(
            temporal_client,
            ScriptedModel(STEPS),
            ImageForTests(engine, sandbox.image),
            host="host-b",
            workflows=[ImpatientSandboxAgentWorkflow],
        ):
            reason = await failure_of(run)
    finally:
        # Left on its host's engine, labelled with its run (see the README).
        container.remove(force=True)

    assert reason.startswith("The agent could not finish: its sandbox's host 'host-a' is gone")
    assert await sandbox_workers(run) == ({"worker-of-host-a"}, {host_queue("host-a")})


@pytest.mark.usefixtures("collect_dropped_runs")
@pytest.mark.filterwarnings(DROPPED_RUNS_CLOSED)
async def test_a_run_whose_container_is_gone_fails_instead_of_going_on_in_a_fresh_one(
    temporal_client: Client, engine: Any, sandbox: ImageForTests
) -> None:
    # A worker of the host comes back (a Kubernetes pod under its name), but
    # its engine has not got the run's container: the pod is on another
    # node's engine, or the container was removed.
    run = await stalled_on(temporal_client, "host-a", PROVIDER, sandbox)
    [container] = containers_of(engine, run)
    container.remove(force=True)
    try:
        async with docker_worker(
            temporal_client,
            ScriptedModel(STEPS),
            ImageForTests(engine, sandbox.image),
            host="host-a",
        ):
            reason = await failure_of(run)
        left = {c.id for c in containers_of(engine, run)}
    finally:
        for each in containers_of(engine, run):
            each.remove(force=True)

    assert (
        f"The run's container {container.id[:12]} is not on this worker's Docker engine" in reason
    )
    # No fresh container took its place.
    assert left == set()


async def test_an_image_that_cannot_be_pulled_fails_the_run_at_once_saying_why(
    temporal_client: Client, engine: Any
) -> None:
    # A registry on this machine where nothing listens: the pull fails at once.
    missing = f"{closed_address()}/no-such-image:never"
    async with docker_worker(
        temporal_client, ScriptedModel(["true"]), ImageForTests(engine, missing)
    ) as (client, _):
        handle = await start_in(client, docker_backend, "Do nothing.")
        reason = await failure_of(handle)

    assert reason.startswith(
        f"The agent could not finish: the sandbox operation {PROVIDER}-sandbox_client_create"
        " failed with an error that retrying cannot fix:"
        f" The image {missing!r} is not on the Docker engine and could not be pulled: "
    )
    creates = [a for a in await activities(handle) if a.name == f"{PROVIDER}-sandbox_client_create"]
    # At once: one attempt, no retry.
    assert [a.attempt for a in creates] == [1]
    assert containers_of(engine, handle) == []


async def test_an_image_without_the_tools_the_sandbox_needs_fails_the_run_at_once(
    temporal_client: Client, engine: Any
) -> None:
    # An image holding one file: no shell, no `tail` to keep the container up.
    empty = "{{ cookiecutter.project_slug }}-tests:empty"
    build_image(engine, empty, {"Dockerfile": "FROM scratch\nCOPY note /note\n", "note": "empty\n"})

    async with docker_worker(
        temporal_client, ScriptedModel(["true"]), ImageForTests(engine, empty)
    ) as (client, _):
        handle = await start_in(client, docker_backend, "Do nothing.")
        reason = await failure_of(handle)

    assert f"The Docker engine refused a container from image {empty!r}: " in reason
    assert "tail" in reason
    assert containers_of(engine, handle) == []


@pytest.mark.long
async def test_a_long_run_continues_as_new_in_the_same_container(
    temporal_client: Client, engine: Any, sandbox: ImageForTests
) -> None:
    # About 60 kB of output a step: the run's history passes its budget within
    # a dozen steps, and each run of the chain hands the container to the next.
    sixty_kb = "head -c 60000 /dev/zero | tr '\\0' x"
    commands = ["hostname > first.txt", *[sixty_kb] * 30, "cat first.txt && hostname"]
    async with docker_worker(
        temporal_client,
        ScriptedModel(commands),
        sandbox,
        workflows=[LongSandboxAgentWorkflow],
        time_limit=timedelta(minutes=8),
    ) as (client, _):
        handle = await client.start_workflow(
            LongSandboxAgentWorkflow.run,
            RunRequest("Note where you are, work a while, then look again.", PROVIDER),
            id=f"{TASK_QUEUE}-docker-chain-{uuid.uuid4()}",
            task_queue=TASK_QUEUE,
            execution_timeout=WORKFLOW_EXECUTION_TIMEOUT,
        )
        answer = (await handle.result()).answer
        assert handle.first_execution_run_id is not None
        runs = await runs_of_chain(client, handle.id, handle.first_execution_run_id)

    # The last run read the file the first run wrote, in the same container.
    first_host, last_host = answer.strip().splitlines()[-2:]
    assert first_host == last_host
    assert len(runs) > 1
    operations = [a.name for run in runs for a in activities_in(run.history)]
    assert operations.count(f"{PROVIDER}-sandbox_client_create") == 1
{%- if cookiecutter.approval != "none" %}
    # (The agent's run also resumes its sandbox after each approved command.)
    resumes = len(runs) - 1 + approvals_in(runs)
    assert operations.count(f"{PROVIDER}-sandbox_client_resume") == resumes
{%- else %}
    assert operations.count(f"{PROVIDER}-sandbox_client_resume") == len(runs) - 1
{%- endif %}
    assert operations.count(f"{PROVIDER}-sandbox_client_delete") == 1
    assert containers_of(engine, handle) == []


# Limits small enough for the hostile commands below to reach them in seconds.
SMALL_LIMITS = {
    "DOCKER_SANDBOX_MEMORY": "160m",
    "DOCKER_SANDBOX_CPUS": "0.5",
    "DOCKER_SANDBOX_PIDS": "48",
    "DOCKER_SANDBOX_WORKSPACE_SIZE": "32m",
}
MIB = 1 << 20
# The worker's model key, as a hostile command would look for it.
KEY = "sk-worker-secret-0123456789"
# Commands a model could be talked into running (prompt injection), one run
# each: every one must fail inside its container.
HOSTILE = {
    "fork bomb": "b() { b | b & }; b; sleep 2; echo bombed",
    # One 400 MiB buffer, filled by the kernel: out of memory in a tenth of
    # a second. (Growing tail's buffer instead took about 2 s at the
    # container's half CPU, and past the 3 s limit on a loaded machine.)
    "memory hog": "dd if=/dev/zero of=/dev/null bs=400M count=1; echo status=$?",
    "cpu spin": "while :; do :; done",
    "disk filler": "dd if=/dev/zero of=filler bs=1M count=100; echo status=$?; rm -f filler",
    "secrets": "tr '\\0' '\\n' < /proc/1/environ; env; ls /var/run/docker.sock; echo socket=$?",
    # On the default network, none.
    "network": (
        "if command -v nc >/dev/null; then nc -w 3 192.0.2.1 80 </dev/null; "
        "else python3 -c \"import socket; socket.create_connection(('192.0.2.1', 80), 3)\"; fi; "
        "echo connect=$?"
    ),
}


class HostileModel(ScriptedModel):
    """Each run's commands by its prompt: ``id -u``, then its HOSTILE command
    (none for any other prompt: it says hello). A hostile run waits after
    its first command until ``limits_read`` is set: no hostile command runs
    before the test has read its container's limits back from the engine."""

    def __init__(self) -> None:
        super().__init__([])
        self.held: dict[str, str] = {}  # prompt: what `id -u` printed
        self.limits_read = asyncio.Event()

    async def get_response(
        self, system_instructions: str | None, input: str | list[Any], *args: Any, **kwargs: Any
    ) -> ModelResponse:
        prompt = next(str(item["content"]) for item in input if isinstance(item, dict))
        if prompt in HOSTILE and steps_done(input) == 1 and not self.limits_read.is_set():
            self.held[prompt] = tool_outputs(input)[0]
            await self.limits_read.wait()
        self.commands = ["id -u", HOSTILE[prompt]] if prompt in HOSTILE else ["echo hello"]
        return await super().get_response(system_instructions, input, *args, **kwargs)


@pytest.fixture
def contained(engine: Any, image: str) -> Iterator[ImageForTests]:
    """The service's Docker client as the worker builds it, with SMALL_LIMITS."""
    client = docker_backend.sandbox_client(
        replace(SETTINGS, docker_limits=docker_limits(SMALL_LIMITS))
    )
    yield ImageForTests(client.docker_client, image)
    client.docker_client.close()


def assert_contained(attributes: dict[str, Any]) -> None:
    """A container's limits, as the engine reports them, are SMALL_LIMITS."""
    host = attributes["HostConfig"]
    assert host["Memory"] == host["MemorySwap"] == 160 * MIB
    assert host["NanoCpus"] == 500_000_000
    assert host["PidsLimit"] == 48
    assert host["CapDrop"] == ["ALL"]
    assert host["SecurityOpt"] == ["no-new-privileges"]
    assert host["Tmpfs"][docker_backend.WORKSPACE_ROOT].startswith(
        f"size={32 * MIB},uid=65534,gid=65534,"
    )
    assert attributes["Config"]["User"] == "65534:65534"


def host_processes_in(container_ids: list[str]) -> list[int]:
    """This host's processes in any of these containers' control groups."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            groups = (entry / "cgroup").read_text()
        except OSError:
            continue  # not a process, or one that just ended
        if any(container_id in groups for container_id in container_ids):
            found.append(int(entry.name))
    return found


def test_each_limit_has_a_default_and_is_taken_from_the_workers_settings() -> None:
    defaults = SETTINGS.docker_limits
    assert defaults is not None
    assert (defaults.memory, defaults.cpus, defaults.pids) == (2048 * MIB, 1.0, 256)
    assert (defaults.workspace_size, defaults.uid, defaults.gid) == (1024 * MIB, 65534, 65534)
    small = docker_limits({**SMALL_LIMITS, "DOCKER_SANDBOX_USER": "1000"})
    assert (small.memory, small.cpus, small.pids) == (160 * MIB, 0.5, 48)
    assert (small.workspace_size, small.uid, small.gid) == (32 * MIB, 1000, 1000)
    # A bad one stops the worker in one line: test_configuration.py.


@pytest.mark.faults
async def test_hostile_commands_fail_in_their_container_while_the_worker_goes_on(
    temporal_client: Client, engine: Any, contained: ImageForTests, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    model = HostileModel()
    limited = replace(SETTINGS, command_time_limit=3)
    async with docker_worker(
        temporal_client, model, contained, time_limit=timedelta(seconds=120), settings=limited
    ) as (client, _):
        runs = {prompt: await start_in(client, docker_backend, prompt) for prompt in HOSTILE}
        async with asyncio.timeout(60):
            while len(model.held) < len(runs):
                await asyncio.sleep(0.1)
        containers = []
        for run in runs.values():
            [container] = containers_of(engine, run)
            assert_contained(engine.api.inspect_container(container.id))
            containers.append(container.id)
        # Not root: the user nobody.
        # The whole tool output on failure: CI once saw one end at "Output:"
        # with nothing after it (cause not yet found; see the note of issue 36).
        assert {output.split()[-1] for output in model.held.values()} == {"65534"}, model.held
        model.limits_read.set()
        # Meanwhile, an ordinary run on the same worker completes.
        ordinary = await start_in(client, docker_backend, "Say hello.")
        assert "hello" in (await ordinary.result()).answer
        answers = {prompt: (await run.result()).answer for prompt, run in runs.items()}

    # Each hostile command failed, stopped by its container's limit...
    assert "Resource temporarily unavailable" in answers["fork bomb"]  # out of processes
    assert "status=137" in answers["memory hog"]  # killed, out of memory
    assert "Process exited with code 137" in answers["cpu spin"]  # the time limit
    assert "[killed: it ran past the sandbox's limit of 3 s per command" in answers["cpu spin"]
    assert "No space left on device" in answers["disk filler"]
    assert "status=1" in answers["disk filler"]
    # ...found none of the worker's secrets, nor the engine's socket...
    assert "socket=1" in answers["secrets"] or "socket=2" in answers["secrets"]
    for run in runs.values():
        async for event in run.fetch_history_events():
            assert KEY not in str(event)
    # ...and reached no network.
    assert "unreachable" in answers["network"] and "connect=0" not in answers["network"]
    # Nothing is left of them on the host: no container, no process.
    for run in runs.values():
        assert containers_of(engine, run) == []
    assert host_processes_in(containers) == []
    assert os.environ["OPENAI_API_KEY"] == KEY  # the one the worker had
    hostile = f"Hostile commands in contained containers ({len(runs)})"
    figures(hostile, len(runs) + 1, len(runs) + 1, 0, 0)  # the ordinary run too


# Commands whose processes go on in their container once they have answered:
# a fork bomb that holds the container at its process limit (no command in
# it can fork then), a memory hog that holds it at its memory limit.
# The bomb is a shell that forks for ever, retaking each process slot the
# moment it is freed: an interactive shell (-i) goes on after a fork fails,
# where a plain one exits and frees its own slot. (A recursive bomb's
# processes come and go: a command slipped in between them at times, CI saw
# a follow-up answered that was to fail.) A command the engine execs joins
# the container without a fork, which the limit does not stop; the sandbox's
# commands run in a shell, which must fork, and cannot.
LINGERING = {
    "fork bomb": 'sleep 2 & s=$!; yes "sleep 1000 &" | sh -i >/dev/null 2>&1 & wait $s; echo bombed',
    "memory hog": "(while :; do tail /dev/zero; done) & sleep 2; echo hogging",
}


class Lingering(Conversing):
    """Runs a LINGERING command, then finds the run's container and counts
    its processes on the host before it answers; a follow-up's command reads
    the workspace."""

    def __init__(self, engine: Any, command: str) -> None:
        super().__init__([[command], ["ls"]])
        self.engine = engine
        self.containers: list[str] = []
        self.processes: list[int] = []

    async def get_response(
        self, system_instructions: str | None, input: str | list[Any], *args: Any, **kwargs: Any
    ) -> ModelResponse:
        if tool_outputs(input) and not self.containers:
            # The model is called in an activity of the run.
            label = f"{docker_backend.workflow_label()}={activity.info().workflow_id}"
            found = self.engine.containers.list(filters={"label": label})
            self.containers = [container.id for container in found]
            self.processes = host_processes_in(self.containers)
        return await super().get_response(system_instructions, input, *args, **kwargs)


async def ended_by(handle: WorkflowHandle[Any, Any], how: str) -> str:
    """Once the conversation has answered, end it ``how``: "end" (the END
    update), "cancel" (the run cancelled) or "fail" (a follow-up, which
    fails for good in a sandbox at its process limit); what the run ended
    with, its answer or its failure (a run that failed first is not ended)."""
    while (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
        state = await handle.query(CONVERSATION, result_type=Conversation)
        if state.answered and state.state != WORKING:
            if how == "end":
                await handle.execute_update(END)
            elif how == "cancel":
                await handle.cancel()
            else:
                await handle.execute_update(FOLLOW_UP, FollowUp("List the files."))
            break
        await asyncio.sleep(0.1)
    try:
        return str((await handle.result()).answer)
    except WorkflowFailureError as failed:
        return str(getattr(failed.cause, "message", failed.cause))


@pytest.mark.faults
@pytest.mark.parametrize(
    ("hostile", "how", "outcome"),
    [
        ("fork bomb", "end", "prompt 1: "),
        ("fork bomb", "fail", "The agent could not finish: the sandbox operation "),
        ("fork bomb", "cancel", "Workflow cancelled"),
        ("memory hog", "end", "prompt 1: "),
    ],
    ids=["fork-bomb-ended", "fork-bomb-failed", "fork-bomb-cancelled", "memory-hog-ended"],
)
async def test_a_conversation_whose_command_lingers_leaves_nothing_on_the_host_once_it_ends(
    temporal_client: Client,
    engine: Any,
    contained: ImageForTests,
    hostile: str,
    how: str,
    outcome: str,
) -> None:
    model = Lingering(engine, LINGERING[hostile])
    async with docker_worker(
        temporal_client, model, contained, time_limit=timedelta(seconds=150)
    ) as (client, _):
        handle = await start(client, RunRequest(hostile, PROVIDER, follow_ups=True))
        ended = await ended_by(handle, how)

    # The command's processes were running in the run's container...
    assert len(model.containers) == 1, ended
    assert len(model.processes) > (20 if hostile == "fork bomb" else 2), ended
    # ...the conversation answered (a workspace that cannot be counted is
    # not snapshotted: it goes on without a snapshot) and ended as told...
    assert ended.startswith(outcome), ended
    # ...and once it has ended, nothing of them is left on the host: no
    # container, no process.
    assert containers_of(engine, handle) == [], ended
    assert host_processes_in(model.containers) == [], ended


class EngineOfItsOwn:
    """A Docker engine (dockerd) that this test starts, stops and starts again,
    with its own socket, state, containerd namespace and network namespace:
    restarting it touches no other test's containers, and it cannot touch the
    host's networks (a second dockerd in the host's namespace removes the
    host's docker0 bridge, whatever its flags). Needs root, dockerd, unshare."""

    def __init__(self) -> None:
        # Short: a unix socket's path has a limit of about 100 bytes.
        self.root = Path(tempfile.mkdtemp(prefix="dk", dir="/tmp"))
        self.address = f"unix://{self.root}/docker.sock"
        # Not from the directory's name: mkdtemp's names may hold "_" where
        # containerd refuses it ("dkabbv84__": its build fails at once).
        self.namespace = f"tests-{uuid.uuid4().hex[:12]}"
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        namespace = self.namespace
        self.process = await asyncio.create_subprocess_exec(
            *("unshare", "--net", "dockerd"),
            *("--data-root", f"{self.root}/data", "--exec-root", f"{self.root}/exec"),
            *("--pidfile", f"{self.root}/docker.pid", "-H", self.address),
            *("--bridge=none", "--iptables=false", "--ip6tables=false"),
            *("--containerd-namespace", namespace),
            *("--containerd-plugins-namespace", f"{namespace}-plugins"),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        import docker as docker_sdk  # type: ignore[import-untyped]

        async with asyncio.timeout(60):
            while True:
                try:
                    docker_sdk.DockerClient(base_url=self.address).ping()
                    return
                except docker_sdk.errors.DockerException:
                    await asyncio.sleep(0.2)

    async def stop(self) -> None:
        """Stop it as `systemctl restart docker` does (SIGTERM): it stops
        every container it runs."""
        if self.process is not None and self.process.returncode is None:
            self.process.terminate()
            async with asyncio.timeout(60):
                await self.process.wait()


@asynccontextmanager
async def engine_of_its_own() -> AsyncIterator[EngineOfItsOwn]:
    if os.geteuid() != 0 or not (shutil.which("dockerd") and shutil.which("unshare")):
        pytest.skip("restarting an engine needs root, dockerd and unshare, to run one of its own")
    own = EngineOfItsOwn()
    await own.start()
    try:
        yield own
    finally:
        await own.stop()
        shutil.rmtree(own.root, ignore_errors=True)


@pytest.mark.faults
async def test_a_run_whose_docker_engine_restarts_ends_saying_why_and_leaves_no_container(
    temporal_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    busybox = shutil.which("busybox")
    if busybox is None or not statically_linked(Path(busybox)):
        pytest.skip("an engine of its own needs an image built from a static busybox")
    async with engine_of_its_own() as own:
        monkeypatch.setenv("DOCKER_HOST", own.address)
        engine = docker_backend.sandbox_client(
            replace(SETTINGS, docker_host=own.address)
        ).docker_client
        sandbox = ImageForTests(engine, TEST_IMAGE)
        build_image(
            sandbox.docker_client,
            TEST_IMAGE,
            {"Dockerfile": BUSYBOX_DOCKERFILE, "busybox": Path(busybox)},
        )
        model = PausesAfterTheFirstCommand(["echo before > note.txt", "cat note.txt"])
        async with docker_worker(
            temporal_client, model, sandbox, time_limit=timedelta(seconds=120)
        ) as (client, _):
            handle = await start_in(client, docker_backend, "Write a note, then read it back.")
            await model.first_command_done.wait()
            await own.stop()
            await own.start()
            model.go_on.set()
            try:
                async with asyncio.timeout(90):
                    outcome = (await handle.result()).answer
            except WorkflowFailureError as failed:
                outcome = str(getattr(failed.cause, "message", failed.cause))
        left = containers_of(sandbox.docker_client, handle)

    # The engine stopped the run's container, and a container's workspace is
    # in its memory: the run cannot go on with its files. It ends within the
    # retries of one command (15 s), saying so, and its container is removed.
    assert outcome.startswith(
        f"The agent could not finish: the sandbox operation {PROVIDER}-sandbox_session_pty_exec_start"
        " kept failing until its retries ran out: 409 Client Error: Conflict"
    ), outcome
    assert left == []
    figures("Docker engine restarted mid-run", 1, 0, 1, 0)


async def test_an_idle_conversation_removes_its_container_and_a_follow_up_restores_the_files(
    temporal_client: Client, engine: Any, sandbox: ImageForTests
) -> None:
    # Without an object store, the snapshot stays on this host's disk.
    model = Conversing([["echo first > one.txt && hostname"], ["cat one.txt && hostname"]])
    settings = replace(SETTINGS, session_idle_timeout=timedelta(seconds=1))
    async with docker_worker(temporal_client, model, sandbox, settings=settings) as (client, _):
        request = RunRequest("Write a file, and say where you are.", PROVIDER, follow_ups=True)
        handle = await start(client, request)
        first = await answered(handle, 1)
        held = containers_of(engine, handle)
        await until(handle, lambda state: state.state == RELEASED)
        released = containers_of(engine, handle)
        await handle.execute_update(FOLLOW_UP, FollowUp("Show the file, and say where you are."))
        second = await answered(handle, 2)
        again = containers_of(engine, handle)
        await handle.execute_update(END)
        result = await handle.result()

    assert first.answer is not None and second.answer == result
    # Waiting, the conversation held its container; released, none.
    assert len(held) == 1 and held[0].id[:12] in str(first.answer.answer)
    assert released == []
    # The follow-up ran in a new container, holding the first prompt's file.
    assert len(again) == 1 and again[0].id != held[0].id
    assert str(result.answer).split(": ", 1)[1].split() == ["first", again[0].id[:12]]
    assert containers_of(engine, handle) == []
