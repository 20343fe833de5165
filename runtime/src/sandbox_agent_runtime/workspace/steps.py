"""The workspace's operations as a run takes them (workflow side): each
schedules its activity on the run's sandbox as the sandbox's own operations
are scheduled (their timeout, retries and host), with a summary for history
and the starter: ``place()``, ``collect()``, ``Snapshots`` (``restore()``,
``forget()``), and ``Preparation``, what the workspace needs before the
agent's first model turn, which the chain's run hooks await. It reads the
sandbox client through ``RunSandbox`` alone, so nothing here imports the
chain.
"""

import dataclasses
import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from agents.sandbox import SandboxAgent
from agents.sandbox.capabilities import Memory
from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.openai_agents.sandbox._temporal_sandbox_session import TemporalSandboxSession

from sandbox_agent_runtime.archives import size_text
from sandbox_agent_runtime.failures import GAVE_UP, describe
from sandbox_agent_runtime.run_request import Check, CheckResult, Outputs, RunRequest
from sandbox_agent_runtime.service import current
from sandbox_agent_runtime.shared import (
    CALLER_MEMO,
    CHECK,
    COLLECT,
    FORGET,
    MEMORY_LOAD,
    MEMORY_SAVE,
    PLACE,
    RESTORE,
    SNAPSHOT,
)
from sandbox_agent_runtime.workspace.memories import STARTER_OWNER, memory_key
from sandbox_agent_runtime.workspace.requests import (
    CheckArgs,
    CollectArgs,
    ForgetArgs,
    MemoryArgs,
    PlaceArgs,
    Placed,
    Remembered,
    RestoreArgs,
    Restored,
    Snapshot,
    SnapshotArgs,
)


class RunSandbox(Protocol):
    """The run's sandbox client, as the workspace's operations use it."""

    # The provider it was registered under (the activities' prefix), and
    # how its operations are scheduled.
    provider: str
    config: workflow.ActivityConfig
    # The session of the current Runner.run (None before it started one),
    # and the state an earlier run of the chain handed on.
    inner: TemporalSandboxSession | None
    handed_on: Any

    async def resume(self, state: Any) -> Any: ...


def _session(sandbox: RunSandbox) -> TemporalSandboxSession:
    assert sandbox.inner is not None, "the workspace's operations run once the sandbox is up"
    return sandbox.inner


def _with_summary(sandbox: RunSandbox, summary: str) -> workflow.ActivityConfig:
    return {**sandbox.config, "summary": summary}


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


async def place(sandbox: RunSandbox, request: RunRequest, first_prompt: bool) -> Placed:
    """Put the prompt's inputs (the first prompt's repository too) in the
    workspace; what the workspace then holds."""
    repo = request.repo if first_prompt else None
    placed: Placed = await workflow.execute_activity(
        f"{sandbox.provider}-{PLACE}",
        PlaceArgs(state=_session(sandbox).state, inputs=request.inputs, repo=repo),
        result_type=Placed,
        **_with_summary(sandbox, placing(dataclasses.replace(request, repo=repo), first_prompt)),
    )
    return placed


async def collect(sandbox: RunSandbox, request: RunRequest, placed: Placed | None) -> Outputs:
    """Every file the prompt created or changed since ``placed``. The answer
    is kept whatever becomes of them: outputs that could not be collected
    are withheld, saying why."""
    if sandbox.inner is None and sandbox.handed_on is not None:
        await sandbox.resume(sandbox.handed_on)
    if sandbox.inner is None:
        return Outputs()
    before = placed or Placed()
    try:
        outputs: Outputs = await workflow.execute_activity(
            f"{sandbox.provider}-{COLLECT}",
            CollectArgs(
                state=sandbox.inner.state,
                baseline=before.baseline,
                repo=request.repo,
                commit=before.commit,
                files=before.files,
                size=before.size,
            ),
            result_type=Outputs,
            **_with_summary(sandbox, "output"),
        )
    except ActivityError as e:
        if e.retry_state not in GAVE_UP:
            raise  # e.g. the run was cancelled
        return Outputs(commit=before.commit, withheld=f"they were not collected: {describe(e)}")
    return outputs


async def check(sandbox: RunSandbox, checks: list[Check]) -> list[CheckResult]:
    """The request's checks on what the run left, made in its sandbox
    (evaluations: run_request.Check), given the time their commands may
    take. A step that could not be made is a failed check, never a failed
    run: the answer stands."""
    if sandbox.inner is None and sandbox.handed_on is not None:
        await sandbox.resume(sandbox.handed_on)
    if sandbox.inner is None:
        return [
            CheckResult(each.kind, False, each.path or each.command, "no sandbox")
            for each in checks
        ]
    config = _with_summary(
        sandbox, f"check {len(checks)} thing{'s' if len(checks) != 1 else ''} the run left"
    )
    given = config.get("start_to_close_timeout") or timedelta(minutes=2)
    needed = timedelta(seconds=sum(each.timeout for each in checks if each.kind == "command") + 60)
    config["start_to_close_timeout"] = max(given, needed)
    try:
        found: list[CheckResult] = await workflow.execute_activity(
            f"{sandbox.provider}-{CHECK}",
            CheckArgs(state=sandbox.inner.state, checks=checks),
            result_type=list[CheckResult],
            **config,
        )
    except ActivityError as e:
        if e.retry_state not in GAVE_UP:
            raise
        why = f"the checks could not be made: {describe(e)}"
        return [CheckResult(each.kind, False, each.path or each.command, why) for each in checks]
    return found


def snapshot_key(workflow_id: str, run_id: str, number: int) -> str:
    """The object a snapshot is written to: under ``snapshots/`` (which a
    lifecycle rule may expire), one directory per conversation (its id
    hashed: an id may hold any character), one object per snapshot."""
    conversation = hashlib.sha256(workflow_id.encode()).hexdigest()[:32]
    return f"snapshots/{conversation}/{run_id}-{number}.tar.gz"


@dataclass
class Snapshots:
    """A conversation's snapshots: the latest (None before the first), and
    how many this run took (each run of a chain numbers its own objects)."""

    latest: Snapshot | None = None
    taken: int = 0

    async def take(self, sandbox: RunSandbox) -> None:
        """Snapshot the workspace; a snapshot that could not be taken keeps
        the one before (with the worker's timeouts it answered with). One
        whose step failed for good (a workspace that could not be counted
        or read: a sandbox at its process or memory limit, say) is not
        taken either: the run goes on without it, and its end removes the
        sandbox as ever."""
        self.taken += 1
        info = workflow.info()
        try:
            taken: Snapshot = await workflow.execute_activity(
                f"{sandbox.provider}-{SNAPSHOT}",
                SnapshotArgs(
                    state=_session(sandbox).state,
                    key=snapshot_key(info.workflow_id, info.run_id, self.taken),
                    previous=self.latest.key if self.latest else "",
                ),
                result_type=Snapshot,
                **_with_summary(sandbox, "snapshot"),
            )
        except ActivityError as e:
            if e.retry_state not in GAVE_UP:
                raise  # e.g. the run was cancelled
            workflow.logger.warning(f"The workspace's snapshot was not taken: {describe(e)}")
            taken = (self.latest or Snapshot()).model_copy(
                update={"key": "", "why_not": f"it could not be taken: {describe(e)}"}
            )
        if taken.key or self.latest is None:
            self.latest = taken
        else:
            self.latest = self.latest.model_copy(
                update={"idle_timeout": taken.idle_timeout, "lifetime": taken.lifetime}
            )


async def restore(sandbox: RunSandbox, snapshot: Snapshot) -> None:
    """Put a snapshot's files in the fresh sandbox: only if it is the very
    snapshot recorded (its digest and format; a snapshot recorded before
    them, without)."""
    await workflow.execute_activity(
        f"{sandbox.provider}-{RESTORE}",
        RestoreArgs(
            state=_session(sandbox).state,
            key=snapshot.key,
            encrypted=snapshot.encrypted,
            format=snapshot.format,
            digest=snapshot.digest,
        ),
        result_type=Restored,
        **_with_summary(sandbox, f"restore from the snapshot of {snapshot.taken}"),
    )


async def forget(sandbox: RunSandbox, snapshot: Snapshot | None) -> None:
    """Delete the last snapshot of a conversation that ended (nothing
    restores it any more)."""
    if snapshot is None or not snapshot.key:
        return
    await workflow.execute_activity(
        f"{sandbox.provider}-{FORGET}",
        ForgetArgs(key=snapshot.key),
        **_with_summary(sandbox, "forget snapshot"),
    )


@dataclass(frozen=True)
class CallerMemory:
    """Where the run's caller's memory is kept (its object), and the
    directory of the agent's Memory capability it holds."""

    key: str
    directory: str


def memory_of(agent: SandboxAgent[Any]) -> Memory | None:
    """The agent's Memory capability, if any. One that generates memories
    (``generate``: two further models, run when the sandbox stops, which a
    conversation's sandbox does only at its end) ends the run in one line."""
    memory = next((each for each in agent.capabilities if isinstance(each, Memory)), None)
    if memory is not None and memory.generate is not None:
        raise ApplicationError(
            "The agent's Memory capability (agent.py) generates memories, which this service "
            "does not run: declare Memory(generate=None), the agent keeping its memory itself "
            "(docs/skills-and-memory.md)",
            type="MemoryGenerationUnsupported",
            non_retryable=True,
        )
    return memory


def caller_memory(agent: SandboxAgent[Any], across_conversations: bool) -> CallerMemory | None:
    """The memory of the run's caller, kept across its conversations when
    the service asks for it (``Service.memory_across_conversations``) and
    the agent has a ``Memory`` capability; None otherwise (its memory then
    lives in the conversation's workspace alone). The caller is the API
    caller the run's memo names, else the starter's (STARTER_OWNER)."""
    memory = memory_of(agent)
    if not across_conversations or memory is None:
        return None
    owner = workflow.memo_value(CALLER_MEMO, STARTER_OWNER, type_hint=str)
    return CallerMemory(memory_key(current().task_queue, owner), memory.layout.memories_dir)


async def _remember(sandbox: RunSandbox, memory: CallerMemory, operation: str) -> Remembered:
    remembered: Remembered = await workflow.execute_activity(
        f"{sandbox.provider}-{operation}",
        MemoryArgs(state=_session(sandbox).state, key=memory.key, directory=memory.directory),
        result_type=Remembered,
        **_with_summary(sandbox, operation.removeprefix("sandbox_workspace_").replace("_", " ")),
    )
    if remembered.why_not:
        workflow.logger.info(f"The caller's memory ({operation}): {remembered.why_not}")
    return remembered


async def load_memory(sandbox: RunSandbox, memory: CallerMemory) -> Remembered:
    """Put the caller's kept memory in the workspace (before the first turn
    of its conversation)."""
    return await _remember(sandbox, memory, MEMORY_LOAD)


async def save_memory(sandbox: RunSandbox, memory: CallerMemory) -> Remembered:
    """Keep the workspace's memory directory for the caller (after each answer)."""
    return await _remember(sandbox, memory, MEMORY_SAVE)


@dataclass
class MemoryLoad:
    """The caller's memory put back in the workspace of its conversation's
    first prompt, once the sandbox is up and before the agent's
    instructions (which its Memory capability reads) are made: awaited by
    the chain's run hooks (``before_instructions``)."""

    sandbox: RunSandbox
    memory: CallerMemory
    done: bool = False

    async def __call__(self) -> None:
        await load_memory(self.sandbox, self.memory)
        self.done = True


def in_turn(*steps: Callable[[], Awaitable[None]] | None) -> Callable[[], Awaitable[None]]:
    """One step of the chain's run hooks that awaits each of ``steps`` in
    order (None: none)."""

    async def each() -> None:
        for step in steps:
            if step is not None:
                await step()

    return each


@dataclass
class Preparation:
    """What the workspace needs before the agent's first model turn of a
    prompt, in order: a fresh sandbox ``restore``d from a snapshot (a
    follow-up to a released conversation, a prompt redone after its host
    was gone), the prompt's inputs placed (``place``), and then, when
    ``snapshot_after``, the workspace snapshotted (what a conversation's
    prompt is redone from). Awaited once by the chain's run hooks; what
    was placed is its result, ``placed`` (the repository's ``commit`` as
    the first prompt placed it)."""

    sandbox: RunSandbox
    request: RunRequest
    snapshots: Snapshots
    restore: Snapshot | None = None
    place: bool = False
    first_prompt: bool = False
    snapshot_after: bool = False
    commit: str = ""
    placed: Placed | None = None

    @property
    def needed(self) -> bool:
        return self.restore is not None or self.place

    async def __call__(self) -> None:
        if self.restore is not None:
            await restore(self.sandbox, self.restore)
        if self.place:
            placed = await place(self.sandbox, self.request, self.first_prompt)
            if self.first_prompt:
                self.commit = placed.commit
            self.placed = placed.model_copy(update={"commit": self.commit})
            if self.snapshot_after:
                await self.snapshots.take(self.sandbox)
