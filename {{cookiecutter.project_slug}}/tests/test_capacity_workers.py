"""Several worker processes on one machine, as the capacity benchmark runs
them (``benchmarks/capacity.py --workers``): each is a host of its own, with
its own host id, its own TMPDIR and no port another worker also binds, and
every one of them takes runs."""

import shutil

import pytest

from benchmarks.capacity import measure
from {{ cookiecutter.package_name }}.machinery.backends import SANDBOX_BACKENDS
from {{ cookiecutter.package_name }}.machinery.health import ADDRESS_VARIABLE
from {{ cookiecutter.package_name }}.machinery.observability import METRICS_ADDRESS_VARIABLE
from {{ cookiecutter.package_name }}.machinery.shared import SANDBOX_PROVIDER

from .support import closed_address

pytestmark = pytest.mark.process

RUNS = 20


async def test_two_workers_on_one_machine_each_take_runs_and_keep_their_sandboxes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Set where the benchmark runs: two workers serving on one port each
    # would stop the second at its start.
    monkeypatch.setenv(METRICS_ADDRESS_VARIABLE, closed_address())
    monkeypatch.setenv(ADDRESS_VARIABLE, closed_address())
    temporal = shutil.which("temporal")
    assert temporal is not None
    result = await measure(RUNS, RUNS // 2, 2, 60, 5, temporal)

    assert result.ended == {"completed": RUNS}
    # Each worker has slots for half the runs: every run waited on the model
    # at once, half through each worker.
    assert result.peak == RUNS
    assert [host.held_at_peak for host in result.hosts] == [RUNS // 2, RUNS // 2]
    if SANDBOX_BACKENDS[SANDBOX_PROVIDER].host_bound():
        # Each run's sandbox operations all ran on one worker (an identity of
        # its own, "<pid>@<host>"), and both workers held sandboxes.
        identities = {f"{host.pid}@{host.id}" for host in result.hosts}
        assert set(result.sandbox_hosts) == identities, result.sandbox_hosts
{%- if cookiecutter.sandbox_backend != "docker" %}
    # Every sandbox alive at the peak had its workspace in the TMPDIR of one
    # of the two workers, and each worker's held some.
    workspaces = [host.sandboxes_at_peak for host in result.hosts]
    assert sum(workspaces) == RUNS and min(workspaces) > 0, workspaces
{%- endif %}
