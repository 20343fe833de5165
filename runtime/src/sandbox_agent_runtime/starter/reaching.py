"""Reaching the Temporal service from the starter, and its lines when it
cannot: unreachable, stopped answering, or no such workflow (with the exit
status for each)."""

import sys

from temporalio.client import Client

from sandbox_agent_runtime.client import RunNotFound, connected
from sandbox_agent_runtime.connection import ConnectionFailed
from sandbox_agent_runtime.display import safe_line, without_credentials
from sandbox_agent_runtime.object_store import ObjectStoreUnreachable
from sandbox_agent_runtime.settings import StarterSettings
from sandbox_agent_runtime.starter.statuses import EXIT_UNREACHABLE, EXIT_USAGE


def stopped_answering(client: Client, doing: str) -> int:
    """Say, in one line, that the service stopped answering while the
    starter was ``doing`` something; the status for it."""
    address = without_credentials(client.service_client.config.target_host)
    print(f"Temporal at {address} stopped answering while {doing}.", file=sys.stderr)
    return EXIT_UNREACHABLE


async def reached(settings: StarterSettings) -> Client | None:
    """``connected()``, or None once the one line saying why not (Temporal
    or the object store unreachable) is printed: the command then exits
    EXIT_UNREACHABLE."""
    try:
        return await connected(settings)
    except (ConnectionFailed, ObjectStoreUnreachable) as e:
        print(e, file=sys.stderr)
        return None


def no_such_workflow(error: RunNotFound) -> int:
    """Say that a workflow id names no workflow (or another service's); the status for it."""
    print(safe_line(f"ERROR: {error}"), file=sys.stderr)
    return EXIT_USAGE
