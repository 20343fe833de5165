"""How a run that fails ends: which errors end it (``ends_the_run()``), its
sandbox removed on the way out whatever ended it (``remove()``, or the place
it was left said), and the failure a person reads (``failure()``) in place
of the agent's own errors and of steps that Temporal stopped retrying. And
how any run ends: its callback posted (``call_back()``)."""

import asyncio
import dataclasses

from agents import AgentsException
from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, FailureError
from temporalio.openai_agents import AgentsWorkflowError

from sandbox_agent_runtime import affinity
from sandbox_agent_runtime.callbacks import (
    ATTEMPT_TIMEOUT,
    CALLBACK_ACTIVITY,
    CALLBACK_DEADLINE,
    CALLBACK_PATCH,
    CALLBACK_RETRY_POLICY,
    callback_of,
)
from sandbox_agent_runtime.chain import LastingSandboxClient
from sandbox_agent_runtime.failures import GAVE_UP, describe
from sandbox_agent_runtime.observability import Usage, count_host_gone
from sandbox_agent_runtime.phases.given import Given
from sandbox_agent_runtime.run_request import RunAnswer
from sandbox_agent_runtime.shared import SANDBOX_LEFT_MEMO
from sandbox_agent_runtime.workspace.requests import Snapshot
from sandbox_agent_runtime.workspace.steps import forget


def ends_the_run(error: BaseException) -> bool:
    """Whether ``error`` ends the run (a failure, a cancellation: the
    workflow turns the agent's own errors into failures) rather than fail
    the workflow task. A bug in workflow code (a KeyError, say) fails only
    the workflow task, which Temporal retries until fixed code is deployed:
    the run goes on then, in the same sandbox."""
    return isinstance(
        error, FailureError | AgentsWorkflowError | AgentsException | asyncio.CancelledError
    )


async def remove(
    sandbox: LastingSandboxClient, ending: BaseException, given: Given, snapshot: Snapshot | None
) -> None:
    """Remove the sandbox of a run that ``ending`` ends (whatever it is:
    a step that failed for good, the agent's own error, a cancellation),
    and the conversation's last ``snapshot``, which nothing will restore,
    unless their host is gone with them (nothing can reach it). A removal
    that fails is logged and written in the run's SANDBOX_LEFT_MEMO, which
    names the sandbox, so the one left behind can be found; the run ends
    with its own reason."""
    if given.host_bound and affinity.host_gone(ending) is not None:
        return
    try:
        await sandbox.remove()
    except Exception as e:
        why = said(e)
        workflow.logger.warning(
            f"The sandbox of a run that ended ({str(ending) or type(ending).__name__}) was not "
            f"removed: {why}"
        )
        workflow.upsert_memo({SANDBOX_LEFT_MEMO: left_behind(sandbox, why)})
    try:
        await forget(sandbox, snapshot)
    except Exception as e:
        workflow.logger.warning(f"The last snapshot of a run that ended was not deleted: {said(e)}")


def said(error: Exception) -> str:
    """``error`` in one line (a step that failed for good: which, and why)."""
    if isinstance(error, ActivityError) and error.retry_state in GAVE_UP:
        return describe(error)
    return str(error)


def left_behind(sandbox: LastingSandboxClient, why: str) -> dict[str, str]:
    """What SANDBOX_LEFT_MEMO says of a sandbox a run could not remove:
    its provider, its host (a host-bound backend's), its session id (the
    backends label their sandboxes with the run's workflow id too:
    backends.workflow_key) and why."""
    state = sandbox.inner.state if sandbox.inner is not None else sandbox.handed_on
    return {
        "provider": sandbox.provider,
        "host": sandbox.host.id if sandbox.host is not None else "",
        "session": str(state.session_id) if state is not None else "",
        "why": why,
    }


def failure(
    error: AgentsException | ActivityError | AgentsWorkflowError,
    sandbox: LastingSandboxClient,
    given: Given,
) -> ApplicationError | None:
    """The failure a run raising ``error`` ends with, said so a person can
    act on it; None when ``error`` says it as it is (a cancellation, say).

    An exception escaping workflow code fails only the workflow *task*,
    which Temporal retries for ever: the run would hang. So the agent's own
    errors (too many turns, a malformed model response, ...) become a
    failed run, and so does a model call or a sandbox operation that failed
    for good, saying which and why; a sandbox whose host is gone, naming
    the host."""
    if isinstance(error, AgentsException):
        return ApplicationError(
            f"The agent could not finish: {error}", type=type(error).__name__, non_retryable=True
        )
    gone = affinity.host_gone(error) if given.host_bound else None
    if gone is not None and sandbox.host is not None:
        count_host_gone(sandbox.host.id, "failed")
        return affinity.host_gone_failure(sandbox.host, gone, given.host_wait)
    failed = error if isinstance(error, ActivityError) else error.__cause__
    if not isinstance(failed, ActivityError) or failed.retry_state not in GAVE_UP:
        return None  # e.g. the run was cancelled: it ends as cancelled
    return ApplicationError(
        f"The agent could not finish: {describe(failed)}",
        type="ActivityFailed",
        non_retryable=True,
    )


async def call_back(
    url: str,
    state: str,
    answer: RunAnswer | None,
    usage: Usage,
    error: BaseException | None = None,
) -> None:
    """Post the run's end to its callback ``url``, if it has one
    (callbacks.py): ``state``, and its ``answer`` or the ``error`` that
    ended it. Called once per chain, when it ends (a continue-as-new is no
    end). A callback that fails for good is logged; the run ends as it
    would have."""
    if not url or not workflow.patched(CALLBACK_PATCH):
        return
    info = workflow.info()
    reason = ""
    if error is not None:
        reason = (error.message if isinstance(error, FailureError) else str(error)) or (
            "the run was cancelled"
        )
    callback = callback_of(
        url,
        # The chain's, the same on every attempt; never a "." (the signed
        # text joins it with one).
        f"msg_{info.first_execution_run_id.replace('-', '')}",
        info.workflow_id,
        state,
        answer,
        dataclasses.asdict(usage),
        reason,
        workflow.now(),
    )
    try:
        await workflow.execute_activity(
            CALLBACK_ACTIVITY,
            callback,
            start_to_close_timeout=ATTEMPT_TIMEOUT * 2,
            schedule_to_close_timeout=CALLBACK_DEADLINE,
            retry_policy=CALLBACK_RETRY_POLICY,
        )
    except ActivityError as e:
        cause = e.cause.message if isinstance(e.cause, FailureError) else str(e)
        workflow.logger.warning(f"The run's callback was not delivered: {cause}")
