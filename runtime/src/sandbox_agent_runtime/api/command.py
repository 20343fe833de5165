"""The API: the service over HTTP, for web apps, chat bots, CI jobs and other
teams' services that want the agent without speaking Temporal's protocol.

A client of the same Temporal service as the starter, with the same
settings, holding no state of its own: any number of replicas serve the same
runs, and the workers need nothing new. The routes are in /openapi.json; a
render's docs/api.md is its guide (callers and tokens, signed decisions,
limits per caller, exit statuses).
"""

import argparse
import asyncio
import logging
import resource
import signal
import socket
import sys
from collections.abc import Sequence
from typing import NoReturn

from sandbox_agent_runtime.connection import ConnectionFailed
from sandbox_agent_runtime.exits import exit_after
from sandbox_agent_runtime.object_store import ObjectStoreUnreachable
from sandbox_agent_runtime.service import current
from sandbox_agent_runtime.settings import ApiSettings, BadSetting, api_settings

EXIT_STOPPED = 0
EXIT_CANNOT_SERVE = 1
EXIT_UNREACHABLE = 2

log = logging.getLogger("api")


def exit_statuses() -> dict[int, str]:
    return {
        EXIT_STOPPED: "stopped (SIGTERM, SIGINT)",
        EXIT_CANNOT_SERVE: "cannot serve: a setting it cannot use, or the address is taken",
        EXIT_UNREACHABLE: "Temporal or the object store did not answer at start",
    }


def raise_open_files() -> None:
    """Each open stream holds a connection: the soft limit on open files
    raised to the hard one (often 1,024 and 1,048,576)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def listening(settings: ApiSettings) -> socket.socket:
    """A socket bound to API_BIND_ADDRESS; ``OSError`` when it cannot be."""
    host, port = settings.address
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


async def serve(settings: ApiSettings, sock: socket.socket) -> int:
    import uvicorn

    from sandbox_agent_runtime.api.app import create_app
    from sandbox_agent_runtime.client import connected

    try:
        client = await connected(settings.starter)
    except (ConnectionFailed, ObjectStoreUnreachable) as e:
        print(e, file=sys.stderr)
        return EXIT_UNREACHABLE
    try:
        app = create_app(settings, client)
    except BadSetting as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return EXIT_CANNOT_SERVE
    config = uvicorn.Config(
        app,
        log_level="info",
        # A stream open when the API stops is closed after this long: its
        # client reconnects (to another replica) with Last-Event-ID.
        timeout_graceful_shutdown=3,
        proxy_headers=True,
        server_header=False,
    )
    server = uvicorn.Server(config)
    # uvicorn stops on SIGTERM and SIGINT, then raises the signal again with
    # the handler it found: a stop is the API's to report, as status 0.
    for stop in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop, lambda *_: None)
    host, port = settings.address
    print(
        f"{current().command('api')} on http://{host}:{port} (OpenAPI: /openapi.json)", flush=True
    )
    await server.serve(sockets=[sock])
    return EXIT_STOPPED


def main(argv: Sequence[str] | None = None) -> None:
    """The API command: serve the service over HTTP until stopped.

    Args:
        argv: its arguments (``--new-token NAME``); None for ``sys.argv``.
    """
    parser = argparse.ArgumentParser(
        prog=current().command("api"),
        description=(__doc__ or "").partition("\n")[0],
        epilog="exit statuses: "
        + "; ".join(f"{status} {meaning}" for status, meaning in exit_statuses().items()),
    )
    parser.add_argument(
        "--new-token",
        metavar="NAME",
        help="print a new token for caller NAME and its API_TOKENS entry, and store nothing",
    )
    args = parser.parse_args(argv)
    if args.new_token is not None:
        from sandbox_agent_runtime.api.callers import new_token

        try:
            token, entry = new_token(args.new_token)
        except ValueError as e:
            print(f"ERROR: {e}", file=sys.stderr)
            sys.exit(EXIT_CANNOT_SERVE)
        print(f"token (give it to {args.new_token}; it is shown once): {token}")
        print(f"API_TOKENS entry (add it, comma-separated): {entry}")
        sys.exit(EXIT_STOPPED)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        settings = api_settings()
    except BadSetting as e:
        print(f"ERROR: {e}", file=sys.stderr)
        sys.exit(EXIT_CANNOT_SERVE)
    raise_open_files()
    try:
        sock = listening(settings)
    except OSError as e:
        host, port = settings.address
        print(
            f"ERROR: cannot serve on {host}:{port} (API_BIND_ADDRESS): {e.strerror or e}",
            file=sys.stderr,
        )
        sys.exit(EXIT_CANNOT_SERVE)
    sys.exit(asyncio.run(serve(settings, sock)))


def cli() -> NoReturn:
    """The installed API command: ``main()``, then exit with its status."""
    exit_after(main)
