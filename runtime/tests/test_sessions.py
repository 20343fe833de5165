"""Conversations: a run that answers, then takes follow-ups in the same
workspace, releases its sandbox while nobody talks, and ends.

With a real dev server, the service's real worker, the real local sandbox
(its workspace a fresh directory in a temp dir the tests watch) and a
scripted model that runs each prompt's own commands (conversing.py), these
tests prove that:

- a follow-up's commands see the files the earlier prompts made, its model
  input holds the earlier prompts and their answers, its outputs are only
  what it made or changed itself, and the usage in the run's memo adds up
  across prompts;
- a conversation left idle for the worker's SESSION_IDLE_TIMEOUT snapshots
  its workspace and removes its sandbox (no workspace directory is left
  while it waits, the memo and the metrics say "released"), and the next
  follow-up restores the files into a fresh sandbox, an activity in history;
- END completes the run with its last answer and removes the sandbox; a
  follow-up to a closed run is refused by the server; SESSION_LIFETIME
  without a follow-up ends the conversation by itself;
- a follow-up (or END) while a prompt is being worked on is refused
  (StillWorking), even one that reaches the run before its first step, as
  is any to a run started without follow-ups (NoFollowUps), and neither is
  ever written to history;
- a snapshot replaced in the store by an archive of other files is refused
  (its digest is not the one the run recorded): the follow-up fails at once,
  in one line naming it, and the fresh sandbox never held any of its files;
- a chain that continues as new between two prompts keeps the conversation
  and the snapshot, whether the sandbox is released after the continue or
  not (a chain cannot continue while released: it continues right after an
  answer), and the next run takes a follow-up at once.

The replay of a recorded conversation is in a project's test_histories.py;
Docker's own (its container gone while released) in the template's
test_docker.py.

It runs against both stand-ins (conftest.py): the default one (the local
backend, its snapshots on the host's disk) and the remote one (a Daytona
sandbox, its snapshots in an object store).

Where the service's provider is a remote backend (its sandbox a local stand
in here), snapshots need an object store: the tests give the worker a
``file://`` one.
"""

import asyncio
import io
import tarfile
import tempfile
import uuid
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from sandbox_agent_runtime.backends import sandbox_backends
from sandbox_agent_runtime.object_store import parse
from sandbox_agent_runtime.observability import SESSIONS, TOKENS_ONLY
from sandbox_agent_runtime.run_request import (
    ENDED,
    RELEASED,
    WAITING,
    Conversation,
    RunRequest,
)
from sandbox_agent_runtime.settings import WorkerSettings
from sandbox_agent_runtime.shared import (
    CONVERSATION,
    END,
    FOLLOW_UP,
    RESTORE,
    SESSION_MEMO,
    SNAPSHOT,
    USAGE_MEMO,
)
from sandbox_agent_runtime.starter import start
from sandbox_agent_runtime.testing import project_service
from sandbox_agent_runtime.testing.conversing import (
    Conversing,
    answered,
    conversation,
    follow_up,
    printed,
    session_memos,
    until,
)
from sandbox_agent_runtime.testing.failing_sandbox import watched
from sandbox_agent_runtime.testing.long_workflow import ContinuesBetweenPromptsWorkflow
from sandbox_agent_runtime.testing.scripted_model import user_messages
from sandbox_agent_runtime.testing.support import (
    SETTINGS,
    activities,
    metered_client,
    running_worker,
    sandboxes_for_tests,
)

# Long enough that no sandbox is released unless a test means it to be.
NEVER = timedelta(minutes=10)


@pytest.fixture
def temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The worker's temp dir, an empty one to watch: the local sandbox makes
    each workspace there (``sandbox-local-*``), and a host keeps its
    snapshots there when it has no object store."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    return temp


def session_settings(
    temp: Path, idle: timedelta = NEVER, lifetime: timedelta = timedelta(days=7)
) -> WorkerSettings:
    """The tests' worker settings with these SESSION_IDLE_TIMEOUT and
    SESSION_LIFETIME; an object store (a directory beside ``temp``) when the
    provider's sandboxes are not bound to the worker's host, which keeps no
    snapshot of theirs on its disk."""
    settings = replace(SETTINGS, session_idle_timeout=idle, session_lifetime=lifetime)
    if sandbox_backends()[project_service().sandbox_provider].host_bound(settings):
        return settings
    return replace(settings, object_store=parse(f"file://{temp.parent}/store"))


def workspaces(temp: Path) -> list[Path]:
    """The local sandbox's workspaces in the worker's temp dir."""
    return sorted(temp.glob("sandbox-local-*"))


def snapshots(temp: Path) -> list[Path]:
    """The snapshots on the worker's disk (in its temp dir without an object
    store, else in the store's directory beside it)."""
    return sorted(temp.parent.rglob("*.tar.gz"))


async def conversation_updates(handle: WorkflowHandle[Any, Any]) -> list[str]:
    """The FOLLOW_UP and END updates the run took, in order, as its history
    records them (a refused update is never written there)."""
    names = []
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            accepted = event.workflow_execution_update_accepted_event_attributes
            names.append(accepted.accepted_request.input.name)
    return [name for name in names if name in (FOLLOW_UP, END)]


async def running_command(handle: WorkflowHandle[Any, Any]) -> None:
    """Return once the run has started a command in its sandbox."""
    exec_start = f"{project_service().sandbox_provider}-sandbox_session_pty_exec_start"
    while not any(step.name == exec_start for step in await activities(handle)):
        await asyncio.sleep(0.05)


def refused(error: pytest.ExceptionInfo[WorkflowUpdateFailedError]) -> str:
    """The type of the ApplicationError a run's update validator refused with."""
    cause = error.value.cause
    assert isinstance(cause, ApplicationError), cause
    return cause.type or ""


async def test_a_follow_up_works_in_the_same_workspace_and_conversation_and_the_usage_adds_up(
    temporal_client: Client, temp: Path
) -> None:
    model = Conversing(
        [
            ["echo first > one.txt && echo kept > two.txt && echo made"],
            ["cat one.txt && echo more >> two.txt && echo new > three.txt"],
        ]
    )
    async with running_worker(temporal_client, model, settings=session_settings(temp)) as (
        client,
        _,
    ):
        handle = await conversation(client, "Make two files.")
        first = await answered(handle, 1)
        calls_of_first = len(model.reported)
        memo_of_first = (await (await handle.describe()).memo())[USAGE_MEMO]

        assert await follow_up(handle, "Show the first file, then change the files.") == 2
        second = await answered(handle, 2)
        memo = (await (await handle.describe()).memo())[USAGE_MEMO]
        assert await handle.execute_update(END, result_type=str) == ENDED
        result = await handle.result()

    # Each prompt's answer, from the query.
    assert first.state == WAITING and first.prompts == 1
    assert first.answer is not None and printed(first.answer) == ["made"]
    assert second.state == WAITING and second.prompts == second.answered == 2
    assert second.answer is not None
    # The follow-up's command read the file the first prompt wrote.
    assert printed(second.answer) == ["first"]
    # Each prompt's outputs are what it made or changed: the follow-up's
    # baseline is the workspace as the first prompt left it.
    assert [file.path for file in first.answer.outputs.files] == ["one.txt", "two.txt"]
    assert [file.path for file in second.answer.outputs.files] == ["three.txt", "two.txt"]
    # The run's result is its last answer.
    assert result == second.answer

    # The model's input for the follow-up held the first prompt, its
    # command, what the command printed and its answer, then the follow-up.
    [follow_up_input, *_] = [each for each in model.inputs if len(user_messages(each)) == 2]
    assert user_messages(follow_up_input) == [
        "Make two files.",
        "Show the first file, then change the files.",
    ]
    kinds = [item.get("type", item.get("role")) for item in follow_up_input]
    assert kinds == ["user", "function_call", "function_call_output", "message", "user"]
    assert "echo first > one.txt" in follow_up_input[1]["arguments"]
    assert follow_up_input[2]["output"].endswith("Output:\nmade\n")
    assert follow_up_input[3]["content"][0]["text"] == "prompt 1: made\n"

    # The usage in the memo adds up over both prompts' model calls.
    assert calls_of_first == 2 and len(model.reported) == 4
    assert {key: memo_of_first[key] for key in TOKENS_ONLY} == {
        "model_calls": 2,
        "input_tokens": sum(usage.input_tokens for usage in model.reported[:2]),
        "output_tokens": sum(usage.output_tokens for usage in model.reported[:2]),
        "cached_input_tokens": 0,
        "cost_usd": None,
    }
    assert {key: memo[key] for key in TOKENS_ONLY} == {
        "model_calls": 4,
        "input_tokens": sum(usage.input_tokens for usage in model.reported),
        "output_tokens": sum(usage.output_tokens for usage in model.reported),
        "cached_input_tokens": 0,
        "cost_usd": None,
    }
    # The sandbox held since the first prompt, its time and the actions
    # going on with the second.
    assert 0 < memo_of_first["sandbox_seconds"] < memo["sandbox_seconds"]
    assert 0 < memo_of_first["actions"] < memo["actions"]


async def test_an_idle_conversation_releases_its_sandbox_and_a_follow_up_restores_the_files(
    temporal_client: Client, temp: Path
) -> None:
    model = Conversing([["echo first > one.txt && pwd"], ["cat one.txt && pwd"]])
    settings = session_settings(temp, idle=timedelta(seconds=1))
    async with (
        metered_client(temporal_client) as (metered, metrics),
        running_worker(metered, model, settings=settings) as (client, _),
    ):
        handle = await conversation(client, "Write a file, and say where you are.")
        first = await answered(handle, 1)
        assert first.answer is not None
        [first_workspace] = [Path(line) for line in printed(first.answer)]
        released = await until(handle, lambda state: state.state == RELEASED)
        # Released: no workspace on the worker's disk; the memo says so.
        leftover = workspaces(temp)
        kept = snapshots(temp)
        memo_while_released = (await (await handle.describe()).memo())[SESSION_MEMO]

        assert await follow_up(handle, "Show the file, and say where you are.") == 2
        second = await answered(handle, 2)
        await handle.execute_update(END)
        await handle.result()
        forgotten = snapshots(temp)
        counted = {
            state: await metrics.total(SESSIONS, state=state)
            for state in ("waiting", "released", "restored", "ended")
        }

    assert released.answered == 1 and released.answer == first.answer
    assert leftover == [] and not first_workspace.exists()
    # The workspace is in one snapshot while released; none is kept once ended.
    assert len(kept) == 1 and forgotten == []
    assert memo_while_released["state"] == RELEASED and memo_while_released["answered"] == 1
    # The follow-up ran in a fresh workspace, holding the first prompt's file.
    assert second.answer is not None
    content, second_workspace = printed(second.answer)
    assert content == "first"
    assert second_workspace != str(first_workspace)
    # History: a snapshot at the answer, the sandbox removed, a fresh one
    # created and restored from the snapshot before the follow-up's command.
    steps = [
        step.name.removeprefix(f"{project_service().sandbox_provider}-")
        for step in await activities(handle)
    ]
    restore = steps.index(RESTORE)
    assert steps[:restore].count(SNAPSHOT) >= 1
    assert steps[:restore].count("sandbox_client_delete") == 1
    assert steps[:restore].count("sandbox_client_create") == 2
    assert "sandbox_session_pty_exec_start" in steps[restore:]
    summaries = [
        event.user_metadata.summary.data
        async for event in handle.fetch_history_events()
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and event.activity_task_scheduled_event_attributes.activity_type.name.endswith(RESTORE)
    ]
    assert len(summaries) == 1 and b"restore from the snapshot of " in summaries[0]
    # The memo went working, waiting, released, working again (saying it restored), waiting, ended.
    states = [memo["state"] for memo in await session_memos(handle)]
    assert states == ["working", "waiting", "released", "working", "waiting", "ended"]
    [restoring] = [memo for memo in await session_memos(handle) if memo["restored"]]
    assert restoring["state"] == "working" and "restored from its snapshot" in restoring["restored"]
    assert counted == {"waiting": 2, "released": 1, "restored": 1, "ended": 1}


def tar_gz(files: dict[str, bytes]) -> bytes:
    """A gzipped tar archive of ``files``, as a snapshot's object holds one."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            member = tarfile.TarInfo(name)
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    return buffer.getvalue()


async def test_a_snapshot_replaced_in_the_store_fails_the_follow_up_at_once_and_restores_nothing(
    temporal_client: Client, temp: Path
) -> None:
    """Without keys, a gzipped tar of other files written over a released
    conversation's snapshot is refused: the follow-up fails at once, in one
    line naming the snapshot, and none of those files reaches a workspace."""
    model = Conversing([["echo first > one.txt"], ["cat one.txt planted.txt"]])
    settings = session_settings(temp, idle=timedelta(seconds=1))
    deleted: list[list[str]] = []
    sandbox = watched(sandboxes_for_tests()[project_service().sandbox_provider], deleted)
    async with running_worker(temporal_client, model, sandbox, settings=settings) as (client, _):
        handle = await conversation(client, "Write a file.")
        await until(handle, lambda state: state.state == RELEASED)
        [snapshot] = snapshots(temp)
        snapshot.write_bytes(tar_gz({"one.txt": b"planted\n", "planted.txt": b"planted\n"}))
        calls = len(model.inputs)

        assert await follow_up(handle, "Show the files.") == 2
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()

    failure = str(failed.value.cause)
    assert "\n" not in failure, failure
    key = snapshot.relative_to(snapshot.parents[2]).as_posix()
    assert f"The snapshot {key!r}" in failure and key.startswith("snapshots/"), failure
    assert "not the snapshot this conversation took" in failure, failure
    # At once: one attempt of the restore, and no model call for the follow-up.
    [restore] = [step for step in await activities(handle) if step.name.endswith(RESTORE)]
    assert restore.attempt == 1 and restore.failed
    assert len(model.inputs) == calls
    # The fresh sandbox held none of the snapshot's files when the failed
    # run removed it (the released one held the first prompt's); no
    # workspace is left, and no planted file on the worker's disk but the store.
    assert len(deleted) == 2 and "one.txt" in deleted[0], deleted
    assert "one.txt" not in deleted[1] and "planted.txt" not in deleted[1], deleted
    assert workspaces(temp) == []
    assert not [path for path in temp.rglob("planted.txt")]


async def test_end_completes_with_the_last_answer_and_a_closed_run_takes_no_follow_up(
    temporal_client: Client, temp: Path
) -> None:
    model = Conversing([["echo note > note.txt && pwd"]])
    async with running_worker(temporal_client, model, settings=session_settings(temp)) as (
        client,
        _,
    ):
        handle = await conversation(client, "Write a note, and say where you are.")
        first = await answered(handle, 1)
        # Waiting, it holds its sandbox: the workspace is there.
        assert first.answer is not None
        [workspace] = [Path(line) for line in printed(first.answer)]
        assert workspaces(temp) == [workspace] and (workspace / "note.txt").exists()

        assert await handle.execute_update(END, result_type=str) == ENDED
        result = await handle.result()
        with pytest.raises(RPCError) as closed:
            await follow_up(handle, "Are you there?")
        state = await handle.query(CONVERSATION, result_type=Conversation)

    assert result == first.answer
    assert workspaces(temp) == []
    assert closed.value.status == RPCStatusCode.NOT_FOUND
    assert state.state == ENDED and state.answered == 1
    steps = [
        step.name.removeprefix(f"{project_service().sandbox_provider}-")
        for step in await activities(handle)
    ]
    assert steps.count("sandbox_client_create") == steps.count("sandbox_client_delete") == 1
    assert [memo["state"] for memo in await session_memos(handle)] == [
        "working",
        "waiting",
        "ended",
    ]


async def test_a_conversation_without_a_follow_up_for_its_lifetime_ends_by_itself(
    temporal_client: Client, temp: Path
) -> None:
    model = Conversing([["echo note > note.txt && echo written"]])
    settings = session_settings(temp, idle=timedelta(seconds=1), lifetime=timedelta(seconds=2))
    async with running_worker(temporal_client, model, settings=settings) as (client, _):
        handle = await conversation(client, "Write a note.")
        result = await handle.result()

    assert printed(result) == ["written"]
    assert workspaces(temp) == []
    # Released after a second, ended after two.
    assert [memo["state"] for memo in await session_memos(handle)] == [
        "working",
        "waiting",
        "released",
        "ended",
    ]


async def test_a_follow_up_or_end_while_a_prompt_is_worked_on_is_refused(
    temporal_client: Client, temp: Path
) -> None:
    # Each prompt's command waits (30 s at most) for a file the test makes
    # once it has sent what must be refused: a prompt is worked on for as
    # long as the test needs, however slow the machine (with a 2 s sleep in
    # their place, the updates once came after the prompt was answered).
    first, second = temp.parent / "first-may-end", temp.parent / "second-may-end"

    def waiting_for(gate: Path) -> str:
        return f'for _ in $(seq 600); do [ -e "{gate}" ] && break; sleep 0.05; done'

    model = Conversing(
        [[f"{waiting_for(first)} && echo slept"], [f"{waiting_for(second)} && echo slept again"]]
    )
    async with running_worker(temporal_client, model, settings=session_settings(temp)) as (
        client,
        _,
    ):
        handle = await conversation(client, "Sleep a while.")
        await running_command(handle)
        with pytest.raises(WorkflowUpdateFailedError) as working:
            await follow_up(handle, "Are you done?")
        with pytest.raises(WorkflowUpdateFailedError) as ending:
            await handle.execute_update(END)
        first.touch()

        await answered(handle, 1)
        with pytest.raises(WorkflowUpdateFailedError) as empty:
            await follow_up(handle, " ")
        assert await follow_up(handle, "Sleep again.") == 2
        # Taken, not yet answered: the next one is refused too.
        with pytest.raises(WorkflowUpdateFailedError) as second_prompt:
            await follow_up(handle, "And again?")
        second.touch()
        second_answer = await answered(handle, 2)
        await handle.execute_update(END)
        result = await handle.result()

    assert refused(working) == refused(ending) == refused(second_prompt) == "StillWorking"
    assert "still working on prompt 1" in str(working.value.cause)
    assert "still working on prompt 2" in str(second_prompt.value.cause)
    assert refused(empty) == "BadFollowUp"
    assert result == second_answer.answer and result is not None
    assert printed(result) == ["slept again"]
    # A refused update is never written to history: the one taken and END are.
    assert await conversation_updates(handle) == [FOLLOW_UP, END]


async def test_a_follow_up_sent_before_the_run_has_started_is_refused_as_still_working(
    temporal_client: Client, temp: Path
) -> None:
    # Sent before any worker runs the conversation, the follow-up reaches
    # the run with its first task, before the workflow's run method.
    handle = await conversation(temporal_client, "Write a note.")
    early = asyncio.create_task(follow_up(handle, "Are you done?"))
    await asyncio.sleep(0.5)
    model = Conversing([["echo note > note.txt && echo written"]])
    async with running_worker(temporal_client, model, settings=session_settings(temp)) as (
        client,
        _,
    ):
        with pytest.raises(WorkflowUpdateFailedError) as refusal:
            await early
        first = await answered(client.get_workflow_handle(handle.id), 1)
        await handle.execute_update(END)
        await handle.result()

    assert refused(refusal) == "StillWorking"
    assert first.answer is not None and printed(first.answer) == ["written"]


async def test_a_run_started_without_follow_ups_refuses_them_and_ends_with_its_answer(
    temporal_client: Client, temp: Path
) -> None:
    model = Conversing([["sleep 2 && echo done"]])
    async with running_worker(temporal_client, model, settings=session_settings(temp)) as (
        client,
        _,
    ):
        handle = await start(client, "Sleep a while.")
        await running_command(handle)
        with pytest.raises(WorkflowUpdateFailedError) as asked:
            await follow_up(handle, "Are you done?")
        with pytest.raises(WorkflowUpdateFailedError) as ending:
            await handle.execute_update(END)
        result = await handle.result()

    assert refused(asked) == refused(ending) == "NoFollowUps"
    assert printed(result) == ["done"]
    assert workspaces(temp) == []
    # A run without follow-ups takes no snapshot, and writes no session memo.
    steps = [
        step.name.removeprefix(f"{project_service().sandbox_provider}-")
        for step in await activities(handle)
    ]
    assert SNAPSHOT not in steps
    assert await session_memos(handle) == []
    assert await conversation_updates(handle) == []


@pytest.mark.parametrize(
    "idle",
    [
        pytest.param(NEVER, id="holding-its-sandbox"),
        pytest.param(timedelta(seconds=1), id="released-after-the-continue"),
    ],
)
async def test_a_chain_that_continues_as_new_between_prompts_keeps_conversation_and_snapshot(
    temporal_client: Client, temp: Path, idle: timedelta
) -> None:
    model = Conversing([["echo first > one.txt && echo made"], ["cat one.txt"]])
    async with running_worker(
        temporal_client,
        model,
        settings=session_settings(temp, idle=idle),
        workflows=[ContinuesBetweenPromptsWorkflow],
    ) as (client, _):
        handle = await client.start_workflow(
            ContinuesBetweenPromptsWorkflow.run,
            RunRequest("Write a file.", follow_ups=True),
            id=f"{project_service().task_queue}-{uuid.uuid4()}",
            task_queue=project_service().task_queue,
        )
        first = await answered(handle, 1)
        assert first.answer is not None
        # The first run answered, then handed the conversation on.
        while (await handle.describe()).run_id == handle.first_execution_run_id:
            await asyncio.sleep(0.05)
        if idle != NEVER:
            await until(handle, lambda state: state.state == RELEASED)
            assert workspaces(temp) == []
        assert await follow_up(handle, "Show the file.") == 2
        second = await answered(handle, 2)
        await handle.execute_update(END)
        result = await handle.result()
        latest = client.get_workflow_handle(handle.id)
        runs = [handle.first_execution_run_id, (await latest.describe()).run_id]

    assert runs[0] != runs[1]
    assert second.answer == result
    # The next run's follow-up saw the first run's file...
    assert printed(result) == ["first"]
    assert printed(first.answer) == ["made"]
    # ...and its model input held the first prompt and its command.
    [follow_up_input, *_] = [each for each in model.inputs if len(user_messages(each)) == 2]
    assert user_messages(follow_up_input) == ["Write a file.", "Show the file."]
    assert "echo first > one.txt" in str(follow_up_input)
    # The next run restored from the snapshot the first took, or resumed its sandbox.
    steps = [
        step.name.removeprefix(f"{project_service().sandbox_provider}-")
        for step in await activities(latest)
    ]
    assert (RESTORE in steps) == (idle != NEVER)
    assert workspaces(temp) == []
