"""What the Temporal service or a run refused, as typed errors: each says
why in one line and carries no exit status and no HTTP status; each command
maps them to its own (the starter's and the evaluator's exit statuses, the
API's problems)."""


class ClientError(Exception):
    """A refusal, or a call the service could not answer; the message is one line."""


class RunNotFound(ClientError):
    """No workflow ``workflow_id`` (or no run ``run_id`` of it), or another
    service's: the same, so a service learns nothing of another's runs."""

    def __init__(self, workflow_id: str, namespace: str, run_id: str | None = None) -> None:
        super().__init__(f"no such workflow {workflow_id!r} in namespace {namespace!r}.")
        self.workflow_id = workflow_id
        self.namespace = namespace
        self.run_id = run_id


class RunEnded(ClientError):
    """The run has closed: it takes no follow-up, no end and no decision.
    ``status`` is how it closed, in words ("completed", "timed out"), or None
    when it closed as it was asked."""

    def __init__(self, workflow_id: str, status: str | None = None) -> None:
        super().__init__(f"workflow {workflow_id} has ended" + (f" ({status})" if status else ""))
        self.workflow_id = workflow_id
        self.status = status


class Refused(ClientError):
    """The run refused an update: its validator's ``reason``, in its words;
    the message says what to do instead where the refusal is a known one."""

    def __init__(self, workflow_id: str, reason: str, line: str | None = None) -> None:
        super().__init__(line or f"workflow {workflow_id} refused it: {reason}")
        self.workflow_id = workflow_id
        self.reason = reason


class BadFollowUp(Refused):
    """The run refused a follow-up it cannot take as sent (its budget, its text)."""


class StillWorking(Refused):
    """The conversation is still working on a prompt."""


class NoFollowUps(Refused):
    """The run was started without follow-ups (``RunRequest.follow_ups``)."""


class ConversationEnded(Refused):
    """The conversation has ended."""


class NoWorker(ClientError):
    """No worker answered for the run within WORKER_ANSWERS_WITHIN."""

    def __init__(self, workflow_id: str, within_seconds: float) -> None:
        super().__init__(
            f"no worker answered for workflow {workflow_id} within {within_seconds:.0f} s"
        )
        self.workflow_id = workflow_id
        self.within_seconds = within_seconds


class StoppedAnswering(ClientError):
    """The Temporal service did not answer for SERVICE_OUTAGE_LIMIT."""
