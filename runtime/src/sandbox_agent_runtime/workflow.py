"""A ``SandboxAgent`` whose every sandbox operation is a Temporal activity.

The agent gets a machine to work on: a shell to run commands in and a
filesystem to read and write. The plugin turns each of those operations
(creating the session, each command, each read and write, the teardown) into
an activity against the sandbox provider the run names (the service's
primary one unless it names another), as the worker registered it. Four
consequences:

1. Each sandbox operation is retried on its own and shows up in the workflow's
   history, so a flaky command is a retried activity, not a lost run.
2. The sandbox session's state is recorded with the workflow, so a worker that
   restarts part-way through a run resumes against the same session.
3. A sandbox that lives on one host (a local workspace, a container on the
   host's own engine: a service with a host-bound backend) gets every
   operation on that host, however many workers share the task queue
   (affinity.py). A remote service's sandbox, reached over the network, gets
   its next operation from any worker on the task queue, so a run whose
   worker is gone goes on on another, in the same sandbox.
4. A long run becomes a chain of runs under one workflow id (chain.py): each
   continues as new before its history grows large, handing the next the
   conversation and the same sandbox, so no run meets Temporal's size limits.

``AgentWorkflow`` is the workflow's code without its type: a project defines
the type (``@workflow.defn(name=WORKFLOW_TYPE)``) as a subclass that gives
its agent (``agent()``) and whose ``@workflow.run`` method calls
``run_agent()``. Its handlers and its ``@workflow.init`` are inherited.

Workflow code must be deterministic: everything that touches the outside world
(the model, the sandbox) happens in activities, never here.
"""

import asyncio
import dataclasses
import hashlib
from dataclasses import asdict
from datetime import datetime, timedelta
from typing import Any

from agents import AgentsException, MaxTurnsExceeded, Runner
from agents.items import ToolApprovalItem
from agents.run import RunConfig
from agents.sandbox import SandboxAgent, SandboxRunConfig
from agents.sandbox.manifest import Environment, Manifest
from agents.sandbox.snapshot import NoopSnapshotSpec
from pydantic import BaseModel, TypeAdapter, ValidationError
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, FailureError, RetryState
from temporalio.openai_agents import AgentsWorkflowError, TemporalWorkerEnvValue

from sandbox_agent_runtime import affinity, approvals
from sandbox_agent_runtime.approvals import (
    Approvals,
    Decision,
    NotAPerson,
    Request,
    UnknownRequest,
)
from sandbox_agent_runtime.archives import size_text
from sandbox_agent_runtime.backends import sandbox_backends
from sandbox_agent_runtime.chain import (
    Carried,
    HistoryBudget,
    HistoryFull,
    LastingSandboxClient,
    bounded,
    bounded_model_input,
    conversation_so_far,
)
from sandbox_agent_runtime.observability import (
    Usage,
    count_approval,
    count_host_gone,
    count_run,
    count_session,
    run_outcome,
)
from sandbox_agent_runtime.run_request import (
    ENDED,
    RELEASED,
    WAITING,
    WORKING,
    Conversation,
    FollowUp,
    Outputs,
    RunAnswer,
    RunRequest,
)
from sandbox_agent_runtime.sandbox_tools import TOLD_WHEN_NOT_FOUND
from sandbox_agent_runtime.service import current

# With approvals, the approvers this worker trusts are set at its start
# (approvers.trust()); the workflow's update validator reads them from this one
# module, shared with the workflow sandbox instead of imported afresh in it
# (cryptography cannot be). Imported by its full name: `from <package> import
# approvers` would import it afresh, as a part of the package the sandbox
# imported afresh.
with workflow.unsafe.imports_passed_through():
    import sandbox_agent_runtime.approvers as approvers
from sandbox_agent_runtime.shared import (
    COLLECT,
    CONVERSATION,
    DECIDE,
    END,
    FOLLOW_UP,
    FORGET,
    HISTORY_BUDGET,
    LONGEST_PROMPT,
    PENDING,
    PLACE,
    RESTORE,
    SANDBOX_HOST_WAIT,
    SESSION_MEMO,
    SNAPSHOT,
    USAGE_MEMO,
    step_name,
)
from sandbox_agent_runtime.workspace import (
    IN_STORE,
    CollectArgs,
    ForgetArgs,
    PlaceArgs,
    Placed,
    RestoreArgs,
    Restored,
    Snapshot,
    SnapshotArgs,
)


def sandbox_retry_policy() -> RetryPolicy:
    """How a sandbox operation is retried. One that keeps failing ends the
    run after a few attempts (about 15 seconds of back-off) instead of
    backing off for ever. An error that no retry can fix (one the SDK marks
    so, or one of a backend's NON_RETRYABLE_ERRORS: a rejected key, an
    unknown template) ends it at once."""
    return RetryPolicy(
        initial_interval=timedelta(seconds=1),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=30),
        maximum_attempts=5,
        non_retryable_error_types=[
            error
            for backend in sandbox_backends().values()
            for error in backend.NON_RETRYABLE_ERRORS
        ],
    )


# On a versioned worker (versioning.py) a run stays on the build it started
# on (the worker's default behaviour, PINNED: a workflow that names one fails
# on an unversioned worker), so a deploy never replays new code into it; the
# next run of its chain starts on the current build (continue_as_new below).
class AgentWorkflow:
    """The agent's workflow, without its type: a project's subclass, under
    ``@workflow.defn(name=WORKFLOW_TYPE)``, gives its agent (``agent()``)
    and defines its ``@workflow.run`` method as a call of ``run_agent()``."""

    # The most model turns a run may take, across its whole chain (None: the
    # service's max_turns).
    max_turns: int | None = None
    # How long an operation of a sandbox on a host waits for that host's
    # workers before the host is taken for gone (a service with a host-bound
    # backend).
    host_wait: timedelta = SANDBOX_HOST_WAIT
    # How long a call waits for a person's decision (with approvals:
    # approvals.py; None: the service's approval_timeout).
    approval_timeout: timedelta | None = None

    @workflow.init
    def __init__(self, request: RunRequest, carried: Carried | None = None) -> None:
        self.approvals = Approvals()
        # The chain's model calls and tokens (and what the memo shows of
        # them: _show_usage), and which run of it this is.
        self.usage = Usage()
        self.usage_shown = Usage()
        self.run_of_chain = 1
        # A conversation's (RunRequest.follow_ups): where it stands, the
        # follow-up (or the end) asked for and not yet taken up, its model
        # input after the latest answer, what the current prompt is redone
        # from after a restore, the workspace's latest snapshot (and the
        # one a fresh sandbox is to be restored from), and the commit of its
        # repository.
        self.state = Conversation(state=WORKING)
        self.asked: FollowUp | None = None
        self.ending = False
        self.conversation: list[dict[str, Any]] = []
        self.redo: list[dict[str, Any]] = []
        self.snapshot: Snapshot | None = None
        self.snapshots = 0
        self.restoring: Snapshot | None = None
        self.commit = ""
        # A run's first task runs its update validators before its run
        # method: they must know from here whether it takes follow-ups
        # (a client's request arrives as JSON: run_request()), and a run
        # that continues a waiting conversation, where it stands.
        given: Any = request
        if isinstance(given, RunRequest):
            self.follow_ups = given.follow_ups
        else:
            self.follow_ups = isinstance(given, dict) and given.get("follow_ups") is True
        if carried is not None:
            self.state = carried_state(carried)

    def turns_allowed(self) -> int:
        """The most model turns a run may take: ``max_turns``, or the service's."""
        return self.max_turns if self.max_turns is not None else current().max_turns

    def approval_wait(self) -> timedelta:
        """How long a call waits for a person: ``approval_timeout``, or the
        service's."""
        if self.approval_timeout is not None:
            return self.approval_timeout
        return current().approval_timeout

    async def run_agent(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer:
        """Run the agent on ``request`` (its prompt, in a workspace of its
        provider holding its inputs); a run that continues an earlier one of
        its chain gets what that one ``carried`` as well (no client may). The
        subclass's ``@workflow.run`` method returns what this returns."""
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
        # A request naming no provider uses the service's primary one.
        provider = request.provider or current().sandbox_provider
        request = dataclasses.replace(request, provider=provider)
        self.follow_ups = request.follow_ups
        if carried is not None and workflow.info().continued_run_id is None:
            # Only a run that continued as new from an earlier run of its
            # chain (same workflow id: Temporal sets continued_run_id, no
            # client can) is handed state. A client's own would choose the
            # sandbox to resume and remove, and (with approvals) the tools
            # approved.
            raise ApplicationError(
                "This run was started with carried state (the second argument), which only "
                "the run it continues from may hand it: start a run with a RunRequest only.",
                type="ForgedCarriedState",
                non_retryable=True,
            )
        backends = sandbox_backends()
        if provider not in backends:
            raise ApplicationError(
                f"Unknown sandbox provider {provider!r}: "
                f"this service registers {', '.join(backends)}.",
                type="UnknownSandboxProvider",
                non_retryable=True,
            )
        # With a host-bound backend, the host the sandbox lives on, if it is
        # bound to one: chosen once per chain, before the sandbox is
        # created, then handed on with it.
        host: affinity.SandboxHost | None = None
        if current().host_bound:
            host = carried.host if carried else await affinity.choose_host(provider)
        self.sandbox = self._sandbox(provider, host)
        if carried is not None:
            self._carry_on(carried)
        try:
            if request.follow_ups:
                return await self._conversation(request, carried)
            return await self._job(request, carried)
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
            gone = affinity.host_gone(e) if current().host_bound else None
            if gone is not None and self.sandbox.host is not None:
                count_host_gone(self.sandbox.host.id, "failed")
                raise affinity.host_gone_failure(self.sandbox.host, gone, self.host_wait) from e
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

    def _sandbox(
        self, provider: str, host: affinity.SandboxHost | None = None
    ) -> LastingSandboxClient:
        """A sandbox client for ``provider``, its operations sent to ``host``
        (None: any worker, and always so without a host-bound backend)."""
        # Must match the name the worker registered the provider under.
        return LastingSandboxClient(
            provider,
            workflow.ActivityConfig(
                start_to_close_timeout=current().sandbox_activity_timeout,
                retry_policy=sandbox_retry_policy(),
                **affinity.routed_to(host, self.host_wait),
            ),
            host,
        )

    async def _job(self, request: RunRequest, carried: Carried | None) -> RunAnswer:
        """A run without follow-ups: one prompt, its answer, and the sandbox
        removed."""
        answer = await self._prompt(request, carried)
        await self.sandbox.remove()
        return answer

    async def _conversation(self, request: RunRequest, carried: Carried | None) -> RunAnswer:
        """A run with follow-ups: each prompt is answered in the same
        workspace, then the run waits for the next (``_wait``), until it is
        ended or SESSION_LIFETIME passes without one; it returns the last
        answer. The workspace is snapshotted at each answer, so a sandbox
        left idle is released and restored when a follow-up comes."""
        if carried is not None and carried.waiting:
            answer = self.state.answer or RunAnswer(answer="")
        else:
            if carried is None:
                self._enter(WORKING)
            answer = await self._prompt(request, carried)
            await self._answered(answer)
        while True:
            if self.history_full():
                await self._continue_waiting(request)
            follow_up = await self._wait()
            if follow_up is None:
                break
            prompt = {"role": "user", "content": follow_up.prompt}
            answer = await self._prompt(
                dataclasses.replace(request, prompt=follow_up.prompt, inputs=follow_up.inputs),
                None,
                [*self.conversation, prompt],
            )
            await self._answered(answer)
        await self.sandbox.remove()
        if self.snapshot is not None and self.snapshot.key:
            # Nothing restores it any more.
            config: workflow.ActivityConfig = {**self.sandbox.config, "summary": "forget snapshot"}
            await workflow.execute_activity(
                f"{self.sandbox.provider}-{FORGET}", ForgetArgs(key=self.snapshot.key), **config
            )
        self._enter(ENDED)
        return answer

    async def _prompt(
        self,
        request: RunRequest,
        carried: Carried | None,
        conversation: list[dict[str, Any]] | None = None,
    ) -> RunAnswer:
        """Work on one prompt to its answer (its outputs collected): the
        request's, or a follow-up's, whose model input is ``conversation``."""
        backend = sandbox_backends()[request.provider]
        agent = self.agent()
        talking = request.follow_ups
        model_input: str | list[dict[str, Any]] = (
            carried.conversation if carried else conversation or request.prompt
        )
        turns_before = carried.turns if carried else 0
        placed = carried.placed if carried else None
        first_prompt = carried is None and conversation is None
        if talking and carried is None:
            # What the prompt is redone from after a restore (_recovery).
            self.redo = (
                list(model_input)
                if isinstance(model_input, list)
                else [{"role": "user", "content": model_input}]
            )
        # Before the first model call: restore the workspace into a fresh
        # sandbox (a follow-up to a released one), then place the inputs.
        restore = self._restore_from()
        place = carried is None and (
            talking or bool(request.inputs or request.repo or agent.default_manifest)
        )
        approving = current().approvals
        if carried and approving:
            self.approvals.always = set(carried.always_approved)
        while True:
            sandbox = self.sandbox
            run_config = RunConfig(
                sandbox=SandboxRunConfig(
                    client=sandbox,
                    options=backend.sandbox_options(),
                    # The sandbox an earlier run of the chain, or the earlier
                    # prompt, left running, if any.
                    session_state=sandbox.next_state(),
                    manifest=workspace_manifest(
                        agent, backend.WORKSPACE_ROOT, request if first_prompt else None
                    ),
                    # The service takes its own snapshots (workspace/).
                    snapshot=NoopSnapshotSpec(),
                ),
                call_model_input_filter=bounded_model_input,
                # A call of a tool the agent lacks is told to the model, which
                # can correct it, instead of ending the run (sandbox_tools.py).
                tool_not_found_behavior=TOLD_WHEN_NOT_FOUND,
            )
            budget = self.run_hooks(self.usage)
            if restore is not None or place:

                async def prepare(restore: Snapshot | None = restore, place: bool = place) -> None:
                    nonlocal placed
                    if restore is not None:
                        await self._restore(restore)
                    if place:
                        placed = await self._placed(request, first_prompt)
                        # What the prompt is redone from (_recovery); a
                        # follow-up without inputs has the answer's snapshot.
                        if talking and (first_prompt or request.inputs):
                            await self._snapshot()

                budget.before_first_turn = prepare
            try:
                result = await Runner.run(
                    agent,
                    model_input,  # type: ignore[arg-type]
                    max_turns=self.turns_allowed() - turns_before,
                    run_config=run_config,
                    hooks=budget,
                )
                # With approvals, calls that wait for a person: decide each,
                # then go on from there (the state holds the turns left;
                # hooks are not in it).
                while approving and result.interruptions:
                    self._show_usage()
                    state = result.to_state()
                    for item in result.interruptions:
                        decision = await self._decision_on(item)
                        if decision.approve:
                            state.approve(item, always_approve=decision.always)
                        else:
                            state.reject(item, rejection_message=decision.reason)
                    result = await Runner.run(agent, state, run_config=run_config, hooks=budget)
                break
            except HistoryFull as full:
                assert full.run_data is not None
                await self._continue_prompt(request, full, carried, turns_before, budget, placed)
            except MaxTurnsExceeded as e:
                await self._remove(e)
                raise MaxTurnsExceeded(f"Max turns ({self.turns_allowed()}) exceeded") from e
            except BaseException as e:
                bound = current().host_bound
                again = await self._recovery(e, budget) if talking and bound else None
                if again is not None:
                    # Redone in a fresh sandbox, from the latest snapshot
                    # (with the prompt's inputs, unless they were placed).
                    model_input, restore = again, self.snapshot
                    place = place and placed is None
                    turns_before += budget.turns
                    continue
                # A bug in workflow code (a KeyError, say) fails only the
                # workflow task, which Temporal retries until fixed code is
                # deployed: the run goes on then, in the same sandbox. Only an
                # error that ends the run removes it, unless its host is gone
                # (nothing can reach it).
                if ends_the_run(e) and not (bound and affinity.host_gone(e) is not None):
                    await self._remove(e)
                raise
            finally:
                self._show_usage()
        try:
            outputs = await self._collect(request, placed)
        except BaseException as e:
            if ends_the_run(e):
                await self._remove(e)
            raise
        self.conversation = bounded(conversation_so_far(result))  # type: ignore[assignment]
        return answer_of(result.final_output, outputs)

    async def _continue_prompt(
        self,
        request: RunRequest,
        full: HistoryFull,
        carried: Carried | None,
        turns_before: int,
        budget: HistoryBudget,
        placed: dict[str, Any] | None,
    ) -> None:
        """Hand the rest of the prompt's work to a fresh run with the same
        id: same conversation, same sandbox, the turns left (a conversation
        snapshots its workspace first: the next run redoes from there)."""
        assert full.run_data is not None
        conversation = bounded(conversation_so_far(full.run_data))
        if request.follow_ups:
            await self._snapshot()
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(
            args=[
                # Its inputs are in the workspace already.
                dataclasses.replace(request, inputs=[]),
                self._carried(
                    conversation,  # type: ignore[arg-type]
                    turns=turns_before + budget.turns,
                    run=(carried.run if carried else 1) + 1,
                    placed=placed,
                ),
            ],
            memo=self._chain_memo(request),
            # On the deployment's current build, which reads this Carried.
            initial_versioning_behavior=workflow.ContinueAsNewVersioningBehavior.AUTO_UPGRADE,
        )

    async def _continue_waiting(self, request: RunRequest) -> None:
        """Between two prompts, a history grown large goes on in a fresh run,
        which starts by waiting for the follow-up."""
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(
            args=[
                dataclasses.replace(request, inputs=[]),
                self._carried(
                    self.conversation,
                    turns=0,
                    run=self.run_of_chain + 1,
                    placed=Placed(commit=self.commit).model_dump(),
                    waiting=True,
                ),
            ],
            memo=self._chain_memo(request),
            initial_versioning_behavior=workflow.ContinueAsNewVersioningBehavior.AUTO_UPGRADE,
        )

    def _carried(
        self,
        conversation: list[dict[str, Any]],
        turns: int,
        run: int,
        placed: dict[str, Any] | None = None,
        waiting: bool = False,
    ) -> Carried:
        return Carried(
            conversation=conversation,
            session_state=self.sandbox.carried_state(),
            turns=turns,
            run=run,
            usage=self.usage,
            host=self.sandbox.host,
            always_approved=sorted(self.approvals.always),
            placed=placed,
            waiting=waiting,
            prompts=self.state.prompts,
            answered=self.state.answered,
            since=self.state.since,
            answer=asdict(self.state.answer) if self.state.answer else None,
            snapshot=self.snapshot.model_dump() if self.snapshot else None,
        )

    def _carry_on(self, carried: Carried) -> None:
        """Take up where the run before this one in the chain left off."""
        self.usage = carried.usage
        # The run before handed it on in this run's memo (_chain_memo).
        self.usage_shown = dataclasses.replace(carried.usage)
        self.run_of_chain = carried.run
        self.commit = Placed(**carried.placed).commit if carried.placed else ""
        self.conversation = carried.conversation
        self.redo = carried.conversation
        self.sandbox.state_from(carried)
        if carried.snapshot is not None:
            self.snapshot = Snapshot(**carried.snapshot)
        self.state = carried_state(carried)

    def history_full(self) -> bool:
        """Whether the run's history is large enough to go on in a fresh run
        (between two prompts of a conversation: half the budget a prompt has)."""
        info = workflow.info()
        return (
            info.get_current_history_size() > HISTORY_BUDGET // 2
            or info.is_continue_as_new_suggested()
        )

    # ------------------------------------------------------- conversations

    @workflow.update(name=FOLLOW_UP)
    async def follow_up(self, follow_up: FollowUp) -> int:
        """The next prompt of a conversation that has answered; the prompt's
        number. The run's main loop works on it (``_conversation``)."""
        self.asked = follow_up
        return self.state.prompts + 1

    @follow_up.validator
    def only_when_answered(self, follow_up: FollowUp) -> None:
        # Refused here, a follow-up is never written to history.
        self._check_talking()
        if self.state.state == WORKING or self.asked is not None:
            raise ApplicationError(
                f"The run is still working on prompt {self.state.prompts}: send the follow-up "
                "once it has answered.",
                type="StillWorking",
            )
        if not follow_up.prompt.strip() or len(follow_up.prompt) > LONGEST_PROMPT:
            raise ApplicationError(
                f"A follow-up's prompt must hold text, at most {LONGEST_PROMPT:,} characters.",
                type="BadFollowUp",
            )

    @workflow.update(name=END)
    async def end(self) -> str:
        """End the conversation: its sandbox is removed and the run returns
        its last answer."""
        self.ending = True
        return ENDED

    @end.validator
    def only_when_not_working(self) -> None:
        self._check_talking()
        if self.state.state == WORKING:
            raise ApplicationError(
                f"The run is still working on prompt {self.state.prompts}: end it once it has "
                "answered (or cancel the run to stop it now).",
                type="StillWorking",
            )

    def _check_talking(self) -> None:
        if not self.follow_ups:
            raise ApplicationError(
                "This run takes no follow-ups: it was started without follow_ups, and ends "
                "with its answer.",
                type="NoFollowUps",
            )
        if self.ending or self.state.state == ENDED:
            raise ApplicationError("This conversation has ended.", type="ConversationEnded")

    @workflow.query(name=CONVERSATION)
    def conversation_state(self) -> Conversation:
        """Where the conversation stands, with its latest answer."""
        return self.state

    async def _answered(self, answer: RunAnswer) -> None:
        """The prompt is answered: snapshot the workspace, and wait."""
        await self._snapshot()
        self._enter(WAITING, answered=self.state.prompts, answer=answer, restored="")

    async def _wait(self) -> FollowUp | None:
        """Wait for a follow-up (None: the conversation ends). A sandbox idle
        for the worker's SESSION_IDLE_TIMEOUT is released, once its workspace
        is in a snapshot; SESSION_LIFETIME without a follow-up ends it."""
        snapshot = self.snapshot or Snapshot()
        since = datetime.fromisoformat(self.state.since)
        idle = since + timedelta(seconds=snapshot.idle_timeout)
        lifetime = since + timedelta(seconds=snapshot.lifetime)
        idled = self.state.state == WAITING and not await self._asked_before(idle)
        if idled and snapshot.key and self.sandbox.holds:
            await self._release()
            self._enter(RELEASED)
        if not await self._asked_before(lifetime):
            return None
        if self.ending:
            return None
        follow_up, self.asked = self.asked, None
        assert follow_up is not None
        if self.sandbox.holds:
            self._enter(WORKING, prompts=self.state.prompts + 1)
            return follow_up
        # Released: a fresh sandbox, restored from the snapshot (on any host
        # when the snapshot is in the object store).
        host = self.sandbox.host
        if current().host_bound and snapshot.where == IN_STORE:
            host = await affinity.choose_host(self.sandbox.provider)
        self.sandbox = self._sandbox(self.sandbox.provider, host)
        self.restoring = snapshot
        self._enter(
            WORKING,
            prompts=self.state.prompts + 1,
            restored=f"the workspace restored from its snapshot of {snapshot.taken}",
        )
        return follow_up

    async def _release(self) -> None:
        """Remove an idle conversation's sandbox (its workspace is in a
        snapshot). A sandbox whose host is gone (a host-bound backend's) went
        with it: there is nothing left to remove."""
        try:
            await self.sandbox.remove()
        except (ActivityError, AgentsWorkflowError) as e:
            if not current().host_bound or affinity.host_gone(e) is None:
                raise

    async def _asked_before(self, deadline: datetime) -> bool:
        """Whether a follow-up, or the end, came before ``deadline``."""
        left = max(deadline - workflow.now(), timedelta(seconds=1))
        try:
            await workflow.wait_condition(
                lambda: self.asked is not None or self.ending, timeout=left
            )
        except TimeoutError:
            return False
        return True

    def _enter(self, state: str, **changes: Any) -> None:
        """Record where the conversation stands: in the query's answer, the
        run's memo (the Web UI, the starter) and its current details."""
        self.state = dataclasses.replace(
            self.state, state=state, since=workflow.now().isoformat(), **changes
        )
        workflow.upsert_memo({SESSION_MEMO: self._memo()})
        workflow.set_current_details(session_details(self.state))
        if state != WORKING:
            count_session(state)
        elif self.state.restored:
            count_session("restored")

    def _show_usage(self) -> None:
        """Show the chain's usage in the run's memo, where the starter reads
        it (usage_line), if it changed: once per prompt (and before waiting
        for a person) rather than at every model call, each memo update
        being an event in the history and work for the server."""
        if self.usage != self.usage_shown:
            workflow.upsert_memo({USAGE_MEMO: asdict(self.usage)})
            self.usage_shown = dataclasses.replace(self.usage)

    def _chain_memo(self, request: RunRequest) -> dict[str, Any]:
        """The memo the next run of the chain starts with."""
        memo: dict[str, Any] = {USAGE_MEMO: asdict(self.usage)}
        if request.follow_ups:
            memo[SESSION_MEMO] = self._memo()
        return memo

    def _memo(self) -> dict[str, Any]:
        memo = asdict(self.state)
        del memo["answer"]
        return memo

    def _restore_from(self) -> Snapshot | None:
        """The snapshot a released conversation's fresh sandbox starts from."""
        restoring, self.restoring = self.restoring, None
        return restoring

    async def _snapshot(self) -> None:
        """Snapshot the workspace (an activity: workspace/provider.py); a snapshot
        that could not be taken keeps the one before."""
        sandbox = self.sandbox
        assert sandbox.inner is not None
        self.snapshots += 1
        key = snapshot_key(workflow.info().workflow_id, workflow.info().run_id, self.snapshots)
        config: workflow.ActivityConfig = {**sandbox.config, "summary": "snapshot"}
        taken: Snapshot = await workflow.execute_activity(
            f"{sandbox.provider}-{SNAPSHOT}",
            SnapshotArgs(
                state=sandbox.inner.state,
                key=key,
                previous=self.snapshot.key if self.snapshot else "",
            ),
            result_type=Snapshot,
            **config,
        )
        if taken.key or self.snapshot is None:
            self.snapshot = taken
        else:
            self.snapshot = self.snapshot.model_copy(
                update={"idle_timeout": taken.idle_timeout, "lifetime": taken.lifetime}
            )

    async def _restore(self, snapshot: Snapshot) -> None:
        """Put a snapshot's files in the fresh sandbox (an activity)."""
        sandbox = self.sandbox
        assert sandbox.inner is not None
        config: workflow.ActivityConfig = {
            **sandbox.config,
            "summary": f"restore from the snapshot of {snapshot.taken}",
        }
        await workflow.execute_activity(
            f"{sandbox.provider}-{RESTORE}",
            # Restored only if it is the very snapshot recorded here (its
            # digest and format: a snapshot recorded before them, without).
            RestoreArgs(
                state=sandbox.inner.state,
                key=snapshot.key,
                encrypted=snapshot.encrypted,
                format=snapshot.format,
                digest=snapshot.digest,
            ),
            result_type=Restored,
            **config,
        )

    async def _recovery(
        self, error: BaseException, budget: HistoryBudget
    ) -> list[dict[str, Any]] | None:
        """After the host of a conversation's sandbox is gone mid-prompt (a
        service with a host-bound backend): the
        model input to redo the prompt from, in a fresh sandbox on another
        host restored from the latest snapshot, telling the model what was
        lost. None when the snapshot is not in the object store (or there is
        none): the run then fails as before."""
        gone = affinity.host_gone(error)
        snapshot = self.snapshot
        if gone is None or snapshot is None or snapshot.where != IN_STORE or not snapshot.key:
            return None
        old = self.sandbox.host.id if self.sandbox.host else "?"
        count_host_gone(old, "recovered")
        host = await affinity.choose_host(self.sandbox.provider)
        self.sandbox = self._sandbox(self.sandbox.provider, host)
        lost = "; ".join(budget.calls) or "none"
        self._enter(
            WORKING,
            restored=f"host {old!r} is gone: the workspace restored from its snapshot of "
            f"{snapshot.taken} on {host.id if host else 'any worker'}, and the prompt redone "
            f"from there ({len(budget.calls)} calls lost)",
        )
        note = (
            f"[The host that held this workspace ({old}) is gone. The workspace was restored "
            f"from its snapshot of {snapshot.taken}; the effects of these calls, made after "
            f"it, were lost: {lost}. Redo what the task still needs.]"
        )
        return [*self.redo, {"role": "user", "content": note}]

    # ----------------------------------------------------------- approvals

    @workflow.query(name=PENDING)
    def pending(self) -> list[Request]:
        """The calls waiting for a person, oldest first (none without
        approvals)."""
        if not current().approvals:
            return []
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
        # request as it was shown (approvers.py), and any decision when the
        # service takes no approvals. A replay never runs this.
        if not current().approvals:
            raise ApplicationError(
                'This service takes no approvals (its approval is "none"): nothing in '
                "its runs waits for a decision.",
                type="NoApprovals",
            )
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
                lambda: call_id in self.approvals.decided, timeout=self.approval_wait()
            )
            decision = self.approvals.decided[call_id]
        except TimeoutError:
            decision = approvals.timed_out(call_id, self.approval_wait())
            self.approvals.record(decision)
        workflow.set_current_details("")
        count_approval(decision, workflow.now() - asked)
        return decision

    async def _placed(self, request: RunRequest, first_prompt: bool) -> dict[str, Any]:
        """Put the prompt's inputs (the first prompt's repository too) in the
        workspace (an activity: workspace/provider.py), before the agent's first
        turn; what the workspace then holds, the baseline of its outputs."""
        sandbox = self.sandbox
        assert sandbox.inner is not None
        repo = request.repo if first_prompt else None
        config: workflow.ActivityConfig = {
            **sandbox.config,
            "summary": placing(dataclasses.replace(request, repo=repo), first_prompt),
        }
        placed: Placed = await workflow.execute_activity(
            f"{request.provider}-{PLACE}",
            PlaceArgs(state=sandbox.inner.state, inputs=request.inputs, repo=repo),
            result_type=Placed,
            **config,
        )
        if first_prompt:
            self.commit = placed.commit
        return placed.model_copy(update={"commit": self.commit}).model_dump()

    async def _collect(self, request: RunRequest, placed: dict[str, Any] | None) -> Outputs:
        """Every file the prompt created or changed (an activity:
        workspace/provider.py). The answer is kept whatever becomes of them:
        outputs that could not be collected are withheld, saying why, and the
        run goes on."""
        sandbox = self.sandbox
        if sandbox.inner is None and sandbox.handed_on is not None:
            await sandbox.resume(sandbox.handed_on)
        if sandbox.inner is None:
            return Outputs()
        before = Placed(**placed) if placed else Placed()
        config: workflow.ActivityConfig = {**sandbox.config, "summary": "output"}
        try:
            outputs: Outputs = await workflow.execute_activity(
                f"{request.provider}-{COLLECT}",
                CollectArgs(
                    state=sandbox.inner.state,
                    baseline=before.baseline,
                    repo=request.repo,
                    commit=before.commit,
                    files=before.files,
                    size=before.size,
                ),
                result_type=Outputs,
                **config,
            )
        except ActivityError as e:
            if e.retry_state not in GAVE_UP:
                raise  # e.g. the run was cancelled
            return Outputs(commit=before.commit, withheld=f"they were not collected: {describe(e)}")
        return outputs

    def agent(self) -> SandboxAgent[None]:
        """The agent of this run: the subclass gives it (a project's, from
        its agent.py; a test's variant gives another, with files or an
        output_type of its own)."""
        raise NotImplementedError(
            f"{type(self).__name__} gives no agent: a subclass of AgentWorkflow defines "
            "agent() (a project's workflow.py)"
        )

    def run_hooks(self, usage: Usage) -> HistoryBudget:
        """The hooks of the agent's run: they count this run's turns and the
        chain's model calls and tokens (from ``usage``), and stop the run for
        the next of its chain when its history is full."""
        return HistoryBudget(usage=usage)

    async def _remove(self, ending: BaseException) -> None:
        """Remove the sandbox of a run that ``ending`` ends; a removal that
        fails is logged, and the run ends with its own reason."""
        try:
            await self.sandbox.remove()
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


def workspace_manifest(agent: SandboxAgent[Any], root: str, request: RunRequest | None) -> Manifest:
    """The run's manifest: the agent's own ``default_manifest`` (agent.py:
    its files, its environment), at the backend's workspace root, with the
    names of the variables forwarded to the sandbox (the service's
    ``sandbox_secrets``: the
    worker resolves each one when the sandbox needs it, so no value travels
    with the run). An input named like one of the agent's entries, or a
    variable of the agent's named like a forwarded one, ends the run
    (``request`` None: no inputs to check, a chain's later run or prompt)."""
    own = agent.default_manifest or Manifest()
    names = []
    if request is not None:
        names = [item.name for item in request.inputs]
        names += [request.repo.name] if request.repo else []
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
    secrets = current().sandbox_secrets
    forwarded = sorted(set(variables) & set(secrets))
    if forwarded:
        raise ApplicationError(
            f"The agent's default_manifest (agent.py) sets {forwarded[0]!r}, which the worker "
            "forwards to the sandbox (sandbox_secrets in service.py): keep it in one of them.",
            type="EnvironmentClash",
            non_retryable=True,
        )
    variables.update({name: TemporalWorkerEnvValue(name=name) for name in secrets})
    return own.model_copy(
        update={"root": root, "environment": Environment(value=variables)}, deep=True
    )


def placing(request: RunRequest, first_prompt: bool = True) -> str:
    """What the place step puts in the workspace, for history and progress."""
    parts = [
        f"{item.name}{'/' if item.kind == 'directory' else ''} ({size_text(item.size)})"
        for item in request.inputs
    ]
    if request.repo is not None:
        ref = f"@{request.repo.ref}" if request.repo.ref else ""
        parts.append(f"{request.repo.name}/ (git {request.repo.url}{ref})")
    if parts:
        return "input " + ", ".join(parts)
    if first_prompt:
        return "input (the agent's own files)"
    return "input (none: the workspace as it was)"


def carried_state(carried: Carried) -> Conversation:
    """Where a conversation stands that an earlier run of its chain handed on."""
    return Conversation(
        state=(WAITING if carried.session_state else RELEASED) if carried.waiting else WORKING,
        prompts=carried.prompts,
        answered=carried.answered,
        since=carried.since,
        answer=run_answer(carried.answer) if carried.answer else None,
    )


def run_answer(fields: dict[str, Any]) -> RunAnswer:
    """A RunAnswer from its fields (as a chain hands it on)."""
    return TypeAdapter(RunAnswer).validate_python(fields)


def snapshot_key(workflow_id: str, run_id: str, number: int) -> str:
    """The object a snapshot is written to: under ``snapshots/`` (which a
    lifecycle rule may expire), one directory per conversation (its id
    hashed: an id may hold any character), one object per snapshot."""
    conversation = hashlib.sha256(workflow_id.encode()).hexdigest()[:32]
    return f"snapshots/{conversation}/{run_id}-{number}.tar.gz"


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
