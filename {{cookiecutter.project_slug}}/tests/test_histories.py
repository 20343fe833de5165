"""Every history in tests/histories/ replays against the workflow's code.

A run in flight when a new build is deployed unversioned, or a chain whose
next run starts on it (docs/versioning.md), is replayed by the new code: a
change to the sequence of commands the workflow issues for the same history
(a new step, a step moved or removed) fails that replay, and the run sticks
on a failing workflow task. So the suite replays real histories, with the
plugins and the data converter the worker uses. The ones the service ships
with were recorded from its own scripted runs: a chain of two runs (the first
continued as new), with an input placed in its workspace, its sandbox's
commands, its model calls and its outputs collected; and a conversation of
two prompts, its sandbox released (its workspace snapshotted) between them
and restored for the follow-up, then ended; where the provider keeps the
name it was recorded under, that conversation again with encryption on
{%- if cookiecutter | has_encrypted_history %}
(here: ``*.encrypted.json``, its payloads and snapshots ciphertext under
TEST_KEYS, which the replayer decrypts with).
{%- else %}
(not here: its request is ciphertext, and names another provider).
{%- endif %} Histories recorded with keys
of your own replay with PAYLOAD_ENCRYPTION_KEYS set (in CI: a secret). Record
more from a live namespace before a deploy with
``{{ cookiecutter.project_slug }}-record-histories`` (histories.py) and commit them.
"""

import asyncio
{%- if cookiecutter | has_encrypted_history %}
import base64
{%- endif %}
import json
import os
import shutil
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer

from sandbox_agent_runtime import (
    END,
    FOLLOW_UP,
    EncryptionCodec,
    Keys,
    agents_plugin,
    data_converter,
    workflow_runner,
)
from sandbox_agent_runtime.testing import (
    COLLECT,
{%- if cookiecutter | has_encrypted_history %}
    ENCODING,
    LOCAL_ACTIVITY_MARKER,
{%- endif %}
    PLACE,
    RESTORE,
    SETTINGS,
    SNAPSHOT,
    CompletedRun,
    NextBuildWorkflow,
    encryption_keys,
    record_histories,
    sandbox_operation,
    sandboxes_for_tests,
)

from {{ cookiecutter.package_name }}.workflow import SandboxAgentWorkflow

PROJECT = Path(__file__).resolve().parents[1]
HISTORIES = PROJECT / "tests" / "histories"
RECORDED = sorted(HISTORIES.glob("*.json"))

# The key the shipped encrypted history was recorded with: a test key, in
# the open here, never to be used for a real run.
TEST_KEYS = Keys(current="recorded-test-key", by_id={"recorded-test-key": bytes(range(32))})


def replay_keys() -> Keys:
    """TEST_KEYS, and the keys of PAYLOAD_ENCRYPTION_KEYS when it is set
    (for histories recorded from your own namespace with keys on)."""
    own = encryption_keys(os.environ)
    if own is None:
        return TEST_KEYS
    return Keys(current=own.current, by_id={**TEST_KEYS.by_id, **own.by_id})


class DoesNotReplay(AssertionError):
    """A recorded history the workflow's code cannot replay."""


def load(path: Path) -> WorkflowHistory:
    """A history file as ``temporal workflow show --output json`` or
    ``{{ cookiecutter.project_slug }}-record-histories`` wrote it."""
    return WorkflowHistory.from_json(path.name.partition(".")[0], json.loads(path.read_text()))


async def replay(path: Path, workflow: type = SandboxAgentWorkflow) -> None:
    """Replay the history in ``path`` against ``workflow``, as the worker
    would run it; a failure names the file and says what did not match."""
    replayer = Replayer(
        workflows=[workflow],
        workflow_runner=workflow_runner(),
        plugins=[agents_plugin(SETTINGS, sandboxes=sandboxes_for_tests())],
        data_converter=data_converter(None, codec=EncryptionCodec(replay_keys())),
    )
    result = await replayer.replay_workflow(load(path), raise_on_replay_failure=False)
    if result.replay_failure is not None:
        name = path.relative_to(PROJECT) if path.is_relative_to(PROJECT) else path
        raise DoesNotReplay(
            f"{name} does not replay against the workflow's code: {result.replay_failure}"
        )


@pytest.mark.parametrize("path", RECORDED, ids=[path.name for path in RECORDED])
async def test_a_recorded_run_replays_against_the_workflow(path: Path) -> None:
    await replay(path)


def test_the_histories_hold_a_chain_with_sandbox_commands_and_model_calls() -> None:
    """What the replay above covers: a run that continued as new, and the
    next run of its chain; sandbox operations and model calls in both, the
    run's input placed and its outputs collected; a conversation's
    follow-up and end (updates), its workspace snapshotted and restored."""
    endings, activities, updates = set(), [], []
    for path in RECORDED:
        events = load(path).events
        endings.add(events[-1].event_type)
        activities += [
            event.activity_task_scheduled_event_attributes.activity_type.name
            for event in events
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        ]
        updates += [
            event.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
            for event in events
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
        ]
    assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW in endings
    assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED in endings
    operations = {sandbox_operation(name) for name in activities}
    # A model call (None), a command, the session that ran it, the input
    # placed in the workspace, the outputs collected from it, a snapshot of
    # the workspace and a fresh sandbox restored from it.
    commands = {None, "sandbox_session_pty_exec_start", "sandbox_session_start", PLACE, COLLECT}
    assert commands | {SNAPSHOT, RESTORE} <= operations, operations
    assert {FOLLOW_UP, END} <= set(updates), updates


{%- if cookiecutter | has_encrypted_history %}


ENCRYPTED = [path for path in RECORDED if path.name.endswith(".encrypted.json")]


def payload_encodings(node: object) -> list[bytes]:
    """The ``encoding`` of every payload in a history's JSON, but for its
    headers' (the plugin's trace context: span and trace ids{{ "; a sandbox operation's host" if cookiecutter | host_bound_backends }})
    and the ``data`` Temporal records of a local activity (its name, attempt
    and times), in plain text, as docs/encryption.md says."""
    if isinstance(node, list):
        return [found for each in node for found in payload_encodings(each)]
    if not isinstance(node, dict):
        return []
    if node.get("markerName") == LOCAL_ACTIVITY_MARKER:
        details = {**node["details"], "data": None}
        node = {**node, "details": details}
    found = [
        found for key, each in node.items() if key != "header" for found in payload_encodings(each)
    ]
    metadata = node.get("metadata")
    if isinstance(metadata, dict) and "encoding" in metadata and "data" in node:
        found.append(base64.b64decode(metadata["encoding"]))
    return found


def test_the_history_recorded_with_encryption_on_holds_ciphertext_alone() -> None:
    """Its every payload is encrypted (the replay above decrypts them): the
    prompt, the model's inputs and answers, the commands and their output,
    the memo, the snapshots' records."""
    assert ENCRYPTED
    for path in ENCRYPTED:
        encodings = payload_encodings(json.loads(path.read_text()))
        assert len(encodings) > 20, path.name
        assert set(encodings) == {ENCODING}, (path.name, set(encodings))
{%- endif %}


async def test_a_change_to_the_workflows_steps_fails_replay_naming_the_file() -> None:
    """The next build adds one step (a timer) before the agent: every
    recorded run fails to replay, and the failure says which file and why."""
    for path in RECORDED:
        with pytest.raises(DoesNotReplay) as failed:
            await replay(path, NextBuildWorkflow)
        assert str(failed.value).startswith(f"tests/histories/{path.name} does not replay")
        assert "[TMPRL1100]" in str(failed.value)


async def test_recorded_runs_replay_as_the_record_command_and_the_cli_write_them(
    temporal_client: Client, completed_run: CompletedRun, tmp_path: Path
) -> None:
    client = temporal_client
    only_this_run = f"WorkflowId = {completed_run.handle.id!r}"
    [recorded] = await record_histories(client, tmp_path / "recorded", limit=5, query=only_this_run)
    # The same run as `temporal workflow show --output json` writes it.
    temporal = shutil.which("temporal")
    assert temporal is not None
    shown = tmp_path / "shown" / f"{completed_run.handle.id}.cli.json"
    shown.parent.mkdir()
    process = await asyncio.create_subprocess_exec(
        *[temporal, "workflow", "show", "--output", "json"],
        *["--workflow-id", completed_run.handle.id, "--namespace", client.namespace],
        *["--address", client.service_client.config.target_host],
        stdout=asyncio.subprocess.PIPE,
    )
    output, _ = await process.communicate()
    assert process.returncode == 0
    shown.write_bytes(output)
    for path in (recorded, shown):
        assert len(load(path).events) == len((await completed_run.handle.fetch_history()).events)
        await replay(path)
