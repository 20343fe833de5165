"""The API as its tests drive it: an API process (``api_process``) with
callers of its own, and a client that reads its Server-Sent Events as a
browser's EventSource does (``read_events``)."""

import hashlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx2 as httpx

from sandbox_agent_runtime.testing.processes import API, Service, service
from sandbox_agent_runtime.testing.support import free_address

# The callers every API process of the tests knows, by name: their tokens.
TOKENS = {
    "alice": "alice-token-0123456789abcdef",
    "bob": "bob-token-0123456789abcdef",
    # Whose runs only the tests of the API's bounds start (test_api_limits.py).
    "dana": "dana-token-0123456789abcdef",
}


def api_tokens() -> str:
    """API_TOKENS for TOKENS."""
    return ",".join(
        f"{name}:{hashlib.sha256(token.encode()).hexdigest()}" for name, token in TOKENS.items()
    )


def as_caller(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[name]}"}


@dataclass
class ApiProcess:
    process: Service
    url: str

    def client(self, caller: str | None = "alice", **options: Any) -> httpx.AsyncClient:
        headers = as_caller(caller) if caller else {}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=60, **options)


@asynccontextmanager
async def api_process(
    environment: dict[str, str], command: list[str] | None = None
) -> AsyncIterator[ApiProcess]:
    """The project's API command (or ``command``), serving on a free local port."""
    address = free_address()
    environment = {**environment, "API_BIND_ADDRESS": address, "API_TOKENS": api_tokens()}
    async with service(command or API, environment) as process:
        await process.wait_for("Application startup complete", timeout=60)
        yield ApiProcess(process, f"http://{address}")


@dataclass(frozen=True)
class Event:
    id: str
    name: str
    data: dict[str, Any]


async def read_events(
    client: httpx.AsyncClient,
    workflow_id: str,
    last_event_id: str | None = None,
    most: int | None = None,
) -> list[Event]:
    """The run's events from the API, after ``last_event_id``, until the
    stream ends (or ``most`` have come)."""
    headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
    found: list[Event] = []
    async with client.stream("GET", f"/v1/runs/{workflow_id}/events", headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        fields: dict[str, str] = {}
        async for line in response.aiter_lines():
            if line.startswith(":"):
                continue
            if line:
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")
                continue
            if fields:
                found.append(
                    Event(
                        fields.get("id", ""),
                        fields.get("event", ""),
                        json.loads(fields.get("data", "{}")),
                    )
                )
                fields = {}
                if most is not None and len(found) >= most:
                    break
    return found
