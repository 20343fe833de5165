"""Model calls on a task queue of their own, and the whole fleet's rate of them.

Forty workers of one service share one organisation's rate limit at the
model's provider, and nothing on any one worker can keep their sum under it;
Temporal's server can, for a task queue. The queue is the model calls' alone
because the rate is the queue's (sandbox operations would share it, and a
call started eagerly would pass it by), and unversioned, so one rate holds
for every build during a rollout. This module names the queue alone, so the
starter reads its name without the worker's modules.
"""

from sandbox_agent_runtime.service import current


def model_task_queue() -> str:
    """The task queue of this service's model calls.

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
