"""Writing outputs: a run's answer as the starter prints it (JSON for an agent
with an ``output_type``), its files written under ``--output DIR`` (each one
refused there named), the line that says how to follow up, and what the
whole chain used of the model and what that cost. A prompt stopped at its
budget prints why, and the starter exits EXIT_NOT_COMPLETED; one a guardrail
stopped, EXIT_GUARDRAIL."""

import json
import sys
from pathlib import Path
from typing import Any

from temporalio.client import Client

from sandbox_agent_runtime.archives import outputs_lines, write_outputs
from sandbox_agent_runtime.client import StoppedAnswering, answered, chain_run
from sandbox_agent_runtime.display import visible
from sandbox_agent_runtime.run_request import Outputs, RunAnswer
from sandbox_agent_runtime.service import usd
from sandbox_agent_runtime.shared import USAGE_MEMO
from sandbox_agent_runtime.starter.statuses import (
    EXIT_COMPLETED,
    EXIT_FILES_NOT_WRITTEN,
    EXIT_GUARDRAIL,
    EXIT_NOT_COMPLETED,
    hint_command,
)

# The line after a conversation's answer.
FOLLOW_UP_LINE = 'Follow up: {command} --continue {id} "..."   End: --end {id}'


async def show_answer(
    client: Client,
    workflow_id: str,
    answer: RunAnswer,
    output: Path | None,
    waiting: bool,
    written: bool = False,
) -> int:
    """Print a run's answer (unless it was ``written`` above as the model
    wrote it), write its files under ``output``, say (when ``waiting`` for a
    follow-up) how to follow up, and what it used; the exit status."""
    if answer.stopped:
        print(f"Stopped: {answer.stopped.removeprefix('stopped: ')}", file=sys.stderr)
    if written:
        print("Answer: as written above")
    elif answer.structured:
        print("Answer:")
        print(json.dumps(answer.answer, indent=2, ensure_ascii=False))
    else:
        print("Answer:")
        print(str(answer.answer).rstrip("\n"))
    status = deliver(answer.outputs, output, workflow_id)
    if waiting:
        print(FOLLOW_UP_LINE.format(command=hint_command(), id=workflow_id), flush=True)
    try:
        print(await answered(lambda: usage_line(client, workflow_id)), flush=True)
    except StoppedAnswering:
        print("Usage: unknown (Temporal stopped answering)", flush=True)
    # The files and the workspace are kept; the prompt did not finish.
    if answer.guardrail:
        return EXIT_GUARDRAIL
    return EXIT_NOT_COMPLETED if answer.stopped else status


def deliver(outputs: Outputs, output: Path | None, workflow_id: str) -> int:
    """Say what the run's outputs hold and write them under ``output``
    (when given); the exit status: EXIT_FILES_NOT_WRITTEN when any file
    asked for was not written (each refused one named, the rest written)."""
    for line in outputs_lines(outputs):
        print(visible(line), flush=True)
    if output is None:
        if outputs.files or outputs.patch:
            print(
                f"Fetch them with: {hint_command()} --attach {workflow_id} --output DIR",
                flush=True,
            )
        return EXIT_COMPLETED
    if outputs.withheld:
        print(f"Nothing written to {output}: the files did not travel", file=sys.stderr)
        return EXIT_FILES_NOT_WRITTEN
    try:
        written, refused = write_outputs(outputs, output)
    except OSError as e:
        print(f"ERROR: --output {output}: cannot write there ({e.strerror})", file=sys.stderr)
        return EXIT_FILES_NOT_WRITTEN
    print(f"Wrote {len(written)} file{'s' if len(written) != 1 else ''} to {output}:")
    for path in written:
        print(f"  {visible(path)}")
    for entry in refused:
        print(f"  refused  {visible(entry)}", file=sys.stderr)
    return EXIT_FILES_NOT_WRITTEN if refused else EXIT_COMPLETED


async def usage_line(client: Client, workflow_id: str) -> str:
    """What the whole chain used and what it cost, from its latest run's
    memo (the worker keeps it there): its model calls and tokens at the
    model's price ("cost n/a" without one), its sandbox's time and its
    Temporal actions at their rates, and the total (costs.py). A run
    recorded before those were counted shows its tokens alone."""
    description = await chain_run(client, workflow_id, None).describe()
    usage = (await description.memo()).get(USAGE_MEMO)
    if not isinstance(usage, dict):
        return "Usage: not recorded"
    cached = usage.get("cached_input_tokens", 0)
    cost = usage.get("cost_usd")
    calls = usage.get("model_calls", 0)
    return (
        f"Usage: {calls:,} model {'call' if calls == 1 else 'calls'}, "
        f"{usage.get('input_tokens', 0):,} input tokens"
        + (f" ({cached:,} cached)" if cached else "")
        + f", {usage.get('output_tokens', 0):,} output tokens, "
        + (usd(cost) if isinstance(cost, int | float) else "cost n/a")
        + costs_shown(usage)
    )


def costs_shown(usage: dict[str, Any]) -> str:
    """The sandbox's time, the actions and the total, as the usage line
    says them ("" for a run recorded before they were counted)."""
    if "sandbox_seconds" not in usage:
        return ""
    actions, total = usage.get("actions", 0), usage.get("total_usd")
    return (
        f"; sandbox {usage.get('sandbox_seconds', 0.0):,.1f} s, {usd(usage.get('sandbox_usd', 0.0))}"
        f"; {actions:,} Temporal {'action' if actions == 1 else 'actions'}, "
        f"{usd(usage.get('actions_usd', 0.0))}"
        f"; total {usd(total) if isinstance(total, int | float) else 'n/a'}"
    )
