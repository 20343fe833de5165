"""The codec server command (remote-agent-codec-server): decodes this service's
encrypted payloads for the Temporal Web UI and CLI (docs/operations.md).
"""

from typing import NoReturn

from sandbox_agent_runtime import codec_server_cli


def cli() -> NoReturn:
    codec_server_cli()


if __name__ == "__main__":
    cli()
