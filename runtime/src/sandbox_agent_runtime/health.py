"""The worker's health, over HTTP, for a readiness and a liveness probe.

With ``HEALTH_BIND_ADDRESS`` set, ``GET /readyz`` answers 200 once the worker
polls its task queues and 503 from the moment it begins to drain; ``GET
/livez`` 503 once its event loop has been blocked longer than
``LIVENESS_BOUND``, when only a restart helps. It runs in a thread of its own
on its own address (the metrics port, served by the SDK's Rust runtime, keeps
answering while the Python loop is stuck, so it cannot tell), and holds
whoever calls it (``http_guard``).
"""

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from datetime import timedelta

from sandbox_agent_runtime.http_guard import GuardedHandler, GuardedServer

READY_PATH = "/readyz"
LIVE_PATH = "/livez"

# How long the event loop may go without turning before the worker is not
# live. Far above any step the loop takes in a healthy worker (starting
# thousands of runs keeps it busy for a few hundred ms at a time).
LIVENESS_BOUND = timedelta(seconds=10)

# How often the event loop renews its time stamp.
TICK = timedelta(seconds=1)

# How long a probe's request has to arrive: a probe sends it
# at once (and the kubelet gives up after a second); a client that does not
# holds a thread of the worker no longer than this.
ARRIVAL_DEADLINE = 10.0

# The most connections it serves at once (a kubelet probes one at a time).
MOST_CONNECTIONS = 16

log = logging.getLogger("health")


class HealthUnavailable(Exception):
    """The worker cannot serve on ``HEALTH_BIND_ADDRESS`` (its port is taken, say)."""


class HealthServer:
    """The health endpoint, serving from a thread until ``close()``.

    ``ready`` says whether the worker polls and is not draining; the server
    asks it at each request (from its own thread: it must only read)."""

    def __init__(
        self,
        address: tuple[str, int],
        liveness_bound: timedelta = LIVENESS_BOUND,
    ) -> None:
        self.ready: Callable[[], bool] = lambda: False
        self._bound = liveness_bound.total_seconds()
        self._last_turn = time.monotonic()
        try:
            self._server = GuardedServer(
                address,
                self._handler(),
                log=log,
                most_connections=MOST_CONNECTIONS,
                deadline=ARRIVAL_DEADLINE,
                largest_body=0,
            )
        except OSError as e:
            raise HealthUnavailable(
                f"Cannot serve the health endpoint on {address[0]}:{address[1]} "
                f"(HEALTH_BIND_ADDRESS): {e.strerror or e}"
            ) from e
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="health", daemon=True
        )
        self._thread.start()

    def turned(self) -> None:
        """The event loop has just turned (the ticker calls this)."""
        self._last_turn = time.monotonic()

    def blocked_for(self) -> float:
        """Seconds since the event loop last turned."""
        return time.monotonic() - self._last_turn

    def answer(self, path: str) -> tuple[int, str]:
        if path == READY_PATH:
            return (200, "ready\n") if self.ready() else (503, "not ready\n")
        if path == LIVE_PATH:
            blocked = self.blocked_for()
            if blocked > self._bound:
                return 503, f"event loop blocked for {blocked:.0f} s\n"
            return 200, "live\n"
        return 404, f"not found: try {READY_PATH} or {LIVE_PATH}\n"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[GuardedHandler]:
        health = self

        class Handler(GuardedHandler):
            def do_GET(self) -> None:
                status, text = health.answer(self.path.partition("?")[0])
                body = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler


@asynccontextmanager
async def serving_health(
    address: tuple[str, int] | None, liveness_bound: timedelta = LIVENESS_BOUND
) -> AsyncIterator[HealthServer | None]:
    """The health endpoint, served while the block runs, the running event loop
    renewing its time stamp.

    Args:
        address: ``(host, port)`` to serve on; None for no endpoint.
        liveness_bound: how long the loop may go without turning before
            ``LIVE_PATH`` answers 503.

    Returns:
        A context manager giving the server (set its ``ready`` to say when the
        worker is ready), or None without an address.
    """
    if address is None:
        yield None
        return
    health = HealthServer(address, liveness_bound)

    async def tick() -> None:
        while True:
            health.turned()
            await asyncio.sleep(TICK.total_seconds())

    ticker = asyncio.create_task(tick())
    try:
        yield health
    finally:
        ticker.cancel()
        with suppress(asyncio.CancelledError):
            await ticker
        health.close()
