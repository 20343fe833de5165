"""The worker, the starter and the API as a user runs them.

The tests marked ``process`` run the installed commands as separate
processes (see processes.py): the worker and the starter against the dev
server, with the real ``openai`` client talking to a scripted
OpenAI-compatible server, and a worker killed part-way. The other tests call
the same ``main`` functions in this process."""

import asyncio
import hashlib
import signal
from importlib.metadata import entry_points
from types import ModuleType

import pytest
from agents.sandbox.sandboxes.unix_local import UnixLocalSandboxClient
from temporalio.client import Client

from sandbox_agent_runtime import (
    EXIT_CANNOT_SERVE,
    api_main,
    sandboxes_main,
    starter_main,
    worker_main,
)
from sandbox_agent_runtime.testing import (
    API_VARIABLES,
    CREDENTIALS,
    SCRIPTS,
    STARTER,
    WORKER,
    api_tokens,
    closed_address,
    sandbox_backends,
    scripted_openai_server,
    service,
    service_environment,
)

from {{ cookiecutter.package_name }} import evals as service_evals
from {{ cookiecutter.package_name }} import worker as service_worker
from {{ cookiecutter.package_name }}.tools import ACTIVITIES
from {{ cookiecutter.package_name }}.workflow import SandboxAgentWorkflow

WRITE_THEN_READ = [
    "printf 'written before the kill\\n' > note.txt",
    "cat note.txt",
]
# Every sandbox backend the worker builds a client for, by provider name.
BACKENDS = list(sandbox_backends().items())


@pytest.mark.process
async def test_a_run_survives_its_worker_being_killed_and_the_starter_prints_the_answer(
    temporal_client: Client,
) -> None:
    address = temporal_client.service_client.config.target_host
    with scripted_openai_server(WRITE_THEN_READ) as model:
        # The model holds its answer to the first command's output until the
        # worker that asked for it has been killed.
        model.hold_at_step = 1
        environment = service_environment(address, model.url)
        async with (
            service(WORKER, environment) as first_worker,
            service(STARTER + ["Write a note, then read it."], environment) as asking,
        ):
            # The first command has run; the worker is waiting for the model.
            assert await asyncio.to_thread(model.reached.wait, 120), asking.output
            first_worker.process.send_signal(signal.SIGKILL)
            assert await first_worker.exit_status() == -signal.SIGKILL
            model.release.set()

            async with service(WORKER, environment) as second_worker:
                status = await asking.exit_status()
                # Ctrl+C or SIGTERM stops a worker cleanly.
                second_worker.process.send_signal(signal.SIGTERM)
                stopped = await second_worker.exit_status()

    assert status == 0, asking.output
    assert asking.output[0].startswith("Started workflow ")
    assert "written before the kill" in asking.output
    assert stopped == 0, second_worker.output
    assert "Worker stopped." in second_worker.output


@pytest.mark.process
async def test_a_worker_on_chat_completions_completes_a_run_against_an_endpoint_that_speaks_only_that(
    temporal_client: Client,
) -> None:
    # OPENAI_API=chat_completions, for vLLM, Ollama or a gateway
    # (docs/configuration.md, The model endpoint), and the fleet's rate set.
    address = temporal_client.service_client.config.target_host
    commands = ["printf 'spoken in chat\\n' > note.txt", "cat note.txt"]
    with scripted_openai_server(commands, apis=("chat_completions",)) as model:
        environment = {
            **service_environment(address, model.url),
            "OPENAI_API": "chat_completions",
            "MODEL_CALLS_PER_SECOND": "50",
        }
        async with service(WORKER, environment) as worker:
            await worker.wait_for("Worker polling")
            async with service(STARTER + ["Write a note, then read it."], environment) as asking:
                status = await asking.exit_status()

    assert status == 0, asking.output
    assert "spoken in chat" in asking.output
    assert model.apis_called == ["chat_completions"] * 3
    [polling] = [line for line in worker.output if line.startswith("Worker polling")]
    queue = "{{ cookiecutter.task_queue }}-model-calls"
    assert f"{queue!r} (model calls, at most 50 a second across the fleet)" in polling


@pytest.mark.parametrize("role", ["worker", "starter", "api", "eval", "sandboxes"])
def test_console_scripts_are_installed_and_answer_help(
    role: str, capsys: pytest.CaptureFixture[str]
) -> None:
    [script] = entry_points(group="console_scripts", name=f"{{ cookiecutter.project_slug }}-{role}")
    # cli() runs main() and ends the process without the interpreter's
    # shutdown (exits.py); the tests call main() itself.
    module = {"eval": "evals"}.get(role, role)
    assert script.value == f"{{ cookiecutter.package_name }}.{module}:cli"
    assert (SCRIPTS / script.name).exists(), f"{script.name} is not installed: run `uv sync`"
    commands = {
        "worker": service_worker.main,
        "starter": starter_main,
        "api": api_main,
        "eval": service_evals.main,
        "sandboxes": sandboxes_main,
    }
    with pytest.raises(SystemExit) as exited:
        commands[role](["--help"])

    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith("usage: ")


def test_a_new_token_is_printed_with_an_entry_the_api_takes_and_nothing_is_stored(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        api_main(["--new-token", "ci-bot"])

    assert exited.value.code == 0
    [token_line, entry_line] = capsys.readouterr().out.splitlines()
    token = token_line.rpartition(" ")[2]
    entry = entry_line.rpartition(" ")[2]
    # The entry holds the token's SHA-256, never the token.
    assert token not in entry
    digest = hashlib.sha256(token.encode()).hexdigest()
    assert api_tokens({"API_TOKENS": entry}) == {digest: "ci-bot"}


def test_the_api_without_callers_refuses_to_start_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in API_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SystemExit) as exited:
        api_main([])

    assert exited.value.code == EXIT_CANNOT_SERVE
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("ERROR: API_TOKENS is unset"), line
    assert "--new-token NAME" in line


@pytest.mark.parametrize(("provider", "backend"), BACKENDS)
def test_the_worker_refuses_to_start_when_a_sandbox_backend_cannot_be_built(
    provider: str, backend: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_backend(settings: object) -> None:
        raise RuntimeError("no credentials found")

    # Every other backend builds (a local sandbox each); this one cannot.
    for _, other in BACKENDS:
        monkeypatch.setattr(other, "sandbox_client", lambda settings: UnixLocalSandboxClient())
    monkeypatch.setattr(backend, "sandbox_client", broken_backend)
    # Credentials are checked first (test_configuration.py): they are set.
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    # Nothing listens here: had the worker tried to connect first, it would
    # have failed with a different message.
    monkeypatch.setenv("TEMPORAL_ADDRESS", closed_address())
    with pytest.raises(SystemExit) as refused:
        worker_main(SandboxAgentWorkflow, ACTIVITIES, [])

    assert str(refused.value.code) == (
        f"Cannot start the {provider!r} sandbox backend: RuntimeError: no credentials found"
    )
