"""A conversation between two prompts: it waits for a follow-up (or its end),
releases a sandbox left idle once its workspace is in a snapshot, and takes
the follow-up up, in the sandbox it holds or in a fresh one that starts from
the snapshot.

The follow-up and the end arrive as updates into the run's
``Inbox``, which refuses them (their validators) but when the conversation
can take them; a wait reads nothing else."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.openai_agents import AgentsWorkflowError

from sandbox_agent_runtime import affinity
from sandbox_agent_runtime.chain import LastingSandboxClient
from sandbox_agent_runtime.costs import count_action
from sandbox_agent_runtime.phases.given import Given
from sandbox_agent_runtime.phases.progress import Progress
from sandbox_agent_runtime.run_request import (
    ENDED,
    RELEASED,
    WAITING,
    WORKING,
    Conversation,
    FollowUp,
)
from sandbox_agent_runtime.shared import LONGEST_PROMPT
from sandbox_agent_runtime.workspace.requests import IN_STORE, Snapshot


@dataclass
class Inbox:
    """What people asked of a conversation that has answered: the follow-up
    not yet taken up, and whether it is to end."""

    follow_up: FollowUp | None = None
    ending: bool = False

    async def asked_before(self, deadline: datetime) -> bool:
        """Whether a follow-up, or the end, came before ``deadline``."""
        left = max(deadline - workflow.now(), timedelta(seconds=1))
        count_action()  # the wait's timer
        try:
            await workflow.wait_condition(
                lambda: self.follow_up is not None or self.ending, timeout=left
            )
        except TimeoutError:
            return False
        return True

    def check_follow_up(self, follow_up: FollowUp, follow_ups: bool, state: Conversation) -> None:
        """Refuse a follow-up (before it is written to history: the update's
        validator) but to a conversation that has answered and is not ending,
        and one without text or over LONGEST_PROMPT."""
        self.check_talking(follow_ups, state)
        if state.state == WORKING or self.follow_up is not None:
            raise ApplicationError(
                f"The run is still working on prompt {state.prompts}: send the follow-up once "
                "it has answered.",
                type="StillWorking",
            )
        if not follow_up.prompt.strip() or len(follow_up.prompt) > LONGEST_PROMPT:
            raise ApplicationError(
                f"A follow-up's prompt must hold text, at most {LONGEST_PROMPT:,} characters.",
                type="BadFollowUp",
            )

    def check_end(self, follow_ups: bool, state: Conversation) -> None:
        """Refuse to end a run but a conversation that has answered."""
        self.check_talking(follow_ups, state)
        if state.state == WORKING:
            raise ApplicationError(
                f"The run is still working on prompt {state.prompts}: end it once it has "
                "answered (or cancel the run to stop it now).",
                type="StillWorking",
            )

    def check_talking(self, follow_ups: bool, state: Conversation) -> None:
        if not follow_ups:
            raise ApplicationError(
                "This run takes no follow-ups: it was started without follow_ups, and ends "
                "with its answer.",
                type="NoFollowUps",
            )
        if self.ending or state.state == ENDED:
            raise ApplicationError("This conversation has ended.", type="ConversationEnded")


async def wait(
    inbox: Inbox,
    progress: Progress,
    sandbox: LastingSandboxClient,
    snapshot: Snapshot | None,
    host_bound: bool,
) -> FollowUp | None:
    """Wait for a follow-up (None: the conversation ends). A sandbox idle
    for the worker's SESSION_IDLE_TIMEOUT is released, once its workspace
    is in ``snapshot``; SESSION_LIFETIME without a follow-up ends it. Both
    count from when the prompt was answered, with the timeouts of the
    worker that took the snapshot."""
    snapshot = snapshot or Snapshot()
    since = datetime.fromisoformat(progress.state.since)
    idle = since + timedelta(seconds=snapshot.idle_timeout)
    lifetime = since + timedelta(seconds=snapshot.lifetime)
    idled = progress.state.state == WAITING and not await inbox.asked_before(idle)
    if idled and snapshot.key and sandbox.holds:
        await release(sandbox, host_bound)
        progress.enter(RELEASED)
    if not await inbox.asked_before(lifetime) or inbox.ending:
        return None
    follow_up, inbox.follow_up = inbox.follow_up, None
    assert follow_up is not None
    return follow_up


async def release(sandbox: LastingSandboxClient, host_bound: bool) -> None:
    """Remove an idle conversation's sandbox (its workspace is in a
    snapshot). A sandbox whose host is gone (a host-bound backend's) went
    with it: there is nothing left to remove."""
    try:
        await sandbox.remove()
    except (ActivityError, AgentsWorkflowError) as e:
        if not host_bound or affinity.host_gone(e) is None:
            raise


async def take_up(
    progress: Progress,
    sandbox: LastingSandboxClient,
    snapshot: Snapshot | None,
    given: Given,
) -> tuple[LastingSandboxClient, Snapshot | None]:
    """The follow-up is worked on: in the sandbox the conversation holds, or,
    released, in a fresh one (on any host when ``snapshot`` is in the object
    store) that is restored from ``snapshot`` first. The sandbox, and the
    snapshot to restore (None: none)."""
    prompts = progress.state.prompts + 1
    if sandbox.holds:
        progress.enter(WORKING, prompts=prompts)
        return sandbox, None
    snapshot = snapshot or Snapshot()
    host = sandbox.host
    if given.host_bound and snapshot.where == IN_STORE:
        host = await affinity.choose_host(sandbox.provider)
    fresh = given.sandbox(sandbox.provider, host)
    progress.enter(
        WORKING,
        prompts=prompts,
        restored=f"the workspace restored from its snapshot of {snapshot.taken}",
    )
    return fresh, snapshot
