"""How many runs one worker holds at once, sized for agents: one number.

An agent run spends nearly all its time waiting on the model (seconds per
call) while the worker's CPU is idle, so a worker can keep thousands of runs
waiting at once for well under a MiB of memory each. The Temporal SDK's
defaults are sized for CPU-bound work instead: 100 activities at a time (so
only 100 runs wait on the model, the rest queue behind an idle CPU), and the
OpenAI client keeps at most 1,000 connections. ``RUNS_IN_FLIGHT`` sets the
three limits that must agree, together:

- activity slots: each run waiting on the model holds one, as does each
  sandbox operation in progress;
- cached workflows: twice as many, so that neither a run in flight nor one
  waiting for a slot is dropped from the cache and replayed (a dropped run can
  also trip temporalio/sdk-python#494, see the README);
- the model client's connection pool: one connection per model call in flight.

Past the limit nothing fails: a run's next step (a model call or a sandbox
operation) waits on the task queue until a slot frees, and shows as
scheduled, not started, in the run's history and the Web UI. Set
``WORKER_RUNS_IN_FLIGHT`` to change the limit; figures behind the default are
in the template's docs/capacity.md.

What a run in flight holds besides: its sandbox (a remote backend's quota of
sandboxes caps runs in flight across all workers, and a run past that quota
fails to create its sandbox instead of waiting: keep WORKER_RUNS_IN_FLIGHT
times the workers within it), and, while it waits on the model, a heartbeat
to Temporal every few seconds (worker.py: MODEL_HEARTBEAT_TIMEOUT), which
costs CPU on the worker and on the Temporal service for every run waiting.
"""

import resource
from collections.abc import Mapping
from typing import Any

import httpx2
from agents.models.interface import Model, ModelProvider
from agents.models.openai_provider import OpenAIProvider
from openai import AsyncOpenAI, DefaultAsyncHttpxClient

ENVIRONMENT_VARIABLE = "WORKER_RUNS_IN_FLIGHT"

# Runs one worker keeps in flight at once unless WORKER_RUNS_IN_FLIGHT says
# otherwise: about 0.7 MiB of worker memory each. Memory and slots are not
# what limits a worker: CPU is. The worker is one Python process, and when it
# is busy (starting many runs at once) the heartbeats of the model calls it
# waits on arrive late, Temporal times those calls out and they are made
# again. Measured on 2 cores: 1,000 runs reached the model together, 5,000
# started at once did not (see the template's docs/capacity.md). Past this
# limit runs wait on the task queue, which costs nothing; run more workers
# rather than raise it far.
RUNS_IN_FLIGHT = 1_000

# The most WORKER_RUNS_IN_FLIGHT may ask for: past this, one worker's event
# loop is the limit, not its slots. Run more workers instead.
MOST_RUNS_IN_FLIGHT = 100_000

# Files the worker keeps open besides one connection per model call in flight
# (its Temporal connection, its modules, its sandboxes' pipes).
OTHER_OPEN_FILES = 1_000


class BadCapacity(ValueError):
    """WORKER_RUNS_IN_FLIGHT is not a limit this worker can use."""


def runs_in_flight(environ: Mapping[str, str]) -> int:
    """The runs a worker keeps in flight: WORKER_RUNS_IN_FLIGHT, or RUNS_IN_FLIGHT."""
    value = environ.get(ENVIRONMENT_VARIABLE, "").strip()
    if not value:
        return RUNS_IN_FLIGHT
    try:
        runs = int(value.replace("_", ""))
    except ValueError:
        runs = 0
    if not 1 <= runs <= MOST_RUNS_IN_FLIGHT:
        raise BadCapacity(
            f"{ENVIRONMENT_VARIABLE}={value!r} is not allowed: use a whole number "
            f"of runs from 1 to {MOST_RUNS_IN_FLIGHT}."
        )
    return runs


def worker_options(runs: int) -> dict[str, Any]:
    """The Worker's slots and cache for ``runs`` runs in flight."""
    return {
        "max_concurrent_activities": runs,
        "max_cached_workflows": 2 * runs,
    }


class PooledOpenAIProvider(ModelProvider):
    """The OpenAI model provider the plugin uses by default (the key and
    endpoint from OPENAI_API_KEY / OPENAI_BASE_URL, no retries of its own:
    Temporal retries the model call), with a connection for every run in
    flight instead of the client's 1,000. The client is built at the first
    model call, as the default one is, so that a worker that cannot start
    for another reason says that reason."""

    def __init__(self, runs: int) -> None:
        self.runs = runs
        self._provider: OpenAIProvider | None = None

    def get_model(self, model_name: str | None) -> Model:
        if self._provider is None:
            pool = httpx2.Limits(max_connections=self.runs, max_keepalive_connections=self.runs)
            client = AsyncOpenAI(max_retries=0, http_client=DefaultAsyncHttpxClient(limits=pool))
            self._provider = OpenAIProvider(openai_client=client)
        return self._provider.get_model(model_name)


def model_provider(runs: int) -> ModelProvider:
    """The model provider for ``runs`` model calls in flight."""
    return PooledOpenAIProvider(runs)


def make_room_for_connections(runs: int) -> None:
    """Raise this process's open-file limit (``ulimit -n``) to what ``runs``
    model calls in flight need, as far as the hard limit allows.

    Raises BadCapacity, naming the most runs that fit, when the hard limit is
    too low."""
    needed = runs + OTHER_OPEN_FILES
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise BadCapacity(
            f"{ENVIRONMENT_VARIABLE}={runs} needs {needed} open files and this "
            f"process may open at most {hard} (ulimit -Hn): raise that limit or "
            f"set {ENVIRONMENT_VARIABLE} to at most {max(1, hard - OTHER_OPEN_FILES)}."
        )
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
