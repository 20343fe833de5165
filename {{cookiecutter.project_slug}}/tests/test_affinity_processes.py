"""Two worker processes as two hosts, under load: each run's sandbox stays on
the host that created it (affinity.py).

Each worker has a host id and a TMPDIR of its own (where the local sandbox
puts its workspaces) and, where this machine allows it (root, as in CI), a
mount namespace of its own in which the other host's TMPDIR is an empty
directory: as on two machines, a command sent to the wrong host would find no
workspace, or an empty one. Whatever the machine, the runs' histories show
which worker ran each operation on which workspace."""

import asyncio
import os
from pathlib import Path

import pytest
from temporalio.client import Client

from sandbox_agent_runtime import start
from sandbox_agent_runtime.testing import (
    ALL_STEPS,
    HOSTS,
    SETTINGS,
    STEPS,
    activities,
    host_queue,
    on_host,
    private_mounts,
    sandbox_backends,
    scripted_openai_server,
    service,
    service_environment,
    with_plugins,
    workspaces_used,
)

pytestmark = pytest.mark.process

RUNS = 8
RUNS_PER_WORKER = 2

# A provider whose sandbox lives on the worker's host.
BOUND_PROVIDER = next(
    provider for provider, backend in sandbox_backends().items() if backend.host_bound(SETTINGS)
)


async def test_two_hosts_under_load_keep_every_run_on_the_host_of_its_sandbox(
    temporal_client: Client, tmp_path: Path
) -> None:
    isolated = private_mounts()
    address = temporal_client.service_client.config.target_host
    client = with_plugins(temporal_client)
    with scripted_openai_server(STEPS) as model:
        environment = service_environment(address, model.url)
        hosts = {}
        for host in HOSTS:
            (tmp_path / host).mkdir()
            hosts[host] = {
                **environment,
                "WORKER_HOST_ID": host,
                "TMPDIR": str(tmp_path / host),
                "WORKER_RUNS_IN_FLIGHT": str(RUNS_PER_WORKER),
            }
        async with (
            service(on_host("host-a", tmp_path, isolated), hosts["host-a"]) as worker_a,
            service(on_host("host-b", tmp_path, isolated), hosts["host-b"]) as worker_b,
        ):
            await worker_a.wait_for("Worker polling")
            await worker_b.wait_for("Worker polling")
            runs = [
                await start(client, "Add to the file, then print it.", provider=BOUND_PROVIDER)
                for _ in range(RUNS)
            ]
            async with asyncio.timeout(240):
                done = await asyncio.gather(*(run.result() for run in runs))
                answers = [each.answer for each in done]

    # Every run saw, at its last step, what each of its steps wrote.
    for answer in answers:
        assert answer.endswith(ALL_STEPS), answer
    hosts_used = set()
    for run in runs:
        steps = [
            step for step in await activities(run) if step.is_sandbox_operation and not step.refused
        ]
        # All of a run's sandbox operations went to one host's queue (or
        # were offered for that host on the run's own: affinity.HostFirst)
        # and ran on that host's worker (its identity is "<pid>@<host>")...
        ran_on = {step.worker.rpartition("@")[2] for step in steps}
        assert len(ran_on) == 1, f"{run.id}: sandbox operations ran on {sorted(ran_on)}"
        [host] = ran_on
        assert {step.queue for step in steps} == {host_queue(host)}
        # ...on a workspace in that host's TMPDIR.
        for root in await workspaces_used(run):
            assert Path(root).is_relative_to(tmp_path / host), (host, root)
        hosts_used.add(host)
    # With two runs in flight per worker and eight runs at once, both hosts
    # took runs; had one kept every run, this test would prove nothing.
    assert hosts_used == set(HOSTS)
    assert os.listdir(tmp_path / "host-a") == os.listdir(tmp_path / "host-b") == []
