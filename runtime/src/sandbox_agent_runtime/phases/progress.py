"""What a run shows of itself as it goes: where its conversation stands (the
CONVERSATION query, the SESSION_MEMO the Web UI and the starter read, and
the run's current details) and the chain's usage (the USAGE_MEMO)."""

import dataclasses
from dataclasses import asdict
from typing import Any

from temporalio import workflow

from sandbox_agent_runtime.observability import Usage, count_session, usage_memo
from sandbox_agent_runtime.run_request import ENDED, RELEASED, WAITING, WORKING, Conversation
from sandbox_agent_runtime.shared import CALLER_MEMO, SERVICE_MEMO, SESSION_MEMO, USAGE_MEMO


class Progress:
    """Where the run's conversation stands (``state``), and the usage its
    memo shows."""

    def __init__(self, state: Conversation) -> None:
        self.state = state
        self.usage_shown = Usage()
        # Whether the memo shows the whole cost (costs.RUN_COST), or a run
        # recorded before it, its tokens' alone.
        self.costs = False

    def enter(self, state: str, **changes: Any) -> None:
        """Record where the conversation stands: in the query's answer, the
        run's memo and its current details."""
        self.state = dataclasses.replace(
            self.state, state=state, since=workflow.now().isoformat(), **changes
        )
        workflow.upsert_memo({SESSION_MEMO: self.memo()})
        workflow.set_current_details(session_details(self.state))
        if state != WORKING:
            count_session(state)
        elif self.state.restored:
            count_session("restored")

    def show_usage(self, usage: Usage) -> None:
        """Show the chain's ``usage`` in the run's memo, where the starter
        reads it (usage_line), if it changed: once per prompt (and before
        waiting for a person) rather than at every model call, each memo
        update being an event in the history and work for the server."""
        if usage != self.usage_shown:
            workflow.upsert_memo({USAGE_MEMO: usage_memo(usage, self.costs)})
            self.usage_shown = dataclasses.replace(usage)

    def chain_memo(self, usage: Usage, follow_ups: bool) -> dict[str, Any]:
        """The memo the next run of the chain starts with."""
        memo: dict[str, Any] = {USAGE_MEMO: usage_memo(usage, self.costs)}
        if follow_ups:
            memo[SESSION_MEMO] = self.memo()
        # The service the chain belongs to, and who started it
        # through the API (api/callers.py): every run of the chain is theirs.
        for owner in (SERVICE_MEMO, CALLER_MEMO):
            recorded = workflow.memo_value(owner, None)
            if recorded is not None:
                memo[owner] = recorded
        return memo

    def memo(self) -> dict[str, Any]:
        memo = asdict(self.state)
        del memo["answer"]
        return memo


def session_details(state: Conversation) -> str:
    """Where a conversation stands, for the Web UI's current details."""
    if state.state == WAITING:
        return (
            f"Answered prompt {state.answered}; waiting for a follow-up since {state.since}, "
            "holding its sandbox."
        )
    if state.state == RELEASED:
        return (
            f"Answered prompt {state.answered}; waiting for a follow-up since {state.since}. "
            "Its sandbox is released: the workspace is in a snapshot, restored on a follow-up."
        )
    if state.state == ENDED:
        return f"Ended after {state.answered} answered prompts."
    restored = f" ({state.restored})" if state.restored else ""
    return f"Working on prompt {state.prompts}.{restored}"
