"""A ``SandboxAgent`` whose every sandbox operation is a Temporal activity.

Each sandbox operation (creating the session, each command, each read and
write, the teardown) is retried on its own and shows in the workflow's
history, so a flaky command is a retried activity, not a lost run; a worker
that restarts part-way resumes against the same session; a host-bound
sandbox gets every operation on its host, and a remote one from any worker.
A long run becomes a chain of runs under one workflow id, each within
Temporal's size limits. Each prompt is bounded in turns and, when set, in
tokens and USD across its chain. The run's phases are modules of their own
(``phases``); ``AgentWorkflow`` keeps the state its handlers share with them.
"""

import dataclasses
from datetime import timedelta
from typing import Any, cast

from agents import AgentsException, MaxTurnsExceeded
from agents.sandbox import SandboxAgent
from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.openai_agents import AgentsWorkflowError

from sandbox_agent_runtime.approvals import Approvals, Decision, Request, UnknownRequest
from sandbox_agent_runtime.backends import sandbox_backends
from sandbox_agent_runtime.chain import (
    Carried,
    HistoryBudget,
    HistoryFull,
    handed_off_to,
)
from sandbox_agent_runtime.costs import RUN_COST, RunMeter
from sandbox_agent_runtime.observability import (
    BudgetReached,
    Usage,
    count_budget_reached,
    count_run,
    record_charge,
    run_outcome,
)
from sandbox_agent_runtime.payloads import not_text
from sandbox_agent_runtime.phases import begin, between, deciding, ending, interruptions, prompting
from sandbox_agent_runtime.phases.between import Inbox
from sandbox_agent_runtime.phases.given import Given
from sandbox_agent_runtime.phases.progress import Progress
from sandbox_agent_runtime.phases.prompting import Prompt, answer_of, first_prompt, next_prompt
from sandbox_agent_runtime.run_request import (
    ENDED,
    WAITING,
    WORKING,
    Conversation,
    FollowUp,
    RunAnswer,
    RunRequest,
)
from sandbox_agent_runtime.service import current, priced_as
from sandbox_agent_runtime.shared import (
    CONVERSATION,
    DECIDE,
    END,
    FOLLOW_UP,
    HISTORY_BUDGET,
    PENDING,
    SANDBOX_HOST_WAIT,
)
from sandbox_agent_runtime.streaming import RunStream, streamed_run
from sandbox_agent_runtime.workspace.requests import Placed, Snapshot
from sandbox_agent_runtime.workspace.steps import (
    MemoryLoad,
    Preparation,
    Snapshots,
    caller_memory,
    check,
    collect,
    forget,
    in_turn,
    save_memory,
)


# On a versioned worker a run stays on the build it started
# on (the worker's default behaviour, PINNED: a workflow that names one fails
# on an unversioned worker), so a deploy never replays new code into it; the
# next run of its chain starts on the current build.
class AgentWorkflow:
    """The agent's workflow, without its type: a project's subclass, under
    ``@workflow.defn(name=WORKFLOW_TYPE)``, gives its agent (``agent()``)
    and defines its ``@workflow.run`` method as a call of ``run_agent()``."""

    # The most model turns a run may take, across its whole chain (None: the
    # service's max_turns).
    max_turns: int | None = None
    # Whether the agent's memory is kept across one caller's conversations
    # (None: the service's memory_across_conversations).
    memory_across_conversations: bool | None = None
    # How long an operation of a sandbox on a host waits for that host's
    # workers before the host is taken for gone (a service with a host-bound
    # backend).
    host_wait: timedelta = SANDBOX_HOST_WAIT
    # How long a call waits for a person's decision (with approvals:
    # approvals.py; None: the service's approval_timeout).
    approval_timeout: timedelta | None = None

    @workflow.init
    def __init__(self, request: RunRequest, carried: Carried | None = None) -> None:
        # The state the run's handlers share with its phases: the calls
        # waiting for a person; where the conversation stands (and what its
        # memo shows); the follow-up (or the end) asked for.
        self.approvals = Approvals()
        self.progress = Progress(Conversation(state=WORKING))
        self.inbox = Inbox()
        # The chain's model calls and tokens, the current prompt's (what its
        # budget counts, across the chain), and which run of it this is.
        self.usage = Usage()
        self.prompt_usage = Usage()
        self.run_of_chain = 1
        # The time the run holds a sandbox and the actions it makes, charged
        # into both usages (costs.py; CountsActions counts into it).
        self.meter = RunMeter(record=record_charge)
        # A conversation's (RunRequest.follow_ups): its model input after the
        # latest answer, what the current prompt is redone from after a
        # restore, the workspace's snapshots, and its repository's commit.
        self.conversation: list[dict[str, Any]] = []
        self.redo: list[dict[str, Any]] = []
        self.snapshots = Snapshots()
        self.commit = ""
        # The run's stream (streaming.py): what the model writes, its turns
        # and tool calls, for clients to read as they come; whether the run
        # streams at all is decided when it starts (_run).
        self.stream = RunStream(WorkflowStream(carried.stream if carried else None))
        self.streamed = False
        # Whether the run's inputs carried skills (prompting.INPUT_SKILLS).
        self.input_skills = False
        # Where the run posts its end (RunRequest.callback_url), once read.
        self.callback_url = ""
        # A run's first task runs its update validators before its run
        # method: they must know from here whether it takes follow-ups
        # (a client's request arrives as JSON: begin.run_request()), and a
        # run that continues a waiting conversation, where it stands.
        given: Any = request
        if isinstance(given, RunRequest):
            self.follow_ups = given.follow_ups
        else:
            self.follow_ups = isinstance(given, dict) and given.get("follow_ups") is True
        if carried is not None:
            self.progress.state = interruptions.carried_state(carried)

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

    def history_full(self) -> bool:
        """Whether the run's history is large enough to go on in a fresh run
        (between two prompts of a conversation: half the budget a prompt has)."""
        info = workflow.info()
        return (
            info.get_current_history_size() > HISTORY_BUDGET // 2
            or info.is_continue_as_new_suggested()
        )

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
            if outcome in ("failed", "cancelled"):
                self._charge()
                await ending.call_back(self.callback_url, outcome, None, self.usage, e)
            if outcome is not None:
                await self._release_readers()
            raise
        count_run("completed")
        self._charge()
        state = "stopped" if answer.stopped else "completed"
        await ending.call_back(self.callback_url, state, answer, self.usage)
        await self._release_readers()
        return answer

    async def _release_readers(self) -> None:
        """Before the run ends: its stream's readers get what they wait for
        (they then read the rest of the ended run by query)."""
        self.stream.stream.detach_pollers()
        await workflow.wait_condition(workflow.all_handlers_finished)

    # ------------------------------------------------------------- the run

    async def _run(self, request: RunRequest, carried: Carried | None) -> RunAnswer:
        """The run: it begins (its request checked, its sandbox's client),
        takes up where its chain's earlier run left off, and is a job or a
        conversation; a failure ends it as a person can read."""
        # A run recorded before costs.py replays with its tokens' cost alone.
        self.meter.on = self.progress.costs = workflow.patched(RUN_COST)
        self.given = self._given()
        self.streamed = streamed_run()
        # A chain's first run of a host-bound service asks for its host.
        self.stream.choosing_host = carried is None and self.given.host_bound
        request, self.sandbox = await begin.begin(request, carried, self.given)
        self.stream.choosing_host = False
        self.follow_ups = request.follow_ups
        self.callback_url = request.callback_url
        if carried is not None:
            self._carry_on(carried)
        try:
            if request.follow_ups:
                return await self._conversation(request, carried)
            return await self._job(request, carried)
        except BaseException as e:
            # Whatever ends the run, at whichever step (the agent's turns, a
            # wait cancelled, a sandbox operation that failed for good), its
            # sandbox and its last snapshot are removed here.
            if ending.ends_the_run(e):
                await ending.remove(self.sandbox, e, self.given, self.snapshots.latest)
            if isinstance(e, AgentsException | ActivityError | AgentsWorkflowError):
                failure = ending.failure(e, self.sandbox, self.given)
                if failure is not None:
                    raise failure from e
            raise

    async def _job(self, request: RunRequest, carried: Carried | None) -> RunAnswer:
        """A run without follow-ups: one prompt, its answer, and the sandbox
        removed."""
        answer = await self._answer(first_prompt(request, carried))
        if request.checks:
            # An evaluation's checks on what the run left, in its sandbox.
            answer = dataclasses.replace(answer, checks=await check(self.sandbox, request.checks))
        await self.sandbox.remove()
        self._show_cost()
        return answer

    async def _conversation(self, request: RunRequest, carried: Carried | None) -> RunAnswer:
        """A run with follow-ups: each prompt is answered in the same
        workspace, snapshotted at each answer; then the run waits for the
        next (a sandbox left idle is released, and restored when a follow-up
        comes), until it is ended or SESSION_LIFETIME passes without one. It
        returns the last answer."""
        if carried is not None and carried.waiting:
            answer = self.progress.state.answer or RunAnswer(answer="")
        else:
            if carried is None:
                self.progress.enter(WORKING)
            answer = await self._answer(first_prompt(request, carried))
            await self._answered(answer)
        while True:
            if self.history_full():
                await self._continue_waiting(request)
            asked = await between.wait(
                self.inbox,
                self.progress,
                self.sandbox,
                self.snapshots.latest,
                self.given.host_bound,
            )
            if asked is None:
                break
            if self.sandbox.holds or self.snapshots.latest is not None:
                self.sandbox, restore = await between.take_up(
                    self.progress, self.sandbox, self.snapshots.latest, self.given
                )
                prompt = next_prompt(request, asked, self.conversation, restore)
            else:
                # No workspace yet: every prompt so far tripped an input
                # guardrail before it was made. This one is the first to
                # reach it, with the run's inputs and its own.
                self.progress.enter(WORKING, prompts=self.progress.state.prompts + 1)
                prompt = prompting.first_after_trips(request, asked, self.conversation)
            answer = await self._answer(prompt)
            await self._answered(answer)
        await self.sandbox.remove()
        await forget(self.sandbox, self.snapshots.latest)
        self._show_cost()
        self.progress.enter(ENDED)
        return answer

    async def _answer(self, prompt: Prompt) -> RunAnswer:
        """Work on one prompt to its answer: the workspace prepared before
        the agent's first turn (restored, the inputs placed), the agent's
        turns, the outputs collected. The prompt goes on in the next run of
        the chain when the history is full, and a conversation's is redone
        in a fresh sandbox when its host is gone. A
        prompt that reaches its budget, or whose guardrail trips, stops, its
        answer saying so: its workspace stays as it is, for a follow-up."""
        request, agent = prompt.request, self.agent()
        if prompt.carried is not None:
            # The earlier run of the chain stopped in the turn of an agent
            # it had handed off to: that agent goes on.
            agent = cast(SandboxAgent[None], handed_off_to(agent, prompt.carried.agent))
        talking = request.follow_ups
        budget = prompting.budget_of(request, self.given)
        if prompt.carried is None:
            self.prompt_usage = Usage()
        stopped: BudgetReached | None = None
        tripped: prompting.Tripped | None = None
        model_input, turns_before, placed = prompt.model_input, prompt.turns_before, prompt.placed
        if talking and prompt.carried is None:
            # What the prompt is redone from after a restore.
            self.redo = (
                list(model_input)
                if isinstance(model_input, list)
                else [{"role": "user", "content": model_input}]
            )
        restore = prompt.restore
        # Skills in the run's inputs (its "skills" directory), this prompt's
        # or an earlier one's: listed like agent.py's, so the workspace is
        # prepared before the agent's instructions are made.
        self.input_skills = self.input_skills or prompting.carries_skills(request)
        if self.input_skills:
            agent = prompting.with_input_skills(agent)
        # The caller's memory: put back before the conversation's first turn,
        # kept again after each answer.
        memory = caller_memory(agent, self.given.memory_across_conversations)
        load_memory = memory if prompt.first else None
        # Its input guardrails passed it in the chain's earlier run.
        input_checked = prompt.carried is not None
        place = prompt.carried is None and (
            talking or bool(request.inputs or request.repo or agent.default_manifest)
        )
        while True:
            config = prompting.run_config(self.sandbox, agent, prompt, self.given)
            hooks = self.run_hooks(self.usage)
            hooks.prompt, hooks.budget = self.prompt_usage, budget
            hooks.model, hooks.prices = self.given.model, self.given.prices
            hooks.meter = self.meter
            # What the workspace needs before the first model call (a
            # follow-up without inputs has the answer's snapshot).
            preparation = Preparation(
                self.sandbox,
                request,
                self.snapshots,
                restore=restore,
                place=place,
                first_prompt=prompt.first,
                snapshot_after=talking and (prompt.first or bool(request.inputs)),
                commit=self.commit,
            )
            if preparation.needed:
                hooks.before_first_turn = preparation
            loading = MemoryLoad(self.sandbox, load_memory) if load_memory else None
            hooks.before_instructions = loading
            if self.input_skills and preparation.needed:
                hooks.before_first_turn = None
                hooks.before_instructions = in_turn(preparation, loading)
            try:
                result = await prompting.answer(
                    agent,
                    model_input,
                    self.given.max_turns - turns_before,
                    config,
                    hooks,
                    self.given,
                    self.approvals,
                    self.progress,
                    self.usage,
                    input_checked,
                    self.stream if self.streamed else None,
                )
                placed = self._placed(preparation, placed)
                break
            except BudgetReached as stop:
                placed = self._placed(preparation, placed)
                count_budget_reached(stop.kind)
                stopped = stop
                break
            except HistoryFull as full:
                placed = self._placed(preparation, placed)
                await self._continue_prompt(prompt, full, turns_before + hooks.turns, placed)
            except prompting.TRIPS as trip:
                # A guardrail's trip ends the prompt, never the run: it
                # would otherwise fail the workflow task, retried for ever.
                placed = self._placed(preparation, placed)
                tripped = trip
                break
            except MaxTurnsExceeded as e:
                raise MaxTurnsExceeded(f"Max turns ({self.given.max_turns}) exceeded") from e
            except BaseException as e:
                placed = self._placed(preparation, placed)
                bound = self.given.host_bound
                recovered = None
                if talking and bound:
                    recovered = await interruptions.recovery(
                        e,
                        self.sandbox,
                        self.snapshots.latest,
                        hooks.calls,
                        self.given,
                        self.progress,
                    )
                if recovered is not None:
                    # Redone in a fresh sandbox, from the latest snapshot
                    # (with the prompt's inputs, unless they were placed).
                    self.sandbox = recovered.sandbox
                    model_input, restore = [*self.redo, recovered.note], recovered.snapshot
                    place = place and placed is None
                    turns_before += hooks.turns
                    input_checked = True
                    continue
                raise  # the run's end removes the sandbox (_run)
            finally:
                self._show_cost()
                if loading is not None and loading.done:
                    load_memory = None
        outputs = await collect(self.sandbox, request, placed)
        if memory is not None:
            await save_memory(self.sandbox, memory)
        if tripped is not None:
            # The conversation goes on from before the tripped prompt: what
            # a guardrail stopped is never handed to the model.
            return prompting.tripped_answer(tripped, outputs)
        if stopped is not None:
            assert stopped.run_data is not None
            self.conversation = prompting.conversation_after(stopped.run_data, self.given)
            return prompting.stopped_answer(stopped, outputs)
        self.conversation = prompting.conversation_after(result, self.given)
        return answer_of(result.final_output, outputs)

    def _charge(self) -> None:
        """Charge what the run used of its sandbox and of Temporal since the
        last charge to the chain's usage and the prompt's."""
        charge = self.meter.charge()
        self.usage.charge(charge)
        self.prompt_usage.charge(charge)

    def _show_cost(self) -> None:
        """Charge the run, and show the chain's usage in its memo."""
        self._charge()
        self.progress.show_usage(self.usage)

    def _placed(self, preparation: Preparation, placed: Placed | None) -> Placed | None:
        """What the workspace holds once ``preparation`` placed the inputs
        (the first prompt's commit kept for the chain), else ``placed``."""
        if preparation.placed is None:
            return placed
        self.commit = preparation.commit
        return preparation.placed

    async def _answered(self, answer: RunAnswer) -> None:
        """The prompt is answered: snapshot the workspace, and wait."""
        await self._snapshot()
        self.progress.enter(
            WAITING, answered=self.progress.state.prompts, answer=answer, restored=""
        )

    async def _snapshot(self) -> None:
        # None to take when an input guardrail tripped before the sandbox was made.
        if self.sandbox.holds:
            await self.snapshots.take(self.sandbox)

    # ----------------------------------------------------- the chain's runs

    async def _continue_prompt(
        self, prompt: Prompt, full: HistoryFull, turns: int, placed: Placed | None
    ) -> None:
        """Hand the rest of the prompt's work to the next run of the chain:
        same conversation, same sandbox, the turns left (a conversation
        snapshots its workspace first: the next run redoes from there)."""
        assert full.run_data is not None
        conversation = prompting.conversation_after(full.run_data, self.given)
        if prompt.request.follow_ups:
            await self._snapshot()
        # Whose turn it was: agent.py's agent, or one it handed off to.
        agent = full.run_data.last_agent.name
        if agent == self.agent().name:
            agent = ""
        await self._continue(prompt.request, conversation, turns, placed, agent=agent)

    async def _continue_waiting(self, request: RunRequest) -> None:
        """Between two prompts, a history grown large goes on in the next
        run of the chain, which starts by waiting for the follow-up."""
        await self._continue(request, self.conversation, 0, Placed(commit=self.commit), True)

    async def _continue(
        self,
        request: RunRequest,
        conversation: list[dict[str, Any]],
        turns: int,
        placed: Placed | None,
        waiting: bool = False,
        agent: str = "",
    ) -> None:
        # The stream's readers released (they follow to the next run), and
        # once the updates being handled are done: what they change is handed on.
        self.stream.stream.detach_pollers()
        await workflow.wait_condition(workflow.all_handlers_finished)
        # What the run used so far, handed on with its sandbox's clock.
        self._charge()
        stream = self.stream.handed_on()
        handed = interruptions.carried(
            conversation,
            self.sandbox,
            self.usage,
            self.prompt_usage,
            self.progress.state,
            self.snapshots.latest,
            self.approvals.always,
            turns=turns,
            run=self.run_of_chain + 1,
            placed=placed,
            waiting=waiting,
            agent=agent,
        )
        if self.streamed or stream.log or stream.base_offset:
            handed = dataclasses.replace(handed, stream=stream)
        since = self.meter.since.isoformat() if self.meter.since is not None else ""
        handed = dataclasses.replace(handed, skills=self.input_skills, sandbox_since=since)
        memo = self.progress.chain_memo(self.usage, request.follow_ups)
        interruptions.continue_as_new(request, handed, memo)

    def _carry_on(self, carried: Carried) -> None:
        """Take up where the run before this one in the chain left off."""
        self.usage = carried.usage
        self.prompt_usage = carried.prompt_usage or Usage()
        # The run before handed it on in this run's memo (chain_memo).
        self.progress.usage_shown = dataclasses.replace(carried.usage)
        self.run_of_chain = carried.run
        self.input_skills = carried.skills
        self.commit = Placed(**carried.placed).commit if carried.placed else ""
        self.conversation = carried.conversation
        self.redo = carried.conversation
        self.sandbox.state_from(carried)
        self.meter.held_since(carried.sandbox_since, self.sandbox.usd_per_hour)
        if carried.snapshot is not None:
            self.snapshots.latest = Snapshot(**carried.snapshot)
        if self.given.approvals:
            self.approvals.always = set(carried.always_approved)
        self.progress.state = interruptions.carried_state(carried)

    def _given(self) -> Given:
        """What the service and this workflow type give the run."""
        service = current()
        return Given(
            max_turns=self.max_turns if self.max_turns is not None else service.max_turns,
            approvals=service.approvals,
            approval_wait=self.approval_timeout
            if self.approval_timeout is not None
            else service.approval_timeout,
            host_bound=service.host_bound,
            host_wait=self.host_wait,
            activity_timeout=service.sandbox_activity_timeout,
            secrets=tuple(service.sandbox_secrets),
            primary_provider=service.sandbox_provider,
            backends=sandbox_backends(),
            budget=service.budget(),
            model=priced_as(self.agent().model),
            prices=service.prices,
            memory_across_conversations=self.memory_across_conversations
            if self.memory_across_conversations is not None
            else service.memory_across_conversations,
            # None for an instance no run initialised (a test's).
            meter=getattr(self, "meter", None),
        )

    # ------------------------------------------------------- conversations

    @workflow.update(name=FOLLOW_UP)
    async def follow_up(self, follow_up: FollowUp) -> int:
        """The next prompt of a conversation that has answered; the prompt's
        number. The run's main loop works on it (``_conversation``)."""
        self.inbox.follow_up = follow_up
        return self.progress.state.prompts + 1

    @follow_up.validator
    def only_when_answered(self, follow_up: FollowUp) -> None:
        # Refused here, a follow-up is never written to history.
        self.inbox.check_follow_up(follow_up, self.follow_ups, self.progress.state)
        unsendable = not_text(dataclasses.asdict(follow_up))
        if unsendable is not None:
            raise ApplicationError(
                f"The follow-up cannot be sent on: its {unsendable} holds a lone surrogate "
                "(a character UTF-8 cannot carry); send UTF-8 text.",
                type="BadFollowUp",
            )
        refusal = self._given().budget_refusal(follow_up.token_budget, follow_up.cost_budget_usd)
        if refusal is not None:
            raise ApplicationError(
                f"The follow-up has a bad budget: {refusal}.", type="BadFollowUp"
            )

    @workflow.update(name=END)
    async def end(self) -> str:
        """End the conversation: its sandbox is removed and the run returns
        its last answer."""
        self.inbox.ending = True
        return ENDED

    @end.validator
    def only_when_not_working(self) -> None:
        self.inbox.check_end(self.follow_ups, self.progress.state)

    @workflow.query(name=CONVERSATION)
    def conversation_state(self) -> Conversation:
        """Where the conversation stands, with its latest answer."""
        return self.progress.state

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
        # Refused here, a decision is never written to history. A replay
        # never runs this.
        deciding.check(decision, self.approvals, current().approvals)
