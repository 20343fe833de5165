"""MCP servers as the agent's tools (mcp_servers.py), against a real MCP
server the tests start (testing/mcp_server.py: the ``mcp`` package's
server, over streamable HTTP on loopback and over stdio), the scripted
model calling its tools: each call an activity named after its server,
shown in the steps by server and tool, its credential kept on the worker,
a server that is down failing in bounded time in one line naming it, a
tool that writes waiting for a person, a stateful session kept across the
calls of a prompt and started again on another worker when its own dies,
and the histories replayed."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.worker import Replayer

from sandbox_agent_runtime.approvals import detail_of
from sandbox_agent_runtime.client.steps import Progress
from sandbox_agent_runtime.mcp_servers import SESSION_HEARTBEAT
from sandbox_agent_runtime.run_request import RunAnswer
from sandbox_agent_runtime.shared import DECIDE, PENDING
from sandbox_agent_runtime.starter import start
from sandbox_agent_runtime.testing import approver, project, project_service
from sandbox_agent_runtime.testing.mcp_agents import (
    COUNTER,
    NOTEBOOK,
    NOTEBOOK_TOKEN,
    CounterAgentWorkflow,
    NotebookAgentWorkflow,
    mcp_providers,
)
from sandbox_agent_runtime.testing.mcp_server import (
    READ_NOTES,
    VISITS,
    WHOAMI,
    WRITE_NOTE,
    notebook_mcp_server,
)
from sandbox_agent_runtime.testing.mcp_worker import CALLS, STALL_AFTER, counting
from sandbox_agent_runtime.testing.scripted_model import Call, ScriptedModel
from sandbox_agent_runtime.testing.support import (
    RUN_TIME_LIMIT,
    SETTINGS,
    activities,
    closed_address,
    running_worker,
    sandboxes_for_tests,
)
from sandbox_agent_runtime.worker import agents_plugin, workflow_runner

QUICK_STOP = timedelta(seconds=1)

# The notebook's token: the worker's, and the server's, never the run's.
SECRET = "mcp-token-that-must-stay-on-the-worker-7f3a"


@dataclass
class Notebook:
    url: str
    notes: Path


@pytest.fixture
def notebook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Notebook]:
    """The notebook MCP server over streamable HTTP on loopback, expecting
    SECRET, which the worker's environment holds too."""
    monkeypatch.setenv(NOTEBOOK_TOKEN, SECRET)
    notes = tmp_path / "notes.txt"
    with notebook_mcp_server(notes, token_from=NOTEBOOK_TOKEN) as url:
        yield Notebook(url, notes)


async def steps_of(client: Client, handle: WorkflowHandle[Any, Any]) -> list[str]:
    """The run's steps, as the starter and the API show them."""
    progress, lines = Progress(client), []
    async for event in handle.fetch_history_events():
        line = await progress.describe(event)
        if line is not None:
            lines.append(line)
    return lines


async def history_bytes(handle: WorkflowHandle[Any, Any]) -> bytes:
    return (await handle.fetch_history()).to_json().encode()


async def test_an_mcp_tool_is_an_activity_of_its_server_shown_by_server_and_tool(
    temporal_client: Client, notebook: Notebook
) -> None:
    model = ScriptedModel([Call(READ_NOTES, "{}"), Call(WHOAMI, "{}")])
    async with running_worker(
        temporal_client,
        model,
        workflows=[NotebookAgentWorkflow],
        mcp_servers=mcp_providers(notebook.url, notebook.notes),
    ) as (client, _):
        handle = await start(client, "Who am I to the notebook?")
        answer = await handle.result()
        steps = await steps_of(client, handle)

    # The server's answer, with the worker's token, reached the answer.
    assert "'token accepted'" in str(answer.answer)
    names = [each.name for each in await activities(handle)]
    assert names.count(f"{NOTEBOOK}-stateless-call-tool-v2") == 2
    # The tool list is listed once and kept in the run (replayed from history).
    assert names.count(f"{NOTEBOOK}-stateless-list-tools") == 1
    assert f"mcp      {NOTEBOOK}: listing its tools" in steps
    assert f"mcp      {NOTEBOOK} {READ_NOTES} {{}}" in steps
    assert f"mcp      {NOTEBOOK} {WHOAMI} {{}}" in steps
    # The token is in the worker's environment only.
    assert SECRET.encode() not in await history_bytes(handle)
    assert os.environ[NOTEBOOK_TOKEN] == SECRET

    history = await handle.fetch_history()
    replayer = Replayer(
        workflows=[NotebookAgentWorkflow],
        plugins=[agents_plugin(SETTINGS, sandboxes=sandboxes_for_tests())],
        workflow_runner=workflow_runner(),
    )
    replayed = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert replayed.replay_failure is None


async def test_an_mcp_server_that_is_down_fails_in_bounded_time_in_a_line_naming_it(
    temporal_client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(NOTEBOOK_TOKEN, SECRET)
    down = f"http://{closed_address()}/mcp"
    async with running_worker(
        temporal_client,
        ScriptedModel([Call(READ_NOTES, "{}")]),
        workflows=[NotebookAgentWorkflow],
        mcp_servers=mcp_providers(down, tmp_path / "notes.txt"),
    ) as (client, _):
        began = time.monotonic()
        handle = await start(client, "Read the notebook.")
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        took = time.monotonic() - began

    message = str(getattr(failed.value.cause, "message", failed.value.cause))
    assert "\n" not in message
    assert f"the MCP server {NOTEBOOK!r} (list-tools)" in message
    assert took < 60, f"{took:.0f} s"


async def test_a_stateful_server_keeps_its_session_across_the_calls_of_a_prompt(
    temporal_client: Client, tmp_path: Path
) -> None:
    model = ScriptedModel([Call(VISITS, "{}")] * 3)
    async with running_worker(
        temporal_client,
        model,
        workflows=[CounterAgentWorkflow],
        mcp_servers=mcp_providers("http://unused.invalid/mcp", tmp_path / "notes.txt"),
        graceful_shutdown_timeout=QUICK_STOP,
    ) as (client, _):
        handle = await start(client, "Count your visits.")
        answer = await handle.result()
        steps = await steps_of(client, handle)

    # One server process answered the three calls: its session's state.
    assert "'visit 3 (process " in str(answer.answer)
    assert f"mcp      {COUNTER}: session opened" in steps
    assert steps.count(f"mcp      {COUNTER} {VISITS} {{}}") == 3


@pytest.mark.process
async def test_a_stateful_session_starts_again_on_another_worker_when_its_worker_is_killed(
    temporal_client: Client, tmp_path: Path
) -> None:
    # The first worker, a process, makes two calls of the run's session,
    # then is killed while its model thinks.
    address = temporal_client.service_client.config.target_host
    root = project().root
    first = subprocess.Popen(
        [sys.executable, "-m", "sandbox_agent_runtime.testing.mcp_worker", project().package]
        + [address, str(tmp_path / "notes.txt")],
        cwd=root,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert first.stdout is not None and first.stdout.readline().strip() == "ready"
        handle = await start(temporal_client, "Count your visits.")
        await until_calls_completed(handle, STALL_AFTER)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        if first.stdout is not None:
            first.stdout.close()
    began = time.monotonic()
    async with running_worker(
        temporal_client,
        ScriptedModel(counting()),
        workflows=[CounterAgentWorkflow],
        mcp_servers=mcp_providers("http://unused.invalid/mcp", tmp_path / "notes.txt"),
        # The session's activity hears of its end at its next heartbeat
        # (30 seconds: the plugin's); the test does not wait for it.
        graceful_shutdown_timeout=QUICK_STOP,
        # Until the session's heartbeat is missed, nothing happens in the
        # run's history: that wait is the design, not a stuck run.
        time_limit=SESSION_HEARTBEAT + RUN_TIME_LIMIT,
    ) as (client, _):
        answer = await client.get_workflow_handle(handle.id, result_type=RunAnswer).result()
        took = time.monotonic() - began
        print(f"resumed in {took:.0f} s")

    # The session started again on the second worker: a new server process,
    # whose count starts again (its state of the session is gone); the two
    # calls the first worker made were not made again.
    results = [str(each) for each in await call_results(handle)]
    assert len(results) == CALLS
    first_pid, second_pid = pid_of(results[0]), pid_of(results[-1])
    assert [visit_of(each) for each in results] == [1, 2, 1, 2]
    assert pid_of(results[1]) == first_pid != second_pid
    assert "'visit 2 (process " in str(answer.answer)

    replayer = Replayer(
        workflows=[CounterAgentWorkflow],
        plugins=[agents_plugin(SETTINGS, sandboxes=sandboxes_for_tests())],
        workflow_runner=workflow_runner(),
    )
    replayed = await replayer.replay_workflow(
        await handle.fetch_history(), raise_on_replay_failure=False
    )
    assert replayed.replay_failure is None


async def until_calls_completed(handle: WorkflowHandle[Any, Any], calls: int) -> None:
    deadline = time.monotonic() + 60
    while len(await call_results(handle)) < calls:
        assert time.monotonic() < deadline, "the first worker made no calls"
        await asyncio.sleep(0.2)


async def call_results(handle: WorkflowHandle[Any, Any]) -> list[Any]:
    """What each MCP call of the run returned, in order."""
    history = await handle.fetch_history()
    calls = {
        event.event_id
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and event.activity_task_scheduled_event_attributes.activity_type.name.endswith(
            "-call-tool-v2"
        )
    }
    results = []
    for event in history.events:
        completed = event.activity_task_completed_event_attributes
        if (
            event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
            and completed.scheduled_event_id in calls
        ):
            results.append(completed.result.payloads[0].data.decode())
    return results


def visit_of(result: str) -> int:
    return int(result.split("visit ", 1)[1].split(" ", 1)[0])


def pid_of(result: str) -> str:
    return result.split("(process ", 1)[1].split(")", 1)[0]


if project_service().approvals:

    async def test_an_mcp_tool_that_writes_waits_for_a_person_shown_whole(
        temporal_client: Client, notebook: Notebook
    ) -> None:
        note = "remember the milk\nrm -rf / is not a note"
        model = ScriptedModel([Call(WRITE_NOTE, json.dumps({"text": note}))])
        async with running_worker(
            temporal_client,
            model,
            workflows=[NotebookAgentWorkflow],
            mcp_servers=mcp_providers(notebook.url, notebook.notes),
            approve=False,
        ) as (client, _):
            handle = await start(client, "Write a note.")
            async with asyncio.timeout(30):
                while not (pending := await handle.query(PENDING, result_type=list)):
                    await asyncio.sleep(0.1)
            [request] = pending
            # Nothing was written before the decision.
            assert not notebook.notes.exists()
            run_id = (await handle.describe()).run_id
            await handle.execute_update(DECIDE, approver.signed(handle.id, run_id, request, True))
            await handle.result()

        assert request["tool"] == WRITE_NOTE
        assert request["detail"] == detail_of(WRITE_NOTE, json.dumps({"text": note}), NOTEBOOK)
        assert request["detail"].startswith(f"MCP server {NOTEBOOK!r}, tool {WRITE_NOTE!r}\n")
        assert "rm -rf / is not a note" in request["detail"]
        assert notebook.notes.read_text() == note + "\n"

else:

    async def test_an_mcp_tool_under_approval_in_a_service_without_approvals_ends_the_run(
        temporal_client: Client, notebook: Notebook
    ) -> None:
        model = ScriptedModel([Call(WRITE_NOTE, '{"text": "a note"}')])
        async with running_worker(
            temporal_client,
            model,
            workflows=[NotebookAgentWorkflow],
            mcp_servers=mcp_providers(notebook.url, notebook.notes),
        ) as (client, _):
            handle = await start(client, "Write a note.")
            with pytest.raises(WorkflowFailureError) as failed:
                await handle.result()

        message = str(getattr(failed.value.cause, "message", failed.value.cause))
        assert f"{WRITE_NOTE!r} of the MCP server {NOTEBOOK!r} waits for a person" in message
        assert not notebook.notes.exists()


def test_a_request_for_an_mcp_tool_names_its_server_and_shows_every_argument() -> None:
    shown = detail_of(WRITE_NOTE, '{"text": "a\\u001b[2Jb", "more": [1, 2]}', NOTEBOOK)

    assert shown.splitlines()[0] == f"MCP server {NOTEBOOK!r}, tool {WRITE_NOTE!r}"
    assert '"more": [' in shown and "\x1b" not in shown


def test_the_servers_of_every_agent_a_prompt_may_hand_off_to_are_connected_once() -> None:
    from agents import Agent

    from sandbox_agent_runtime.mcp_servers import mcp_server, servers_of

    notes, tickets = mcp_server("notes"), mcp_server("tickets", stateful=True)
    reviewer: Agent[None] = Agent(name="Reviewer", mcp_servers=[tickets, notes])
    agent: Agent[None] = Agent(name="Agent", mcp_servers=[notes], handoffs=[reviewer])
    reviewer.handoffs = [agent]  # back and forth: each agent's servers once

    assert servers_of(agent) == [notes, tickets]
