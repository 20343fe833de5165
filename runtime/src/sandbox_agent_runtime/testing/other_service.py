"""The project's API or starter as another service's, a second render in
the same Temporal namespace: the project's service on a task queue of its
own (its workflow type, and everything else, the same):
``python -m sandbox_agent_runtime.testing.other_service <package> <task queue> api|starter [arguments]``,
``<package>`` the project's import package. It runs no worker: the
workflow sandbox of one would configure the project's own service again."""

import dataclasses
import importlib
import sys
from typing import Any

from sandbox_agent_runtime import service


def main() -> None:
    if len(sys.argv) < 4 or sys.argv[3] not in ("api", "starter"):
        sys.exit(
            f"usage: python -m {__spec__.name if __spec__ else __name__} "
            "<package> <task queue> api|starter [arguments]"
        )
    package, queue, command = sys.argv.pop(1), sys.argv.pop(1), sys.argv.pop(1)
    project: Any = importlib.import_module(f"{package}.service")
    # The runtime serves one service per process (service.configure): this
    # process is made another's before any of it runs.
    service._configured = None
    service.configure(dataclasses.replace(project.SERVICE, task_queue=queue))
    importlib.import_module(f"{package}.{command}").cli()


if __name__ == "__main__":
    main()
