"""Several worker processes on one machine, as the capacity benchmark runs
them (``benchmarks/capacity.py --workers``): each {{ "is a host of its own, with
its own host id, " if cookiecutter | host_bound_backends else "has " }}its own TMPDIR and no port another worker also binds, and
every one of them takes runs."""

import shutil

import pytest

{% if cookiecutter | host_bound_backends -%}
from sandbox_agent_runtime.testing import SETTINGS, closed_address, sandbox_backends
{% else -%}
from sandbox_agent_runtime.testing import closed_address
{% endif %}
{% if cookiecutter | host_bound_backends -%}
from {{ cookiecutter.package_name }}.service import SANDBOX_PROVIDER

{% endif -%}
from benchmarks.capacity import measure

pytestmark = pytest.mark.process

RUNS = 20


async def test_two_workers_on_one_machine_each_take_runs_and_keep_their_sandboxes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Set where the benchmark runs: two workers serving on one port each
    # would stop the second at its start.
    monkeypatch.setenv("PROMETHEUS_BIND_ADDRESS", closed_address())
    monkeypatch.setenv("HEALTH_BIND_ADDRESS", closed_address())
    temporal = shutil.which("temporal")
    assert temporal is not None
    result = await measure(RUNS, RUNS // 2, 2, 60, 5, temporal)

    assert result.ended == {"completed": RUNS}
    # Each worker has slots for half the runs: every run waited on the model
    # at once, half through each worker.
    assert result.peak == RUNS
    assert [worker.held_at_peak for worker in result.workers] == [RUNS // 2, RUNS // 2]
{%- if cookiecutter | host_bound_backends %}
    if sandbox_backends()[SANDBOX_PROVIDER].host_bound(SETTINGS):
        # Each run's sandbox operations all ran on one worker (an identity of
        # its own, "<pid>@<host>"), and both workers held sandboxes.
        identities = {f"{worker.pid}@{worker.name}" for worker in result.workers}
        assert set(result.sandbox_workers) == identities, result.sandbox_workers
{%- endif %}
{%- if cookiecutter.sandbox_backend != "docker" %}
    # Every sandbox alive at the peak had its workspace in the TMPDIR of one
    # of the two workers, and each worker's held some.
    workspaces = [worker.sandboxes_at_peak for worker in result.workers]
    assert sum(workspaces) == RUNS and min(workspaces) > 0, workspaces
{%- endif %}
