"""Evaluations of a service with approvals: each command of an evaluation's
run waits for a person, so a case waits to its time limit, unless the
person running it approves them all (--approve-all), signed with their own
key, which the worker checks as any approver's."""

from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from sandbox_agent_runtime.evals.dataset import load
from sandbox_agent_runtime.evals.runner import APPROVED_BY_THE_EVALUATION, prepare, run_all
from sandbox_agent_runtime.shared import DECIDE
from sandbox_agent_runtime.testing import approver
from sandbox_agent_runtime.testing.eval_model import EvalModel
from sandbox_agent_runtime.testing.support import running_worker

DATASET = """
cases:
  - id: writes-ok
    prompt: Write ok.txt.
    timeout_seconds: 4
    checks:
      - file_contains: {path: ok.txt, text: ok}
"""


async def test_approve_all_approves_an_evaluations_commands_and_nothing_else_does(
    temporal_client: Client, tmp_path: Path
) -> None:
    (tmp_path / "tasks.yaml").write_text(DATASET)
    prepared = prepare(load(tmp_path / "tasks.yaml"), False)
    model = EvalModel({"Write ok.txt.": lambda n: ["printf 'ok\\n' > ok.txt"]})
    async with running_worker(temporal_client, model, approve=False) as (client, _):
        approved = await run_all(client, prepared, 1, 1, "m", {}, None, approver=approver.KEY)
        waiting = await run_all(client, prepared, 1, 1, "m", {}, None)
        history = await client.get_workflow_handle(approved[0].run_id).fetch_history()
        decisions = [
            (await client.data_converter.decode(accepted.input.args.payloads))[0]
            for accepted in (
                event.workflow_execution_update_accepted_event_attributes.accepted_request
                for event in history.events
                if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
            )
            if accepted.input.name == DECIDE
        ]

    assert approved[0].passed, approved
    assert (waiting[0].passed, waiting[0].failed) == (False, "timeout")
    # The decision is in the run's history, signed, with the evaluation's word.
    [decision] = decisions
    assert decision["approve"] is True and decision["reason"] == APPROVED_BY_THE_EVALUATION
    assert decision["approver"] == approver.PUBLIC and decision["signature"]
