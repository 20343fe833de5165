"""Skills and memory: the SDK's ``Skills`` and ``Memory`` capabilities in a
durable run (workspace/memories.py, workflow.py's ``_answer``).

With a real dev server, the service's real worker, the local sandbox, an S3
API on loopback (moto, the plugin's ``s3_service``), payload keys set and a
scripted model that keeps the instructions it was given, these tests prove
that:

- skills from a directory on the worker (``Skills(from_=LocalDir(...))``)
  reach the agent: its instructions list each skill with its description
  and path, and the SKILL.md is in the workspace;
- a memory the agent writes in one prompt is in the instructions of the
  next prompt of the same conversation, also once the worker that ran the
  first prompt is gone and another took the conversation up;
- kept across conversations (``memory_across_conversations``), it is in
  the instructions of the caller's next conversation before its first
  command, and never in another caller's; the object in the store is
  ciphertext under the first key, named by no caller;
- nothing of the memory is in the runs' history (read raw, without keys),
  and each run's history replays;
- a kept memory opens only under its own caller's name, a worker with keys
  takes no plaintext, nothing outside the memory directory is put back; a
  Memory capability that generates (models of its own at the sandbox's
  stop) ends the run in one line.
"""

import asyncio
import base64
import dataclasses
import gzip
import io
import tarfile
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import aioboto3
import pytest
from agents import ModelResponse
from agents.sandbox import SandboxAgent
from agents.sandbox.capabilities import Filesystem, Memory, Shell
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.worker import Replayer

from sandbox_agent_runtime.archives import inputs_of
from sandbox_agent_runtime.encryption import KEY_ID, EncryptionCodec, WrongKey, parse_keys
from sandbox_agent_runtime.object_store import DirectoryObjects, data_converter, parse
from sandbox_agent_runtime.run_request import FollowUp, RunAnswer, RunRequest
from sandbox_agent_runtime.shared import (
    CALLER_MEMO,
    END,
    FOLLOW_UP,
    MEMORY_LOAD,
    MEMORY_SAVE,
    WORKFLOW_TYPE,
)
from sandbox_agent_runtime.testing import project, project_service
from sandbox_agent_runtime.testing.api_client import api_process, read_events
from sandbox_agent_runtime.testing.conversing import Conversing, answered, follow_up
from sandbox_agent_runtime.testing.object_stores import client_with, payloads_in
from sandbox_agent_runtime.testing.plugin import BUCKET
from sandbox_agent_runtime.testing.processes import service_environment
from sandbox_agent_runtime.testing.support import (
    SETTINGS,
    activities,
    running_worker,
    sandboxes_for_tests,
    settings_with,
)
from sandbox_agent_runtime.testing.workspace_agents import (
    RemembersAcrossRunsWorkflow,
    RemembersWorkflow,
    SkillsAcrossRunsWorkflow,
)
from sandbox_agent_runtime.worker import agents_plugin, workflow_runner
from sandbox_agent_runtime.workspace import IN_STORE, SnapshotStore
from sandbox_agent_runtime.workspace.memories import memory_key, opened, sealed
from sandbox_agent_runtime.workspace.steps import memory_of

KEYS = f"A={base64.b64encode(bytes(range(32))).decode()}"
# What the agent keeps in its memory (memories/memory_summary.md).
REMEMBERED = "The caller prefers tabs to spaces."
WRITE_MEMORY = (
    f"mkdir -p memories && printf '%s\\n' '{REMEMBERED}' > memories/memory_summary.md && echo kept"
)
READ_SKILL = "cat .agents/release-notes/SKILL.md"


class Remembering(Conversing):
    """The conversing model, keeping the instructions of each call."""

    def __init__(self, prompts: list[list[str]]) -> None:
        super().__init__(prompts)
        self.instructions: list[str] = []

    async def get_response(
        self, system_instructions: str | None, input: str | list[Any], *args: Any, **kwargs: Any
    ) -> ModelResponse:
        self.instructions.append(system_instructions or "")
        return await super().get_response(system_instructions, input, *args, **kwargs)


@pytest.fixture
def prefix(s3_service: dict[str, str]) -> str:
    """A prefix of the tests' bucket of this test's own."""
    return f"test-{uuid.uuid4().hex[:8]}"


async def start(
    client: Client, prompt: str, caller: str | None, workflow: str = "RemembersWorkflow"
) -> WorkflowHandle[Any, RunAnswer]:
    """A conversation of ``workflow``, started for ``caller`` (an API
    caller as its memo names it; None: the starter's)."""
    return await client.start_workflow(
        workflow,
        RunRequest(prompt, follow_ups=True),
        id=f"{project_service().task_queue}-{uuid.uuid4()}",
        task_queue=project_service().task_queue,
        memo={CALLER_MEMO: caller} if caller else {},
        result_type=RunAnswer,
    )


async def objects(prefix: str) -> dict[str, bytes]:
    """The objects under ``prefix`` of the tests' bucket."""
    found = {}
    async with aioboto3.Session().client("s3") as s3:
        listed = await s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)
        for each in listed.get("Contents", []):
            body = await s3.get_object(Bucket=BUCKET, Key=each["Key"])
            found[each["Key"]] = await body["Body"].read()
    return found


async def history_bytes(client: Client, workflow_id: str) -> bytes:
    """What every payload of the run's history holds, as the server stores
    it (read without keys)."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return b"".join(payload.data for event in history.events for payload in payloads_in(event))


async def replays(client: Client, handle: WorkflowHandle[Any, Any], settings: Any) -> None:
    """Every run of ``handle``'s chain replays on the worker's workflows and plugins."""
    replayer = Replayer(
        workflows=[RemembersWorkflow, RemembersAcrossRunsWorkflow],
        plugins=[agents_plugin(settings, sandboxes=sandboxes_for_tests())],
        data_converter=client.data_converter,
        workflow_runner=workflow_runner(),
    )
    run_ids = {handle.first_execution_run_id, (await handle.describe()).run_id}
    for run_id in run_ids:
        history = await client.get_workflow_handle(handle.id, run_id=run_id).fetch_history()
        replayed = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert replayed.replay_failure is None, replayed.replay_failure


async def test_skills_reach_the_agent_and_memory_stays_with_its_caller(
    temporal_client: Client, prefix: str
) -> None:
    keys = parse_keys(KEYS)
    client = client_with(temporal_client, data_converter(None, codec=EncryptionCodec(keys)))
    settings = dataclasses.replace(
        settings_with({}),
        keys=keys,
        object_store=parse(f"s3://{BUCKET}/{prefix}", region="us-east-1"),
    )
    model = Remembering([[READ_SKILL], [WRITE_MEMORY], ["echo third"]])
    async with running_worker(client, model, settings=settings, workflows=[RemembersWorkflow]) as (
        plugged,
        _,
    ):
        alice = await start(plugged, "Read the skill.", "token:alice")
        first = await answered(alice, 1)
        skill_listing = model.instructions[0]
        await follow_up(alice, "Remember my preference.")
        await answered(alice, 2)
        before_third = len(model.instructions)
        await follow_up(alice, "What do you remember?")
        await answered(alice, 3)
        third_instructions = model.instructions[before_third]
        await alice.execute_update(END)
        await alice.result()

        before_next = len(model.instructions)
        again = await start(plugged, "Read the skill.", "token:alice")
        await answered(again, 1)
        next_conversation = model.instructions[before_next]
        await again.execute_update(END)
        await again.result()

        before_bob = len(model.instructions)
        bob = await start(plugged, "Read the skill.", "token:bob")
        await answered(bob, 1)
        bobs = model.instructions[before_bob]
        await bob.execute_update(END)
        await bob.result()

    # The skill is listed to the model, and its SKILL.md is in the workspace.
    assert (
        "- release-notes: Write release notes from a list of changes, newest first. "
        "(file: .agents/release-notes)" in skill_listing
    )
    assert first.answer is not None and "# Release notes" in str(first.answer.answer)
    # The memory written in prompt 2 is in prompt 3's instructions...
    assert REMEMBERED not in skill_listing
    assert REMEMBERED in third_instructions
    # ...in the caller's next conversation before its first command...
    assert REMEMBERED in next_conversation
    # ...and never in another caller's.
    assert REMEMBERED not in bobs
    steps = [step.name.rsplit("-", 1)[-1] for step in await activities(bob)]
    assert MEMORY_LOAD in steps and MEMORY_SAVE in steps

    # One object, alice's: ciphertext under key A, named by no caller.
    stored = await objects(prefix)
    memories = {key: data for key, data in stored.items() if "/memories/" in key}
    assert len(memories) == 1, sorted(stored)
    [(key, data)] = memories.items()
    assert "alice" not in key and not data.startswith(b"\x1f\x8b")
    assert REMEMBERED.encode() not in data and b"release" not in data
    sealed = Payload()
    sealed.ParseFromString(data)
    assert sealed.metadata[KEY_ID] == b"A"

    # Nothing of the memory in any history, read raw; each replays.
    for handle in (alice, again, bob):
        raw = await history_bytes(temporal_client, handle.id)
        assert raw and b"prefers tabs" not in raw
        await replays(client, client.get_workflow_handle(handle.id), settings)


async def test_a_memory_outlives_the_worker_and_the_run_that_wrote_it(
    temporal_client: Client,
) -> None:
    """Without an object store (nor keys), memory lives in the
    conversation's workspace: written in the first prompt, it is in the
    instructions of the second, taken up by another worker in the next run
    of the chain (continued as new between the two)."""
    settings = settings_with({})
    writer = Remembering([[WRITE_MEMORY], ["echo second"]])
    async with running_worker(
        temporal_client, writer, settings=settings, workflows=[RemembersAcrossRunsWorkflow]
    ) as (client, _):
        handle = await start(client, "Remember.", None, "RemembersAcrossRunsWorkflow")
        await answered(handle, 1)
        while (await handle.describe()).run_id == handle.first_execution_run_id:
            await asyncio.sleep(0.05)
    # Another worker, another model: it knows only what the run gives it.
    reader = Remembering([[WRITE_MEMORY], ["echo second"]])
    async with running_worker(
        temporal_client, reader, settings=settings, workflows=[RemembersAcrossRunsWorkflow]
    ) as (client, _):
        await follow_up(client.get_workflow_handle(handle.id), "What do you remember?")
        await answered(client.get_workflow_handle(handle.id), 2)
        await client.get_workflow_handle(handle.id).execute_update(END)
        await client.get_workflow_handle(handle.id).result()

    assert REMEMBERED not in writer.instructions[0]
    assert reader.instructions and all(REMEMBERED in each for each in reader.instructions)
    # The second run read it from the workspace: it loaded nothing.
    steps = [step.name for step in await activities(client.get_workflow_handle(handle.id))]
    assert not any(step.endswith(MEMORY_LOAD) for step in steps)
    await replays(client, client.get_workflow_handle(handle.id), settings)


def test_a_memory_that_generates_is_refused_in_one_line() -> None:
    """The SDK's generation runs two further models when the sandbox stops:
    a run whose agent asks for it ends at once, saying what to declare."""
    agent = SandboxAgent[None](name="a", capabilities=[Shell(), Filesystem(), Memory()])
    with pytest.raises(ApplicationError) as refused:
        memory_of(agent)
    assert refused.value.non_retryable and "\n" not in str(refused.value)
    assert "Memory(generate=None)" in str(refused.value)
    kept = Memory(generate=None)
    assert memory_of(replace(agent, capabilities=[Shell(), Filesystem(), kept])) is kept


def sealed_tar(names: dict[str, bytes]) -> bytes:
    """A gzipped tar of ``names``, as a memory is kept."""
    packed = io.BytesIO()
    with tarfile.open(fileobj=packed, mode="w") as tar:
        for name, data in names.items():
            member = tarfile.TarInfo(name)
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    return gzip.compress(packed.getvalue())


def test_a_kept_memory_opens_only_under_its_own_caller_s_name(tmp_path: Path) -> None:
    """Sealed for one caller, a memory does not open under another's name;
    a worker with keys takes no plaintext; nothing outside memories/ opens."""
    objects = DirectoryObjects(tmp_path)
    store = SnapshotStore(objects, "", IN_STORE, EncryptionCodec(parse_keys(KEYS)))
    alice = memory_key("sandbox-agent", "token:alice")
    bob = memory_key("sandbox-agent", "token:bob")
    data = sealed_tar({"memories/memory_summary.md": REMEMBERED.encode()})
    stored, key_id = sealed(store, alice, data)
    assert key_id == "A" and REMEMBERED.encode() not in stored
    tar_bytes, files = opened(store, alice, "memories", stored)
    assert files == 1 and REMEMBERED.encode() in tar_bytes
    with pytest.raises(WrongKey):
        opened(store, bob, "memories", stored)
    with pytest.raises(ValueError, match="not encrypted"):
        opened(store, alice, "memories", data)
    plain = SnapshotStore(objects, "", IN_STORE, None)
    for names in ({"notes.txt": b"x"}, {"memories/../notes.txt": b"x"}):
        with pytest.raises(ValueError, match="outside its directory"):
            opened(plain, alice, "memories", sealed_tar(names))


INPUT_SKILL = """---
name: changelog
description: Keep a changelog, newest version first.
---

# Changelog

One heading per version, newest first.
"""
LISTED = "- changelog: Keep a changelog, newest version first. (file: skills/changelog)"


def skills_input(tmp_path: Path) -> list[Any]:
    """A run's input directory ``skills`` with one skill, as the starter
    packs ``--input skills/``."""
    skill = tmp_path / "skills" / "changelog"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(INPUT_SKILL)
    return inputs_of([str(tmp_path / "skills")], has_store=False)


async def test_skills_in_a_runs_inputs_are_listed_to_the_model_from_its_first_turn(
    temporal_client: Client, tmp_path: Path
) -> None:
    model = Remembering([["cat skills/changelog/SKILL.md"], ["echo second"], ["echo third"]])
    workflows = [project().workflow, SkillsAcrossRunsWorkflow]
    async with running_worker(temporal_client, model, workflows=workflows) as (client, _):
        # A job whose inputs carry a skill.
        job = await client.start_workflow(
            WORKFLOW_TYPE,
            RunRequest("Read the skill.", inputs=skills_input(tmp_path / "job")),
            id=f"{project_service().task_queue}-{uuid.uuid4()}",
            task_queue=project_service().task_queue,
            result_type=RunAnswer,
        )
        answer = await job.result()
        job_instructions = model.instructions[:]
        # A conversation whose follow-up carries it: listed from then on,
        # in the next run of its chain too (it goes on there after it).
        talk = await start(client, "Hello.", None, "SkillsAcrossRunsWorkflow")
        await answered(talk, 1)
        before_second = len(model.instructions)
        inputs = skills_input(tmp_path / "talk")
        await talk.execute_update(FOLLOW_UP, FollowUp("Read it.", inputs=inputs), result_type=int)
        await answered(talk, 2)
        before_third = len(model.instructions)
        await follow_up(talk, "Again.")
        await answered(talk, 3)
        await talk.execute_update(END)
        await talk.result()
        runs = {talk.first_execution_run_id, (await talk.describe()).run_id}

    # Listed in the first turn's instructions, as agent.py's skills are;
    # its SKILL.md placed where the listing says.
    assert LISTED in job_instructions[0], job_instructions[0]
    assert "# Changelog" in str(answer.answer)
    assert LISTED not in model.instructions[len(job_instructions)]
    assert LISTED in model.instructions[before_second]
    assert len(runs) == 2 and LISTED in model.instructions[before_third]
    # The recorded runs replay.
    replayer = Replayer(
        workflows=workflows,
        plugins=[agents_plugin(SETTINGS, sandboxes=sandboxes_for_tests())],
        workflow_runner=workflow_runner(),
    )
    histories = [await job.fetch_history()] + [
        await client.get_workflow_handle(talk.id, run_id=run).fetch_history() for run in runs
    ]
    for history in histories:
        replayed = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert replayed.replay_failure is None, replayed.replay_failure


@pytest.mark.process
async def test_skills_sent_through_the_api_as_a_directorys_files_are_listed(
    temporal_client: Client,
) -> None:
    address = temporal_client.service_client.config.target_host
    environment = service_environment(address, "http://127.0.0.1:9")
    model = Remembering([["cat skills/changelog/SKILL.md"]])
    async with (
        running_worker(temporal_client, model),
        api_process(environment) as api,
        api.client() as http,
    ):
        # A file under a directory's path: the directory is the input.
        skill = ("skills/changelog/SKILL.md", INPUT_SKILL.encode(), "text/markdown")
        started = await http.post(
            "/v1/runs", data={"prompt": "Read the skill."}, files=[("files", skill)]
        )
        assert started.status_code == 201, started.text
        workflow_id = started.json()["id"]
        await read_events(http, workflow_id)
        state = (await http.get(f"/v1/runs/{workflow_id}")).json()
        # A path that climbs, or a file where a directory is, is refused.
        climbing = await http.post(
            "/v1/runs", data={"prompt": "x"}, files=[("files", ("skills/../up.txt", b"x"))]
        )
        clashing = await http.post(
            "/v1/runs",
            data={"prompt": "x"},
            files=[("files", ("skills", b"x")), ("files", ("skills/a/SKILL.md", b"x"))],
        )

    assert model.instructions and LISTED in model.instructions[0]
    assert "# Changelog" in state["answer"]["text"], state
    assert climbing.status_code == 400 and "'skills/../up.txt'" in climbing.text
    assert clashing.status_code == 400 and "two files are named 'skills'" in clashing.text
