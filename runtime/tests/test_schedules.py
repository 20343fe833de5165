"""Scheduled runs, as a caller and an operator meet them: a real dev server,
the service's real worker and a scripted model, the API command as a
process driven by a real HTTP client, and the starter as a process.

A schedule made through the API starts ordinary runs on its own (the same
workflow type, its owner's through the API, marked in the Web UI as the
schedule's); paused it starts none, unpaused it starts again; deleted it is
gone. Another caller, and another service in the namespace, find no such
schedule on every route. The starter's --every, --cron, --schedules and
--unschedule do the same; a bad cron, interval or run field is refused in
one line and nothing is made. docs/schedules.md."""

import asyncio
import json
import re
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx2 as httpx
import pytest
from temporalio.client import Client
from temporalio.service import RPCError

from sandbox_agent_runtime.shared import CALLER_MEMO, SERVICE_MEMO, WORKFLOW_TYPE
from sandbox_agent_runtime.starter.statuses import EXIT_COMPLETED, EXIT_USAGE
from sandbox_agent_runtime.testing import project, project_service
from sandbox_agent_runtime.testing.api_client import ApiProcess, api_process
from sandbox_agent_runtime.testing.processes import STARTER, WORKER, service, service_environment
from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server
from sandbox_agent_runtime.testing.support import no_schedules

pytestmark = pytest.mark.process

# The shortest interval these tests' processes take, and the interval their
# schedules run at: short, so a schedule's own runs come within seconds.
MIN_INTERVAL = 2
INTERVAL = 3
# The schedules one caller may hold here.
MOST = 3
# Another service in the same namespace (testing/other_service.py).
OTHER_QUEUE = "another-service"


class Stack:
    def __init__(self, environment: dict[str, str], api: ApiProcess) -> None:
        self.environment = environment
        self.api = api


@pytest.fixture(scope="module")
async def stack(temporal_client: Client) -> AsyncIterator[Stack]:
    address = temporal_client.service_client.config.target_host
    with scripted_openai_server(["echo scheduled"]) as model:
        environment = {
            **service_environment(address, model.url),
            "SCHEDULE_MIN_INTERVAL": str(MIN_INTERVAL),
            "SCHEDULES_PER_CALLER": str(MOST),
        }
        async with service(WORKER, environment) as worker, api_process(environment) as api:
            await worker.wait_for("Worker polling")
            yield Stack(environment, api)


@pytest.fixture(autouse=True)
async def no_schedule_outlives_its_test(temporal_client: Client) -> AsyncIterator[None]:
    """Every schedule a test made is deleted as it ends (it would go on
    starting runs for the next)."""
    yield
    await no_schedules(temporal_client)


async def until(check: Callable[[], Awaitable[Any]], what: str, timeout: float = 60) -> Any:
    """``check()``'s first true answer, asked every half second."""
    deadline = time.monotonic() + timeout
    while True:
        found = await check()
        if found:
            return found
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        await asyncio.sleep(0.5)


def one_line(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    detail = str(response.json()["detail"])
    assert "\n" not in detail and "Traceback" not in detail, detail
    return detail


async def make(client: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    made = await client.post("/v1/schedules", json={"prompt": "Say hi.", **fields})
    assert made.status_code == 201, made.text
    body: dict[str, Any] = made.json()
    assert made.headers["location"] == f"/v1/schedules/{body['id']}"
    return body


async def test_a_schedule_starts_runs_on_its_own_until_paused_and_again_unpaused_then_is_deleted(
    stack: Stack, temporal_client: Client
) -> None:
    async with stack.api.client("alice") as alice, stack.api.client("bob") as bob:
        made = await make(alice, interval_seconds=INTERVAL, overlap="buffer_one")
        schedule_id = made["id"]
        assert (made["interval_seconds"], made["cron"], made["overlap"]) == (
            INTERVAL,
            None,
            "buffer_one",
        )
        assert made["paused"] is False and made["next_runs"]

        async def state() -> dict[str, Any]:
            got = await alice.get(f"/v1/schedules/{schedule_id}")
            assert got.status_code == 200, got.text
            body: dict[str, Any] = got.json()
            return body

        # Nothing triggers it: the schedule starts its first run itself.
        first = await until(lambda: _runs(state), "the schedule's first run", timeout=INTERVAL * 10)
        run_id = first[0]["id"]
        assert run_id.startswith(schedule_id)
        # An ordinary run: the service's workflow type, on its task queue,
        # its owner's and the service's (memo), the schedule's in the Web UI.
        description = await temporal_client.get_workflow_handle(run_id).describe()
        assert description.workflow_type == WORKFLOW_TYPE
        assert description.task_queue == project_service().task_queue
        memo = await description.memo()
        assert (
            memo[CALLER_MEMO] == "token:alice"
            and memo[SERVICE_MEMO] == project_service().task_queue
        )
        scheduled_by = description.search_attributes.get("TemporalScheduledById")
        assert scheduled_by == [schedule_id], description.search_attributes
        # Its owner reads it through the API; another caller finds no run.
        ended = await until(lambda: _ended(alice, run_id), "the scheduled run's answer", timeout=90)
        assert ended["answer"]["text"], ended
        assert (await bob.get(f"/v1/runs/{run_id}")).status_code == 404

        # Listed for its owner (the server's list catches up within moments).
        async def listed() -> bool:
            got = (await alice.get("/v1/schedules")).json()["schedules"]
            return schedule_id in [each["id"] for each in got]

        await until(listed, "the schedule in its owner's list")
        assert (await bob.get("/v1/schedules")).json() == {"schedules": []}

        # Paused: it starts nothing, however long it waits.
        paused = await alice.post(f"/v1/schedules/{schedule_id}/pause")
        assert paused.status_code == 200 and paused.json()["paused"] is True, paused.text
        started = paused.json()["runs_started"]
        await asyncio.sleep(INTERVAL * 3)
        assert (await state())["runs_started"] == started
        # Unpaused: it starts runs again, on its own.
        unpaused = await alice.post(f"/v1/schedules/{schedule_id}/unpause")
        assert unpaused.status_code == 200 and unpaused.json()["paused"] is False
        await until(lambda: _more(state, started), "a run after unpause", timeout=INTERVAL * 10)

        # Deleted: gone from every route; the runs it started stay its owner's.
        deleted = await alice.delete(f"/v1/schedules/{schedule_id}")
        assert deleted.status_code == 200 and deleted.json()["id"] == schedule_id, deleted.text
        assert "no such schedule" in one_line(await alice.get(f"/v1/schedules/{schedule_id}"), 404)
        assert (await alice.get(f"/v1/runs/{run_id}")).status_code == 200


async def _runs(state: Callable[[], Awaitable[dict[str, Any]]]) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = (await state())["runs"]
    return runs


async def _more(state: Callable[[], Awaitable[dict[str, Any]]], than: int) -> bool:
    return bool((await state())["runs_started"] > than)


async def _ended(client: httpx.AsyncClient, run_id: str) -> dict[str, Any] | None:
    body: dict[str, Any] = (await client.get(f"/v1/runs/{run_id}")).json()
    return body if body.get("state") == "ended" else None


async def test_another_caller_and_another_service_find_no_such_schedule(
    stack: Stack, temporal_client: Client
) -> None:
    async with stack.api.client("alice") as alice, stack.api.client("bob") as bob:
        schedule_id = (await make(alice, cron="0 6 * * *"))["id"]
        base = f"/v1/schedules/{schedule_id}"
        # Every route, for another caller as for an id that names nothing.
        for method, path in [
            ("GET", base),
            ("POST", f"{base}/pause"),
            ("POST", f"{base}/unpause"),
            ("DELETE", base),
            ("GET", "/v1/schedules/sandbox-agent-schedule-nothing"),
        ]:
            detail = one_line(await bob.request(method, path), 404)
            assert "no such schedule of yours" in detail, (method, path)
        # A method no route of the path takes: Allow names every one that does.
        wrong = await bob.put("/v1/schedules")
        assert wrong.status_code == 405 and wrong.headers["allow"] == "POST, GET", wrong.headers
        # Untouched by any of it.
        kept = (await alice.get(base)).json()
        assert kept["paused"] is False and kept["cron"] == "0 6 * * *"

    # Another service in the namespace: its starter neither lists nor deletes it.
    other = [
        sys.executable,
        "-m",
        "sandbox_agent_runtime.testing.other_service",
        project().package,
        OTHER_QUEUE,
        "starter",
    ]
    await until(lambda: _listed(temporal_client, schedule_id), "the schedule in the server's list")
    async with service([*other, "--schedules"], stack.environment) as listing:
        assert await listing.exit_status() == EXIT_COMPLETED, listing.output
    assert schedule_id not in "\n".join(listing.output)
    async with service([*other, "--unschedule", schedule_id], stack.environment) as deleting:
        assert await deleting.exit_status() == EXIT_USAGE, deleting.output
    assert f"--unschedule {schedule_id!r}: no such schedule" in "\n".join(deleting.output)
    await temporal_client.get_schedule_handle(schedule_id).describe()


async def _listed(client: Client, schedule_id: str) -> bool:
    return schedule_id in [each.id async for each in await client.list_schedules()]


# Bodies a schedule is refused for, and a word of the one line that says why.
BAD_BODIES: dict[str, tuple[dict[str, Any], int, str]] = {
    "neither cron nor interval": ({}, 422, "give one of field 'cron' and field 'interval_seconds'"),
    "both": ({"cron": "@daily", "interval_seconds": 60}, 422, "give one of"),
    "a cron of three fields": ({"cron": "0 6 *"}, 422, "'0 6 *' is not a cron"),
    "a cron with seconds": ({"cron": "0 0 6 * * *"}, 422, "five fields"),
    "a cron's stray character": ({"cron": "0 6 * * $"}, 422, "a character a cron does not use"),
    "a cron's values out of range": ({"cron": "99 6 * * *"}, 422, "the Temporal service refused"),
    "an interval as JSON text": ({"interval_seconds": "60"}, 422, "'60' is not allowed"),
    "an interval under the least": (
        {"interval_seconds": MIN_INTERVAL - 1},
        422,
        f"from {MIN_INTERVAL} (SCHEDULE_MIN_INTERVAL)",
    ),
    "an interval of text": ({"interval_seconds": "often"}, 422, "'often' is not allowed"),
    "an interval of a fraction": ({"interval_seconds": 2.5}, 422, "whole number of seconds"),
    "an unknown overlap": (
        {"interval_seconds": 60, "overlap": "sometimes"},
        422,
        "skip, buffer_one, buffer_all, cancel_other, terminate_other, allow_all",
    ),
    "a null overlap": ({"interval_seconds": 60, "overlap": None}, 422, "'None' is not an overlap"),
    # What a run is refused for, a schedule is too.
    "a blank prompt": ({"prompt": " ", "interval_seconds": 60}, 422, "field 'prompt'"),
    "a callback not allowed": (
        {"callback_url": "http://127.0.0.1:9/", "interval_seconds": 60},
        422,
        "field 'callback_url'",
    ),
    "a provider not the service's": (
        {"provider": "nowhere", "interval_seconds": 60},
        422,
        "provider 'nowhere'",
    ),
    "a budget over the service's": (
        {"token_budget": 0, "interval_seconds": 60},
        422,
        "field 'token_budget'",
    ),
    "a conversation": ({"follow_ups": True, "interval_seconds": 60}, 422, "field 'follow_ups'"),
}


@pytest.mark.parametrize("case", list(BAD_BODIES))
async def test_a_bad_schedule_is_refused_in_one_line_and_nothing_is_made(
    stack: Stack, temporal_client: Client, case: str
) -> None:
    fields, status, said = BAD_BODIES[case]
    async with stack.api.client("alice") as alice:
        detail = one_line(
            await alice.post("/v1/schedules", json={"prompt": "Say hi.", **fields}), status
        )
    assert said in detail, detail
    assert [each.id async for each in await temporal_client.list_schedules()] == []


async def test_a_caller_holds_at_most_its_share_of_schedules(
    stack: Stack, temporal_client: Client
) -> None:
    async with stack.api.client("dana") as dana, stack.api.client("alice") as alice:
        for _ in range(MOST):
            await make(dana, cron="@daily")

        async def all_listed() -> bool:
            return len((await dana.get("/v1/schedules")).json()["schedules"]) == MOST

        await until(all_listed, "dana's schedules listed")
        detail = one_line(
            await dana.post("/v1/schedules", json={"prompt": "x", "cron": "@daily"}), 429
        )
        assert f"you hold {MOST} schedules" in detail
        # Another caller's share is its own.
        await make(alice, cron="@daily")


def made_id(output: list[str]) -> str:
    found = re.search(r"Made schedule (\S+)", "\n".join(output))
    assert found, output
    return found.group(1)


async def test_the_starter_makes_lists_and_deletes_schedules(
    stack: Stack, temporal_client: Client
) -> None:
    environment = stack.environment
    async with service([*STARTER, "--every", str(INTERVAL), "Say hi."], environment) as making:
        assert await making.exit_status() == EXIT_COMPLETED, making.output
    schedule_id = made_id(making.output)
    assert any(f"/schedules/{schedule_id}" in line for line in making.output), making.output
    handle = temporal_client.get_schedule_handle(schedule_id)

    async def started_one() -> bool:
        return bool((await handle.describe()).info.num_actions)

    # It starts a run on its own: a job, the service's workflow, no caller's.
    await until(started_one, "the starter's schedule's first run", timeout=INTERVAL * 10)
    run_id = (await handle.describe()).info.recent_actions[0].action.workflow_id  # type: ignore[attr-defined]
    request = json.loads(
        (await temporal_client.get_workflow_handle(run_id).fetch_history())
        .events[0]
        .workflow_execution_started_event_attributes.input.payloads[0]
        .data
    )
    assert request["prompt"] == "Say hi." and request["follow_ups"] is False

    async with service(
        [*STARTER, "--cron", "30 5 * * 1", "--overlap", "allow_all", "Weekly."], environment
    ) as making_cron:
        assert await making_cron.exit_status() == EXIT_COMPLETED, making_cron.output
    cron_id = made_id(making_cron.output)

    async def both_listed() -> list[str] | None:
        async with service([*STARTER, "--schedules"], environment) as listing:
            assert await listing.exit_status() == EXIT_COMPLETED, listing.output
        lines = listing.output
        text = "\n".join(lines)
        return lines if schedule_id in text and cron_id in text else None

    lines = "\n".join(await until(both_listed, "both schedules listed"))
    assert f"{cron_id}  cron 30 5 * * 1  overlap allow_all  active" in lines
    assert f"{schedule_id}  every {INTERVAL} s  overlap skip" in lines

    async with service([*STARTER, "--unschedule", schedule_id], environment) as deleting:
        assert await deleting.exit_status() == EXIT_COMPLETED, deleting.output
    assert f"Deleted schedule {schedule_id}" in "\n".join(deleting.output)
    assert not await _exists(temporal_client, schedule_id)


async def _exists(client: Client, schedule_id: str) -> bool:
    try:
        await client.get_schedule_handle(schedule_id).describe()
    except RPCError:
        return False
    return True


# The starter's bad schedules: its arguments, and a word of its one line.
BAD_STARTS = {
    "a bad cron": (["--cron", "every day", "x"], "--cron 'every day' is not a cron"),
    "a short interval": (["--every", "1", "x"], f"from {MIN_INTERVAL} (SCHEDULE_MIN_INTERVAL)"),
    "an interval of text": (["--every", "soon", "x"], "--every 'soon' is not allowed"),
    "both": (["--every", "60", "--cron", "@daily", "x"], "not both"),
    "an overlap alone": (["--overlap", "skip", "x"], "--overlap goes with --every or --cron"),
    "a bad overlap": (["--every", "60", "--overlap", "later", "x"], "invalid choice: 'later'"),
    "with --no-wait": (["--every", "60", "--no-wait", "x"], "--every and --cron make"),
}


@pytest.mark.parametrize("case", list(BAD_STARTS))
async def test_the_starter_refuses_a_bad_schedule_in_one_line(
    stack: Stack, temporal_client: Client, case: str
) -> None:
    arguments, said = BAD_STARTS[case]
    async with service([*STARTER, *arguments], stack.environment) as starter:
        assert await starter.exit_status() == EXIT_USAGE, starter.output
    errors = [line for line in starter.output if "error" in line.lower()]
    assert len(errors) == 1 and said in errors[0], starter.output
    assert not any("Traceback" in line for line in starter.output)
    assert [each.id async for each in await temporal_client.list_schedules()] == []
