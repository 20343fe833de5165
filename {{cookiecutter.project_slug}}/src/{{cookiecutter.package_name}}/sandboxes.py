"""The command that lists this service's sandboxes and removes those whose run
is closed ({{ cookiecutter.project_slug }}-sandboxes list | reap [--grace SECONDS];
docs/sandboxes.md).
"""

from typing import NoReturn

from sandbox_agent_runtime import sandboxes_cli


def cli() -> NoReturn:
    sandboxes_cli()


if __name__ == "__main__":
    cli()
