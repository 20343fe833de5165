"""The API command (remote-agent-api): the service over HTTP, with live events
(docs/api.md).
"""

from typing import NoReturn

from sandbox_agent_runtime import api_cli


def cli() -> NoReturn:
    api_cli()


if __name__ == "__main__":
    cli()
