"""The service's worker with a local sandbox standing in for each remote
backend, which tests cannot reach:
``python -m sandbox_agent_runtime.testing.stand_in_worker <package> [worker arguments]``,
``<package>`` the project's import package (its ``<package>.worker``; a
process started so loads no conftest.py to name it). Everything else
(settings, connection, plugin, model calls, signals) is the real worker's."""

import importlib
import os
import sys

from sandbox_agent_runtime.backends import sandbox_backends


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(
            f"usage: python -m {__spec__.name if __spec__ else __name__} <package> [arguments]"
        )
    package = sys.argv.pop(1)
    # The project's worker module configures its service (its package's
    # service.py), which the stand-ins below are chosen by.
    worker = importlib.import_module(f"{package}.worker")
    from sandbox_agent_runtime.testing.support import SANDBOXES_FOR_TESTS

    # The stand-ins need none of the remote backends' credentials: the
    # worker's check finds some, which no stand-in reads (an address where
    # the worker wants one: Cloudflare's Worker).
    for backend in sandbox_backends().values():
        for name in next(iter(backend.REQUIRED_ENVIRONMENT), ()):
            unread = (
                "https://read-by-no-stand-in.invalid"
                if name.endswith("_URL")
                else "read-by-no-stand-in"
            )
            os.environ.setdefault(name, unread)
    for provider, backend in sandbox_backends().items():
        backend.sandbox_client = SANDBOXES_FOR_TESTS[provider]  # type: ignore[method-assign,assignment]
    worker.cli()


if __name__ == "__main__":
    main()
