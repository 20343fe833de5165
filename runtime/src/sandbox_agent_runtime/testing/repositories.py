"""Git repositories on loopback for the tests (a run is never given a path
on the worker's disk): a repository served over HTTP
(``serving``), the policy that lets a worker clone from loopback
(``LOOPBACK_REPOS``), and a port that counts who connects to it
(``listening``)."""

import contextlib
import functools
import http.server
import ipaddress
import socket
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from sandbox_agent_runtime.repos import RepoPolicy

# What a test worker (and starter) allows to clone the repositories served
# here: http, on loopback.
LOOPBACK_REPOS = RepoPolicy(
    schemes=("https", "ssh", "http"), networks=(ipaddress.ip_network("127.0.0.0/8"),)
)
# The same, as the variables a worker process reads.
LOOPBACK_REPO_ENVIRONMENT = {
    "REPO_ALLOWED_SCHEMES": "https,ssh,http",
    "REPO_ALLOWED_NETWORKS": "127.0.0.0/8",
}


@contextlib.contextmanager
def serving(directory: Path) -> Iterator[str]:
    """The bare repositories under ``directory``, served over git's plain
    ("dumb") HTTP on loopback: the URL of ``directory``, open until the
    context ends. Each repository must have had ``git update-server-info``
    (``bare_copy`` does it)."""
    handler = functools.partial(_Quiet, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def bare_copy(repository: Path, into: Path) -> Path:
    """A bare clone of ``repository`` (every branch and tag) in ``into``,
    ready to be served (``serving``)."""
    bare = into / f"{repository.name}.git"
    for arguments in (
        ["clone", "--quiet", "--bare", str(repository), str(bare)],
        ["--git-dir", str(bare), "update-server-info"],
    ):
        subprocess.run(["git", *arguments], check=True, capture_output=True)
    return bare


@dataclass
class Listener:
    """A port on loopback that takes connections and counts them."""

    port: int
    accepted: list[str] = field(default_factory=list)


@contextlib.contextmanager
def listening(host: str = "127.0.0.1") -> Iterator[Listener]:
    """A listening socket on loopback that records each connection it
    accepts (and closes it), open until the context ends: a test that a
    URL naming it is refused before any connection finds none recorded."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.bind((host, 0))
    sock.listen()
    sock.settimeout(0.1)
    listener = Listener(sock.getsockname()[1])
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, address = sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            listener.accepted.append(str(address))
            connection.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener
    finally:
        stop.set()
        thread.join()
        sock.close()
