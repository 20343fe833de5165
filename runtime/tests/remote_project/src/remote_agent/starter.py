"""The starter command (remote-agent-starter): starts a run, follows it and prints
its answer; `remote-agent-starter --help` lists what else it does.

    uv run remote-agent-starter "Count the files in /etc"
"""

from typing import NoReturn

from sandbox_agent_runtime import starter_cli


def cli() -> NoReturn:
    starter_cli()


if __name__ == "__main__":
    cli()
