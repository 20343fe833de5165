"""Attaching: ``--attach`` follows a run that was started earlier to its
answer, from its first step or, for a conversation, from the prompt it works
on; a conversation that waits for a follow-up (or has ended) is shown where
it stands, with its latest answer."""

import sys
from pathlib import Path

from temporalio.client import WorkflowExecutionStatus

from sandbox_agent_runtime.client import (
    StoppedAnswering,
    answered,
    chain_run,
    session_memo,
    web_ui_link,
)
from sandbox_agent_runtime.display import visible
from sandbox_agent_runtime.run_request import ENDED, RELEASED, WAITING
from sandbox_agent_runtime.settings import StarterSettings
from sandbox_agent_runtime.starter.approving import key_file_of
from sandbox_agent_runtime.starter.following import follow, latest_answer
from sandbox_agent_runtime.starter.outputs import show_answer
from sandbox_agent_runtime.starter.reaching import reached, stopped_answering
from sandbox_agent_runtime.starter.runs import described, prompt_started, state_line
from sandbox_agent_runtime.starter.statuses import EXIT_UNREACHABLE, Refused


async def attach(workflow_id: str, settings: StarterSettings, output: Path | None = None) -> int:
    """Follow a run that was started earlier to its answer, and write its
    files under ``output``: a run without follow-ups, or one that has
    ended, from its first step to its end; a conversation from the prompt
    it works on to that prompt's answer or, when it waits for a follow-up,
    where it stands and its latest answer."""
    client = await reached(settings)
    if client is None:
        return EXIT_UNREACHABLE
    try:
        description = await described(client, workflow_id, "--attach")
        running = description.status == WorkflowExecutionStatus.RUNNING
        session = await session_memo(description) if running else {}
    except Refused as e:
        print(visible(f"ERROR: {e}"), file=sys.stderr)
        return e.status
    except StoppedAnswering:
        return stopped_answering(client, f"looking for workflow {workflow_id}")
    # From the first run of the chain, which a long run continued from.
    first_run = description.raw_description.workflow_execution_info.first_run_id
    handle = chain_run(client, workflow_id, first_run or None)
    print(f"Following workflow {handle.id}")
    print(f"Web UI: {web_ui_link(client, handle.id, settings.ui_url)}", flush=True)
    state = session.get("state")
    if state in (WAITING, RELEASED, ENDED):
        print(visible(state_line(workflow_id, session)), flush=True)
        try:
            answer = await answered(lambda: latest_answer(client, workflow_id))
        except Refused as e:
            print(visible(f"ERROR: {e}"), file=sys.stderr)
            return e.status
        except StoppedAnswering:
            return stopped_answering(client, f"asking workflow {workflow_id} for its answer")
        return await show_answer(client, workflow_id, answer, output, state != ENDED)
    # A conversation working on prompt N (follow-up N - 1): shown from there.
    prompts = session.get("prompts")
    prompt = prompts if isinstance(prompts, int) else 1
    return await follow(
        client,
        handle,
        key_file_of(settings),
        output,
        prompt=prompt if running else None,
        after=prompt_started(prompt) if running and prompt > 1 else None,
        conversation=bool(session),
        # What the model writes from now on: the steps before are shown from history.
        stream_from=None,
    )
