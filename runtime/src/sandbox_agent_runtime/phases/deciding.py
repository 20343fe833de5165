"""A call that waits for a person (with approvals): the
request shown, and the decision the run takes, a person's (``check()``
refuses any other before it reaches history) or, after the wait, a
rejection saying nobody decided.

The approvers this worker trusts are set at its start (approvers.trust()),
in the one approvers module: this module is passed through the workflow
sandbox (worker.PASSED_THROUGH), so the validator reads them there, never
from a copy the sandbox imported afresh (cryptography cannot be)."""

from dataclasses import asdict
from datetime import timedelta

from agents.items import ToolApprovalItem
from temporalio import workflow
from temporalio.exceptions import ApplicationError

from sandbox_agent_runtime import approvals
from sandbox_agent_runtime.approvals import Approvals, Decision, NotAPerson, Request
from sandbox_agent_runtime.costs import count_action
from sandbox_agent_runtime.observability import count_approval
from sandbox_agent_runtime.shared import mcp_server_named

# Where the workflow sandbox imports this module first, what it imports
# passes through with it: approvers' cryptography cannot be imported afresh
# there (its Rust core aborts the process).
with workflow.unsafe.imports_passed_through():
    import sandbox_agent_runtime.approvers as approvers


async def decision_on(item: ToolApprovalItem, pending: Approvals, wait: timedelta) -> Decision:
    """Wait for a person's decision on ``item`` (at most ``wait``; then it
    is rejected, saying so). A tool approved for the rest of the run needs
    none. The DECIDE update records decisions in ``pending``."""
    tool, call_id = item.name or "tool", item.call_id or str(workflow.uuid4())
    if tool in pending.always:
        return Decision(call_id, approve=True, always=True)
    asked = workflow.now()
    # An MCP server's tool (mcp_servers.py) is shown with its server's name.
    origin = item.tool_origin
    named = origin.mcp_server_name if origin is not None else None
    server = mcp_server_named(named) if named else None
    detail = approvals.detail_of(tool, item.arguments or "", server)
    request = Request(call_id, tool, detail, asked.isoformat())
    pending.pending[call_id] = request
    workflow.set_current_details(approvals.current_details(workflow.info().workflow_id, request))
    count_action()  # the wait's timer
    try:
        await workflow.wait_condition(lambda: call_id in pending.decided, timeout=wait)
        decision = pending.decided[call_id]
    except TimeoutError:
        decision = approvals.timed_out(call_id, wait)
        pending.record(decision)
    workflow.set_current_details("")
    count_approval(decision, workflow.now() - asked)
    return decision


def check(decision: Decision, pending: Approvals, approving: bool) -> None:
    """Refuse a decision (before it is written to history: the update's
    validator) on an unknown or decided call, one that no approver signed
    over the request as it was shown, and any decision when
    the service takes no approvals (``approving`` False)."""
    if not approving:
        raise ApplicationError(
            'This service takes no approvals (its approval is "none"): nothing in '
            "its runs waits for a decision.",
            type="NoApprovals",
        )
    pending.check(decision)
    request = pending.pending[decision.call_id]
    if decision.timed_out:
        raise NotAPerson("only the run itself times a request out")
    signed = approvers.message(
        workflow.info().workflow_id,
        workflow.info().run_id,
        asdict(request),
        decision.approve,
        decision.always,
        decision.reason,
    )
    # cryptography imports the exception it raises for a bad signature
    # when it raises it: from the worker's modules, not the sandbox's
    # (imported afresh there, its Rust core aborts the process).
    with workflow.unsafe.imports_passed_through():
        refused = approvers.refusal(signed, decision.approver, decision.signature)
    if refused is not None:
        raise NotAPerson(refused)
