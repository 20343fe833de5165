"""The client of the service that every command shares (the starter, the
HTTP API, the evaluations): connect, start a run and follow its steps,
approvals, follow-ups and the end; what a run refuses, as typed errors
(``ClientError`` and its kinds) that each command maps to its own exit status
or HTTP status."""

from sandbox_agent_runtime.client.approvals import (
    pending_requests,
    running_run,
    send_decision,
    send_signed,
    waiting_requests,
)
from sandbox_agent_runtime.client.connection import (
    SERVICE_OUTAGE_LIMIT,
    WORKER_ANSWERS_WITHIN,
    answered,
    chain_run,
    connected,
    continued_as,
    history_of,
    quiet_runtime,
    web_ui_link,
)
from sandbox_agent_runtime.client.conversation import (
    Taken,
    running_conversation,
    send_update,
    takes_follow_ups,
    update_taken,
)
from sandbox_agent_runtime.client.errors import (
    BadFollowUp,
    ClientError,
    ConversationEnded,
    NoFollowUps,
    NoWorker,
    Refused,
    RunEnded,
    RunNotFound,
    StillWorking,
    StoppedAnswering,
)
from sandbox_agent_runtime.client.runs import closed_as, described, session_memo
from sandbox_agent_runtime.client.steps import (
    LOCAL_ACTIVITY_MARKER,
    Progress,
    why_not_completed,
)

__all__ = [
    "LOCAL_ACTIVITY_MARKER",
    "SERVICE_OUTAGE_LIMIT",
    "WORKER_ANSWERS_WITHIN",
    "BadFollowUp",
    "ClientError",
    "ConversationEnded",
    "NoFollowUps",
    "NoWorker",
    "Progress",
    "Refused",
    "RunEnded",
    "RunNotFound",
    "StillWorking",
    "StoppedAnswering",
    "Taken",
    "answered",
    "chain_run",
    "closed_as",
    "connected",
    "continued_as",
    "described",
    "history_of",
    "pending_requests",
    "quiet_runtime",
    "running_conversation",
    "running_run",
    "send_decision",
    "send_signed",
    "send_update",
    "session_memo",
    "takes_follow_ups",
    "update_taken",
    "waiting_requests",
    "web_ui_link",
    "why_not_completed",
]
