"""A worker's pollers and its block: an error of a poller reaches the code
that runs the worker as that error, whether it comes while the block runs
(the block stops at once) or while the worker stops (the stop completes),
never as a bare CancelledError of the code that stops it.

The SDK's own ``async with Worker`` (temporalio 1.35) counts its caller as
stopping only once the stop is complete: an error raised as a poller stopped
cancelled the caller's wait, which then saw a CancelledError, left its
cached runs to the garbage collector, and failed the next test of its
process (CI at 0ae7202: a warning of the SDK's activity poller, raised as an
error by the tests' filters, in tests/test_eviction.py)."""

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import pytest
from sandbox_agent.tools import ACTIVITIES
from sandbox_agent.workflow import SandboxAgentWorkflow
from temporalio.client import Client
from temporalio.openai_agents.testing import TestModelProvider
from temporalio.plugin import SimplePlugin

from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
from sandbox_agent_runtime.testing.support import SETTINGS, sandboxes_for_tests, with_plugins
from sandbox_agent_runtime.worker import ServiceWorker, agents_plugin, build_worker


async def worker_with(plugin: SimplePlugin, client: Client) -> ServiceWorker:
    """The service's worker, its pollers wrapped by ``plugin`` too, on a
    connection of its own. A poller that fails before it starts is never
    shut down by the SDK, so it stays registered on its connection for as
    long as it is referenced (here: by the error pytest keeps): on the
    tests' shared connection, the next worker of the same task queue in this
    process would be refused as a second one."""
    own = await Client.connect(client.service_client.config.target_host, namespace=client.namespace)
    return build_worker(
        with_plugins(
            own,
            agents_plugin(
                SETTINGS,
                sandboxes=sandboxes_for_tests(),
                model_provider=TestModelProvider(ScriptedModel([])),
            ),
            plugin,
        ),
        SETTINGS,
        workflows=[SandboxAgentWorkflow],
        tool_activities=ACTIVITIES,
    )


class PollerFailed(Exception):
    """What the tests' failing plugin raises inside a poller."""


def failing(when: str) -> Callable[[], AbstractAsyncContextManager[None]]:
    """A plugin's run context (it wraps each poller's run) that fails its
    poller ``when`` it starts or stops."""

    @asynccontextmanager
    async def run_context() -> AsyncIterator[None]:
        if when == "starting":
            raise PollerFailed("the poller failed as it started")
        yield
        raise PollerFailed("the poller failed as it stopped")

    return run_context


async def test_an_error_as_the_worker_stops_is_raised_whole_and_the_stop_completes(
    temporal_client: Client,
) -> None:
    plugin = SimplePlugin("fails-as-it-stops", run_context=failing("stopping"))
    worker = await worker_with(plugin, temporal_client)
    with pytest.raises(PollerFailed, match="as it stopped"):
        async with worker:
            while not worker.ready:
                await asyncio.sleep(0.05)
    assert all(poller.is_shutdown for poller in worker.pollers)


async def test_an_error_while_the_block_runs_stops_the_block_with_that_error(
    temporal_client: Client,
) -> None:
    plugin = SimplePlugin("fails-as-it-starts", run_context=failing("starting"))
    worker = await worker_with(plugin, temporal_client)
    block_ended = False
    with pytest.raises(PollerFailed, match="as it started"):
        async with worker:
            await asyncio.sleep(60)
            block_ended = True
    assert not block_ended
