"""The worker command ({{ cookiecutter.project_slug }}-worker): the runtime's worker, running this
service's workflow, its tools' activities and its MCP servers (tools.py).

    uv run --env-file .env {{ cookiecutter.project_slug }}-worker

Its settings are environment variables (docs/operations.md).
"""

from collections.abc import Sequence
from typing import NoReturn

from sandbox_agent_runtime import worker_cli, worker_main

from {{ cookiecutter.package_name }}.tools import ACTIVITIES, MCP_SERVERS
from {{ cookiecutter.package_name }}.workflow import SandboxAgentWorkflow


def main(argv: Sequence[str] | None = None) -> None:
    """The worker, with ``argv`` for its arguments (the tests call this)."""
    worker_main(SandboxAgentWorkflow, ACTIVITIES, argv, mcp_servers=MCP_SERVERS)


def cli() -> NoReturn:
    """The installed command: the worker, then exit with its status."""
    worker_cli(SandboxAgentWorkflow, ACTIVITIES, MCP_SERVERS)


if __name__ == "__main__":
    cli()
