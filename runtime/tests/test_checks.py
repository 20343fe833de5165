"""An evaluation's checks on what a run left (run_request.Check): the run
makes them itself, in its own sandbox, after its answer and before the
workspace goes, as a step the model does not take; each failure is the
check's result, saying in a line what it found (never what a file holds),
and the run's answer stands. A run with checks replays; a run without has
the steps it always had."""

import hashlib
import uuid

from temporalio.client import Client
from temporalio.worker import Replayer

from sandbox_agent_runtime.run_request import Check, CheckResult, RunAnswer, RunRequest
from sandbox_agent_runtime.shared import CHECK, MODEL_ACTIVITIES, WORKFLOW_TYPE
from sandbox_agent_runtime.testing import project, project_service
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
from sandbox_agent_runtime.testing.support import (
    SETTINGS,
    activities,
    running_worker,
    sandboxes_for_tests,
)
from sandbox_agent_runtime.worker import agents_plugin

MADE = "made by the agent\n"


async def run_with(client: Client, checks: list[Check]) -> tuple[RunAnswer, list[str]]:
    handle = await client.start_workflow(
        WORKFLOW_TYPE,
        RunRequest("Make out.txt.", checks=checks),
        id=f"{project_service().task_queue}-{uuid.uuid4()}",
        task_queue=project_service().task_queue,
        result_type=RunAnswer,
    )
    answer = await handle.result()
    steps = [each.name for each in await activities(handle)]
    await Replayer(
        workflows=[project().workflow],
        plugins=[agents_plugin(SETTINGS, sandboxes=sandboxes_for_tests())],
    ).replay_workflow(await handle.fetch_history())
    return answer, steps


async def test_a_run_checks_what_it_left_in_its_own_sandbox_after_its_answer(
    temporal_client: Client,
) -> None:
    model = ScriptedModel(
        [
            f"printf '{MADE}' > out.txt && ln -s /etc/hostname secret.txt && mkdir -p sub && echo x > sub/y"
        ]
    )
    digest = hashlib.sha256(MADE.encode()).hexdigest()
    checks = [
        Check("file_exists", path="out.txt"),
        Check("file_exists", path="sub/y"),
        Check("file_exists", path="missing.txt"),
        Check("file_exists", path="../outside.txt"),
        Check("file_contains", path="out.txt", text="by the agent"),
        Check("file_contains", path="out.txt", text="by someone else"),
        Check("file_contains", path="secret.txt", text="no such text anywhere"),
        Check("file_sha256", path="out.txt", sha256=digest),
        Check("file_sha256", path="out.txt", sha256="0" * 64),
        Check("file_contains", path="missing.txt", text="x"),
        Check("command", command="test -s out.txt && grep -q agent out.txt"),
        Check("command", command="echo failing >&2; exit 3"),
        Check("command", command="sleep 5", timeout=1),
    ]
    async with running_worker(temporal_client, model) as (client, _):
        answer, steps = await run_with(client, checks)
        plain, plain_steps = await run_with(client, [])

    found = [(result.passed, result.detail) for result in answer.checks]
    assert found[:4] == [(True, ""), (True, ""), (False, "no such file"), (False, found[3][1])]
    assert found[3][1].startswith("not a path in the workspace: '../outside.txt' climbs out")
    assert found[4:9] == [
        (True, ""),
        (False, "it does not hold the text"),
        # A link out of the workspace: not followed, and what it points at never shown.
        (False, "it cannot be read (InvalidManifestPathError)"),
        (True, ""),
        (False, f"its SHA-256 is {digest}"),
    ]
    assert found[9] == (False, "it cannot be read (" + found[9][1].split("(", 1)[1])
    assert found[10] == (True, "")
    assert found[11] == (False, "exit 3: failing")
    assert found[12] == (False, "it ran past 1 s")
    assert answer.checks[10] == CheckResult(
        "command", True, "test -s out.txt && grep -q agent out.txt", ""
    )
    # The answer stands; the checks are one step after it, which the model did not ask for.
    assert answer.answer.endswith("Process exited with code 0\nOutput:\n")
    named = [step.removeprefix(f"{project_service().sandbox_provider}-") for step in steps]
    assert named.count(CHECK) == 1
    assert named.index(CHECK) > max(i for i, step in enumerate(named) if step in MODEL_ACTIVITIES)
    assert named.index(CHECK) < named.index("sandbox_client_delete")
    # A run without checks makes none.
    assert plain.checks == [] and all(not step.endswith(CHECK) for step in plain_steps)
