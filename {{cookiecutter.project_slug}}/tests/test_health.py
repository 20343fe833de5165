"""The health endpoint answers what Kubernetes' probes ask (health.py).

Ready only once the worker polls, not ready while it drains, live while its
event loop turns; over real HTTP, against a real worker and the worker
process, at the paths the manifests in deploy/k8s probe."""

import asyncio
import signal
import socket
import threading
import time
import urllib.error
import urllib.request
from datetime import timedelta

import pytest
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.openai_agents.testing import TestModelProvider

from sandbox_agent_runtime import agents_plugin, build_worker, serving_health, start, worker_main
from sandbox_agent_runtime.testing import (
    CREDENTIALS,
    SETTINGS,
    WORKER,
    ScriptedModel,
    free_port,
    probe_paths,
    running_worker,
    sandboxes_for_tests,
    scripted_openai_server,
    service,
    service_environment,
    with_plugins,
)

from {{ cookiecutter.package_name }}.service import SANDBOX_PROVIDER, TASK_QUEUE
from {{ cookiecutter.package_name }}.tools import ACTIVITIES
from {{ cookiecutter.package_name }}.workflow import SandboxAgentWorkflow

READY, LIVE = probe_paths()


def get(port: int, path: str) -> tuple[int, str]:
    """GET http://127.0.0.1:port/path: its status and body (a probe's view)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except urllib.error.URLError as error:
        return 0, str(error.reason)  # no answer at all (nothing listens yet)


async def status(port: int, path: str) -> int:
    return (await asyncio.to_thread(get, port, path))[0]


async def until(port: int, path: str, expected: int, within: float = 60) -> None:
    """Poll ``path`` until it answers ``expected``; fail after ``within`` s."""
    async with asyncio.timeout(within):
        while await status(port, path) != expected:
            await asyncio.sleep(0.05)


async def test_ready_only_once_the_worker_polls_its_task_queue(temporal_client: Client) -> None:
    plugin = agents_plugin(
        SETTINGS,
        sandboxes=sandboxes_for_tests(None, SANDBOX_PROVIDER),
        model_provider=TestModelProvider(ScriptedModel([])),
    )
    port = free_port()
    async with serving_health(("127.0.0.1", port)) as health:
        assert health is not None
        worker = build_worker(
            with_plugins(temporal_client, plugin),
            SETTINGS,
            workflows=[SandboxAgentWorkflow],
            tool_activities=ACTIVITIES,
        )
        health.ready = lambda: worker.ready
        # Built, not started: live, not ready. (Asserted once it runs: a
        # worker built and never run would stay registered with the SDK.)
        before = (await status(port, READY), await status(port, LIVE))
        async with worker:
            assert before == (503, 200)
            await until(port, READY, 200, within=10)
            # The server has its poller (listed once its first poll arrives).
            async with asyncio.timeout(10):
                while not await pollers_of(temporal_client, TASK_QUEUE):
                    await asyncio.sleep(0.1)
        # Stopped: not ready again.
        assert await status(port, READY) == 503


async def pollers_of(client: Client, task_queue: str) -> int:
    described = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    return len(described.pollers)


@pytest.mark.long  # blocks the event loop for 3.5 s
async def test_not_live_while_the_event_loop_is_blocked(temporal_client: Client) -> None:
    bound = timedelta(seconds=1)
    port = free_port()
    async with (
        serving_health(("127.0.0.1", port), liveness_bound=bound) as health,
        running_worker(temporal_client, ScriptedModel([])) as (_, worker),
    ):
        assert health is not None
        health.ready = lambda: worker.ready
        assert await status(port, LIVE) == 200
        # A probe that arrives while the loop has been blocked past the bound.
        seen: list[tuple[int, str]] = []

        def probe_later() -> None:
            time.sleep(2.5)
            seen.append(get(port, LIVE))

        probe = threading.Thread(target=probe_later)
        probe.start()
        time.sleep(3.5)  # blocks the event loop: nothing else runs
        probe.join(timeout=10)
        assert seen and seen[0][0] == 503, seen
        assert "event loop blocked" in seen[0][1]
        # The loop turns again: live again within a tick.
        await until(port, LIVE, 200, within=5)


@pytest.mark.process
async def test_the_worker_process_is_not_ready_while_it_drains(temporal_client: Client) -> None:
    address = temporal_client.service_client.config.target_host
    port = free_port()
    with scripted_openai_server(["echo hello"]) as model:
        # The first model call is held: the worker has work in flight when
        # it is told to stop, and drains it for up to its shutdown grace.
        model.hold_at_step = 0
        environment = {
            **service_environment(address, model.url),
            "HEALTH_BIND_ADDRESS": f"127.0.0.1:{port}",
        }
        async with service(WORKER, environment) as worker:
            await until(port, READY, 200)
            assert await status(port, LIVE) == 200
            handle = await start(with_plugins(temporal_client), "Say hello.")
            assert await asyncio.to_thread(model.reached.wait, 60)
            worker.process.send_signal(signal.SIGTERM)
            await worker.wait_for("Stopping")
            # Draining: not ready, still live.
            assert await status(port, READY) == 503
            assert await status(port, LIVE) == 200
            model.release.set()
            assert await worker.exit_status() == 0, worker.output
        await handle.terminate()


def test_a_port_already_taken_stops_the_worker_with_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setenv("HEALTH_BIND_ADDRESS", f"127.0.0.1:{port}")
        with pytest.raises(SystemExit) as exited:
            worker_main(SandboxAgentWorkflow, ACTIVITIES, [])
    message = str(exited.value.code)
    assert "\n" not in message
    assert message.startswith(
        f"Cannot serve the health endpoint on 127.0.0.1:{port} (HEALTH_BIND_ADDRESS): "
    )
