"""The codec server: the Web UI and the CLI show decrypted payloads to those allowed.

It speaks Temporal's remote codec protocol: a payload kept in the object
store shows as what it refers to, decrypted; one it cannot decrypt comes
back as it was. Only a caller with ``CODEC_SERVER_TOKEN``, from an allowed
origin (``CODEC_SERVER_ALLOWED_ORIGINS``) and for its own namespace decodes
(unset, it serves only on a loopback address); whoever calls it, it holds
(bounded bodies, slow requests cut, connections capped), and it never logs
a payload. A render's docs/encryption.md is its guide.
"""

import asyncio
import hmac
import json
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, NoReturn

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.converter import DataConverter

from sandbox_agent_runtime.encryption import (
    EncryptionCodec,
    UnknownKey,
    WrongKey,
)
from sandbox_agent_runtime.exits import exit_after
from sandbox_agent_runtime.http_guard import GuardedHandler, GuardedServer
from sandbox_agent_runtime.object_store import (
    ObjectStoreUnreachable,
    check_reachable,
    data_converter,
    worker_storage,
)
from sandbox_agent_runtime.settings import (
    BadSetting,
    CodecServerSettings,
    codec_server_settings,
)

log = logging.getLogger("codec-server")

# The largest request it reads: far above a page of history's payloads (the
# Web UI sends them a few at a time, each under Temporal's 2 MB).
LARGEST_REQUEST = 32 << 20

# How long one request may take (a payload fetched from a slow store).
REQUEST_TIME_LIMIT = 60.0

# How long a request has to arrive, its headers and its body (and one second
# more per 256 KiB of body): http_guard.py. The Web UI's requests take
# milliseconds; a client that takes longer is cut off (408).
ARRIVAL_DEADLINE = 10.0

# The most connections it serves at once (a thread each); one more gets 503.
# A browser opens up to six per site: room for a team's Web UIs and CLIs.
MOST_CONNECTIONS = 64

ALLOWED_HEADERS = "Authorization, Content-Type, X-Namespace"

EXIT_STOPPED = 0
EXIT_CANNOT_SERVE = 1


@dataclass
class Answer:
    status: int
    body: dict[str, Any]


class Codec:
    """Decodes (fetches, then decrypts) and encodes (encrypts) payloads."""

    def __init__(self, converter: DataConverter, codec: EncryptionCodec) -> None:
        self.converter = converter
        self.codec = codec

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        decoded = []
        for payload in payloads:
            try:
                decoded.append(await self.converter._transform_inbound_payload(payload))
            except (UnknownKey, WrongKey) as e:
                log.warning("left a payload encoded: %s", e)
                decoded.append(payload)
            except Exception as e:  # a stored payload gone, a store that fails
                log.warning("left a payload encoded: %s", str(e).splitlines()[0] if str(e) else e)
                decoded.append(payload)
        return decoded

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return await self.codec.encode(payloads)


class CodecServer:
    """The HTTP server, answering from its threads; each request's codec
    work runs on ``loop`` (the object store's client lives there)."""

    def __init__(
        self, settings: CodecServerSettings, codec: Codec, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.settings = settings
        self.codec = codec
        self.loop = loop
        self.http = GuardedServer(
            settings.address,
            self._handler(),
            log=log,
            most_connections=MOST_CONNECTIONS,
            deadline=ARRIVAL_DEADLINE,
            largest_body=LARGEST_REQUEST,
        )

    @property
    def url(self) -> str:
        host, port = self.http.server_address[:2]
        return f"http://{host!s}:{port}"

    def refusal(self, method: str, path: str, headers: Any) -> Answer | None:
        """Why a request is refused, or None for one that may go on."""
        origin = headers.get("Origin")
        if origin is not None and origin not in self.settings.allowed_origins:
            return Answer(403, {"error": f"origin {origin[:200]!r} is not allowed"})
        if method == "OPTIONS":
            return None
        if method != "POST" or path.rstrip("/").rsplit("/", 1)[-1] not in ("encode", "decode"):
            return Answer(404, {"error": "POST .../encode or .../decode"})
        token = self.settings.token
        if token is not None:
            given = headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                return Answer(401, {"error": "a bearer token (CODEC_SERVER_TOKEN) is needed"})
        namespace = headers.get("X-Namespace")
        if namespace is None:
            return Answer(400, {"error": "the X-Namespace header is required"})
        if namespace != self.settings.namespace:
            return Answer(403, {"error": f"namespace {namespace[:200]!r} is not this server's"})
        return None

    def convert(self, path: str, body: bytes) -> Answer:
        try:
            payloads = json_format.Parse(body, Payloads()).payloads
        except (json_format.ParseError, DecodeError, UnicodeDecodeError) as e:
            return Answer(400, {"error": f"the body is not Payloads in protobuf JSON: {e}"})
        work = self.codec.decode if path.rstrip("/").endswith("decode") else self.codec.encode
        future = asyncio.run_coroutine_threadsafe(work(payloads), self.loop)
        try:
            converted = future.result(REQUEST_TIME_LIMIT)
        except FutureTimeout:
            future.cancel()
            return Answer(504, {"error": f"not done within {REQUEST_TIME_LIMIT:.0f} s"})
        except Exception as e:
            log.warning("could not encode: %s", e)
            return Answer(500, {"error": "could not encode the payloads"})
        return Answer(200, json_format.MessageToDict(Payloads(payloads=converted)))

    def _handler(self) -> type[GuardedHandler]:
        server = self

        class Handler(GuardedHandler):
            protocol_version = "HTTP/1.1"

            def do_OPTIONS(self) -> None:
                self._serve("OPTIONS")

            def do_POST(self) -> None:
                self._serve("POST")

            def do_GET(self) -> None:
                self._serve("GET")

            def _serve(self, method: str) -> None:
                # The body's length is checked already: none
                # of it is read before the request may go on.
                path = self.path.partition("?")[0]
                refused = server.refusal(method, path, self.headers)
                if refused is None and method == "OPTIONS":
                    self._answer(Answer(204, {}))
                    return
                if refused is not None:
                    self.refused(refused.status, refused.body["error"])
                    self.close_connection = True
                    self._answer(refused)
                    return
                self._answer(server.convert(path, self.read_body()))

            def _answer(self, answer: Answer) -> None:
                body = json.dumps(answer.body).encode() if answer.status != 204 else b""
                self.send_response(answer.status)
                origin = self.headers.get("Origin")
                if origin is not None and origin in server.settings.allowed_origins:
                    self.send_header("Access-Control-Allow-Origin", origin)
                    self.send_header("Access-Control-Allow-Credentials", "true")
                    self.send_header("Access-Control-Allow-Methods", "POST, OPTIONS")
                    self.send_header("Access-Control-Allow-Headers", ALLOWED_HEADERS)
                    self.send_header("Access-Control-Max-Age", "600")
                self.send_header("Vary", "Origin")
                if body:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler


async def serve(settings: CodecServerSettings, started: threading.Event | None = None) -> None:
    """Serve until SIGINT or SIGTERM."""
    if settings.object_store is not None:
        await check_reachable(settings.object_store)
    codec = EncryptionCodec(settings.keys)
    async with worker_storage(settings.object_store) as storage:
        converter = data_converter(storage, codec=codec)
        server = CodecServer(settings, Codec(converter, codec), asyncio.get_running_loop())
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        thread = threading.Thread(target=server.http.serve_forever, name="codec", daemon=True)
        thread.start()
        who = (
            "with a bearer token (CODEC_SERVER_TOKEN)"
            if settings.token is not None
            else "without a token: anyone on this host may decode (CODEC_SERVER_TOKEN)"
        )
        print(
            f"Codec server on {server.url} for namespace {settings.namespace!r}, {who}; "
            f"browsers from {', '.join(settings.allowed_origins)}",
            flush=True,
        )
        try:
            await stop.wait()
        finally:
            await asyncio.to_thread(server.http.shutdown)
            server.http.server_close()


def main(argv: Sequence[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        settings = codec_server_settings()
    except BadSetting as e:
        print(f"ERROR: {e}", file=sys.stderr)
        sys.exit(EXIT_CANNOT_SERVE)
    try:
        asyncio.run(serve(settings))
    except ObjectStoreUnreachable as e:
        print(f"ERROR: {e}", file=sys.stderr)
        sys.exit(EXIT_CANNOT_SERVE)
    except OSError as e:
        host, port = settings.address
        print(
            f"ERROR: cannot serve on {host}:{port} (CODEC_SERVER_BIND_ADDRESS): {e.strerror or e}",
            file=sys.stderr,
        )
        sys.exit(EXIT_CANNOT_SERVE)
    sys.exit(EXIT_STOPPED)


def cli() -> NoReturn:
    """The installed codec server command: ``main()``, then exit with its status."""
    exit_after(main)


if __name__ == "__main__":
    cli()
