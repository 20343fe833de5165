"""What a hostile caller can do to the codec server and the health endpoint:
be refused, and nothing else (http_guard.py, codec_server.py, health.py).

The real codec-server process and the real worker process, raw sockets for
what no HTTP client sends: a body whose length is not one, headers or a body
sent a byte a second, a connection that sends nothing, more connections than
the server takes at once, a request that names no namespace. The server's
peak memory is read from /proc before and after; its log must hold one line
per request refused, and no traceback."""

import asyncio
import contextlib
import json
import re
import select
import socket
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from temporalio.client import Client

from sandbox_agent_runtime import codec_server, health
from sandbox_agent_runtime.encryption import EncryptionCodec, parse_keys
from sandbox_agent_runtime.testing.processes import (
    CODEC_SERVER,
    WORKER,
    Service,
    service,
    service_environment,
)
from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server
from sandbox_agent_runtime.testing.support import closed_address, free_address

from .test_encryption import TOKEN, A, payload_of, payloads_from, payloads_json, value_of

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(sys.platform != "linux", reason="reads the server's memory from /proc"),
]

AUTHORIZED = f"Authorization: Bearer {TOKEN}\r\nX-Namespace: default\r\n"

# What a client pushes after its headers: a server that read a body to its
# end whatever its length grew by this much (1.8 GB, as the attack found).
FLOOD = 256 << 20
# How much the server's peak memory may grow meanwhile (its buffers).
GROWTH = 32 << 20

# Requests whose body has no length the server can use, and what each gets.
NO_VALID_LENGTH = {
    "negative": ("Content-Length: -1\r\n", 400),
    "not a number": ("Content-Length: soon\r\n", 400),
    "a sign": ("Content-Length: +5\r\n", 400),
    "given twice": ("Content-Length: 2\r\nContent-Length: 5\r\n", 400),
    "missing": ("", 411),
    "chunked": ("Transfer-Encoding: chunked\r\n", 411),
    "over the limit": (f"Content-Length: {codec_server.LARGEST_REQUEST + 1}\r\n", 413),
}


def peak_memory(pid: int) -> int:
    """The process's peak resident memory (VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) << 10
    raise AssertionError(f"no VmHWM in /proc/{pid}/status")


def connect(address: str) -> socket.socket:
    host, _, port = address.rpartition(":")
    return socket.create_connection((host, int(port)), timeout=60)


def status_of(answer: bytes) -> int:
    """The status of an HTTP answer, 0 for none."""
    found = re.match(rb"HTTP/1\.[01] ([0-9]{3}) ", answer)
    return int(found.group(1)) if found else 0


def read_to_end(sock: socket.socket) -> bytes:
    """What the server sends until it closes (a reset ends it too)."""
    received = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            received += chunk
    return received


def push(sock: socket.socket, count: int) -> int:
    """Send up to ``count`` bytes of body, until the server stops taking them."""
    chunk = b"0" * (1 << 20)
    sent = 0
    with contextlib.suppress(OSError):
        while sent < count:
            sock.sendall(chunk)
            sent += len(chunk)
        sock.shutdown(socket.SHUT_WR)
    return sent


def refused_unread(address: str, head: str) -> int:
    """Send ``head`` (request line and headers), wait a moment for an answer,
    then push FLOOD bytes of body whatever came; the answer's status."""
    with connect(address) as sock:
        sock.sendall(head.encode())
        # A server that refuses answers at once; one that waits for the
        # body gets it (and shows what reading it costs).
        ready, _, _ = select.select([sock], [], [], 5)
        answer = sock.recv(65536) if ready else b""
        push(sock, FLOOD)
        answer += read_to_end(sock)
    return status_of(answer)


def dribble(address: str, head: bytes, then: bytes, give_up: float) -> bytes | None:
    """Send ``head``, then ``then`` a byte a second, until the server closes
    the connection: what it answered; None if it took it all or had not
    closed after ``give_up`` seconds."""
    with connect(address) as sock:
        sock.sendall(head)
        ends = time.monotonic() + give_up
        for byte in then:
            if time.monotonic() > ends:
                return None
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                return b""
            ready, _, _ = select.select([sock], [], [], 1)
            if ready:
                return read_to_end(sock)
    return None


def turned_away(address: str, held: int) -> tuple[int, list[socket.socket]]:
    """Open ``held`` connections that send nothing, then one more: the
    status the one more gets, and the held connections (to close)."""
    sockets = [connect(address) for _ in range(held)]
    with connect(address) as one_more:
        return status_of(read_to_end(one_more)), sockets


def decode(address: str, headers: dict[str, str]) -> tuple[int, str]:
    """A Web UI's decode request: its status and body."""
    [sealed] = asyncio.run(EncryptionCodec(parse_keys(A)).encode([payload_of("the prompt")]))
    request = urllib.request.Request(
        f"http://{address}/decode",
        data=json.dumps(payloads_json([sealed])).encode(),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"} | headers,
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def decoded(address: str) -> bool:
    """Whether a good request is served: the prompt decoded."""
    status, body = decode(address, {"X-Namespace": "default"})
    return status == 200 and [value_of(p) for p in payloads_from(json.loads(body))] == [
        "the prompt"
    ]


def probe(address: str) -> int:
    try:
        with urllib.request.urlopen(f"http://{address}{health.LIVE_PATH}", timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return error.code


async def served_again(ask: Callable[[str], bool], address: str) -> None:
    """Ask until the server serves again (its held connections just closed;
    meanwhile a request may be turned away, its connection reset)."""

    def served() -> bool:
        try:
            return ask(address)
        except OSError:
            return False

    async with asyncio.timeout(60):
        while not await asyncio.to_thread(served):
            await asyncio.sleep(0.1)


def refusals(server: Service) -> list[str]:
    return [line for line in server.output if "refused " in line or "turned away" in line]


@contextlib.asynccontextmanager
async def running_codec_server() -> AsyncIterator[tuple[Service, str]]:
    address = free_address()
    environment = {
        **service_environment(closed_address(), "http://127.0.0.1:1"),
        "PAYLOAD_ENCRYPTION_KEYS": A,
        "CODEC_SERVER_BIND_ADDRESS": address,
        "CODEC_SERVER_TOKEN": TOKEN,
    }
    async with service(CODEC_SERVER, environment) as server:
        await server.wait_for("Codec server on")
        yield server, address


# ---------------------------------------------------------- the codec server


async def test_a_body_without_a_valid_length_is_refused_before_any_is_read() -> None:
    async with running_codec_server() as (server, address):
        for case, (length, expected) in NO_VALID_LENGTH.items():
            before = peak_memory(server.process.pid)
            head = f"POST /decode HTTP/1.1\r\nHost: x\r\n{AUTHORIZED}{length}\r\n"
            status = await asyncio.to_thread(refused_unread, address, head)
            grown = peak_memory(server.process.pid) - before
            assert grown < GROWTH, f"{case}: its peak memory grew by {grown >> 20} MiB"
            assert status == expected, (case, server.output[-5:])
        # Still serving.
        assert await asyncio.to_thread(decoded, address)

    lines = refusals(server)
    assert len(lines) == len(NO_VALID_LENGTH), lines
    for line, (_, expected) in zip(lines, NO_VALID_LENGTH.values(), strict=True):
        assert f"refused POST /decode from 127.0.0.1: {expected} " in line, line
    assert not any("Traceback" in line for line in server.output), server.output


async def test_a_slow_client_is_cut_off_at_the_deadline_and_another_is_served() -> None:
    give_up = codec_server.ARRIVAL_DEADLINE + 30
    request = f"POST /decode HTTP/1.1\r\nHost: x\r\n{AUTHORIZED}Content-Length: 1000\r\n\r\n"
    async with running_codec_server() as (server, address):
        # Its headers a byte a second, never ending; its body a byte a second.
        slow_headers = asyncio.create_task(
            asyncio.to_thread(
                dribble, address, b"POST /decode HTTP/1.1\r\n", b"X-Slow: " + b"a" * 1000, give_up
            )
        )
        slow_body = asyncio.create_task(
            asyncio.to_thread(dribble, address, request.encode(), b"{" * 1000, give_up)
        )
        # Meanwhile a good request from another client is served.
        assert await asyncio.to_thread(decoded, address)
        assert not slow_headers.done() and not slow_body.done()
        for task in (slow_headers, slow_body):
            answer = await task
            assert answer is not None, "not cut off"
            assert status_of(answer) in (408, 0), answer[:200]

    lines = refusals(server)
    assert len(lines) == 2, lines
    deadline = f"408 the request did not arrive whole within {codec_server.ARRIVAL_DEADLINE:.0f} s"
    assert all(deadline in line for line in lines), lines
    assert not any("Traceback" in line for line in server.output), server.output


async def test_over_its_connections_one_more_is_refused_at_once_then_served_once_they_go() -> None:
    async with running_codec_server() as (server, address):
        status, held = await asyncio.to_thread(turned_away, address, codec_server.MOST_CONNECTIONS)
        assert status == 503
        for sock in held:
            sock.close()
        await served_again(decoded, address)
    assert sum("turned away" in line for line in server.output) >= 1, server.output


async def test_a_request_naming_no_namespace_or_another_is_refused() -> None:
    async with running_codec_server() as (server, address):
        status, body = await asyncio.to_thread(decode, address, {})
        assert status == 400 and "X-Namespace" in body, body
        assert "payloads" not in body
        status, body = await asyncio.to_thread(decode, address, {"X-Namespace": "other"})
        assert status == 403 and "payloads" not in body, body
        assert await asyncio.to_thread(decoded, address)
    assert len(refusals(server)) == 2, server.output


# ------------------------------------------------------ the health endpoint


@contextlib.asynccontextmanager
async def running_worker_with_health(
    temporal_client: Client,
) -> AsyncIterator[tuple[Service, str]]:
    address = free_address()
    with scripted_openai_server([]) as model:
        environment = {
            **service_environment(temporal_client.service_client.config.target_host, model.url),
            "HEALTH_BIND_ADDRESS": address,
        }
        async with service(WORKER, environment) as worker:
            await worker.wait_for("Worker polling")
            yield worker, address


async def test_the_health_endpoint_refuses_a_body_a_slow_client_and_too_many(
    temporal_client: Client,
) -> None:
    async with running_worker_with_health(temporal_client) as (worker, address):
        # A probe has no body: any it says it has is refused unread.
        for length, expected in (
            ("Content-Length: -1\r\n", 400),
            ("Content-Length: soon\r\n", 400),
            ("Content-Length: 5\r\n", 413),
            ("Transfer-Encoding: chunked\r\n", 411),
        ):
            head = f"GET {health.LIVE_PATH} HTTP/1.1\r\nHost: x\r\n{length}\r\n"
            assert await asyncio.to_thread(refused_unread, address, head) == expected, length
        assert await asyncio.to_thread(probe, address) == 200

        # Headers a byte a second: cut off at the deadline, a probe served meanwhile.
        slow = asyncio.create_task(
            asyncio.to_thread(
                dribble,
                address,
                f"GET {health.LIVE_PATH} HTTP/1.1\r\n".encode(),
                b"X-Slow: " + b"a" * 1000,
                health.ARRIVAL_DEADLINE + 30,
            )
        )
        assert await asyncio.to_thread(probe, address) == 200
        assert not slow.done()
        answer = await slow
        assert answer is not None, "not cut off"

        # Over its connections: one more refused at once, served once they go.
        status, held = await asyncio.to_thread(turned_away, address, health.MOST_CONNECTIONS)
        assert status == 503
        for sock in held:
            sock.close()
        await served_again(lambda at: probe(at) == 200, address)

    lines = refusals(worker)
    # The slow client's line (a held connection that sent nothing and
    # outlived the deadline on a loaded machine would add one of its own).
    slow_line = f"refused GET {health.LIVE_PATH} from 127.0.0.1: 408 the request did not arrive"
    assert sum(slow_line in line for line in lines) == 1, lines
    assert sum("turned away" in line for line in lines) >= 1, lines
    assert not any("Traceback" in line for line in worker.output), worker.output
