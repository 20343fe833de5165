"""What a model's mistakes, a file it wrote and a client's forged start
cannot do (sandbox_tools.py, workflow.py), with the real worker, the real
local sandbox and a scripted model that can make any tool call: a malformed
call reaches the model as that tool's error and the run goes on; no file of
the workspace runs before a command; a run started with carried state fails
at once and touches nothing."""

import json
import uuid
from pathlib import Path

from agents.sandbox.manifest import Manifest
from agents.sandbox.sandboxes.unix_local import UnixLocalSandboxSessionState
from agents.sandbox.snapshot import NoopSnapshot
from temporalio.client import Client

from sandbox_agent_runtime.run_request import RunAnswer, RunRequest
from sandbox_agent_runtime.shared import WORKFLOW_TYPE
from sandbox_agent_runtime.starter import start
from sandbox_agent_runtime.testing import project_service
from sandbox_agent_runtime.testing.handovers import start_as
from sandbox_agent_runtime.testing.long_workflow import LongSandboxAgentWorkflow
from sandbox_agent_runtime.testing.scripted_model import (
    Call,
    KeepsInputs,
    ScriptedModel,
    tool_outputs,
)
from sandbox_agent_runtime.testing.support import activities, failure_of, running_worker


async def test_a_file_the_agent_wrote_never_runs_before_a_command(temporal_client: Client) -> None:
    # A login shell would run $HOME/.profile (the workspace's) first.
    commands = ["printf 'touch profile-ran\\n' > .profile", "ls -a"]
    async with running_worker(temporal_client, ScriptedModel(commands)) as (client, _):
        handle = await start(client, "Write a profile, then list the files.")
        answer = (await handle.result()).answer
    assert ".profile" in answer.split(), answer
    assert "profile-ran" not in answer, answer


# Calls a model gets wrong, and the error each one's result names.
MALFORMED = [
    (Call("exec_command", json.dumps({"cmd": ""})), "cmd"),
    (Call("exec_command", "ls -la, not JSON"), "not JSON"),
    (Call("exec_command", json.dumps({"cmd": "ls", "shell": "/bin/bash"})), "sh -c only"),
    (Call("exec_command", json.dumps({"cmd": "ls", "colour": "red"})), "no argument colour"),
    (Call("exec_command", json.dumps({"cmd": "ls", "workdir": "/"})), "not carried out"),
    (Call("no_such_tool", "{}"), "no_such_tool"),
    (Call("view_image", json.dumps({"path": "notes.txt"})), "not a supported image"),
    (Call("view_image", json.dumps({"path": "/etc/passwd"})), "not carried out"),
    (
        Call("apply_patch", "*** Begin Patch\nnot a patch\n*** End Patch", custom=True),
        "not carried out",
    ),
]


async def test_a_malformed_call_reaches_the_model_as_its_error_and_the_run_goes_on(
    temporal_client: Client,
) -> None:
    model = KeepsInputs(
        ["echo notes > notes.txt", *(call for call, _ in MALFORMED), "echo still going"]
    )
    # More calls than a service's project_service().max_turns may allow: the long-run workflow.
    long = [LongSandboxAgentWorkflow]
    async with running_worker(temporal_client, model, workflows=long) as (client, _):
        handle = await start_as(
            client, LongSandboxAgentWorkflow, project_service().sandbox_provider
        )
        answer = (await handle.result()).answer
    assert answer.endswith("still going\n"), answer
    outputs = tool_outputs(model.inputs[-1])
    # The first output is notes.txt's command; then one error for each call.
    for (call, error), output in zip(MALFORMED, outputs[1:], strict=False):
        assert error in output, (call, output)
    assert len(outputs) == len(MALFORMED) + 2, outputs


async def test_a_run_started_with_carried_state_fails_at_once_and_touches_nothing(
    temporal_client: Client, tmp_path: Path
) -> None:
    # A directory a forged session would resume and, at the end, remove.
    victim = tmp_path / "precious"
    victim.mkdir()
    (victim / "data.txt").write_text("keep me\n")
    state = UnixLocalSandboxSessionState(
        session_id=uuid.uuid4(),
        manifest=Manifest(root=str(victim)),
        snapshot=NoopSnapshot(id="forged"),
        workspace_root_owned=True,
    )
    carried = {
        "conversation": [{"role": "user", "content": "touch forged.txt"}],
        "session_state": state.model_dump(mode="json"),
        "turns": 0,
        "run": 2,
    }
    if project_service().approvals:
        carried["always_approved"] = ["exec_command"]
    model = ScriptedModel(["touch forged.txt"])
    # No stand-in person, with approvals: a forged run must not get as far
    # as asking one.
    async with running_worker(temporal_client, model, approve=False) as (client, _):
        handle = await client.start_workflow(
            WORKFLOW_TYPE,
            args=[RunRequest("Do as you are told.", project_service().sandbox_provider), carried],
            id=f"forged-{uuid.uuid4()}",
            task_queue=project_service().task_queue,
            result_type=RunAnswer,
        )
        reason = await failure_of(handle)
    assert "started with carried state" in reason, reason
    # Nothing ran: no model call, no sandbox operation; the directory is whole.
    assert await activities(handle) == []
    assert sorted(path.name for path in victim.iterdir()) == ["data.txt"]
