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
import dataclasses
from dataclasses import asdict
from datetime import timedelta
from typing import Any

from agents import AgentsException, MaxTurnsExceeded, Runner
{%- if cookiecutter.approval != "none" %}
from agents.items import ToolApprovalItem
{%- endif %}
from agents.run import RunConfig
from agents.sandbox import SandboxAgent, SandboxRunConfig
from agents.sandbox.manifest import Environment, Manifest
from agents.sandbox.snapshot import NoopSnapshotSpec
from pydantic import BaseModel, TypeAdapter, ValidationError
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
from {{ cookiecutter.package_name }}.machinery.archives import size_text
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
from {{ cookiecutter.package_name }}.machinery.run_request import Outputs, RunAnswer, RunRequest
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
    COLLECT,
{%- if cookiecutter.approval != "none" %}
    DECIDE,
    PENDING,
{%- endif %}
    PLACE,
{%- if bound %}
    SANDBOX_HOST_WAIT,
{%- endif %}
    USAGE_MEMO,
    WORKFLOW_TYPE,
    step_name,
)
from {{ cookiecutter.package_name }}.machinery.workspace import CollectArgs, PlaceArgs, Placed
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
    async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
        """Run the agent on ``request`` (its prompt, in a workspace of its
        provider holding its inputs); a run that continues an earlier one of
        its chain gets what that one ``carried`` as well (no client may)."""
        try:
            answer = await self._run(request, carried)
        except BaseException as e:
            outcome = run_outcome(e)
            if outcome is not None:
                count_run(outcome)
            raise
        count_run("completed")
        return answer

    async def _run(self, request: RunRequest, carried: Carried | None) -> RunAnswer:
        request = run_request(request)
        provider = request.provider
        if carried is not None and workflow.info().continued_run_id is None:
            # Only a run that continued as new from an earlier run of its
            # chain (same workflow id: Temporal sets continued_run_id, no
            # client can) is handed state. A client's own would choose the
            # sandbox to resume and remove{{ ", and the tools approved" if cookiecutter.approval != "none" }}.
            raise ApplicationError(
                "This run was started with carried state (the second argument), which only "
                "the run it continues from may hand it: start a run with a RunRequest only.",
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
            return await self._run_agent(request, sandbox, carried)
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
        request: RunRequest,
        sandbox: LastingSandboxClient,
        carried: Carried | None,
    ) -> RunAnswer:
        backend = SANDBOX_BACKENDS[request.provider]
        agent = self.agent()
        run_config = RunConfig(
            sandbox=SandboxRunConfig(
                client=sandbox,
                options=backend.sandbox_options(),
                # The sandbox an earlier run of the chain left running, if any.
                session_state=sandbox.state_from(carried) if carried else None,
                manifest=workspace_manifest(agent, backend.WORKSPACE_ROOT, request),
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
        placed = carried.placed if carried else None
        if carried is None and (request.inputs or request.repo or agent.default_manifest):

            async def place() -> None:
                nonlocal placed
                placed = (await self._place(sandbox, request)).model_dump()

            budget.before_first_turn = place
{%- if cookiecutter.approval != "none" %}
        if carried:
            self.approvals.always = set(carried.always_approved)
{%- endif %}
        try:
            result = await Runner.run(
                agent,
                carried.conversation if carried else request.prompt,  # type: ignore[arg-type]
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
                    # Its inputs are in the workspace already.
                    dataclasses.replace(request, inputs=[]),
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
                        placed=placed,
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
        try:
            outputs = await self._collect(sandbox, request, placed)
        except BaseException as e:
            if ends_the_run(e):
                await self._remove(sandbox, e)
            raise
        await sandbox.remove()
        return answer_of(result.final_output, outputs)

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

    async def _place(self, sandbox: LastingSandboxClient, request: RunRequest) -> Placed:
        """Put the run's inputs and repository in the workspace (an
        activity: workspace.py), before the agent's first turn."""
        assert sandbox.inner is not None
        config: workflow.ActivityConfig = {**sandbox.config, "summary": placing(request)}
        placed: Placed = await workflow.execute_activity(
            f"{request.provider}-{PLACE}",
            PlaceArgs(state=sandbox.inner.state, inputs=request.inputs, repo=request.repo),
            result_type=Placed,
            **config,
        )
        return placed

    async def _collect(
        self, sandbox: LastingSandboxClient, request: RunRequest, placed: dict[str, Any] | None
    ) -> Outputs:
        """Every file the run created or changed (an activity: workspace.py)."""
        if sandbox.inner is None and sandbox.handed_on is not None:
            await sandbox.resume(sandbox.handed_on)
        if sandbox.inner is None:
            return Outputs()
        before = Placed(**placed) if placed else Placed()
        config: workflow.ActivityConfig = {**sandbox.config, "summary": "output"}
        outputs: Outputs = await workflow.execute_activity(
            f"{request.provider}-{COLLECT}",
            CollectArgs(
                state=sandbox.inner.state,
                baseline=before.baseline,
                repo=request.repo,
                commit=before.commit,
            ),
            result_type=Outputs,
            **config,
        )
        return outputs

    def agent(self) -> SandboxAgent[Any]:
        """The agent of this run: agent.py's (a test's variant of this
        workflow gives another, with files or an output_type of its own)."""
        return sandbox_agent()

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


def run_request(given: RunRequest | Any) -> RunRequest:
    """The run's request as a ``RunRequest``. Temporal converts a run's
    arguments by their types only when it has one for every parameter, so a
    client's start (the request alone, without the chain's ``carried``)
    arrives as JSON, read here; one that is not a request ends the run."""
    if isinstance(given, RunRequest):
        return given
    try:
        return TypeAdapter(RunRequest).validate_python(given)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the request"
        raise ApplicationError(
            f"The run's request is not a RunRequest: {where}: {first['msg']} "
            "(give prompt, and optionally provider, inputs, repo: run_request.py).",
            type="BadRunRequest",
            non_retryable=True,
        ) from None


def workspace_manifest(agent: SandboxAgent[Any], root: str, request: RunRequest) -> Manifest:
    """The run's manifest: the agent's own ``default_manifest`` (agent.py:
    its files, its environment), at the backend's workspace root, with the
    names of the variables forwarded to the sandbox (SANDBOX_SECRETS: the
    worker resolves each one when the sandbox needs it, so no value travels
    with the run). An input named like one of the agent's entries, or a
    variable of the agent's named like a forwarded one, ends the run."""
    own = agent.default_manifest or Manifest()
    names = [item.name for item in request.inputs] + ([request.repo.name] if request.repo else [])
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ApplicationError(
            f"Two of the run's inputs (its repository's directory among them) are named "
            f"{twice[0]!r}: each needs a name of its own.",
            type="InputClash",
            non_retryable=True,
        )
    entries = {str(path).strip("/").split("/", 1)[0] for path in own.entries}
    clash = sorted(set(names) & entries)
    if clash:
        raise ApplicationError(
            f"The run's input {clash[0]!r} has the name of an entry of the agent's "
            "default_manifest (agent.py): rename the input, or the entry.",
            type="InputClash",
            non_retryable=True,
        )
    variables = dict(own.environment.value)
    forwarded = sorted(set(variables) & set(SANDBOX_SECRETS))
    if forwarded:
        raise ApplicationError(
            f"The agent's default_manifest (agent.py) sets {forwarded[0]!r}, which the worker "
            "forwards to the sandbox (SANDBOX_SECRETS in runs.py): keep it in one of them.",
            type="EnvironmentClash",
            non_retryable=True,
        )
    variables.update({name: TemporalWorkerEnvValue(name=name) for name in SANDBOX_SECRETS})
    return own.model_copy(
        update={"root": root, "environment": Environment(value=variables)}, deep=True
    )


def placing(request: RunRequest) -> str:
    """What the place step puts in the workspace, for history and progress."""
    parts = [
        f"{item.name}{'/' if item.kind == 'directory' else ''} ({size_text(item.size)})"
        for item in request.inputs
    ]
    if request.repo is not None:
        ref = f"@{request.repo.ref}" if request.repo.ref else ""
        parts.append(f"{request.repo.name}/ (git {request.repo.url}{ref})")
    return "input " + ", ".join(parts) if parts else "input (the agent's own files)"


def answer_of(output: Any, outputs: Outputs) -> RunAnswer:
    """The run's result: text as it is; an ``output_type``'s value (a
    pydantic model, a dataclass, ...) as JSON."""
    if isinstance(output, str):
        return RunAnswer(answer=output, outputs=outputs)
    if isinstance(output, BaseModel):
        return RunAnswer(answer=output.model_dump(mode="json"), structured=True, outputs=outputs)
    if dataclasses.is_dataclass(output) and not isinstance(output, type):
        return RunAnswer(answer=asdict(output), structured=True, outputs=outputs)
    return RunAnswer(answer=output, structured=True, outputs=outputs)


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
