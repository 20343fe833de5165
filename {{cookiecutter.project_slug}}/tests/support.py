"""Helpers that run the service's real worker with a scripted model."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from agents import Model
{%- if cookiecutter.sandbox_backend != "local" %}
from agents.sandbox.sandboxes.unix_local import UnixLocalSandboxClient
{%- endif %}
from agents.sandbox.session.sandbox_client import BaseSandboxClient
from temporalio.client import Client
from temporalio.openai_agents.testing import TestModelProvider
from temporalio.worker import Worker

{% if cookiecutter.sandbox_backend == "local" -%}
from {{ cookiecutter.package_name }}.backends.local import (
    sandbox_client,
)
{% endif -%}
from {{ cookiecutter.package_name }}.worker import (
    agents_plugin,
    build_worker,
)


def sandbox_for_tests() -> BaseSandboxClient[Any]:
{%- if cookiecutter.sandbox_backend == "local" %}
    """The service's own local sandbox: real commands in a real temp dir."""
    return sandbox_client()
{%- else %}
    """A local sandbox standing in for the remote backend, which tests cannot
    reach. It is registered under the same provider name, so everything but
    the remote service itself (names, activities, session state) is real."""
    return UnixLocalSandboxClient(inherit_host_environment=False)
{%- endif %}


@asynccontextmanager
async def running_worker(
    client: Client,
    model: Model,
    sandbox: BaseSandboxClient[Any] | None = None,
    **worker_options: object,
) -> AsyncIterator[tuple[Client, Worker]]:
    """Run the service's worker with a scripted model; yield a client whose
    data converter matches the worker's."""
    plugin = agents_plugin(
        sandbox=sandbox if sandbox is not None else sandbox_for_tests(),
        model_provider=TestModelProvider(model),
    )
    config = client.config()
    config["plugins"] = [plugin]
    plugged = Client(**config)
    worker = build_worker(plugged, **worker_options)
    async with worker:
        yield plugged, worker
