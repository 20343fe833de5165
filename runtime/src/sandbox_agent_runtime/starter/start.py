"""Starting a run and following it: ``start()`` starts one run of the agent
by its workflow's type name (the starter needs only Temporal's client), and
``run()``, the starter given a prompt, starts one, prints its id and Web UI
link and follows it to its answer (``--no-wait``: only starts it)."""

import uuid
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from sandbox_agent_runtime.client import web_ui_link
from sandbox_agent_runtime.owners import service_memo
from sandbox_agent_runtime.run_request import RunAnswer, RunRequest
from sandbox_agent_runtime.service import current
from sandbox_agent_runtime.settings import StarterSettings
from sandbox_agent_runtime.shared import WORKFLOW_TYPE
from sandbox_agent_runtime.starter.approving import approvals, key_file_of
from sandbox_agent_runtime.starter.following import follow
from sandbox_agent_runtime.starter.reaching import reached, stopped_answering
from sandbox_agent_runtime.starter.statuses import (
    EXIT_COMPLETED,
    EXIT_UNREACHABLE,
    hint_command,
)


async def start(
    client: Client,
    request: RunRequest | str,
    workflow_id: str | None = None,
    provider: str = "",
) -> WorkflowHandle[Any, RunAnswer]:
    """Start one run of the agent on the service's task queue, by the workflow's
    name (the caller needs only Temporal's client). A conversation (a request
    with ``follow_ups``) has no execution timeout: it waits for follow-ups until
    it is ended or ``SESSION_LIFETIME`` passes.

    Args:
        client: the Temporal client.
        request: the run's request, or a prompt alone (no follow-ups).
        workflow_id: the run's id; None for ``<task queue>-<uuid>``.
        provider: for a prompt alone, the sandbox provider; empty for the
            service's primary one.

    Returns:
        The run's handle; its ``result()`` is the ``RunAnswer``.
    """
    service = current()
    if isinstance(request, str):
        request = RunRequest(prompt=request, provider=provider or service.sandbox_provider)
    return await client.start_workflow(
        WORKFLOW_TYPE,
        request,
        id=workflow_id or f"{service.task_queue}-{uuid.uuid4()}",
        task_queue=service.task_queue,
        execution_timeout=None if request.follow_ups else service.workflow_execution_timeout,
        result_type=RunAnswer,
        memo=service_memo(),
    )


async def run(
    request: RunRequest,
    settings: StarterSettings,
    wait: bool = True,
    output: Path | None = None,
) -> int:
    """What the starter command does with a request: start a run, print its id
    and Web UI link, then (unless ``wait`` is false) follow it to its answer.

    Args:
        request: the run's request.
        settings: the starter's settings.
        wait: follow the run to its answer.
        output: where to write its files; None writes none.

    Returns:
        The starter's exit status.
    """
    client = await reached(settings)
    if client is None:
        return EXIT_UNREACHABLE
    try:
        handle = await start(client, request)
    except RPCError as e:
        if e.status != RPCStatusCode.UNAVAILABLE:
            raise
        return stopped_answering(client, "starting the run: it may or may not have started")
    print(f"Started workflow {handle.id}")
    print(f"Web UI: {web_ui_link(client, handle.id, settings.ui_url)}", flush=True)
    if not wait:
        if approvals():
            print(f"Requests for approval: {hint_command()} --pending {handle.id}")
        return EXIT_COMPLETED
    return await follow(client, handle, key_file_of(settings), output)
