{% set bound = cookiecutter | host_bound_backends -%}
{% set modules = (["affinity"] if bound else []) + (["approvals"] if cookiecutter.approval != "none" else []) -%}
"""A ``SandboxAgent`` whose every sandbox operation is a Temporal activity.

The agent gets a machine to work on: a shell to run commands in and a
filesystem to read and write. The plugin turns each of those operations
(creating the session, each command, each read and write, the teardown) into
an activity against the sandbox provider the worker registered under
``SANDBOX_PROVIDER``. Four consequences:

1. Each sandbox operation is retried on its own and shows up in the workflow's
   history, so a flaky command is a retried activity, not a lost run.
2. The sandbox session's state is recorded with the workflow, so a worker that
   restarts part-way through a run resumes against the same session.
{%- if bound %}
3. A sandbox that lives on one host (a local workspace, a container on the
   host's own engine) gets every operation on that host, however many
   workers share the task queue (affinity.py).
{%- else %}
3. The sandbox is a remote service's, reached over the network: any worker
   on the task queue runs its next operation, so a run whose worker is gone
   goes on on another, in the same sandbox.
{%- endif %}
4. A long run becomes a chain of runs under one workflow id (chain.py): each
   continues as new before its history grows large, handing the next the
   conversation and the same sandbox, so no run meets Temporal's size limits.

Workflow code must be deterministic: everything that touches the outside world
(the model, the sandbox) happens in activities, never here.
"""

import asyncio
from dataclasses import asdict
from datetime import timedelta

from agents import AgentsException, MaxTurnsExceeded, Runner
{%- if cookiecutter.approval != "none" %}
from agents.items import ToolApprovalItem
{%- endif %}
from agents.run import RunConfig
from agents.sandbox import SandboxRunConfig
from agents.sandbox.manifest import Environment, Manifest
from agents.sandbox.snapshot import NoopSnapshotSpec
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, FailureError, RetryState
from temporalio.openai_agents import AgentsWorkflowError, TemporalWorkerEnvValue
{% if modules %}
from {{ cookiecutter.package_name }}.machinery import {{ modules | join(", ") }}
{%- endif %}
{%- if cookiecutter.approval != "none" %}
from {{ cookiecutter.package_name }}.machinery.approvals import (
    Approvals,
    Decision,
    NotAPerson,
    Request,
    UnknownRequest,
)
{%- endif %}
from {{ cookiecutter.package_name }}.machinery.backends import SANDBOX_BACKENDS
from {{ cookiecutter.package_name }}.machinery.chain import (
    Carried,
    HistoryBudget,
    HistoryFull,
    LastingSandboxClient,
    bounded,
    bounded_model_input,
    conversation_so_far,
)
from {{ cookiecutter.package_name }}.machinery.observability import (
    Usage,
{%- if cookiecutter.approval != "none" %}
    count_approval,
{%- endif %}
    count_run,
    run_outcome,
)
from {{ cookiecutter.package_name }}.machinery.registry import sandbox_agent
from {{ cookiecutter.package_name }}.machinery.sandbox_tools import TOLD_WHEN_NOT_FOUND
{%- if cookiecutter.approval != "none" %}

# The approvers this worker trusts are set at its start (approvers.trust());
# the workflow's update validator reads them from this one module, shared with
# the workflow sandbox instead of imported afresh in it (cryptography cannot
# be). Imported by its full name: `from <package> import approvers` would
# import it afresh, as a part of the package the sandbox imported afresh.
with workflow.unsafe.imports_passed_through():
    import {{ cookiecutter.package_name }}.machinery.approvers as approvers
{%- endif %}
from {{ cookiecutter.package_name }}.machinery.shared import (
{%- if cookiecutter.approval != "none" %}
    DECIDE,
    PENDING,
{%- endif %}
{%- if bound %}
    SANDBOX_HOST_WAIT,
{%- endif %}
    SANDBOX_PROVIDER,
    USAGE_MEMO,
    WORKFLOW_TYPE,
    step_name,
)
from {{ cookiecutter.package_name }}.runs import (
{%- if cookiecutter.approval != "none" %}
    APPROVAL_TIMEOUT,
{%- endif %}
    MAX_TURNS,
    SANDBOX_ACTIVITY_TIMEOUT,
    SANDBOX_SECRETS,
)

# A sandbox operation that keeps failing ends the run after a few attempts
# (about 15 seconds of back-off) instead of backing off for ever. An error
# that no retry can fix (one the SDK marks so, or one of a backend's
# NON_RETRYABLE_ERRORS: a rejected key, an unknown template) ends it at once.
SANDBOX_RETRY_POLICY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=5,
    non_retryable_error_types=[
        error for backend in SANDBOX_BACKENDS.values() for error in backend.NON_RETRYABLE_ERRORS
    ],
)


# On a versioned worker (versioning.py) a run stays on the build it started
# on (the worker's default behaviour, PINNED: a workflow that names one fails
# on an unversioned worker), so a deploy never replays new code into it; the
# next run of its chain starts on the current build (continue_as_new below).
@workflow.defn(name=WORKFLOW_TYPE)
class SandboxAgentWorkflow:
    # The most model turns a run may take, across its whole chain.
    max_turns = MAX_TURNS
{%- if bound %}
    # How long an operation of a sandbox on a host waits for that host's
    # workers before the host is taken for gone.
    host_wait = SANDBOX_HOST_WAIT
{%- endif %}
{%- if cookiecutter.approval != "none" %}
    # How long a call waits for a person's decision (approvals.py).
    approval_timeout = APPROVAL_TIMEOUT

    def __init__(self) -> None:
        self.approvals = Approvals()
{%- endif %}

    @workflow.run
    async def run(
        self, prompt: str, provider: str = SANDBOX_PROVIDER, carried: Carried | None = None
    ) -> str:
        """Run the agent on ``prompt`` in a sandbox of ``provider``; a run
        that continues an earlier one of its chain gets what it ``carried``."""
        try:
            answer = await self._run(prompt, provider, carried)
        except BaseException as e:
            outcome = run_outcome(e)
            if outcome is not None:
                count_run(outcome)
            raise
        count_run("completed")
        return answer

    async def _run(self, prompt: str, provider: str, carried: Carried | None) -> str:
        if carried is not None and workflow.info().continued_run_id is None:
            # Only a run that continued as new from an earlier run of its
            # chain (same workflow id: Temporal sets continued_run_id, no
            # client can) is handed state. A client's own would choose the
            # sandbox to resume and remove{{ ", and the tools approved" if cookiecutter.approval != "none" }}.
            raise ApplicationError(
                "This run was started with carried state (the third argument), which only "
                "the run it continues from may hand it: start a run with a prompt and a "
                "provider only.",
                type="ForgedCarriedState",
                non_retryable=True,
            )
        if provider not in SANDBOX_BACKENDS:
            raise ApplicationError(
                f"Unknown sandbox provider {provider!r}: "
                f"this service registers {', '.join(SANDBOX_BACKENDS)}.",
                type="UnknownSandboxProvider",
                non_retryable=True,
            )
{%- if bound %}
        # The host the sandbox lives on, if it is bound to one: chosen once
        # per chain, before the sandbox is created, then handed on with it.
        host = carried.host if carried else await affinity.choose_host(provider)
{%- endif %}
        # Must match the name the worker registered the provider under.
        sandbox = LastingSandboxClient(
            provider,
            workflow.ActivityConfig(
                start_to_close_timeout=SANDBOX_ACTIVITY_TIMEOUT,
                retry_policy=SANDBOX_RETRY_POLICY,
{%- if bound %}
                **affinity.routed_to(host, self.host_wait),
{%- endif %}
            ),
{%- if bound %}
            host,
{%- endif %}
        )
        try:
            return await self._run_agent(prompt, provider, sandbox, carried)
        except AgentsException as e:
            # An exception escaping workflow code fails only the workflow
            # *task*, which Temporal retries for ever: the run would hang.
            # Turn the agent's own errors (too many turns, a malformed model
            # response, ...) into a failed run a person can read.
            raise ApplicationError(
                f"The agent could not finish: {e}",
                type=type(e).__name__,
                non_retryable=True,
            ) from e
        except (ActivityError, AgentsWorkflowError) as e:
{%- if bound %}
            gone = affinity.host_gone(e)
            if gone is not None and host is not None:
                raise affinity.host_gone_failure(host, gone, self.host_wait) from e
{%- endif %}
            # A model call or a sandbox operation failed for good: say which,
            # and why, in the failure the starter and the Web UI show.
            failed = e if isinstance(e, ActivityError) else e.__cause__
            if not isinstance(failed, ActivityError) or failed.retry_state not in GAVE_UP:
                raise  # e.g. the run was cancelled: let it end as cancelled
            raise ApplicationError(
                f"The agent could not finish: {describe(failed)}",
                type="ActivityFailed",
                non_retryable=True,
            ) from e

    async def _run_agent(
        self,
        prompt: str,
        provider: str,
        sandbox: LastingSandboxClient,
        carried: Carried | None,
    ) -> str:
        backend = SANDBOX_BACKENDS[provider]
        agent = sandbox_agent()
        run_config = RunConfig(
            sandbox=SandboxRunConfig(
                client=sandbox,
                options=backend.sandbox_options(),
                # The sandbox an earlier run of the chain left running, if any.
                session_state=sandbox.state_from(carried) if carried else None,
                # Only the names of the variables forwarded to the sandbox
                # (SANDBOX_SECRETS) travel with the run; the worker resolves
                # each one when the sandbox needs it.
                manifest=Manifest(
                    root=backend.WORKSPACE_ROOT,
                    environment=Environment(
                        value={name: TemporalWorkerEnvValue(name=name) for name in SANDBOX_SECRETS}
                    ),
                ),
                # No snapshot of the workspace is written when the session ends.
                snapshot=NoopSnapshotSpec(),
            ),
            call_model_input_filter=bounded_model_input,
            # A call of a tool the agent lacks is told to the model, which
            # can correct it, instead of ending the run (sandbox_tools.py).
            tool_not_found_behavior=TOLD_WHEN_NOT_FOUND,
        )
        turns_before = carried.turns if carried else 0
        budget = self.run_hooks(carried.usage if carried else Usage())
{%- if cookiecutter.approval != "none" %}
        if carried:
            self.approvals.always = set(carried.always_approved)
{%- endif %}
        try:
            result = await Runner.run(
                agent,
                carried.conversation if carried else prompt,  # type: ignore[arg-type]
                max_turns=self.max_turns - turns_before,
                run_config=run_config,
                hooks=budget,
            )
{%- if cookiecutter.approval != "none" %}
            # Calls that wait for a person: decide each, then go on from there
            # (the state holds the turns left; hooks are not in it).
            while result.interruptions:
                state = result.to_state()
                for item in result.interruptions:
                    decision = await self._decision_on(item)
                    if decision.approve:
                        state.approve(item, always_approve=decision.always)
                    else:
                        state.reject(item, rejection_message=decision.reason)
                result = await Runner.run(agent, state, run_config=run_config, hooks=budget)
{%- endif %}
        except HistoryFull as full:
            assert full.run_data is not None
            # The rest of the work goes to a fresh run with the same id: same
            # conversation, same sandbox, the turns left.
            workflow.continue_as_new(
                args=[
                    prompt,
                    provider,
                    Carried(
                        conversation=bounded(conversation_so_far(full.run_data)),  # type: ignore[arg-type]
                        session_state=sandbox.carried_state(),
                        turns=turns_before + budget.turns,
                        run=(carried.run if carried else 1) + 1,
                        usage=budget.usage,
{%- if bound %}
                        host=sandbox.host,
{%- endif %}
{%- if cookiecutter.approval != "none" %}
                        always_approved=sorted(self.approvals.always),
{%- endif %}
                    ),
                ],
                memo={USAGE_MEMO: asdict(budget.usage)},
                # On the deployment's current build, which reads this Carried.
                initial_versioning_behavior=workflow.ContinueAsNewVersioningBehavior.AUTO_UPGRADE,
            )
        except MaxTurnsExceeded as e:
            await self._remove(sandbox, e)
            raise MaxTurnsExceeded(f"Max turns ({self.max_turns}) exceeded") from e
        except BaseException as e:
            # A bug in workflow code (a KeyError, say) fails only the workflow
            # task, which Temporal retries until fixed code is deployed: the
{%- if bound %}
            # run goes on then, in the same sandbox. Only an error that ends
            # the run removes it, unless its host is gone (nothing can reach it).
            if ends_the_run(e) and affinity.host_gone(e) is None:
{%- else %}
            # run goes on then, in the same sandbox. Only an error that ends
            # the run removes it.
            if ends_the_run(e):
{%- endif %}
                await self._remove(sandbox, e)
            raise
        await sandbox.remove()
        return result.final_output_as(str, raise_if_incorrect_type=True)

{%- if cookiecutter.approval != "none" %}

    @workflow.query(name=PENDING)
    def pending(self) -> list[Request]:
        """The calls waiting for a person, oldest first."""
        return list(self.approvals.pending.values())

    @workflow.update(name=DECIDE)
    async def decide(self, decision: Decision) -> str:
        """A person's decision on a waiting call."""
        try:
            self.approvals.record(decision)
        except UnknownRequest as e:
            # The update fails, not the workflow task (the validator refuses
            # such a decision first; this covers one that raced another).
            raise ApplicationError(str(e), type="UnknownRequest", non_retryable=True) from e
        return "approved" if decision.approve else "rejected"

    @decide.validator
    def only_a_person_on_a_waiting_call(self, decision: Decision) -> None:
        # Refused here, a decision is never written to history: one on an
        # unknown or decided call, and one that no approver signed over the
        # request as it was shown (approvers.py). A replay never runs this.
        self.approvals.check(decision)
        request = self.approvals.pending[decision.call_id]
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

    async def _decision_on(self, item: ToolApprovalItem) -> Decision:
        """Wait for a person's decision on ``item`` (at most
        ``approval_timeout``; then it is rejected, saying so)."""
        tool, call_id = item.name or "tool", item.call_id or str(workflow.uuid4())
        if tool in self.approvals.always:
            return Decision(call_id, approve=True, always=True)
        asked = workflow.now()
        request = Request(
            call_id,
            tool,
            approvals.detail_of(tool, item.arguments or ""),
            asked.isoformat(),
        )
        self.approvals.pending[call_id] = request
        workflow.set_current_details(
            approvals.current_details(workflow.info().workflow_id, request)
        )
        try:
            await workflow.wait_condition(
                lambda: call_id in self.approvals.decided, timeout=self.approval_timeout
            )
            decision = self.approvals.decided[call_id]
        except TimeoutError:
            decision = approvals.timed_out(call_id, self.approval_timeout)
            self.approvals.record(decision)
        workflow.set_current_details("")
        count_approval(decision, workflow.now() - asked)
        return decision
{%- endif %}

    def run_hooks(self, usage: Usage) -> HistoryBudget:
        """The hooks of the agent's run: they count this run's turns and the
        chain's model calls and tokens (from ``usage``), and stop the run for
        the next of its chain when its history is full."""
        return HistoryBudget(usage=usage)

    async def _remove(self, sandbox: LastingSandboxClient, ending: BaseException) -> None:
        """Remove the sandbox of a run that ``ending`` ends; a removal that
        fails is logged, and the run ends with its own reason."""
        try:
            await sandbox.remove()
        except Exception as e:
            workflow.logger.warning(
                f"The sandbox of a run that ended ({ending}) was not removed: {e}"
            )


def ends_the_run(error: BaseException) -> bool:
    """Whether ``error`` ends the run (a failure, a cancellation: _run turns
    the agent's own errors into failures) rather than fail the workflow task."""
    return isinstance(
        error, FailureError | AgentsWorkflowError | AgentsException | asyncio.CancelledError
    )


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
