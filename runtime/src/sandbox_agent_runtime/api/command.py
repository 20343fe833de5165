"""The API: the service over HTTP, for web apps, chat bots, CI jobs and other
teams' services that want the agent without speaking Temporal's protocol.

    <service>-api                      # on 127.0.0.1:8000 (API_BIND_ADDRESS)
    <service>-api --new-token NAME     # a new caller's token and its API_TOKENS entry

It is a client of the same Temporal service as the starter, with the same
settings (TEMPORAL_*, PAYLOAD_ENCRYPTION_KEYS, OBJECT_STORE_URL): a run it
starts is a run like any other, and the workers need nothing new. It holds
no state of its own, so any number of replicas serve the same runs.

Routes (versioned under /v1/; the OpenAPI document at /openapi.json):

    POST /v1/runs                         start a run: JSON {"prompt": ..., "follow_ups": false,
                                          "provider": ..., "repo": "URL@REF"}, or multipart/form-data
                                          with those fields and "files" parts; 201 {"id": ...}, Location
    GET  /v1/runs/{id}                    where it stands: working, waiting, released, ended, failed;
                                          its answer, usage and outputs
    GET  /v1/runs/{id}/events             its live events, text/event-stream (events.py)
    POST /v1/runs/{id}/messages           a follow-up {"prompt": ...} (or multipart, with files)
    POST /v1/runs/{id}/end                end a conversation
    GET  /v1/runs/{id}/outputs            its outputs, a gzipped tar (changes.patch inside)
    GET  /v1/runs/{id}/approvals          what waits for a person, as the starter shows it
    POST /v1/runs/{id}/approvals/{call}   a decision, signed by the person's key
    GET  /livez, /readyz                  alive; ready (Temporal answers)

Who may call it (callers.py): every route under /v1/ needs ``Authorization:
Bearer TOKEN``, a token the operator made with ``--new-token`` and listed in
API_TOKENS by its SHA-256 (the setting never holds a token). A run belongs
to the caller who started it (its memo says so, in every run of its chain);
another caller gets 404 for it, as for a run that does not exist. Runs the
command-line starter started belong to no API caller.

A decision stays a person's: the API passes on a decision signed with the
approver's own Ed25519 key (approvers.py: the signed bytes are the compact,
key-sorted JSON of the run, the call, the digest of what was shown, the
decision and its reason, every character outside " " to "~" escaped as
\\uXXXX, as Python's json.dumps does: page/app.js's canonicalJson), and
the worker checks the signature against APPROVERS. The API holds no key,
unless the operator gives it one (API_APPROVER_KEY_FILE): it then signs the
decisions sent unsigned, as that approver, and whoever may call the API as a
run's owner decides for it as that approver.

Every error is ``application/problem+json`` with one sentence (problems.py).
No caller grows it without bound (limits.py): each holds at most so many
event streams and downloads open on a replica, and so many runs in flight
in the service (API_STREAMS_PER_CALLER, API_DOWNLOADS_PER_CALLER,
API_DOWNLOADS_AT_ONCE, API_RUNS_IN_FLIGHT_PER_CALLER; past one, 429 with
Retry-After); any answer given before a request's body is read closes its
connection (app.py); /metrics labels only what the API itself names.

Exit statuses: 0 stopped (SIGTERM, Ctrl+C); 1 cannot serve (a setting, the
address); 2 Temporal or the object store unreachable at start.
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
