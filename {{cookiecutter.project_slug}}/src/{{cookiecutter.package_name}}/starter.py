"""The starter command ({{ cookiecutter.project_slug }}-starter): starts a run, follows it and prints
its answer; `{{ cookiecutter.project_slug }}-starter --help` lists what else it does.

    uv run {{ cookiecutter.project_slug }}-starter "Count the files in /etc"
"""

from typing import NoReturn

from sandbox_agent_runtime import starter_cli


def cli() -> NoReturn:
    starter_cli()


if __name__ == "__main__":
    cli()
