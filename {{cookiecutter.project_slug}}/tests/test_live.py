"""A real agent turn on the real sandbox backend with the real model.

Not part of the default run: ``uv run pytest -m live`` runs it, with the
worker's credentials set (see ``.env.example``); without them, or without
what a backend needs to start (a Docker engine that answers, say), it is
skipped and says what is missing.
"""

import uuid

import pytest
from temporalio.client import Client

from sandbox_agent_runtime import BackendUnavailable, RunRequest, agents_plugin, build_worker
from sandbox_agent_runtime.testing import (
    BadSetting,
{%- if cookiecutter.approval != "none" %}
    approving_everything,
{%- endif %}
    sandbox_backends,
    with_plugins,
    worker_settings,
)

from {{ cookiecutter.package_name }}.runs import WORKFLOW_EXECUTION_TIMEOUT
from {{ cookiecutter.package_name }}.service import TASK_QUEUE
from {{ cookiecutter.package_name }}.tools import ACTIVITIES
from {{ cookiecutter.package_name }}.workflow import SandboxAgentWorkflow

pytestmark = pytest.mark.live


@pytest.mark.parametrize("provider", list(sandbox_backends()))
async def test_the_real_agent_runs_a_command_in_a_real_sandbox(
    temporal_client: Client, provider: str
) -> None:
    try:
        # The worker's settings and credentials, as it reads them at start.
        settings = worker_settings()
    except BadSetting as e:
        pytest.skip(str(e))
    try:
        # The worker builds every backend's client, as it does at start.
        plugin = agents_plugin(settings)
    except BackendUnavailable as e:
        pytest.skip(str(e))
    client = with_plugins(temporal_client, plugin)
    worker = build_worker(
        client, settings, workflows=[SandboxAgentWorkflow], tool_activities=ACTIVITIES
    )
    async with worker{{ ", approving_everything(client)" if cookiecutter.approval != "none" }}:
        done = await client.execute_workflow(
            SandboxAgentWorkflow.run,
            RunRequest(
                "Run `echo $((6 * 7))` in the shell and answer with what it printed.",
                provider,
            ),
            id=f"live-{uuid.uuid4()}",
            task_queue=TASK_QUEUE,
            execution_timeout=WORKFLOW_EXECUTION_TIMEOUT,
        )

    assert "42" in done.answer
