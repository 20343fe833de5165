"""A run's sandbox stays on the host that holds it.

A local workspace, a container on one host's engine and a command still
running in one worker's memory live on one host, while Temporal hands an
activity to whichever worker polls first. So a worker whose sandboxes live
on its host also polls its host's own queue (``host_queue``); a run asks,
before it creates its sandbox, where it will live (``choose_host``), and
sends every operation of that sandbox there, carrying the host to the next
run of its chain. A host named by ``WORKER_HOST_ID`` (or the machine's host
name) keeps its queue across restarts; a host no worker answers for within
``SANDBOX_HOST_WAIT`` is taken for gone, and the run fails naming it
(``host_gone_failure()``) rather than wait for ever or go on without its files.
"""

import asyncio
import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.converter import PayloadConverter
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutError, TimeoutType
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
    StartActivityInput,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)

from sandbox_agent_runtime.service import current
from sandbox_agent_runtime.shared import CHOOSING_THE_HOST, HOST_HEADER, NOT_THIS_HOST

# Asking a worker for its host is quick: it only reads its own name.
_ASK = workflow.LocalActivityConfig(
    start_to_close_timeout=timedelta(seconds=10),
    retry_policy=RetryPolicy(maximum_attempts=5),
)
# Headers are not encoded by the service's codec: plain JSON.
_HEADERS = PayloadConverter.default


@dataclass(frozen=True)
class SandboxHost:
    """The host that holds a run's sandbox, and the queue its workers poll."""

    id: str
    task_queue: str


def host_queue(host: str) -> str:
    """The task queue of a host's workers, for the sandboxes they hold.

    Args:
        host: the host's id (``WORKER_HOST_ID``).

    Returns:
        ``<task queue>@<host>``.
    """
    return f"{current().task_queue}@{host}"


def host_activities(host: str, host_bound: Mapping[str, bool]) -> Sequence[Any]:
    """The ``<provider>-sandbox_host`` activity of each provider, for the
    shared queue: it answers with ``host`` when ``host_bound[provider]``
    says the provider's sandboxes live on this worker's host, else None."""

    def answer(provider: str, bound: bool) -> Any:
        here = SandboxHost(host, host_queue(host)) if bound else None

        @activity.defn(name=f"{provider}-{CHOOSING_THE_HOST}")
        async def sandbox_host() -> SandboxHost | None:
            return here

        return sandbox_host

    return [answer(provider, bound) for provider, bound in host_bound.items()]


async def choose_host(provider: str) -> SandboxHost | None:
    """Ask the worker running the workflow where a new sandbox of
    ``provider`` will live (in the workflow, a local activity): a host, or
    None when any worker can reach it."""
    # None travels as Temporal's null payload, whatever the result type.
    host: SandboxHost | None = await workflow.execute_local_activity(
        f"{provider}-{CHOOSING_THE_HOST}", result_type=SandboxHost, **_ASK
    )
    return host


def routed_to(host: SandboxHost | None, wait: timedelta) -> workflow.ActivityConfig:
    """The part of a sandbox operation's options that sends it to ``host``'s
    workers and gives up when none has taken it within ``wait``."""
    if host is None:
        return workflow.ActivityConfig()
    return workflow.ActivityConfig(task_queue=host.task_queue, schedule_to_start_timeout=wait)


def host_gone(error: BaseException) -> ActivityError | None:
    """The sandbox operation in ``error`` that no worker of its host took in
    time (its schedule-to-start timeout), if that is what ``error`` is."""
    cause: BaseException | None = error
    while cause is not None:
        if (
            isinstance(cause, ActivityError)
            and isinstance(cause.cause, TimeoutError)
            and cause.cause.type == TimeoutType.SCHEDULE_TO_START
        ):
            return cause
        cause = cause.__cause__
    return None


def gone_reason(host: SandboxHost, operation: ActivityError, wait: timedelta) -> str:
    """Why a run whose host is gone failed, in words a person can act on."""
    return (
        f"its sandbox's host {host.id!r} is gone: no worker of that host took "
        f"{operation.activity_type} within {wait.total_seconds():g} s (task queue "
        f"{host.task_queue!r}). The sandbox lived on that host, so the run cannot go "
        "on elsewhere: start it again."
    )


def host_gone_failure(
    host: SandboxHost, operation: ActivityError, wait: timedelta
) -> ApplicationError:
    """The failure a run ends with when its sandbox's host is gone."""
    return ApplicationError(
        f"The agent could not finish: {gone_reason(host, operation, wait)}",
        type="SandboxHostGone",
        non_retryable=True,
    )


def worker_identity(host: str) -> str:
    """The identity the worker reports (with each activity it runs): its
    process and its host, as the SDK's default does with the host name."""
    return f"{os.getpid()}@{host}"


class HostFirst(Interceptor):
    """Offers each operation bound for a host's queue on the run's own queue
    first, where it is most often dispatched eagerly to the worker running
    the workflow, on the sandbox's host; a worker of ``host`` refuses an
    operation marked for another host.

    The host question (``choose_host``) is a local activity: the worker that
    runs the workflow's task answers it, so a run's sandbox lives where its
    workflow runs. Temporal keeps sending a run's workflow tasks to the
    worker that has it in memory, and hands an activity on the workflow's own
    queue straight back to the worker completing the task (eager dispatch),
    with no trip through the server's matching. So each operation is first
    offered on the run's own queue, marked with its host (``HOST_HEADER``); a
    worker of another host (the run moved after a restart or an eviction)
    refuses it before running anything (``NotThisHost``), and only then is it
    sent to the host's queue, where a host that is gone is found out."""

    def __init__(self, host: str) -> None:
        self.host = host

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor]:
        return _OfferingFirst

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _OnItsHost(next, self.host)


class _OfferingFirst(WorkflowInboundInterceptor):
    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        super().init(_OfferFirst(outbound))


class _OfferFirst(WorkflowOutboundInterceptor):
    """One run's: after a worker of another host refused one of its
    operations, the run sends the rest straight to their host's queue. The
    run is then on a worker of another host (a restart, an eviction), or its
    worker had no slot free to take operations with its tasks, as under
    load: more offers would be refused too, each costing a task."""

    def __init__(self, next: WorkflowOutboundInterceptor) -> None:
        super().__init__(next)
        self.refused = False

    def start_activity(self, input: StartActivityInput) -> workflow.ActivityHandle[Any]:
        prefix = host_queue("")
        if self.refused or input.task_queue is None or not input.task_queue.startswith(prefix):
            return super().start_activity(input)
        host = input.task_queue.removeprefix(prefix)
        offered = dataclasses.replace(
            input,
            task_queue=None,
            schedule_to_start_timeout=None,
            headers={**input.headers, HOST_HEADER: _HEADERS.to_payloads([host])[0]},
        )
        return cast(
            workflow.ActivityHandle[Any], asyncio.create_task(self._offered(offered, input))
        )

    async def _offered(self, offered: StartActivityInput, routed: StartActivityInput) -> Any:
        try:
            return await super().start_activity(offered)
        except ActivityError as e:
            if not (isinstance(e.cause, ApplicationError) and e.cause.type == NOT_THIS_HOST):
                raise
        self.refused = True
        return await super().start_activity(routed)


class _OnItsHost(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, host: str) -> None:
        super().__init__(next)
        self.host = host

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        marked = input.headers.get(HOST_HEADER)
        if marked is not None:
            host = _HEADERS.from_payloads([marked], [str])[0]
            if host != self.host:
                raise ApplicationError(
                    f"This sandbox operation is for host {host!r}; this worker is on "
                    f"{self.host!r}: it goes to that host's queue instead.",
                    type=NOT_THIS_HOST,
                    non_retryable=True,
                )
        return await super().execute_activity(input)
