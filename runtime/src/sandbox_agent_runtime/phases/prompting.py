"""A prompt answered: the agent's turns in the run's sandbox, and, with
approvals, each call that waits for a person decided (deciding.py) before the
agent goes on.

``Prompt`` is what one prompt starts from: the run's first prompt, a
follow-up, or a prompt a chain's earlier run handed on (``carried``). The
workspace it needs before the first model turn (workspace/steps.py's
``Preparation``) rides on the chain's run hooks (chain.HistoryBudget), and
the prompt's end gives the answer (``answer_of()``) and the conversation the
next prompt goes on from. Each prompt has a budget of its own (``budget_of()``:
the request's or the follow-up's, else the service's), checked by the run
hooks before each model call; a prompt that reaches it stops with an answer
that says so (``stopped_answer()``), its workspace left as it is. So does a
prompt whose input or output guardrail (agent.py, the SDK's own) trips
(``tripped_answer()``); every input guardrail runs before the prompt's first
model call and sandbox operation (``guarded_in_turn()``)."""

import contextlib
import dataclasses
import json
from contextlib import AsyncExitStack
from dataclasses import asdict, dataclass
from typing import Any

from agents import InputGuardrailTripwireTriggered, OutputGuardrailTripwireTriggered, Runner
from agents.exceptions import RunErrorDetails
from agents.result import RunResult, RunResultBase, RunResultStreaming
from agents.run import RunConfig
from agents.sandbox import SandboxAgent, SandboxRunConfig
from agents.sandbox.capabilities import Skills
from agents.sandbox.entries import Dir
from agents.sandbox.manifest import Environment, Manifest
from agents.sandbox.snapshot import NoopSnapshotSpec
from agents.tool import ToolOrigin
from pydantic import BaseModel
from temporalio.exceptions import ApplicationError
from temporalio.openai_agents import TemporalWorkerEnvValue

from sandbox_agent_runtime.approvals import Approvals
from sandbox_agent_runtime.chain import (
    Carried,
    HistoryBudget,
    LastingSandboxClient,
    bounded,
    bounded_model_input,
    budgeted,
    conversation_so_far,
)
from sandbox_agent_runtime.display import visible
from sandbox_agent_runtime.mcp_servers import connected, servers_of
from sandbox_agent_runtime.observability import BudgetReached, Usage
from sandbox_agent_runtime.phases.deciding import decision_on
from sandbox_agent_runtime.phases.given import Given
from sandbox_agent_runtime.phases.progress import Progress
from sandbox_agent_runtime.run_request import FollowUp, Outputs, RunAnswer, RunRequest
from sandbox_agent_runtime.sandbox_tools import TOLD_WHEN_NOT_FOUND
from sandbox_agent_runtime.service import Budget, prompt_budget
from sandbox_agent_runtime.shared import mcp_server_named
from sandbox_agent_runtime.streaming import Published, RunStream
from sandbox_agent_runtime.workspace.requests import Placed, Snapshot


@dataclass(frozen=True)
class Prompt:
    """One prompt to answer: its request (its inputs), and what the model
    is given."""

    request: RunRequest
    # The model's input: the prompt, or the conversation ending with it.
    model_input: str | list[dict[str, Any]]
    # The run's first prompt (its repository is cloned for it; its inputs
    # are checked against the agent's files).
    first: bool
    # What the chain's earlier run handed on of it (None: it starts here):
    # the model turns it took, and what it placed in the workspace.
    carried: Carried | None = None
    turns_before: int = 0
    placed: Placed | None = None
    # The snapshot a fresh sandbox is restored from first (a follow-up to a
    # released conversation).
    restore: Snapshot | None = None


def first_prompt(request: RunRequest, carried: Carried | None) -> Prompt:
    """The run's first prompt: the request's, or, handed on by the chain's
    earlier run, the conversation so far."""
    if carried is None:
        return Prompt(request, request.prompt, first=True)
    placed = Placed(**carried.placed) if carried.placed else None
    return Prompt(request, carried.conversation, False, carried, carried.turns, placed)


def next_prompt(
    request: RunRequest,
    follow_up: FollowUp,
    conversation: list[dict[str, Any]],
    restore: Snapshot | None,
) -> Prompt:
    """A follow-up's prompt: the conversation so far, then its text; its
    inputs, and its own budget (the service's unless it carries one)."""
    return Prompt(
        dataclasses.replace(
            request,
            prompt=follow_up.prompt,
            inputs=follow_up.inputs,
            token_budget=follow_up.token_budget,
            cost_budget_usd=follow_up.cost_budget_usd,
        ),
        [*conversation, {"role": "user", "content": follow_up.prompt}],
        first=False,
        restore=restore,
    )


def first_after_trips(
    request: RunRequest, follow_up: FollowUp, conversation: list[dict[str, Any]]
) -> Prompt:
    """A follow-up to a conversation whose every prompt so far tripped an
    input guardrail before its workspace was made: the run's first prompt
    after all, with the run's inputs and the follow-up's."""
    prompt = next_prompt(request, follow_up, conversation, None)
    inputs = [*request.inputs, *follow_up.inputs]
    return dataclasses.replace(
        prompt, request=dataclasses.replace(prompt.request, inputs=inputs), first=True
    )


def budget_of(request: RunRequest, given: Given) -> Budget:
    """The budget of a prompt of ``request``: its own, else the service's."""
    return prompt_budget(given.budget, request.token_budget, request.cost_budget_usd)


def stopped_answer(stop: BudgetReached, outputs: Outputs) -> RunAnswer:
    """The answer of a prompt stopped at its budget: the reason, and what
    the workspace holds by then."""
    return RunAnswer(answer=stop.reason, outputs=outputs, stopped=stop.reason)


# The most characters of a tripped guardrail's output info its reason shows.
GUARDRAIL_INFO_SHOWN = 200

Tripped = InputGuardrailTripwireTriggered | OutputGuardrailTripwireTriggered
# What a tripped guardrail raises (an ``except`` takes a tuple).
TRIPS = (InputGuardrailTripwireTriggered, OutputGuardrailTripwireTriggered)


def tripped_answer(trip: Tripped, outputs: Outputs) -> RunAnswer:
    """The answer of a prompt a guardrail stopped: a line naming the
    guardrail (input or output, its name) and its output info, and what the
    workspace holds by then."""
    result = trip.guardrail_result
    name = result.guardrail.get_name()
    side = "input" if isinstance(trip, InputGuardrailTripwireTriggered) else "output"
    info = result.output.output_info
    text = info if isinstance(info, str) else json.dumps(info, default=str, ensure_ascii=False)
    text = visible(" ".join(str(text).split()))
    if len(text) > GUARDRAIL_INFO_SHOWN:
        text = text[: GUARDRAIL_INFO_SHOWN - 1] + "…"
    reason = f"stopped: {side} guardrail {name!r} tripped" + (f": {text}" if text else "")
    return RunAnswer(answer=reason, outputs=outputs, stopped=reason, guardrail=name)


def guarded_in_turn(agent: SandboxAgent[None], checked: bool) -> SandboxAgent[None]:
    """``agent`` with each input guardrail run before its first model call
    (``run_in_parallel`` off). In parallel, the SDK would start the model
    call and the sandbox with the guardrail and cancel them when it trips:
    a tripped input would still reach the model, and which activities a
    prompt scheduled would depend on which finished first. In turn, a
    tripped input reaches neither, and history holds the same steps every
    time. A prompt whose input was ``checked`` (it goes on in the chain's
    next run, or is redone after its host was gone) has none: its
    conversation by then holds the tools' outputs, not the prompt alone."""
    if checked:
        return dataclasses.replace(agent, input_guardrails=[])
    if not any(guardrail.run_in_parallel for guardrail in agent.input_guardrails):
        return agent
    return dataclasses.replace(
        agent,
        input_guardrails=[
            dataclasses.replace(guardrail, run_in_parallel=False)
            for guardrail in agent.input_guardrails
        ],
    )


# The name of a run's input whose directories are skills (docs of a
# render: skills-and-memory.md): listed to the model like agent.py's.
INPUT_SKILLS = "skills"


class InputSkills(Skills):
    """The SDK's ``Skills``, listing the skills of the run's ``skills``
    input (a directory each, with its ``SKILL.md``) where the input is
    placed: nothing of it in the manifest (the input is placed as any
    other), and no content in history."""

    def process_manifest(self, manifest: Manifest) -> Manifest:
        return manifest


def carries_skills(request: RunRequest) -> bool:
    """Whether the inputs of ``request`` carry skills: a directory named
    ``INPUT_SKILLS``."""
    return any(each.name == INPUT_SKILLS and each.kind == "directory" for each in request.inputs)


def with_input_skills(agent: SandboxAgent[None]) -> SandboxAgent[None]:
    """``agent``, listing the skills of the run's inputs too (their
    directory placed before its instructions are made); an agent handed
    off to that is no SandboxAgent (a chain's next run goes on with it) as
    it is."""
    if not isinstance(agent, SandboxAgent):
        return agent
    listing = InputSkills(from_=Dir(), skills_path=INPUT_SKILLS)
    return dataclasses.replace(agent, capabilities=[*agent.capabilities, listing])


def workspace_manifest(
    agent: SandboxAgent[Any], root: str, request: RunRequest | None, secrets: tuple[str, ...]
) -> Manifest:
    """The run's manifest: the agent's own ``default_manifest`` (agent.py:
    its files, its environment), at the backend's workspace root, with the
    names of the variables forwarded to the sandbox (``secrets``, the
    service's ``sandbox_secrets``: the worker resolves each one when the
    sandbox needs it, so no value travels with the run). An input named like
    one of the agent's entries, or a variable of the agent's named like a
    forwarded one, ends the run (``request`` None: no inputs to check, a
    chain's later run or prompt)."""
    # (An agent handed off to may be a plain Agent, without one.)
    own = getattr(agent, "default_manifest", None) or Manifest()
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
    forwarded = sorted(set(variables) & set(secrets))
    if forwarded:
        raise ApplicationError(
            f"The agent's default_manifest (agent.py) sets {forwarded[0]!r}, which the worker "
            "forwards to the sandbox (sandbox_secrets in service.py): keep it in one of them.",
            type="EnvironmentClash",
            non_retryable=True,
        )
    variables.update({name: TemporalWorkerEnvValue(name=name) for name in secrets})
    # ``entries`` is named so that it counts as set: the plugin sends a
    # manifest without its unset fields, and a capability adds its entries
    # (Skills: its skills' directory) to this dict in place, after.
    return own.model_copy(
        update={
            "root": root,
            "environment": Environment(value=variables),
            "entries": dict(own.entries),
        },
        deep=True,
    )


def run_config(
    sandbox: LastingSandboxClient, agent: SandboxAgent[Any], prompt: Prompt, given: Given
) -> RunConfig:
    """The configuration of the agent's run on ``prompt`` in ``sandbox``."""
    backend = given.backends[prompt.request.provider]
    return RunConfig(
        sandbox=SandboxRunConfig(
            client=sandbox,
            options=backend.sandbox_options(),
            # The sandbox an earlier run of the chain, or the earlier
            # prompt, left running, if any.
            session_state=sandbox.next_state(),
            manifest=workspace_manifest(
                agent,
                backend.WORKSPACE_ROOT,
                prompt.request if prompt.first else None,
                given.secrets,
            ),
            # The service takes its own snapshots (workspace/).
            snapshot=NoopSnapshotSpec(),
        ),
        call_model_input_filter=bounded_model_input,
        # A call of a tool the agent lacks is told to the model, which
        # can correct it, instead of ending the run (sandbox_tools.py).
        tool_not_found_behavior=TOLD_WHEN_NOT_FOUND,
    )


async def answer(
    agent: SandboxAgent[None],
    model_input: str | list[dict[str, Any]],
    turns: int,
    config: RunConfig,
    hooks: HistoryBudget,
    given: Given,
    approvals: Approvals,
    progress: Progress,
    usage: Usage,
    input_checked: bool = False,
    stream: RunStream | None = None,
) -> RunResult | RunResultStreaming:
    """The agent's run on ``model_input``, in at most ``turns`` model turns
    (the agents it hands off to take turns of the same run; those it calls
    as tools count their model calls into its usage and budget). With
    approvals, calls that wait for a person: each is decided, and the run
    goes on from there (its state holds the turns left; hooks are not
    in it). The MCP servers of the agent, and of those it may hand off to,
    are connected for the prompt (a
    stateful one's session lasts as long: mcp_servers.py). ``input_checked``:
    the input guardrails passed the prompt before. ``stream``: the run's,
    when it streams (streaming.py), else None: whole answers."""
    with budgeted(agent, hooks):
        async with AsyncExitStack() as servers:
            await connected(servers_of(agent), servers)
            result = await ran(
                guarded_in_turn(agent, input_checked),
                model_input,
                stream,
                max_turns=turns,
                run_config=config,
                hooks=hooks,
            )
            while given.approvals and result.interruptions:
                progress.show_usage(usage)
                state = result.to_state()
                for item in result.interruptions:
                    decision = await decision_on(item, approvals, given.approval_wait)
                    if decision.approve:
                        state.approve(item, always_approve=decision.always)
                    else:
                        state.reject(item, rejection_message=decision.reason)
                result = await ran(agent, state, stream, run_config=config, hooks=hooks)
            if result.interruptions:
                raise unapproved(result.interruptions[0].tool_origin, result.interruptions[0].name)
            return result


async def ran(
    agent: SandboxAgent[None],
    model_input: Any,
    stream: RunStream | None,
    hooks: HistoryBudget,
    **options: Any,
) -> RunResult | RunResultStreaming:
    """The agent's run: whole (``Runner.run``), or streamed
    (``Runner.run_streamed``, its turns and tool calls published on
    ``stream`` by its hooks, the model's text by the model activity). A
    streamed run raises what a whole one would (a guardrail's trip, a
    budget reached, its history full) once its events are read."""
    if stream is None:
        return await Runner.run(agent, model_input, hooks=hooks, **options)
    result = Runner.run_streamed(agent, model_input, hooks=Published(hooks, stream), **options)
    # The run's loop is awaited to its end before its events are read: a
    # workflow evicted while it waits holds no open generator of them.
    if result.run_loop_task is not None:
        with contextlib.suppress(Exception):
            await result.run_loop_task
    async for _ in result.stream_events():
        pass
    return result


def unapproved(origin: ToolOrigin | None, tool: str | None) -> ApplicationError:
    """The run's end when a tool waits for a person (an MCP server's
    ``require_approval``, a tool's ``needs_approval``) in a service that
    takes no approvals: nobody would ever decide it."""
    server = mcp_server_named(origin.mcp_server_name or "") if origin is not None else None
    of = f" of the MCP server {server!r}" if server else ""
    return ApplicationError(
        f"The tool {tool!r}{of} waits for a person (agent.py), but this service takes "
        'no approvals (its approval is "none", service.py): drop the approval, or render '
        "the service with approvals.",
        type="NoApprovals",
        non_retryable=True,
    )


def answer_of(output: Any, outputs: Outputs) -> RunAnswer:
    """The prompt's answer: text as it is; an ``output_type``'s value (a
    pydantic model, a dataclass, ...) as JSON."""
    if isinstance(output, str):
        return RunAnswer(answer=output, outputs=outputs)
    if isinstance(output, BaseModel):
        return RunAnswer(answer=output.model_dump(mode="json"), structured=True, outputs=outputs)
    if dataclasses.is_dataclass(output) and not isinstance(output, type):
        return RunAnswer(answer=asdict(output), structured=True, outputs=outputs)
    return RunAnswer(answer=output, structured=True, outputs=outputs)


def conversation_after(run: RunErrorDetails | RunResultBase, given: Given) -> list[dict[str, Any]]:
    """The conversation a run of the agent leaves (finished, or stopped for
    the next run of its chain): what the next model call would be given,
    bounded."""
    return bounded(conversation_so_far(run, given.approvals))  # type: ignore[return-value]
