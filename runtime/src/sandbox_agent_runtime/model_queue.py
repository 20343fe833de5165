"""Model calls on a task queue of their own, when the fleet needs a rate of them.

Forty workers of one service share one organisation's rate limit at the
model's provider, and nothing on any one worker can keep their sum under it;
Temporal's server can, for a task queue. With a rate (MODEL_CALLS_PER_SECOND,
or MODEL_CALLS_QUEUE=own to set one on the queue later) the calls go to a
queue of their own, because the rate is the queue's (sandbox operations would
share it, and a call started eagerly would pass it by), and unversioned, so
one rate holds for every build during a rollout. Without one they go with the
run's own work, and the server hands each call to the worker with the
workflow task that made it (eager dispatch), saving a trip through the queue
at every step. Every worker polls the model calls' queue whatever its
setting, so a call one worker left there is never stranded; and Temporal's
replay does not compare a scheduled activity's task queue (only its id and
type), so a run goes on under either setting. This module names the queue
alone, so the starter reads its name without the worker's modules.
"""

from sandbox_agent_runtime.service import current

# MODEL_CALLS_QUEUE's values: the model calls' own queue, or the run's.
OWN = "own"
RUN = "run"


def model_task_queue() -> str:
    """The task queue of this service's model calls, when they have their own.

    ``MODEL_CALLS_PER_SECOND`` is the rate for the whole fleet, not for one
    worker: each worker asks the server for it as it polls this queue (the
    Worker option ``max_task_queue_activities_per_second``). Give every
    worker the same value: the server keeps the one the latest poll asked
    for. A rate set on the queue itself (``temporal task-queue config set
    --task-queue <queue> --task-queue-type activity --queue-rps-limit N
    --queue-rps-limit-reason ...``) comes before the workers', and changes
    the rate without restarting them. A call over the rate waits on the
    queue, scheduled and not started (``agent_model_call_wait_seconds``
    measures the wait, and the starter names the rate).

    Returns:
        Its name.
    """
    return f"{current().task_queue}-model-calls"


def model_calls_task_queue(queue: str) -> str | None:
    """Where a worker with ``MODEL_CALLS_QUEUE=queue`` schedules model calls:
    their own queue, or None for the run's (the agents plugin's
    ``ModelActivityParameters.task_queue``)."""
    return model_task_queue() if queue == OWN else None
