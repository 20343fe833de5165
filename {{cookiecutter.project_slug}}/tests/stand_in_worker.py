"""The service's worker with a local sandbox standing in for each remote
backend, which tests cannot reach: ``python -m tests.stand_in_worker``.
Everything else (connection, plugin, model calls, signals) is the real worker's."""

from {{ cookiecutter.package_name }}.machinery import worker
from {{ cookiecutter.package_name }}.machinery.backends import SANDBOX_BACKENDS

from .support import SANDBOXES_FOR_TESTS

if __name__ == "__main__":
    # The stand-ins need none of the remote backends' credentials.
    worker.missing_credentials = lambda environ: None
    for provider, backend in SANDBOX_BACKENDS.items():
        backend.sandbox_client = SANDBOXES_FOR_TESTS[provider]  # type: ignore[method-assign]
    worker.cli()
