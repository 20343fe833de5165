"""Model calls on a task queue of their own, and the whole fleet's rate of them.

Every model call of a run is an activity on the service's model calls'
queue, ``<task queue>-model-calls`` (``model_task_queue()``), which every
worker polls beside the service's own queue. Forty workers of one service
share one organisation's rate limit at the model's provider, and nothing on
any one worker can keep their sum under it; Temporal's server can, for a
task queue: it hands out at most so many of its activities a second, across
every worker polling it. ``MODEL_CALLS_PER_SECOND`` (settings.py; unset: no
limit) is that rate for the whole fleet, not for one worker: each worker
asks the server for it as it polls (the Worker option
``max_task_queue_activities_per_second``). Give every worker the same value:
the server keeps the one the latest poll asked for, so workers that disagree
take turns setting it. A rate set on the queue itself
(``temporal task-queue config set --task-queue <queue> --task-queue-type
activity --queue-rps-limit N --queue-rps-limit-reason ...``) comes before
the workers', and is how to change the rate without restarting them.

The queue is the model calls' alone because the rate is the queue's: on the
run's own queue, the sandbox operations would share it, and a model call
that the SDK starts eagerly (on the worker that completed the workflow task,
without the server) would pass it by. It is unversioned, as a host's queue
is (affinity.py): one rate holds for every build during a rollout.

A call over the rate waits on the queue, scheduled and not started, as a
call waits when every worker is busy: nothing fails, and Temporal retries a
call the provider still answers with 429 after its Retry-After, as ever
(the plugin's model activity). The wait shows in the metric
``agent_model_call_wait_seconds`` (from when a call's attempt was scheduled
to when a worker started it) and in the starter's progress
(starter/following.py), which names the rate when the queue has one.
"""

from datetime import datetime
from typing import Any

from temporalio import activity
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from sandbox_agent_runtime.service import current
from sandbox_agent_runtime.shared import MODEL_ACTIVITIES

# A histogram, in seconds: how long each model call's attempt waited on the
# model calls' queue before a worker started it (the fleet's rate, or every
# worker busy).
MODEL_CALL_WAIT = "agent_model_call_wait_seconds"
MODEL_CALL_WAIT_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0]


def model_task_queue() -> str:
    """The task queue of this service's model calls."""
    return f"{current().task_queue}-model-calls"


class ModelCallWait(Interceptor):
    """Records how long each model call waited on its queue
    (MODEL_CALL_WAIT)."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ModelCallWait(next)


class _ModelCallWait(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        if info.activity_type in MODEL_ACTIVITIES:
            activity.metric_meter().create_histogram_float(
                MODEL_CALL_WAIT,
                "Seconds each model call waited on the model calls' queue before a worker "
                "started it",
                "s",
            ).record(waited(info.current_attempt_scheduled_time, info.started_time))
        return await super().execute_activity(input)


def waited(scheduled: datetime, started: datetime) -> float:
    """Seconds from ``scheduled`` to ``started`` (never below 0: the two
    come from the server's clock, which may step)."""
    return max(0.0, (started - scheduled).total_seconds())
