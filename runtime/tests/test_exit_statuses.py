"""The worker and the starter exit with the status they document, every time.

Scripts, CI jobs, systemd and Kubernetes read a process's exit status; a crash
at exit after a successful run looks like a failure and gets restarted or
alerted on. Each status is checked as the number the README documents, which
scripts rely on, not as the starter's own name for it: once each (the last
tests here), then many times. A process that used the Temporal SDK can abort
or hang as the interpreter shuts down (temporalio/sdk-python#300), about once
in 6 to 10 runs, so one run of each proves nothing: the ``process`` tests run
each command many times, as the installed console script and as ``python -m``,
and check every status and the last line each one printed.
"""

import asyncio
import os
import re
import signal
import subprocess
import sys
import uuid
from collections import Counter

import pytest
from temporalio.client import Client

from sandbox_agent_runtime import starter
from sandbox_agent_runtime.owners import service_memo
from sandbox_agent_runtime.run_request import RunRequest
from sandbox_agent_runtime.starter import (
    EXIT_COMPLETED,
    EXIT_INTERRUPTED,
    EXIT_NOT_COMPLETED,
    EXIT_REFUSED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    attach,
    start,
)
from sandbox_agent_runtime.testing import project_service
from sandbox_agent_runtime.testing.processes import (
    SCRIPTS,
    STARTER,
    STARTER_MODULE,
    WORKER,
    WORKER_MODULE,
    Service,
    service,
    service_environment,
)
from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server
from sandbox_agent_runtime.testing.support import (
    CREDENTIALS,
    STARTER_SETTINGS,
    CompletedRun,
    Metrics,
    closed_address,
    free_address,
)

ROUNDS = 4  # of each of the six starter outcomes below: 24 starter runs
WORKER_CYCLES = 12  # half stopped by SIGTERM, half by SIGINT (Ctrl+C)
EXIT_WITHIN = 60  # seconds; a process that takes longer is stuck
CRASH = "Fatal Python error"


class Tally:
    """Every exit status seen, by case, and every exit that was wrong."""

    def __init__(self) -> None:
        self.seen: Counter[tuple[str, int | str]] = Counter()
        self.wrong: list[str] = []

    async def record(self, case: str, process: Service, status: int, last_line: str) -> None:
        """Wait for ``process`` to exit; it should exit with ``status``, its
        output should end with a line matching ``last_line`` (nothing lost)
        and hold no crash report."""
        try:
            seen: int | str = await process.exit_status(timeout=EXIT_WITHIN)
        except AssertionError:
            seen = f"no exit within {EXIT_WITHIN} s"
        self.seen[(case, seen)] += 1
        output = process.output
        if (
            seen != status
            or not output
            or not re.fullmatch(last_line, output[-1])
            or any(CRASH in line for line in output)
        ):
            self.wrong.append(f"{case}: exit {seen}, expected {status}: {output}")

    def check(self) -> None:
        summary = ", ".join(f"{case}: {status} x{n}" for (case, status), n in self.seen.items())
        assert not self.wrong, f"exit statuses seen: {summary}\n" + "\n".join(self.wrong)


# The starter's last line after an answer.
USAGE_PRINTED = (
    r"Usage: [\d,]+ model calls?, [\d,]+ input tokens, [\d,]+ output tokens, (\$[\d.]+|cost n/a)"
    r"; sandbox [\d,.]+ s, \$[\d.]+; [\d,]+ Temporal actions?, \$[\d.]+; total (\$[\d.]+|n/a)"
)


@pytest.mark.process
async def test_the_starter_exits_with_its_documented_status_every_time(
    temporal_client: Client,
) -> None:
    address = temporal_client.service_client.config.target_host
    unreachable = closed_address()
    tally = Tally()
    with scripted_openai_server(["echo all-done"]) as model:
        environment = service_environment(address, model.url)
        elsewhere = {**environment, "TEMPORAL_ADDRESS": unreachable}
        async with service(WORKER, environment) as worker:
            await worker.wait_for("Worker polling")
            for round in range(ROUNDS):
                starter = STARTER if round % 2 == 0 else STARTER_MODULE
                async with service(starter + ["Say it."], environment) as completed:
                    # The answer ("all-done"), then the usage line last.
                    await tally.record("completed", completed, EXIT_COMPLETED, USAGE_PRINTED)
                async with service(starter + ["--no-wait", "Say it."], environment) as no_wait:
                    last = (
                        r"Requests for approval: uv run \S+ --pending \S+"
                        if project_service().approvals
                        else r"Web UI: \S+"
                    )
                    await tally.record("--no-wait", no_wait, EXIT_COMPLETED, last)
                # The model rejects the key: the run fails at once.
                model.error_status = 401
                async with service(starter + ["Say it."], environment) as failed:
                    await tally.record(
                        "failed", failed, EXIT_NOT_COMPLETED, r"Workflow \S+ failed: .+"
                    )
                model.error_status = None
                async with service(starter + ["Say it."], elsewhere) as unreached:
                    await tally.record(
                        "unreachable",
                        unreached,
                        EXIT_UNREACHABLE,
                        f"Cannot reach Temporal at {unreachable} .+",
                    )
                async with service(starter + ["--frobnicate"], environment) as misused:
                    await tally.record(
                        "bad usage",
                        misused,
                        EXIT_USAGE,
                        ".+ error: unrecognized arguments: --frobnicate",
                    )
                await interrupted_while_following(temporal_client, starter, environment, tally)
            worker.process.send_signal(signal.SIGTERM)
            await tally.record("worker", worker, 0, "Worker stopped.")
    tally.check()


async def interrupted_while_following(
    client: Client, starter: list[str], environment: dict[str, str], tally: Tally
) -> None:
    """Ctrl+C while the starter follows a run: it stops following, says how
    to follow it again, and exits 130; the run goes on."""
    # A run on a queue no worker polls waits for ever, so the starter is
    # still following it when the signal comes.
    handle = await client.start_workflow(
        "SandboxAgentWorkflow",
        RunRequest("Wait."),
        id=f"interrupted-{uuid.uuid4()}",
        task_queue=f"nobody-polls-{uuid.uuid4()}",
        # This service's run all the same (owners.py), as the starter records it.
        memo=service_memo(),
    )
    async with service(starter + ["--attach", handle.id], environment) as following:
        await following.wait_for("Web UI: ")
        following.process.send_signal(signal.SIGINT)
        await tally.record(
            "interrupted",
            following,
            EXIT_INTERRUPTED,
            re.escape(
                f"Stopped following. The run goes on; follow it again with --attach {handle.id}"
            ),
        )
    await handle.terminate(reason="test over")


@pytest.mark.process
@pytest.mark.default_stand_in
async def test_the_worker_stops_cleanly_on_sigterm_and_sigint_every_time(
    temporal_client: Client,
) -> None:
    address = temporal_client.service_client.config.target_host
    tally = Tally()
    with scripted_openai_server(["echo all-done"]) as model:
        environment = service_environment(address, model.url)
        for cycle in range(WORKER_CYCLES):
            stop = signal.SIGTERM if cycle % 2 == 0 else signal.SIGINT
            command = WORKER if cycle % 4 < 2 else WORKER_MODULE
            # The second half of the workers also serve metrics, which must
            # not change how a worker exits.
            metrics = free_address() if cycle >= WORKER_CYCLES // 2 else None
            serving = {"PROMETHEUS_BIND_ADDRESS": metrics} if metrics else {}
            async with service(command, {**environment, **serving}) as worker:
                await worker.wait_for("Worker polling")
                # Stop a worker that has done real work: a whole run.
                answered = len(model.reported)
                handle = await start(temporal_client, "Say it.")
                assert (await handle.result()).answer.endswith("all-done\n")
                if metrics:
                    # The run's tokens as the model's HTTP answers reported them.
                    tokens = sum(answer[0] for answer in model.reported[answered:])
                    assert await Metrics(metrics).total("agent_runs", outcome="completed") == 1
                    assert await Metrics(metrics).total("agent_input_tokens") == tokens > 0
                worker.process.send_signal(stop)
                await tally.record(stop.name, worker, 0, "Worker stopped.")
    tally.check()


@pytest.mark.process
@pytest.mark.default_stand_in
async def test_a_worker_given_half_a_version_exits_1_with_one_line_every_time() -> None:
    tally = Tally()
    environment = {**service_environment(closed_address(), "http://127.0.0.1:1"), **CREDENTIALS}
    halves = [{"TEMPORAL_DEPLOYMENT_NAME": "agents"}, {"TEMPORAL_WORKER_BUILD_ID": "3f2c1ab"}]
    for attempt in range(4):
        half = halves[attempt % 2]
        command = WORKER if attempt < 2 else WORKER_MODULE
        async with service(command, {**environment, **half}) as worker:
            [given] = half
            await tally.record(
                given, worker, 1, rf"{given}='.*' is set but \S+ is not: set both .*"
            )
    tally.check()


# Each status once: the worker's, then the starter's.


@pytest.mark.process
def test_the_worker_command_without_credentials_prints_one_line_and_exits_1() -> None:
    # Nothing but what Python needs: no credentials at all. The Temporal
    # address leads nowhere, so a worker that tried to connect would fail
    # differently.
    keep = ("PATH", "HOME", "LANG", "SYSTEMROOT", "TMPDIR")
    environment = {name: value for name, value in os.environ.items() if name in keep}
    environment["TEMPORAL_ADDRESS"] = "127.0.0.1:1"
    result = subprocess.run(
        [str(SCRIPTS / project_service().command("worker"))],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 1
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("Missing credentials: set OPENAI_API_KEY")


def test_the_starter_says_in_one_line_where_it_could_not_connect(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    address = closed_address()
    monkeypatch.setenv("TEMPORAL_ADDRESS", address)
    monkeypatch.setattr(sys, "argv", ["starter", "Say hello."])
    with pytest.raises(SystemExit) as exited:
        starter.main()

    printed = capsys.readouterr()
    assert exited.value.code == 2
    assert printed.out == ""
    [line] = printed.err.splitlines()
    assert line.startswith(f"Cannot reach Temporal at {address} ")
    assert "temporal server start-dev" in line


async def test_a_run_that_ends_without_an_answer_exits_1(
    starter_env: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    handle = await start(starter_env, "Never mind.", workflow_id=f"stopped-{uuid.uuid4()}")
    await handle.terminate(reason="changed my mind")

    status = await attach(handle.id, STARTER_SETTINGS)

    captured = capsys.readouterr()
    assert status == 1
    assert "  ! terminated: changed my mind\n" in captured.out
    assert captured.err == f"Workflow {handle.id} was terminated\n"


async def test_attach_to_an_unknown_id_is_bad_usage(
    starter_env: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    status = await attach("no-such-run", STARTER_SETTINGS)

    err = capsys.readouterr().err
    assert status == 3
    assert err.strip() == "ERROR: --attach 'no-such-run': no such workflow in namespace 'default'."


@pytest.mark.process
async def test_an_id_that_names_no_conversation_is_refused_at_once_with_no_worker(
    temporal_client: Client,
) -> None:
    # No worker runs: a starter that sent the update would wait for one for ever.
    environment = service_environment(
        temporal_client.service_client.config.target_host, "http://127.0.0.1:1"
    )
    other = await temporal_client.start_workflow(
        "SomeoneElsesWorkflow", id=f"other-{uuid.uuid4()}", task_queue="someone-else"
    )
    job = await start(temporal_client, RunRequest("Just this."), workflow_id=f"job-{uuid.uuid4()}")

    def starter(*arguments: str) -> tuple[int, list[str], str]:
        done = subprocess.run(
            [*STARTER, *arguments], env=environment, capture_output=True, text=True, timeout=60
        )
        return done.returncode, done.stderr.splitlines(), done.stdout

    try:
        for option, prompt in (("--continue", ["Go on."]), ("--end", []), ("--attach", [])):
            assert await asyncio.to_thread(starter, option, other.id, *prompt) == (
                EXIT_USAGE,
                # Another service's run: the line of an unknown id (owners.py).
                [f"ERROR: {option} {other.id!r}: no such workflow in namespace 'default'."],
                "",
            ), option
        # A run of this service started without follow-ups takes none.
        for option, prompt in (("--continue", ["Go on."]), ("--end", [])):
            assert await asyncio.to_thread(starter, option, job.id, *prompt) == (
                EXIT_REFUSED,
                [
                    f"ERROR: workflow {job.id} was started without follow-ups "
                    "(RunRequest.follow_ups): start a new run."
                ],
                "",
            ), option
    finally:
        await other.terminate()
        await job.terminate()


@pytest.mark.parametrize(
    "arguments",
    [["--no-wait", "--attach", "some-id"], ["--attach", "some-id", "a prompt"], ["--frobnicate"]],
)
def test_bad_usage_exits_3_not_2(arguments: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        starter.main(arguments)

    assert exited.value.code == 3
    assert "error: " in capsys.readouterr().err


@pytest.mark.process
def test_output_to_a_pipe_that_closed_exits_141_without_a_traceback(
    completed_run: CompletedRun, starter_env: Client
) -> None:
    # `starter --attach ID | head -0`: the reader is gone before the starter
    # writes what it follows.
    reader, writer = os.pipe()
    os.close(reader)
    try:
        ended = subprocess.run(
            [*STARTER, "--attach", completed_run.handle.id],
            stdout=writer,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(writer)
    assert ended.returncode == 141, ended.stderr
    assert ended.stderr == "", ended.stderr
