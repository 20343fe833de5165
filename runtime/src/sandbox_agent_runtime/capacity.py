"""How many runs one worker holds at once, sized for agents: one number.

An agent run spends nearly all its time waiting on the model while the
worker's CPU is idle, so a worker can keep thousands of runs waiting at once;
the Temporal SDK's defaults are sized for CPU-bound work instead.
``WORKER_RUNS_IN_FLIGHT`` sets together the limits that must agree: activity
slots on each queue, cached workflows (``worker_options``), the model
client's connection pools and the model calls' heartbeat timeout
(``model_heartbeat_timeout``). Past the limit nothing fails: a run's next
step waits on its task queue, scheduled and not started, until a slot frees.
A remote backend's quota of sandboxes caps runs in flight across all
workers: keep WORKER_RUNS_IN_FLIGHT times the workers within it.
"""

import resource
from datetime import timedelta
from typing import Any

import httpx2
from agents.models.default_models import get_default_model
from agents.models.interface import Model, ModelProvider
from agents.models.openai_provider import OpenAIProvider
from openai import AsyncOpenAI, DefaultAsyncHttpxClient
from temporalio import activity
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from sandbox_agent_runtime import litellm_models
from sandbox_agent_runtime.model_api import (
    FreeformToolsAsFunctions,
    refuse_unusable_answers,
    through_litellm,
)
from sandbox_agent_runtime.service import current, priced_as
from sandbox_agent_runtime.settings import BadSetting

# Together, the model calls a worker waits on heartbeat Temporal at most this
# many times a second. Each heartbeat costs the worker and the Temporal
# service CPU (and is a billable action on Temporal Cloud); at 10 s per call
# 5,000 calls waiting sent 625 a second, more than two cores of a dev server.
HEARTBEATS_PER_SECOND = 100

# A model call's heartbeat timeout is never shorter than this: a model call
# whose worker died is retried elsewhere within it.
SHORTEST_HEARTBEAT_TIMEOUT = timedelta(seconds=10)

# Files the worker keeps open besides one connection per model call in flight
# (its Temporal connection, its modules, its sandboxes' pipes).
OTHER_OPEN_FILES = 1_000


def model_heartbeat_timeout(runs: int) -> timedelta:
    """How long Temporal waits for a model call's heartbeat, on a worker with
    ``runs`` in flight, before it retries the call on another worker.

    The plugin heartbeats every half of it, and worker_options() lets each
    heartbeat through, so ``runs`` calls send at most HEARTBEATS_PER_SECOND,
    and a heartbeat may be up to half the timeout late (a worker busy starting
    runs) before its call is retried. 10 s up to 500 runs, 20 s at the
    default 1,000, 100 s at 5,000. Past MODEL_ACTIVITY_TIMEOUT the call's own
    timeout comes first."""
    return max(SHORTEST_HEARTBEAT_TIMEOUT, timedelta(seconds=2 * runs / HEARTBEATS_PER_SECOND))


def worker_options(runs: int) -> dict[str, Any]:
    """The Worker's slots, cache and heartbeat throttle for ``runs`` runs in
    flight: an activity slot per run on the service's queue, for its sandbox
    operations, tools and, when they go with their runs, model calls (and as
    many on the host's queue with a host-bound backend, and on the model
    calls' own queue); twice as many cached workflows, so that neither a
    run in flight nor one waiting for a slot is dropped from the cache and
    replayed at its next step. The SDK sends a call's heartbeats to Temporal at most every 0.8 of
    its timeout, leaving 2 s of slack at 10 s; every half timeout leaves half."""
    return {
        "max_concurrent_activities": runs,
        "max_cached_workflows": 2 * runs,
        "max_heartbeat_throttle_interval": model_heartbeat_timeout(runs) / 2,
    }


# The most connections one of the model client's pools holds. httpx's pool
# (httpcore) goes through every connection it holds, and every request
# waiting for one, each time it sends a request or a connection closes: with
# one pool of 2,000 connections, a worker with 2,000 calls in flight spent
# more of its event loop there than on anything else but the workflows
# (docs/capacity.md of the template, "Where a run's CPU and memory go").
# Calls are spread over pools of at most this many connections instead.
CONNECTIONS_PER_POOL = 100


class PooledOpenAIProvider(ModelProvider):
    """The OpenAI model provider the plugin uses by default (the key and
    endpoint from OPENAI_API_KEY / OPENAI_BASE_URL, no retries of its own:
    Temporal retries the model call), with a connection for every run in
    flight instead of the client's 1,000, in pools of at most
    CONNECTIONS_PER_POOL: one client per pool, each model call on the next
    client in turn. A pool may open more connections than its share when
    calls end unevenly (each may open up to ``runs``), so no call waits for
    a connection while the worker has a slot for it. The clients are built
    at the first model call, as the default one is, so that a worker that
    cannot start for another reason says that reason."""

    def __init__(self, runs: int, use_responses: bool = True) -> None:
        self.runs = runs
        # The endpoint's API (OPENAI_API).
        self.use_responses = use_responses
        self._providers: list[OpenAIProvider] = []
        self._next = 0

    def get_model(self, model_name: str | None) -> Model:
        if not self._providers:
            pools = -(-self.runs // CONNECTIONS_PER_POOL)
            kept = -(-self.runs // pools)
            for _ in range(pools):
                pool = httpx2.Limits(max_connections=self.runs, max_keepalive_connections=kept)
                # Each answer checked as it arrives.
                http = DefaultAsyncHttpxClient(
                    limits=pool, event_hooks={"response": [refuse_unusable_answers]}
                )
                client = AsyncOpenAI(max_retries=0, http_client=http)
                self._providers.append(
                    OpenAIProvider(openai_client=client, use_responses=self.use_responses)
                )
        provider = self._providers[self._next]
        self._next = (self._next + 1) % len(self._providers)
        model = provider.get_model(model_name)
        # Chat Completions has no freeform tools: the sandbox's apply_patch
        # goes as a function of one string.
        return model if self.use_responses else FreeformToolsAsFunctions(model)


# The plugin's model calls (temporalio.openai_agents), which heartbeat.
MODEL_CALLS = ("invoke_model_activity", "invoke_model_activity_streaming")


class HeartbeatAtStart(Interceptor):
    """A model call heartbeats as soon as the worker begins to run it, then
    every half timeout as the plugin does. Temporal counts the heartbeat
    timeout from when it handed the call to the worker, and the plugin's
    first heartbeat came half a timeout after the worker began to run it:
    while a worker starts runs faster than its event loop keeps up, calls
    it had taken waited more than half a timeout before they began, missed
    their first heartbeat and were made again (1,256 of 2,000 runs' calls
    repeated, docs/capacity.md of the template). Now a call may wait up to
    the whole timeout before it begins."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _HeartbeatAtStart(next)


class _HeartbeatAtStart(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        if info.heartbeat_timeout and info.activity_type in MODEL_CALLS:
            activity.heartbeat()
        return await super().execute_activity(input)


def model_provider(runs: int, use_responses: bool = True) -> ModelProvider:
    """The model provider for ``runs`` model calls in flight, over the
    Responses API or (``use_responses`` false) Chat Completions; a model
    named ``litellm/<provider>/<model>`` through LiteLLM instead."""
    return litellm_models.ThroughLiteLLM(PooledOpenAIProvider(runs, use_responses))


def check_the_agents_model(workflow: type) -> None:
    """At the worker's start, for the model of the agent of ``workflow``:
    that a money budget (runs.COST_BUDGET_USD) has its price, and, for a
    model through LiteLLM, LiteLLM imported (seconds of CPU, spent here
    rather than in its first model call, which would hold up every run of
    the worker).

    Raises BadSetting, in one line: the model without a price, or the model
    and what to install when LiteLLM is missing."""
    try:
        # The agent's model: a name, a Model object, or None for the SDK's
        # default. agent() builds the run's agent from agent.py and reads
        # nothing of the run's: called on an instance the workflow never
        # initialised. An agent that cannot be built so is left to its
        # first model call, which says what is wrong.
        model = workflow.agent(object.__new__(workflow)).model  # type: ignore[attr-defined]
    except Exception:
        return
    # Priced as the workflow prices it (its model's own name).
    unpriced = current().unpriced(priced_as(model))
    if unpriced is not None:
        raise BadSetting(unpriced)
    # Called as the model provider is called: None for the SDK's default
    # (OPENAI_DEFAULT_MODEL, which the SDK reads, or its own).
    name = get_default_model() if model is None else model
    if not isinstance(name, str) or not through_litellm(name):
        return
    try:
        litellm_models.litellm_model_type()
    except ImportError:
        raise BadSetting(litellm_models.missing(name)) from None


def make_room_for_connections(runs: int) -> None:
    """Raise this process's open-file limit (``ulimit -n``) to what ``runs``
    model calls in flight need, as far as the hard limit allows.

    Raises BadSetting, naming the most runs that fit, when the hard limit is
    too low."""
    needed = runs + OTHER_OPEN_FILES
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise BadSetting(
            f"WORKER_RUNS_IN_FLIGHT={runs} needs {needed} open files and this "
            f"process may open at most {hard} (ulimit -Hn): raise that limit or "
            f"set WORKER_RUNS_IN_FLIGHT to at most {max(1, hard - OTHER_OPEN_FILES)}."
        )
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
