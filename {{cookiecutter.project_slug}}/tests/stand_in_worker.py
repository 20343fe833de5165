{% set remote = cookiecutter | remote_backends | sort -%}
"""The service's worker with a local sandbox standing in for the remote
{{ "backend" if remote | length == 1 else "backends" }}, which tests cannot reach: ``python -m tests.stand_in_worker``.
Everything else (connection, plugin, model calls, signals) is the real worker's."""

from {{ cookiecutter.package_name }} import (
    worker,
)
from {{ cookiecutter.package_name }}.backends import (
{%- for backend in remote %}
    {{ backend }},
{%- endfor %}
)

from .support import local_stand_in

if __name__ == "__main__":
    # The stand-in needs none of the remote backend's credentials.
    worker.missing_credentials = lambda environ: None
{%- for backend in remote %}
    {{ backend }}.sandbox_client = local_stand_in  # type: ignore[assignment]
{%- endfor %}
    worker.cli()
