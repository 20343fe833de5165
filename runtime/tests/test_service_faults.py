"""The commands report a Temporal service that stops answering, or has no
such namespace, in one line and with the status they document.

The starter follows a run through a restart of the service (a dev server
that keeps its runs in a file, started again on its address); a service that
stays gone ends it within SERVICE_OUTAGE_LIMIT and the SDK's own retries, with
status 2 and how to follow the run again. A namespace the service does not
have is named, with the address, by every command before it does anything.
"""

import asyncio
import re
import time
from pathlib import Path

import pytest
from temporalio.client import Client

from sandbox_agent_runtime.starter import (
    EXIT_COMPLETED,
    EXIT_UNREACHABLE,
    SERVICE_OUTAGE_LIMIT,
)
from sandbox_agent_runtime.testing import project_service
from sandbox_agent_runtime.testing.processes import (
    STARTER,
    STARTER_MODULE,
    WORKER,
    WORKER_MODULE,
    service,
    service_environment,
)
from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server
from sandbox_agent_runtime.testing.support import CREDENTIALS, restartable_dev_server

pytestmark = pytest.mark.process

# The SDK's client retries a call for up to 10 s before the starter counts.
SDK_RETRIES = 10
# How long the starter may take to give up on a service that is gone.
GIVES_UP_WITHIN = SDK_RETRIES + SERVICE_OUTAGE_LIMIT.total_seconds() + 10
COMMANDS = ["echo one", "echo two"]


def progress_then(output: list[str], last: str) -> None:
    """The starter printed its usual lines (progress, id, link), then ``last``
    and nothing else: no traceback, no SDK warning."""
    usual = ("Started workflow ", "Web UI: ", "  ")
    assert re.fullmatch(last, output[-1]), output
    assert [line for line in output[:-1] if not line.startswith(usual)] == [], output


@pytest.mark.default_stand_in
async def test_the_starter_follows_a_run_through_a_restart_of_the_service(
    tmp_path: Path,
) -> None:
    async with restartable_dev_server(tmp_path / "temporal.db") as server:
        with scripted_openai_server(COMMANDS) as model:
            model.hold_at_step = 1
            environment = service_environment(server.address, model.url)
            async with (
                service(WORKER, environment) as worker,
                service(STARTER + ["Say it."], environment) as starter,
            ):
                await worker.wait_for("Worker polling")
                await starter.wait_for("model    turn 2")
                # Down for longer than the SDK's client retries by itself.
                await server.stop()
                await asyncio.sleep(SDK_RETRIES + 2)
                await server.start()
                model.release.set()
                await starter.wait_for("sandbox  $ echo two")
                assert await starter.exit_status(timeout=60) == EXIT_COMPLETED
    # Its answer, and not a word about the restart.
    assert "two" in starter.output
    assert re.fullmatch(r"Usage: .+", starter.output[-1])
    # (The usage line counts the run's Temporal actions: it is no word about it.)
    said = starter.output[:-1]
    assert not [line for line in said if "Temporal" in line or "WARN" in line]


@pytest.mark.default_stand_in
async def test_the_starter_exits_2_in_one_line_when_the_service_stops_answering(
    tmp_path: Path,
) -> None:
    async with restartable_dev_server(tmp_path / "temporal.db") as server:
        with scripted_openai_server(COMMANDS) as model:
            model.hold_at_step = 1
            environment = service_environment(server.address, model.url)
            async with (
                service(WORKER, environment) as worker,
                service(STARTER + ["Say it."], environment) as starter,
            ):
                await worker.wait_for("Worker polling")
                await starter.wait_for("model    turn 2")
                await server.stop()
                stopped = time.monotonic()
                status = await starter.exit_status(timeout=GIVES_UP_WITHIN)
                waited = time.monotonic() - stopped
    assert status == EXIT_UNREACHABLE
    [workflow_id] = [line.split()[-1] for line in starter.output if line.startswith("Started")]
    progress_then(
        starter.output,
        re.escape(
            f"Temporal at {server.address} stopped answering while following workflow "
            f"{workflow_id}; the run itself may go on. Follow it again with --attach {workflow_id}."
        ),
    )
    # It asked for SERVICE_OUTAGE_LIMIT after the SDK's own retries: a
    # restart as short as the one above does not end it.
    assert waited >= SERVICE_OUTAGE_LIMIT.total_seconds()


NO_SUCH_NAMESPACE = "nowhere"
# Each command, with what it exits with when the namespace does not exist.
COMMANDS_AND_STATUSES = [
    (STARTER + ["Say it."], EXIT_UNREACHABLE),
    (STARTER_MODULE + ["--no-wait", "Say it."], EXIT_UNREACHABLE),
    (STARTER + ["--attach", "some-run"], EXIT_UNREACHABLE),
    *(
        [
            (STARTER + ["--pending", "some-run"], EXIT_UNREACHABLE),
            (STARTER_MODULE + ["--approve", "some-run", "call_1"], EXIT_UNREACHABLE),
            (STARTER + ["--reject", "some-run", "call_1"], EXIT_UNREACHABLE),
        ]
        if project_service().approvals
        else []
    ),
    (WORKER, 1),
    (WORKER_MODULE, 1),
]


async def test_every_command_names_a_namespace_the_service_does_not_have_in_one_line(
    temporal_client: Client,
) -> None:
    address = temporal_client.service_client.config.target_host
    environment = {
        **service_environment(address, "http://127.0.0.1:1"),
        **CREDENTIALS,
        "TEMPORAL_NAMESPACE": NO_SUCH_NAMESPACE,
    }
    line = re.escape(f"Temporal at {address} has no namespace {NO_SUCH_NAMESPACE!r}: ") + ".+"
    seen = []
    for command, _ in COMMANDS_AND_STATUSES:
        async with service(command, environment) as process:
            seen.append((command[1:], await process.exit_status(timeout=60), process.output))
    expected = [(command[1:], status) for command, status in COMMANDS_AND_STATUSES]
    assert [(command, exited) for command, exited, _ in seen] == expected, seen
    for _, _, output in seen:
        assert len(output) == 1 and re.fullmatch(line, output[0]), seen
