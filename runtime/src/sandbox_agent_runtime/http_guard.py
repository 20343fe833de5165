"""What the service's HTTP servers (the codec server, the health endpoint) hold to, whoever calls them.

Python's ``http.server`` trusts its client: it reads a body of whatever length
the client names, waits for a request as long as the client likes, and starts
a thread for every connection. ``GuardedServer`` bounds each of these, so a
slow or hostile client cannot hold a server's memory or threads.
"""

import io
import logging
import math
import re
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# The slowest a body (or an answer) may travel: a second per this many bytes,
# on top of the deadline. A person's browser or CLI sends far faster.
BODY_RATE = 256 << 10

# What a Content-Length may be: digits, no sign (RFC 9110), at most a petabyte.
_LENGTH = re.compile(r"[0-9]{1,15}")

# The methods whose requests carry a body, and so must say its length.
_WITH_BODY = {"POST", "PUT", "PATCH"}


class Arrival(io.RawIOBase):
    """The connection's incoming bytes, each read bounded by what is left of
    the request's deadline (``begin``): the request arrives whole in time or
    its reads raise ``TimeoutError``."""

    def __init__(self, connection: socket.socket) -> None:
        self.connection = connection
        self.ends = math.inf
        # Seconds this request was given, bytes of it received so far.
        self.allowed = 0.0
        self.received = 0
        self.expired = False

    def begin(self, seconds: float) -> None:
        """A request begins: it has ``seconds`` to arrive."""
        self.ends = time.monotonic() + seconds
        self.allowed = seconds
        self.received = 0
        self.expired = False

    def allow(self, seconds: float) -> None:
        """``seconds`` more for this request (its body's share)."""
        self.ends += seconds
        self.allowed += seconds

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self.ends - time.monotonic()
        if left <= 0:
            self.expired = True
            raise TimeoutError("the request did not arrive in time")
        self.connection.settimeout(left)
        try:
            count = self.connection.recv_into(buffer)
        except TimeoutError:
            self.expired = True
            raise
        self.received += count
        return count


class Departure(io.BufferedIOBase):
    """The connection's outgoing bytes: each write has ``deadline`` seconds
    and one more per ``BODY_RATE`` bytes to leave (a client that does not
    read its answer is cut off too)."""

    def __init__(self, connection: socket.socket, deadline: float) -> None:
        self.connection = connection
        self.deadline = deadline

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data)
        self.connection.settimeout(self.deadline + view.nbytes / BODY_RATE)
        self.connection.sendall(view)
        return view.nbytes


class GuardedServer(ThreadingHTTPServer):
    """A ``ThreadingHTTPServer`` serving at most ``most_connections`` at once,
    each request given ``deadline`` seconds to arrive, bodies of at most
    ``largest_body`` bytes; ``log`` gets one line per request refused.

    - A body only with a valid length, refused before any of it is read: no
      ``Content-Length`` on a ``POST``, or a ``Transfer-Encoding``, is 411; a
      length that is not one (negative, not a number, given twice) is 400;
      one over ``largest_body`` is 413.
    - A deadline for each request to arrive whole: its headers within
      ``deadline`` seconds, its body within that and one more second per
      ``BODY_RATE`` bytes. A total, not a time per read: a client that sends
      a byte a second, or nothing, is cut off (408, or the connection
      closed). An answer gets as long to leave.
    - A connection over ``most_connections`` gets 503 and is closed at once,
      never queued.
    - One line in the log per request refused, no traceback, never a
      header's value beyond the request line's path."""

    daemon_threads = True
    # Connections the kernel holds for it to accept (http.server's default
    # is 5): enough that a burst is accepted, and turned away, not dropped.
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        handler: type["GuardedHandler"],
        *,
        log: logging.Logger,
        most_connections: int,
        deadline: float,
        largest_body: int,
    ) -> None:
        self.log = log
        self.most_connections = most_connections
        self.deadline = deadline
        self.largest_body = largest_body
        self._slots = threading.BoundedSemaphore(most_connections)
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.turn_away(request, client_address)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def turn_away(self, request: socket.socket, client_address: Any) -> None:
        """503 and closed, from the thread that accepts: never waits."""
        self.log.warning(
            "turned away a connection from %s: %d connections are served already",
            client_address[0],
            self.most_connections,
        )
        text = f"over {self.most_connections} connections at once; try again\n".encode()
        try:
            request.setblocking(False)
            request.send(
                b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n"
                b"Content-Type: text/plain; charset=utf-8\r\nRetry-After: 1\r\n"
                + f"Content-Length: {len(text)}\r\n\r\n".encode()
                + text
            )
        except OSError:
            pass  # gone already, or not taking it: closed all the same
        self.shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that failed under its handler (reset, broken): one
        line, not socketserver's traceback."""
        error = sys.exc_info()[1]
        self.log.warning("dropped a connection from %s: %r", client_address[0], error)


class GuardedHandler(BaseHTTPRequestHandler):
    """A request handler for a ``GuardedServer``: its reads bounded by the
    request's deadline, its body's length checked before a method runs."""

    server: GuardedServer
    arrival: Arrival
    # Requests handled on this connection so far.
    answered = 0

    def setup(self) -> None:
        super().setup()
        self.rfile.close()
        self.arrival = Arrival(self.connection)
        self.rfile = io.BufferedReader(self.arrival)
        self.wfile = Departure(self.connection, self.server.deadline)

    def handle_one_request(self) -> None:
        self.arrival.begin(self.server.deadline)
        super().handle_one_request()
        if self.arrival.expired:
            self.close_connection = True
            # A connection left open between requests and ended is no
            # refusal; one that began a request, or never sent one, is.
            if self.arrival.received or not self.answered:
                allowed = self.arrival.allowed
                self.refused(408, f"the request did not arrive whole within {allowed:.0f} s")
                self.answer_late()
        self.answered += 1

    def answer_late(self) -> None:
        """408, if the client still takes it, without waiting for it."""
        try:
            self.connection.setblocking(False)
            self.connection.send(
                b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
            )
        except OSError:
            pass

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        problem = self.length_problem()
        if problem is not None:
            status, reason = problem
            self.send_error(status, reason)
            return False
        return True

    def handle_expect_100(self) -> bool:
        # A client that waits for "100 Continue" before its body hears no
        # to a body it may not send, first.
        problem = self.length_problem()
        if problem is not None:
            self.send_error(*problem)
            return False
        return super().handle_expect_100()

    def length_problem(self) -> tuple[int, str] | None:
        """Why this request's body cannot be read, as (status, reason), or None."""
        if self.headers.get("Transfer-Encoding") is not None:
            return 411, "send the body with a Content-Length (no Transfer-Encoding)"
        lengths = self.headers.get_all("Content-Length") or []
        if not lengths:
            if self.command in _WITH_BODY:
                return 411, "a Content-Length is required"
            return None
        if len(lengths) > 1:
            return 400, "Content-Length given more than once"
        given = lengths[0].strip()
        if not _LENGTH.fullmatch(given):
            return 400, f"Content-Length {ascii(given[:20])} is not a length"
        if int(given) > self.server.largest_body:
            return 413, f"a body of {int(given):,} bytes, over {self.server.largest_body:,}"
        return None

    def body_length(self) -> int:
        """The body's length (parse_request has checked it)."""
        return int(self.headers.get("Content-Length") or 0)

    def read_body(self) -> bytes:
        """The body, given its share of the deadline; ``TimeoutError`` if
        it does not arrive in time, ``ConnectionError`` if it ends short."""
        length = self.body_length()
        self.arrival.allow(length / BODY_RATE)
        body = self.rfile.read(length)
        if len(body) < length:
            raise ConnectionResetError(f"the body ended after {len(body)} of {length} bytes")
        return body

    def refused(self, status: int, reason: str) -> None:
        """The one line a refused request gets in the log."""
        method = getattr(self, "command", None) or "-"
        path = (getattr(self, "path", None) or "-").partition("?")[0]
        self.server.log.warning(
            "refused %s %s from %s: %d %s",
            method,
            path[:200],
            self.client_address[0],
            status,
            reason,
        )

    def log_error(self, format: str, *args: Any) -> None:
        """http.server's own refusals (a request line or headers too long, a
        bad version; send_error's) as one line; a deadline passed is said
        once, by handle_one_request."""
        if self.arrival.expired:
            return
        if format.startswith("code %d"):
            code, message = args[0], args[1]
            self.refused(int(code), str(message))
        else:
            self.refused(400, (format % args)[:200])

    def log_request(self, code: Any = "-", size: Any = "-") -> None:
        pass  # an answered request is no news; a refused one is (refused)
