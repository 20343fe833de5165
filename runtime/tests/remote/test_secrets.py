"""Forwarded secrets reach the agent's sandbox and never the workflow history."""

import uuid

import pytest
from temporalio.client import Client

from sandbox_agent_runtime.starter import start
from sandbox_agent_runtime.testing import project_service
from sandbox_agent_runtime.testing.scripted_model import ScriptedModel
from sandbox_agent_runtime.testing.support import running_worker


@pytest.mark.parametrize("name", project_service().sandbox_secrets)
async def test_the_sandbox_sees_a_forwarded_secret_and_the_history_does_not(
    temporal_client: Client, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    secret = f"secret-{uuid.uuid4().hex}"
    monkeypatch.setenv(name, secret)
    # The agent prints the value upper-cased: proof that the sandbox saw it,
    # without the value itself ever reaching the model or the history.
    model = ScriptedModel([f"printf '%s' \"${name}\" | tr 'a-z' 'A-Z'"])
    async with running_worker(temporal_client, model) as (client, _):
        handle = await start(client, f"Show {name} upper-cased.")
        answer = (await handle.result()).answer

    assert secret.upper() in answer
    history = await handle.fetch_history()
    recorded = b"".join(event.SerializeToString() for event in history.events)
    assert secret.upper().encode() in recorded
    assert secret.encode() not in recorded
