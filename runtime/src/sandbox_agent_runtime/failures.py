"""How a step that Temporal stopped retrying failed, in one line a person
can act on: which step, how (``GAVE_UP``) and the reason. The run's failure
says it, and so does an answer whose outputs were withheld
(workspace/steps.py)."""

from temporalio.exceptions import ActivityError, RetryState

from sandbox_agent_runtime.shared import step_name

# How an activity that Temporal stopped retrying failed, in words.
GAVE_UP: dict[RetryState | None, str] = {
    RetryState.NON_RETRYABLE_FAILURE: "failed with an error that retrying cannot fix",
    RetryState.MAXIMUM_ATTEMPTS_REACHED: "kept failing until its retries ran out",
    RetryState.TIMEOUT: "timed out",
}


# Errors whose message alone does not say what went wrong, by type.
UNCLEAR_ERRORS = {"JSONDecodeError": "its answer was not JSON"}


def describe(error: ActivityError) -> str:
    """One line a person can act on: which step failed, how, and the reason."""
    reason: BaseException = error
    while reason.__cause__ is not None:
        reason = reason.__cause__
    message = getattr(reason, "message", str(reason))
    unclear = UNCLEAR_ERRORS.get(getattr(reason, "type", None) or "")
    if unclear:
        message = f"{unclear} ({message})"
    return f"{step_name(error.activity_type)} {GAVE_UP[error.retry_state]}: {message}"
