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
``agent_model_call_wait_seconds`` (observability.ModelCallWait: from when a
call's attempt was scheduled to when a worker started it) and in the
starter's progress (starter/following.py), which names the rate when the
queue has one. The worker's poller of the queue is worker.model_calls_worker();
this module names the queue alone, so that the starter reads its name without
the worker's modules.
"""

from sandbox_agent_runtime.service import current


def model_task_queue() -> str:
    """The task queue of this service's model calls.

    Returns:
        Its name.
    """
    return f"{current().task_queue}-model-calls"
