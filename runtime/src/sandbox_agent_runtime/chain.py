"""How one long agent run becomes a chain of workflow runs.

Every model call carries the whole conversation, so a run's history grows
with the square of its steps, and Temporal ends a run whose history is too
large. The workflow stops the agent between two turns once its history passes
``HISTORY_BUDGET`` (``HistoryBudget``) and continues as new, handing the next
run a ``Carried``: the conversation, the sandbox session's state and the turns
used. The sandbox outlives each run of the chain (``LastingSandboxClient``),
and the conversation stays under ``CONVERSATION_LIMIT`` even when the model
never compacts it (``bounded()``).
"""

import json
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from agents import (
    AgentsException,
    ItemHelpers,
    ModelResponse,
    RunContextWrapper,
    RunHooks,
    Tool,
    TResponseInputItem,
)
from agents.agent import Agent
from agents.exceptions import RunErrorDetails
from agents.result import RunResultBase
from agents.run import AgentRunner, get_default_agent_runner, set_default_agent_runner
from agents.run_config import CallModelData, ModelInputData
from agents.sandbox.capabilities import Compaction
from agents.sandbox.session.base_sandbox_session import BaseSandboxSession
from agents.sandbox.session.manager import Instrumentation
from agents.sandbox.session.sandbox_session import SandboxSession
from agents.sandbox.session.sandbox_session_state import SandboxSessionState
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.contrib.workflow_streams import WorkflowStreamState
from temporalio.exceptions import ActivityError

# The classes temporal_sandbox_client() builds, which the plugin requires.
from temporalio.openai_agents.sandbox._temporal_sandbox_client import TemporalSandboxClient
from temporalio.openai_agents.sandbox._temporal_sandbox_session import TemporalSandboxSession

from sandbox_agent_runtime.affinity import SandboxHost, host_gone, routed_to
from sandbox_agent_runtime.bounded_sandbox import LastingSession
from sandbox_agent_runtime.costs import RunMeter
from sandbox_agent_runtime.observability import Usage, UsageMeter
from sandbox_agent_runtime.shared import CONVERSATION_LIMIT, HISTORY_BUDGET


@dataclass
class Carried:
    """What one run of the chain hands the next (its second argument).

    The next run may be on a newer build: each build must
    read what the one before it wrote. So change it compatibly: add a field
    only with a default; never rename, remove or retype one (stop writing
    it, keep reading it, and drop it a deploy after no run carries it); a
    change that cannot be made so ships as a new workflow type
    (docs/versioning.md). tests/histories/ replays runs that carried the
    current fields, so the suite catches a field the new code cannot read.
    """

    # The conversation so far, as the model's input items.
    conversation: list[dict[str, Any]]
    # The sandbox session, as the sandbox client serialized it.
    session_state: dict[str, Any]
    # Model turns the earlier runs of the chain used.
    turns: int
    # Which run of the chain the next one is (the first is 1).
    run: int = 1
    # The model calls and tokens the earlier runs of the chain used.
    usage: Usage = field(default_factory=Usage)
    # The host the sandbox lives on, or None when any worker reaches it (or
    # the service has no host-bound backend).
    host: SandboxHost | None = None
    # The tools a person approved for the rest of the chain (with approvals:
    # approvals.py).
    always_approved: list[str] = field(default_factory=list)
    # What the workspace held once the run's inputs were placed
    # (workspace/requests.py's Placed: the baseline of its outputs), or None
    # when nothing was placed.
    placed: dict[str, Any] | None = None
    # A conversation's (RunRequest.follow_ups) own: whether the next run
    # starts by waiting for a follow-up (the chain continued between two
    # prompts; ``conversation`` then ends with the latest answer, and an
    # empty ``session_state`` means the sandbox was released), and where it
    # stands: the prompts given and answered, when the state began, the
    # latest answer (a RunAnswer's fields), and the workspace's latest
    # snapshot (workspace/requests.py's Snapshot).
    waiting: bool = False
    prompts: int = 1
    answered: int = 0
    since: str = ""
    answer: dict[str, Any] | None = None
    snapshot: dict[str, Any] | None = None
    # The model calls and tokens the current prompt used in the earlier runs
    # (what its budget counts; None from a run before budgets: from zero).
    prompt_usage: Usage | None = None
    # The agent whose turn it was, by name, when the agent.py's agent had
    # handed the prompt off to another ("" for agent.py's own).
    agent: str = ""
    # The run's stream (streaming.py), from its latest model turns' start
    # (None: a run that did not stream, or from before streams).
    stream: WorkflowStreamState | None = None
    # Whether a prompt's inputs carried skills (phases/prompting.py's
    # INPUT_SKILLS): the next run's prompts list them too.
    skills: bool = False
    # Since when the run's sandbox has been charged (ISO; "" for none, or a
    # run before costs.py): the next run's meter charges it from there.
    sandbox_since: str = ""


class HistoryFull(AgentsException):
    """Raised between two turns to stop the agent: the run's history has
    reached its budget and the rest of the work goes to the next run."""


@dataclass
class HistoryBudget(UsageMeter):
    """Counts the model turns of this run and stops the agent before a turn
    once the run's history is over ``HISTORY_BUDGET`` (or Temporal suggests
    continuing as new). Both figures come from the workflow task, so replay
    stops at the same turn. As a ``UsageMeter`` it also counts each model
    call's tokens, from the chain's ``usage`` so far, and stops the agent
    at the prompt's budget."""

    turns: int = 0
    # Awaited once, before the first model call (the sandbox is up by then):
    # what the workspace needs first (workspace/steps.py's Preparation: a
    # snapshot restored, the inputs placed), a call down.
    before_first_turn: Callable[[], Awaitable[None]] | None = None
    # Awaited once, when the agent starts (its sandbox is up), before its
    # instructions are made for the first model call: what they read from
    # the workspace (workspace/steps.py's MemoryLoad: the caller's memory).
    before_instructions: Callable[[], Awaitable[None]] | None = None
    # The tools the agent called, each with its arguments (cut short): what
    # a conversation tells the model it lost when its workspace is restored.
    calls: list[str] = field(default_factory=list)

    async def on_agent_start(self, context: RunContextWrapper[Any], agent: Agent[Any]) -> None:
        if self.before_instructions is not None:
            prepare, self.before_instructions = self.before_instructions, None
            await prepare()

    async def on_tool_start(
        self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool
    ) -> None:
        arguments = getattr(context, "tool_arguments", "") or ""
        call = f"{tool.name} {arguments}".strip()
        self.calls.append(call if len(call) <= 200 else call[:199] + "…")

    async def on_llm_start(
        self,
        context: RunContextWrapper[Any],
        agent: Agent[Any],
        system_prompt: str | None,
        input_items: list[TResponseInputItem],
    ) -> None:
        await super().on_llm_start(context, agent, system_prompt, input_items)
        info = workflow.info()
        if self.turns and (
            info.get_current_history_size() > HISTORY_BUDGET or info.is_continue_as_new_suggested()
        ):
            raise HistoryFull(f"history at {info.get_current_history_size():,} bytes")
        if self.before_first_turn is not None:
            prepare, self.before_first_turn = self.before_first_turn, None
            await prepare()
        self.turns += 1


# The hooks of the prompt being answered (``budgeted()``), seen by the
# workflow's task that answers it and by every task it starts.
PROMPT_HOOKS: ContextVar[HistoryBudget | None] = ContextVar("prompt_hooks", default=None)


class NestedRun(RunHooks[Any]):
    """The hooks of a ``Runner.run`` made during a prompt by other than the
    prompt itself: an agent's called as a tool (``Agent.as_tool``), an agent a
    guardrail asks. The prompt's hooks do not reach it, so these count its
    model calls into the run's usage and stop it at the prompt's budget
    (through ``run``), then call the hooks it was given (``own``)."""

    def __init__(self, run: HistoryBudget, own: RunHooks[Any] | None) -> None:
        self.run, self.own = run, own or RunHooks[Any]()

    async def on_llm_start(
        self,
        context: RunContextWrapper[Any],
        agent: Agent[Any],
        system_prompt: str | None,
        input_items: list[TResponseInputItem],
    ) -> None:
        await UsageMeter.on_llm_start(self.run, context, agent, system_prompt, input_items)
        await self.own.on_llm_start(context, agent, system_prompt, input_items)

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        await self.run.on_llm_end(context, agent, response)
        await self.own.on_llm_end(context, agent, response)

    async def on_agent_start(self, context: Any, agent: Agent[Any]) -> None:
        await self.own.on_agent_start(context, agent)

    async def on_agent_end(self, context: Any, agent: Agent[Any], output: Any) -> None:
        await self.own.on_agent_end(context, agent, output)

    async def on_handoff(self, context: Any, from_agent: Agent[Any], to_agent: Agent[Any]) -> None:
        await self.own.on_handoff(context, from_agent, to_agent)

    async def on_tool_start(self, context: Any, agent: Agent[Any], tool: Tool) -> None:
        await self.own.on_tool_start(context, agent, tool)

    async def on_tool_end(self, context: Any, agent: Agent[Any], tool: Tool, result: Any) -> None:
        await self.own.on_tool_end(context, agent, tool, result)


def counted(options: dict[str, Any]) -> dict[str, Any]:
    """A ``Runner.run``'s options, with ``NestedRun`` hooks when it is made
    during a prompt by other than the prompt itself."""
    prompt = PROMPT_HOOKS.get()
    hooks = options.get("hooks")
    # The prompt's own run: its hooks, or them published on its stream
    # (streaming.Published, which holds them as ``hooks``).
    if prompt is None or hooks is prompt or getattr(hooks, "hooks", None) is prompt:
        return options
    return {**options, "hooks": NestedRun(prompt, options.get("hooks"))}


class CountsNestedRuns(AgentRunner):
    """The agent runner (``Runner.run``'s), ``inner`` with every nested run
    of a prompt counted into it (``counted()``); as ``inner`` elsewhere."""

    def __init__(self, inner: AgentRunner) -> None:
        self.inner = inner

    async def run(self, starting_agent: Any, input: Any, **options: Any) -> Any:
        return await self.inner.run(starting_agent, input, **counted(options))

    def run_sync(self, starting_agent: Any, input: Any, **options: Any) -> Any:
        return self.inner.run_sync(starting_agent, input, **counted(options))

    def run_streamed(self, starting_agent: Any, input: Any, **options: Any) -> Any:
        return self.inner.run_streamed(starting_agent, input, **counted(options))

    def __getattr__(self, name: str) -> Any:
        # The rest is inner's (the plugin's runner: its model_params).
        return getattr(self.inner, name)


@contextmanager
def nested_runs_counted() -> Iterator[None]:
    """While the block runs (a worker's or a replayer's life), ``Runner.run``
    counts a prompt's nested runs (``CountsNestedRuns`` over the runner the
    Temporal plugin set)."""
    before = get_default_agent_runner()
    set_default_agent_runner(CountsNestedRuns(before))
    try:
        yield
    finally:
        set_default_agent_runner(before)


def handed_off_to(agent: Agent[Any], name: str) -> Agent[Any]:
    """The agent named ``name`` among those ``agent`` hands off to, directly
    or through another (``handoffs=[...]`` of agents); ``agent`` itself when
    none is (``name`` "" or its own, or an agent a new build no longer has)."""
    seen: set[int] = set()
    waiting = [agent]
    while waiting and name:
        each = waiting.pop(0)
        if id(each) in seen:
            continue
        seen.add(id(each))
        if each.name == name:
            return each
        waiting += [other for other in each.handoffs if isinstance(other, Agent)]
    if name and name != agent.name:
        workflow.logger.warning(f"No agent {name!r} to hand off to: {agent.name!r} goes on")
    return agent


@contextmanager
def budgeted(agent: Agent[Any], hooks: HistoryBudget) -> Iterator[None]:
    """While the block (``agent``'s runs on a prompt) runs, every other
    ``Runner.run`` the workflow makes, whichever agent it runs, counts its
    model calls into ``hooks`` and stops at the prompt's budget
    (``NestedRun``)."""
    del agent  # every nested run counts, not only those of agent's tools
    token = PROMPT_HOOKS.set(hooks)
    try:
        yield
    finally:
        PROMPT_HOOKS.reset(token)


def conversation_so_far(
    run_data: RunErrorDetails | RunResultBase, approvals: bool
) -> list[TResponseInputItem]:
    """The input the next model call would have had, from a stopped run or
    a finished one (with ``approvals``, without the records of calls that
    waited for a person's approval, which are not the model's input: their
    outcome is)."""
    return ItemHelpers.input_to_new_input_list(run_data.input) + [
        item.to_input_item()
        for item in run_data.new_items
        if not (approvals and item.type == "tool_approval_item")
    ]


def _size(item: object) -> int:
    return len(json.dumps(item, default=str))


def bounded(conversation: list[TResponseInputItem]) -> list[TResponseInputItem]:
    """The conversation from its last compaction on, and within
    ``CONVERSATION_LIMIT`` bytes: the first item (the request) is kept, then
    as many of the latest items as fit, after a note saying how many earlier
    items were left out. A tool call's output is never kept without the call."""
    conversation = Compaction().process_context(list(conversation))
    if sum(_size(item) for item in conversation) <= CONVERSATION_LIMIT or len(conversation) < 3:
        return conversation
    first, rest = conversation[0], conversation[1:]
    budget = CONVERSATION_LIMIT - _size(first) - 200
    kept: list[TResponseInputItem] = []
    for item in reversed(rest):
        budget -= _size(item)
        if budget < 0:
            break
        kept.insert(0, item)
    while kept and str(dict(kept[0]).get("type", "")).endswith("_output"):
        kept.pop(0)
    left_out = len(rest) - len(kept)
    note: TResponseInputItem = {
        "role": "user",
        "content": (
            f"[{left_out} earlier items of this conversation were left out to stay "
            f"within {CONVERSATION_LIMIT:,} bytes; the workspace still holds their results.]"
        ),
    }
    return [first, note, *kept]


def bounded_model_input(data: CallModelData[Any]) -> ModelInputData:
    """``RunConfig.call_model_input_filter``: every model call carries a
    bounded conversation."""
    return ModelInputData(
        input=bounded(data.model_data.input), instructions=data.model_data.instructions
    )


class LastingSandboxClient(TemporalSandboxClient):
    """``temporal_sandbox_client()``, but its sessions outlive ``Runner.run``.

    The runner stops and deletes the sandbox at the end of every run it
    makes; here that would delete the workspace between two runs of a chain.
    This client's sessions ignore the runner's teardown, and the workflow
    calls ``remove()`` once, when the chain ends (with an answer, a failure
    or a cancellation).
    """

    def __init__(
        self,
        name: str,
        config: workflow.ActivityConfig,
        host: SandboxHost | None = None,
        meter: RunMeter | None = None,
        usd_per_hour: float = 0.0,
    ) -> None:
        super().__init__(name, config)
        # The run's meter, which counts the time it holds a sandbox at
        # ``usd_per_hour`` (costs.py).
        self.meter = meter
        self.usd_per_hour = usd_per_hour
        # The provider it was registered under (the activities' prefix).
        self.provider = name
        # How each sandbox operation is run (timeout, retries, routing): the
        # workspace's own operations (workspace/) are run the same way.
        self.config = config
        # The host the sandbox lives on (``config`` sends its operations
        # there), handed on with its state; None when any worker reaches it
        # (always, for a service without a host-bound backend).
        self.host = host
        # The session's activities, without the SDK's wrapper (the runner
        # gets the wrapper): in workflow code that wrapper turns any failure
        # of a stop or a shutdown into a RuntimeError, which would fail the
        # workflow task for ever.
        self.inner: TemporalSandboxSession | None = None
        # The state an earlier run of the chain handed on, until this run
        # has resumed the session.
        self.handed_on: SandboxSessionState | None = None

    def _wrap_session(
        self, inner: BaseSandboxSession, *, instrumentation: Instrumentation | None = None
    ) -> SandboxSession:
        assert isinstance(inner, TemporalSandboxSession)
        self.inner = inner
        return LastingSession(
            inner, instrumentation=instrumentation, dependencies=self._resolve_dependencies()
        )

    async def create(self, **options: Any) -> SandboxSession:
        """The run's sandbox. The SDK gives each SandboxAgent of a run a
        session of its own, created with the run's one client; an agent that
        takes a turn after the first (a handoff's, an agent's called as a
        tool) is given the sandbox the run already holds, resumed, so every
        agent of the run works in the one workspace, removed once."""
        if self.inner is not None:
            return await self.resume(self.inner.state)
        if self.meter is not None:
            self.meter.sandbox_created(self.usd_per_hour)
        return await super().create(**options)

    async def delete(self, session: Any) -> Any:
        """Left to ``remove()``."""
        return session

    def carried_state(self) -> dict[str, Any]:
        """The session's state, for the next run of the chain ({} for none)."""
        state = self.inner.state if self.inner is not None else self.handed_on
        return dict(self.serialize_session_state(state)) if state is not None else {}

    def state_from(self, carried: Carried) -> SandboxSessionState | None:
        """The session state an earlier run of the chain handed on (None
        when it handed on none: a conversation that released its sandbox)."""
        if not carried.session_state:
            return None
        self.handed_on = self.deserialize_session_state(carried.session_state)
        return self.handed_on

    def next_state(self) -> SandboxSessionState | None:
        """The state the next ``Runner.run`` resumes the session from: the
        one handed on, or the session of this run's last prompt (None: the
        runner creates a sandbox)."""
        if self.inner is not None:
            self.handed_on, self.inner = self.inner.state, None
        return self.handed_on

    @property
    def holds(self) -> bool:
        """Whether there is a sandbox to remove."""
        return self.inner is not None or self.handed_on is not None

    async def remove(self) -> None:
        """Stop the sandbox and delete it, as the runner would have. A run
        that ends before it resumed the sandbox it was handed (cancelled
        during the resume, say) resumes it to remove it. The delete is
        tried even when the stop or the shutdown before it failed for good
        (a sandbox at its process limit, say): each is an operation with
        the sandbox's timeout and retries. Until the delete is done, the
        client still holds the sandbox, so a removal that failed can be
        tried again; but a sandbox whose host is gone (no worker of it took
        the stop) went with its host: the client holds it no more, and the
        error is raised for the caller to tell (phases/between.py)."""
        if self.inner is None and self.handed_on is not None:
            await self.resume(self.handed_on)
        inner = self.inner
        if inner is None:
            return
        for step in (inner.stop, inner.shutdown):
            try:
                await step()
            except ActivityError as e:
                if host_gone(e) is not None:
                    # No worker of its host took it: the sandbox went with
                    # its host, and there is nothing left to delete.
                    self.inner = self.handed_on = None
                    self._removed()
                    raise
                workflow.logger.warning(
                    f"{e.activity_type} failed, the sandbox is deleted anyway: {e}"
                )
        await TemporalSandboxClient.delete(self, inner)
        self.inner = self.handed_on = None
        self._removed()

    def _removed(self) -> None:
        if self.meter is not None:
            self.meter.sandbox_removed()


def sandbox_retry_policy(non_retryable: Sequence[str]) -> RetryPolicy:
    """How a sandbox operation is retried. One that keeps failing ends the
    run after a few attempts (about 15 seconds of back-off) instead of
    backing off for ever. An error that no retry can fix (one the SDK marks
    so, or one of the backends' ``non_retryable`` errors: a rejected key, an
    unknown template) ends it at once."""
    return RetryPolicy(
        initial_interval=timedelta(seconds=1),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=30),
        maximum_attempts=5,
        non_retryable_error_types=list(non_retryable),
    )


def sandbox_client(
    provider: str,
    host: SandboxHost | None,
    timeout: timedelta,
    host_wait: timedelta,
    non_retryable: Sequence[str],
    meter: RunMeter | None = None,
    usd_per_hour: float = 0.0,
) -> LastingSandboxClient:
    """A sandbox client for ``provider`` (the name the worker registered it
    under), each operation given ``timeout`` and sent to ``host``'s workers
    (None: any worker, and always so without a host-bound backend), which
    take it within ``host_wait`` or are taken for gone; ``meter`` counts
    the time the run holds it, at ``usd_per_hour``."""
    return LastingSandboxClient(
        provider,
        workflow.ActivityConfig(
            start_to_close_timeout=timeout,
            retry_policy=sandbox_retry_policy(non_retryable),
            **routed_to(host, host_wait),
        ),
        host,
        meter,
        usd_per_hour,
    )
