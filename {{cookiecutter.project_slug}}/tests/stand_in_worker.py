"""The service's worker with a local sandbox standing in for each remote
backend, which tests cannot reach: ``python -m tests.stand_in_worker``.
Everything else (settings, connection, plugin, model calls, signals) is the
real worker's."""

import os

from sandbox_agent_runtime.backends import sandbox_backends

from {{ cookiecutter.package_name }} import worker

from .support import SANDBOXES_FOR_TESTS

if __name__ == "__main__":
    # The stand-ins need none of the remote backends' credentials: the
    # worker's check finds some, which no stand-in reads.
    for backend in sandbox_backends().values():
        for name in next(iter(backend.REQUIRED_ENVIRONMENT), ()):
            os.environ.setdefault(name, "read-by-no-stand-in")
    for provider, backend in sandbox_backends().items():
        backend.sandbox_client = SANDBOXES_FOR_TESTS[provider]  # type: ignore[method-assign,assignment]
    worker.cli()
