"""The service's worker with a local sandbox standing in for the remote
backend, which tests cannot reach: ``python -m tests.stand_in_worker``.
Everything else (connection, plugin, model calls, signals) is the real worker's."""

from {{ cookiecutter.package_name }} import (
    worker,
)

from .support import sandbox_for_tests

if __name__ == "__main__":
    worker.backend_client = sandbox_for_tests
    worker.main()
