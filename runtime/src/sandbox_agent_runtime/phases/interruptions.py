"""The two ways a phase is interrupted.

- **The run's history is full**: the rest of the prompt (or a conversation's
  wait for its follow-up) goes on in a fresh run with the same workflow id,
  handed a ``Carried``: the conversation, the same sandbox, the
  turns left, where the conversation stands (``continue_as_new()``).
- **The sandbox's host is gone** (a service with a host-bound backend): a
  conversation's prompt is redone in a fresh sandbox on another host,
  restored from its latest snapshot in the object store, the model told what
  was lost (``recovery()``); without such a snapshot the run fails.
"""

import dataclasses
from dataclasses import asdict, dataclass
from typing import Any

from pydantic import TypeAdapter
from temporalio import workflow

from sandbox_agent_runtime import affinity
from sandbox_agent_runtime.chain import Carried, LastingSandboxClient
from sandbox_agent_runtime.observability import Usage, count_host_gone
from sandbox_agent_runtime.phases.given import Given
from sandbox_agent_runtime.phases.progress import Progress
from sandbox_agent_runtime.run_request import (
    RELEASED,
    WAITING,
    WORKING,
    Conversation,
    RunAnswer,
    RunRequest,
)
from sandbox_agent_runtime.workspace.requests import IN_STORE, Placed, Snapshot

# Built once per worker (this module is passed through the workflow sandbox).
_ANSWER = TypeAdapter(RunAnswer)


def carried(
    conversation: list[dict[str, Any]],
    sandbox: LastingSandboxClient,
    usage: Usage,
    prompt_usage: Usage,
    state: Conversation,
    snapshot: Snapshot | None,
    always_approved: set[str],
    turns: int,
    run: int,
    placed: Placed | None,
    waiting: bool = False,
    agent: str = "",
) -> Carried:
    """What this run hands the next of its chain (``run``): ``agent``, the
    agent whose turn it was, by name ("" for agent.py's)."""
    return Carried(
        conversation=conversation,
        session_state=sandbox.carried_state(),
        turns=turns,
        run=run,
        usage=usage,
        prompt_usage=prompt_usage,
        host=sandbox.host,
        always_approved=sorted(always_approved),
        placed=placed.model_dump() if placed else None,
        waiting=waiting,
        prompts=state.prompts,
        answered=state.answered,
        since=state.since,
        answer=asdict(state.answer) if state.answer else None,
        snapshot=snapshot.model_dump() if snapshot else None,
        agent=agent,
    )


def continue_as_new(request: RunRequest, handed: Carried, memo: dict[str, Any]) -> None:
    """Go on in a fresh run of the chain (the workflow waits for the updates
    being handled first). Its inputs are in the workspace already; the run
    starts on the deployment's current build, which reads
    this Carried, with ``memo`` (what the starter and the Web UI read)."""
    workflow.continue_as_new(
        args=[dataclasses.replace(request, inputs=[]), handed],
        memo=memo,
        initial_versioning_behavior=workflow.ContinueAsNewVersioningBehavior.AUTO_UPGRADE,
    )


def carried_state(handed: Carried) -> Conversation:
    """Where a conversation stands that an earlier run of its chain handed on."""
    return Conversation(
        state=(WAITING if handed.session_state else RELEASED) if handed.waiting else WORKING,
        prompts=handed.prompts,
        answered=handed.answered,
        since=handed.since,
        answer=_ANSWER.validate_python(handed.answer) if handed.answer else None,
    )


@dataclass(frozen=True)
class Recovered:
    """A prompt to redo after its host was gone: in ``sandbox`` (fresh),
    restored from ``snapshot``, the model told what was lost (``note``)."""

    sandbox: LastingSandboxClient
    snapshot: Snapshot
    note: dict[str, Any]


async def recovery(
    error: BaseException,
    sandbox: LastingSandboxClient,
    snapshot: Snapshot | None,
    calls: list[str],
    given: Given,
    progress: Progress,
) -> Recovered | None:
    """After the host of a conversation's sandbox is gone mid-prompt: a
    fresh sandbox on another host, restored from the latest ``snapshot``,
    telling the model which of its ``calls`` were lost. None when the
    error is not that, or the snapshot is not in the object store (or there
    is none): the run then fails as before."""
    gone = affinity.host_gone(error)
    if gone is None or snapshot is None or snapshot.where != IN_STORE or not snapshot.key:
        return None
    old = sandbox.host.id if sandbox.host else "?"
    count_host_gone(old, "recovered")
    host = await affinity.choose_host(sandbox.provider)
    fresh = given.sandbox(sandbox.provider, host)
    lost = "; ".join(calls) or "none"
    progress.enter(
        WORKING,
        restored=f"host {old!r} is gone: the workspace restored from its snapshot of "
        f"{snapshot.taken} on {host.id if host else 'any worker'}, and the prompt redone "
        f"from there ({len(calls)} calls lost)",
    )
    note = (
        f"[The host that held this workspace ({old}) is gone. The workspace was restored "
        f"from its snapshot of {snapshot.taken}; the effects of these calls, made after "
        f"it, were lost: {lost}. Redo what the task still needs.]"
    )
    return Recovered(fresh, snapshot, {"role": "user", "content": note})
