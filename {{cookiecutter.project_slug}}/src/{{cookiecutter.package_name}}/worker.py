"""The worker: runs the agent's workflow, its model calls and its sandbox.

    python -m {{ cookiecutter.package_name }}.worker

Ctrl+C (or SIGTERM) stops it: it stops polling, gives activities in flight
``SHUTDOWN_GRACE`` to finish, and exits. Work it did not finish is not lost;
Temporal hands it to the next worker on the same task queue.
"""

import asyncio
import signal
import sys
from datetime import timedelta
from importlib.metadata import version

from agents.models.interface import ModelProvider
from agents.sandbox.session.sandbox_client import BaseSandboxClient
from temporalio.client import Client
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

# The build this worker reports to Temporal (shown with its pollers). Left
# unset, the SDK derives one by hashing the bytecode of every loaded module:
# with the Agents SDK that is some 1,800 modules and seconds of CPU at every
# worker start. The distribution's name and version say the same thing for free.
DISTRIBUTION = {{ cookiecutter.project_slug | tojson }}
BUILD_ID = f"{DISTRIBUTION}-{version(DISTRIBUTION)}"


def agents_plugin(
    sandbox: BaseSandboxClient | None = None,
    model_provider: ModelProvider | None = None,
) -> OpenAIAgentsPlugin:
    """The plugin that runs model calls and sandbox operations as activities.

    Tests pass their own sandbox client and a scripted model provider; the
    real worker uses the backend's client and the OpenAI model provider.
    """
    return OpenAIAgentsPlugin(
        model_params=ModelActivityParameters(
            start_to_close_timeout=MODEL_ACTIVITY_TIMEOUT,
            # Each model call is a *local* activity: this worker runs it at
            # once, with no round trip through the Temporal service to schedule
            # it, and history keeps only its answer, not the whole conversation
            # it was sent (some 25 kB per turn). benchmarks/durability.py
            # measured 1.1x to 1.3x the agent steps per second for it, and
            # about 30% less server CPU per step. A run stays durable: answers
            # already recorded are never asked again, and a call cut short by a
            # worker crash is made again by the next worker (after the 10 s
            # workflow task timeout, not the model call's own timeout). In the
            # Web UI model calls show as markers, not activities. Set False to
            # route model calls to another task queue or see them as activities.
            use_local_activity=True,
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
    return Worker(
        client,
        task_queue=TASK_QUEUE,
        workflows=[SandboxAgentWorkflow],
        graceful_shutdown_timeout=SHUTDOWN_GRACE,
        build_id=BUILD_ID,
        **options,  # type: ignore[arg-type]
    )


async def run_worker() -> None:
    client = await connect(plugins=[agents_plugin()])
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
    except ConnectionFailed as e:
        sys.exit(str(e))


if __name__ == "__main__":
    main()
