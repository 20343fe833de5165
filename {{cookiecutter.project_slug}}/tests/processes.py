"""The worker and the starter as separate processes, as a user runs them.

Starting either costs seconds (importing the SDKs), so the tests that use
these helpers are marked ``process`` and left out of a plain
``uv run pytest``; run them with ``uv run pytest -m process``.
"""

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager{{ ", suppress" if cookiecutter.approval != "none" }}
from pathlib import Path
{%- if cookiecutter.approval != "none" %}

from temporalio.client import Client

from . import approver
from .support import approving_everything
{%- endif %}

PROJECT = Path(__file__).resolve().parents[1]
# Where `uv sync` installs the console scripts.
SCRIPTS = Path(sys.executable).parent
{%- if not cookiecutter | remote_backends %}
WORKER = [str(SCRIPTS / "{{ cookiecutter.project_slug }}-worker")]
WORKER_MODULE = [sys.executable, "-m", "{{ cookiecutter.package_name }}.worker"]
{%- else %}
# The real worker needs the remote sandbox, which tests cannot reach; this
# runs the same worker with a local sandbox standing in for it.
WORKER = [sys.executable, "-m", "tests.stand_in_worker"]
WORKER_MODULE = WORKER
{%- endif %}
STARTER = [str(SCRIPTS / "{{ cookiecutter.project_slug }}-starter")]
STARTER_MODULE = [sys.executable, "-m", "{{ cookiecutter.package_name }}.starter"]
CODEC_SERVER = [str(SCRIPTS / "{{ cookiecutter.project_slug }}-codec-server")]


def service_environment(temporal_address: str, model_url: str) -> dict[str, str]:
    """What a user exports before running the worker or the starter. Output
    goes to a pipe, so it is block-buffered, as under systemd or Kubernetes:
    whatever the commands print must reach it without PYTHONUNBUFFERED."""
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
{%- if cookiecutter.approval != "none" %}
    # The workers trust the tests' approver, and the starter signs as it.
    environment.update(approver.ENVIRONMENT)
{%- endif %}
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
        [str(SCRIPTS / "{{ cookiecutter.project_slug }}-worker")],
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
    # A command started from a terminal gets Ctrl+C (SIGINT). A test run that
    # a script started in the background inherits SIGINT ignored, and would
    # hand that on to every process it starts (the starter respects it, as
    # POSIX asks of a background job): give them a terminal's Ctrl+C.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    process = await asyncio.create_subprocess_exec(
        *command,
        cwd=PROJECT,
        env=environment,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
{%- if cookiecutter.approval != "none" %}
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
{%- else %}
        yield Service(process)
{%- endif %}
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
