"""Faults the tests inject into real processes: a network between the worker
and Temporal that the test cuts and restores (a Temporal server that stops
and starts again is support.restartable_dev_server), and a git server that
takes connections and never answers, or never finishes answering."""

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from sandbox_agent_runtime.testing.support import free_address


class CuttableNetwork:
    """A TCP proxy on loopback between the worker and Temporal. ``cut()``
    drops every connection and refuses new ones until ``restore()``, as a
    network partition would (no Temporal frontend answers the worker)."""

    def __init__(self, target: str) -> None:
        self.target_host, _, port = target.rpartition(":")
        self.target_port = int(port)
        # A port of its own, which it takes again after each cut.
        self.address = free_address()
        self.port = int(self.address.rpartition(":")[2])
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


@contextlib.asynccontextmanager
async def silent_git_server(trickle: bool = False) -> AsyncIterator[str]:
    """A repository's URL on loopback whose server accepts every connection
    and never answers (a transport that hangs), open until the context ends.
    ``trickle``: it answers, but its answer never ends, a few kilobytes a
    second (faster than a stalled transport: only git's time limit ends it)."""
    held: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        if not trickle:
            return
        await reader.readuntil(b"\r\n\r\n")
        writer.write(
            b"HTTP/1.1 200 OK\r\n"
            b"Content-Type: application/x-git-upload-pack-advertisement\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        with contextlib.suppress(OSError):
            while not writer.is_closing():
                writer.write(b"1000\r\n" + b"0" * 0x1000 + b"\r\n")
                await writer.drain()
                await asyncio.sleep(0.5)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/repo.git"
    finally:
        server.close()
        for writer in held:
            writer.transport.abort()
        await server.wait_closed()


def processes_holding(text: str) -> list[str]:
    """The command lines of the processes on this machine that hold
    ``text`` (a zombie has none: it is not running)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if text.encode() in command:
            found.append(command.replace(b"\0", b" ").decode(errors="replace").strip())
    return found


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


def figures(fault: str, runs: int, completed: int, failed: int, twice: int) -> None:
    """Add a test's figures to the file ``FAULT_FIGURES`` names, if set, as a line
    of JSON. A run that neither completed nor failed with a reason is lost.

    Args:
        fault: the fault's name.
        runs: the runs started.
        completed: those that completed.
        failed: those that failed saying why.
        twice: the commands run twice.
    """
    path = os.environ.get("FAULT_FIGURES")
    if path:
        line = {"fault": fault, "runs": runs, "completed": completed, "failed": failed}
        line.update(lost=runs - completed - failed, twice=twice)
        with open(path, "a") as out:
            out.write(json.dumps(line) + "\n")
