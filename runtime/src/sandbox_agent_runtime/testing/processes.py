"""The worker and the starter as separate processes, as a user runs them.

Starting either costs seconds (importing the SDKs), so the tests that use
these helpers are marked ``process`` and left out of a plain
``uv run pytest``; run them with ``uv run pytest -m process``.

The commands (``WORKER``, ``STARTER``, ...) are the project's, computed at
their first use from the configured service and the registered project
(``sandbox_agent_runtime.testing.use``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sandbox_agent_runtime.testing.registration import project, project_service

# Where `uv sync` installs the console scripts.
SCRIPTS = Path(sys.executable).parent


def _project_root() -> Path:
    """The project's directory (``PROJECT``): where the commands run."""
    return project().root


def _worker() -> list[str]:
    """The worker command (``WORKER``): the installed one of a service with
    local sandboxes alone. The real worker of a service with a remote
    backend needs the remote sandbox, which tests cannot reach; then it is
    the same worker with a local sandbox standing in for each remote one
    (stand_in_worker.py)."""
    if all(backend == "local" for backend in project_service().backends):
        return [str(SCRIPTS / project_service().command("worker"))]
    return [
        sys.executable,
        "-m",
        "sandbox_agent_runtime.testing.stand_in_worker",
        project().package,
    ]


def _worker_module() -> list[str]:
    """The worker as ``python -m <package>.worker`` (``WORKER_MODULE``), or
    the stand-in worker (``WORKER``) of a service with a remote backend."""
    if all(backend == "local" for backend in project_service().backends):
        return [sys.executable, "-m", f"{project().package}.worker"]
    return _worker()


def _starter() -> list[str]:
    return [str(SCRIPTS / project_service().command("starter"))]


def _starter_module() -> list[str]:
    return [sys.executable, "-m", f"{project().package}.starter"]


def _codec_server() -> list[str]:
    return [str(SCRIPTS / project_service().command("codec-server"))]


def _api() -> list[str]:
    return [str(SCRIPTS / project_service().command("api"))]


_LAZY: dict[str, Callable[[], Any]] = {
    "PROJECT": _project_root,
    "WORKER": _worker,
    "WORKER_MODULE": _worker_module,
    "STARTER": _starter,
    "STARTER_MODULE": _starter_module,
    "CODEC_SERVER": _codec_server,
    "API": _api,
}

if TYPE_CHECKING:
    PROJECT: Path
    WORKER: list[str]
    WORKER_MODULE: list[str]
    STARTER: list[str]
    STARTER_MODULE: list[str]
    CODEC_SERVER: list[str]
    API: list[str]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        # The project made first, if one is registered: making it imports
        # its package, which configures the service.
        project_service()
        return _LAZY[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The hosts of the tests that run two worker processes as two hosts.
HOSTS = ("host-a", "host-b")

UNSHARE = ["unshare", "--mount", "--propagation", "private"]


def private_mounts() -> bool:
    """Whether this process may give a worker a mount namespace of its own.

    Returns:
        True where ``unshare`` works.
    """
    if shutil.which("unshare") is None:
        return False
    probe = [*UNSHARE, "true"]
    return subprocess.run(probe, capture_output=True).returncode == 0


def on_host(host: str, tmp: Path, isolated: bool) -> list[str]:
    """The worker command on one of ``HOSTS``.

    Args:
        host: the host.
        tmp: the directory holding each host's TMPDIR (``tmp/<host>``).
        isolated: run it in a mount namespace of its own, in which every other
            host's TMPDIR is empty.

    Returns:
        The command, for ``service``.
    """
    if not isolated:
        return _worker()
    others = [str(tmp / other) for other in HOSTS if other != host]
    hide = " && ".join(f'mount -t tmpfs tmpfs "${index + 1}"' for index in range(len(others)))
    script = f'{hide} && shift {len(others)} && exec "$@"'
    return [*UNSHARE, "sh", "-c", script, "sh", *others, *_worker()]


def service_environment(temporal_address: str, model_url: str) -> dict[str, str]:
    """What a user exports before running the worker or the starter. Output goes
    to a pipe, block-buffered, as under systemd or Kubernetes.

    Args:
        temporal_address: the Temporal service's address.
        model_url: the model endpoint's URL (``scripted_openai_server``).

    Returns:
        The whole environment, for ``service``.
    """
    environment = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TEMPORAL_") and k != "PYTHONUNBUFFERED"
    }
    environment.update(
        TEMPORAL_ADDRESS=temporal_address,
        OPENAI_BASE_URL=model_url,
        OPENAI_API_KEY="dummy",
    )
    if project_service().approvals:
        from sandbox_agent_runtime.testing import approver

        # The workers trust the tests' approver, and the starter signs as it.
        environment.update(approver.ENVIRONMENT)
    return environment


def refusal_of_the_worker_command_without(missing: str, credentials: dict[str, str]) -> str:
    """The one line the real worker command exits with when run with
    ``credentials`` but ``missing`` and a Temporal address that leads nowhere
    (a worker that tried to connect would fail differently). It exits with
    status 1, writes nothing else, and does so at once: importing the SDKs
    takes a few seconds; it never gets as far as Temporal."""
    keep = ("PATH", "HOME", "LANG", "SYSTEMROOT", "TMPDIR")
    environment = {name: value for name, value in os.environ.items() if name in keep}
    environment.update({name: value for name, value in credentials.items() if name != missing})
    environment["TEMPORAL_ADDRESS"] = "127.0.0.1:1"
    began = time.monotonic()
    done = subprocess.run(
        [str(SCRIPTS / project_service().command("worker"))],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert time.monotonic() - began < 60
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    return line


class Service:
    """One process of the service, its output collected as it comes."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.output: list[str] = []
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        async for line in self.process.stdout:
            self.output.append(line.decode(errors="replace").rstrip("\n"))

    async def wait_for(self, text: str, timeout: float = 60) -> None:
        try:
            async with asyncio.timeout(timeout):
                while not any(text in line for line in self.output):
                    if self._reader.done():
                        raise AssertionError(f"exited before printing {text!r}: {self.output}")
                    await asyncio.sleep(0.05)
        except TimeoutError:
            raise AssertionError(
                f"did not print {text!r} within {timeout} s: {self.output}"
            ) from None

    async def exit_status(self, timeout: float = 90) -> int:
        try:
            async with asyncio.timeout(timeout):
                status = await self.process.wait()
                await self._reader
        except TimeoutError:
            raise AssertionError(f"did not exit within {timeout} s: {self.output}") from None
        return status


@asynccontextmanager
async def service(command: list[str], environment: dict[str, str]) -> AsyncIterator[Service]:
    """A command of the project run as a process, its output collected, while the
    block runs; killed at its end if it still runs.

    Args:
        command: the command (``WORKER``, ``STARTER``, ...) and its arguments.
        environment: the process's whole environment (``service_environment``).

    Returns:
        A context manager giving the running ``Service`` (its ``output``,
        ``wait_for(text)``, ``exit_status()``).
    """
    # A command started from a terminal gets Ctrl+C (SIGINT). A test run that
    # a script started in the background inherits SIGINT ignored, and would
    # hand that on to every process it starts (the starter respects it, as
    # POSIX asks of a background job): give them a terminal's Ctrl+C.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    process = await asyncio.create_subprocess_exec(
        *command,
        cwd=_project_root(),
        env=environment,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        if not project_service().approvals:
            yield Service(process)
            return
        from temporalio.client import Client

        from sandbox_agent_runtime.testing.support import approving_everything

        # Beside every worker, a stand-in person approves each call that
        # waits for one (the tests of approvals start their own workers).
        client = None
        if any("worker" in part for part in command):
            # (None for a worker pointed at no server, which stops at once.)
            with suppress(RuntimeError):
                client = await Client.connect(environment["TEMPORAL_ADDRESS"])
        if client is not None:
            async with approving_everything(client):
                yield Service(process)
        else:
            yield Service(process)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
