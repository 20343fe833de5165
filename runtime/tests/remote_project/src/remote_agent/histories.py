"""The command that records this service's runs for its replay test
(remote-agent-record-histories; tests/test_histories.py replays them).
"""

from typing import NoReturn

from sandbox_agent_runtime import histories_cli


def cli() -> NoReturn:
    histories_cli()


if __name__ == "__main__":
    cli()
