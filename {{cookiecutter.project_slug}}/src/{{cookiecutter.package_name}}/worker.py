"""The worker: runs the agent's workflow, its model calls and its sandbox.

    python -m {{ cookiecutter.package_name }}.worker

Ctrl+C (or SIGTERM) stops it: it stops polling, gives activities in flight
``SHUTDOWN_GRACE`` (30 s) to finish, cancels what is left, and exits with
status 0. Work it did not finish is not lost; Temporal hands it to the next
worker on the same task queue. A worker that dies without warning (SIGKILL, a
lost machine) is noticed when its model call misses a heartbeat
(``MODEL_HEARTBEAT_TIMEOUT``) or its sandbox operation reaches its timeout.
"""

import asyncio
import signal
import sys
from datetime import timedelta
from typing import Any

from agents.models.interface import ModelProvider
from agents.sandbox.session.sandbox_client import BaseSandboxClient
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.openai_agents import (
    ModelActivityParameters,
    OpenAIAgentsPlugin,
    SandboxClientProvider,
)
from temporalio.worker import Worker

from {{ cookiecutter.package_name }}.backends.{{ cookiecutter.sandbox_backend }} import (
    sandbox_client,
)
from {{ cookiecutter.package_name }}.connection import (
    ConnectionFailed,
    connect,
)
from {{ cookiecutter.package_name }}.shared import (
    MODEL_ACTIVITY_TIMEOUT,
    SANDBOX_PROVIDER,
    TASK_QUEUE,
)
from {{ cookiecutter.package_name }}.workflow import (
    SandboxAgentWorkflow,
)

SHUTDOWN_GRACE = timedelta(seconds=30)

# A model call that keeps failing (the provider is down, the rate limit does
# not lift) ends the run after about three minutes of retries instead of
# backing off for ever. Errors the provider says retrying cannot fix (a bad
# key: 401, a bad request: 400) are not retried at all, and a Retry-After
# header from the provider overrides these intervals.
MODEL_RETRY_POLICY = RetryPolicy(
    initial_interval=timedelta(seconds=2),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=8,
)

# The worker heartbeats while a model call is in flight, so a worker that dies
# part-way through one is noticed after this long, not after the whole
# MODEL_ACTIVITY_TIMEOUT, and the call is retried on another worker.
MODEL_HEARTBEAT_TIMEOUT = timedelta(seconds=10)


class BackendUnavailable(Exception):
    """The worker cannot build the client of its sandbox backend."""


def agents_plugin(
    sandbox: BaseSandboxClient | None = None,
    model_provider: ModelProvider | None = None,
    model_retry_policy: RetryPolicy = MODEL_RETRY_POLICY,
) -> OpenAIAgentsPlugin:
    """The plugin that runs model calls and sandbox operations as activities.

    Tests pass their own sandbox client and a scripted model provider; the
    real worker uses the backend's client and the OpenAI model provider.
    """
    return OpenAIAgentsPlugin(
        model_params=ModelActivityParameters(
            start_to_close_timeout=MODEL_ACTIVITY_TIMEOUT,
            heartbeat_timeout=MODEL_HEARTBEAT_TIMEOUT,
            retry_policy=model_retry_policy,
        ),
        model_provider=model_provider,
        # One set of sandbox activities per provider, each prefixed with the
        # provider's name; the workflow picks the provider by that name.
        sandbox_clients=[
            SandboxClientProvider(
                SANDBOX_PROVIDER, sandbox if sandbox is not None else sandbox_client()
            ),
        ],
    )


def build_worker(client: Client, **options: object) -> Worker:
    """A worker for this service's task queue and workflow."""
    options.setdefault("graceful_shutdown_timeout", SHUTDOWN_GRACE)
    return Worker(
        client,
        task_queue=TASK_QUEUE,
        workflows=[SandboxAgentWorkflow],
        **options,  # type: ignore[arg-type]
    )


def backend_client() -> BaseSandboxClient[Any]:
    """The backend's client, built before the worker connects, so a backend
    that cannot be built stops the worker at once with a clear line."""
    try:
        return sandbox_client()
    except Exception as e:
        raise BackendUnavailable(
            f"Cannot start the {SANDBOX_PROVIDER!r} sandbox backend: {type(e).__name__}: {e}"
        ) from e


async def run_worker() -> None:
    client = await connect(plugins=[agents_plugin(sandbox=backend_client())])
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with build_worker(client):
        print(
            f"Worker polling task queue {TASK_QUEUE!r} with sandbox provider "
            f"{SANDBOX_PROVIDER!r}. Ctrl+C to stop."
        )
        await stop.wait()
        print("Stopping: letting work in flight finish...")
    print("Worker stopped.")


def main() -> None:
    try:
        asyncio.run(run_worker())
    except (BackendUnavailable, ConnectionFailed) as e:
        sys.exit(str(e))


if __name__ == "__main__":
    main()
