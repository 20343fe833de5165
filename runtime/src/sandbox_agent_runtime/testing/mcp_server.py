"""A real MCP server for tests (the ``mcp`` package's ``MCPServer``, its
FastMCP), over streamable HTTP on loopback or over stdio: a notebook.

Its tools: ``read_notes`` (what was written), ``write_note`` (a tool that
writes: the kind a service puts under approval), ``visits`` (how many calls
this server process has answered: a stateful session's count, which starts
again in a new process) and ``whoami`` (whether the caller sent the bearer
token the server expects: its credential, read from the environment
variable ``--token-from`` names on both sides). Notes go to ``--notes``, a
file, so that a test reads what the agent wrote.

    python -m sandbox_agent_runtime.testing.mcp_server --http PORT --notes FILE
    python -m sandbox_agent_runtime.testing.mcp_server --stdio --notes FILE
"""

import argparse
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# The tools' names, as the model calls them.
READ_NOTES, WRITE_NOTE, VISITS, WHOAMI = "read_notes", "write_note", "visits", "whoami"


def notebook(notes: Path, token: str | None) -> Any:
    """The server: its tools over ``notes``; ``token``: the bearer token it
    expects (None: none)."""
    from mcp.server.mcpserver import Context, MCPServer

    server = MCPServer("notebook")
    answered = {"calls": 0}

    @server.tool(name=READ_NOTES)
    def read_notes() -> str:
        """Everything written in the notebook."""
        answered["calls"] += 1
        return notes.read_text() if notes.exists() else "(the notebook is empty)"

    @server.tool(name=WRITE_NOTE)
    def write_note(text: str) -> str:
        """Write a line in the notebook."""
        answered["calls"] += 1
        with notes.open("a") as file:
            file.write(text + "\n")
        return f"written: {text}"

    @server.tool(name=VISITS)
    def visits() -> str:
        """How many calls this server has answered, this one included."""
        answered["calls"] += 1
        return f"visit {answered['calls']} (process {os.getpid()})"

    @server.tool(name=WHOAMI)
    def whoami(ctx: Context) -> str:
        """Whether the caller sent the token the server expects."""
        answered["calls"] += 1
        request = ctx.request_context.request
        sent = request.headers.get("authorization", "") if request is not None else ""
        if token is None:
            return "no token expected"
        return "token accepted" if sent == f"Bearer {token}" else "token refused"

    return server


@contextmanager
def notebook_mcp_server(notes: Path, token_from: str | None = None) -> Iterator[str]:
    """The notebook MCP server, a process serving streamable HTTP on a free
    loopback port while the block runs.

    Args:
        notes: the file its notes go to.
        token_from: the environment variable holding the bearer token it
            expects (``whoami`` says whether the caller sent it); None: none.

    Returns:
        A context manager giving the server's URL ("http://127.0.0.1:PORT/mcp").
    """
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", __spec__.name if __spec__ else __name__]
    command += ["--http", str(port), "--notes", str(notes)]
    command += ["--token-from", token_from] if token_from else []
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not _listening(port):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the notebook MCP server did not start on port {port}")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.terminate()
        server.wait(10)


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    transport = parser.add_mutually_exclusive_group(required=True)
    transport.add_argument("--http", type=int, metavar="PORT")
    transport.add_argument("--stdio", action="store_true")
    parser.add_argument("--notes", type=Path, required=True)
    parser.add_argument("--token-from", default=None, metavar="VARIABLE")
    args = parser.parse_args(argv)
    token = os.environ[args.token_from] if args.token_from else None
    server = notebook(args.notes, token)
    if args.stdio:
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.http)


if __name__ == "__main__":
    main()
