"""Models through LiteLLM (litellm_models.py, the litellm extra): a model
named ``litellm/<provider>/<model>`` goes through LiteLLM, any other name to
the OpenAI-compatible endpoint as before; a run of the real worker and
starter completes through LiteLLM's OpenAI route against a scripted Chat
Completions endpoint on loopback, its tools used; a rate limit is waited out
as its Retry-After asks, each attempt one request (LiteLLM retries nothing);
a provider's 404 fails the run with LiteLLM's line, not advice on OPENAI_API;
LiteLLM never reaches for the network when it is loaded; and a worker
without the extra says, in one line, what to install."""

import subprocess
import sys
from dataclasses import replace
from typing import Any

import pytest
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from agents.models.openai_responses import OpenAIResponsesModel
from agents.sandbox import SandboxAgent
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from sandbox_agent_runtime.capacity import check_the_agents_model, model_provider
from sandbox_agent_runtime.litellm_models import (
    LITELLM_MISSING,
    WithoutRetries,
    litellm_model_type,
)
from sandbox_agent_runtime.model_api import FreeformToolsAsFunctions
from sandbox_agent_runtime.settings import BadSetting
from sandbox_agent_runtime.testing import project
from sandbox_agent_runtime.testing.processes import STARTER, service, service_environment
from sandbox_agent_runtime.testing.scripted_openai import scripted_openai_server
from sandbox_agent_runtime.testing.support import activities, started_id, with_plugins

# LiteLLM's OpenAI route: it reads OPENAI_BASE_URL and OPENAI_API_KEY, as the
# scripted endpoint's environment sets them.
MODEL = "litellm/openai/gpt-test"

MISSING = (
    "The agent's model 'litellm/openai/gpt-test' goes through LiteLLM, which is not installed: "
    "add the litellm extra to the runtime in pyproject.toml's dependencies (\"sandbox-agent-"
    'runtime[...,litellm]"), then uv sync'
)


def through_litellm(model: object) -> str:
    """The name LiteLLM is given, for a model the provider routed there."""
    # Imported as the worker imports it: its prices table from the package.
    litellm_model_type()
    from agents.extensions.models.litellm_model import LitellmModel

    assert isinstance(model, FreeformToolsAsFunctions), model
    assert isinstance(model.model, WithoutRetries), model.model
    assert isinstance(model.model.model, LitellmModel), model.model.model
    return model.model.model.model


def test_litellm_names_go_through_litellm_and_every_other_name_as_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    monkeypatch.delenv("OPENAI_DEFAULT_MODEL", raising=False)
    for use_responses in (True, False):
        provider = model_provider(3, use_responses)
        assert through_litellm(provider.get_model(MODEL)) == "openai/gpt-test"
        assert through_litellm(provider.get_model("litellm/anthropic/x")) == "anthropic/x"
    assert isinstance(model_provider(3).get_model("gpt-test"), OpenAIResponsesModel)
    assert isinstance(model_provider(3).get_model(None), OpenAIResponsesModel)
    chat = model_provider(3, use_responses=False).get_model("gpt-test")
    assert isinstance(chat, FreeformToolsAsFunctions)
    assert isinstance(chat.model, OpenAIChatCompletionsModel)
    # An agent that names no model: the default one, OPENAI_DEFAULT_MODEL.
    monkeypatch.setenv("OPENAI_DEFAULT_MODEL", "litellm/bedrock/y")
    assert through_litellm(model_provider(3).get_model(None)) == "bedrock/y"


def agent_of_model(model: str | None) -> type:
    """The project's workflow type, its agent's model ``model`` (as the
    worker reads it at start: never run)."""

    class OtherModel(project().workflow):  # type: ignore[misc]
        def agent(self) -> SandboxAgent[Any]:
            return replace(super().agent(), model=model)

    return OtherModel


def test_without_litellm_its_models_are_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As on a worker without the extra: importing LiteLLM fails.
    monkeypatch.setitem(sys.modules, "litellm", None)
    monkeypatch.delitem(sys.modules, "agents.extensions.models.litellm_model", raising=False)
    # At the worker's start, for the agent's model (capacity.check_the_agents_model)...
    monkeypatch.delenv("OPENAI_DEFAULT_MODEL", raising=False)
    with pytest.raises(BadSetting) as stopped:
        check_the_agents_model(agent_of_model(MODEL))
    assert str(stopped.value) == MISSING
    # ...nothing for a model of the endpoint's...
    check_the_agents_model(agent_of_model("gpt-test"))
    monkeypatch.setenv("OPENAI_DEFAULT_MODEL", MODEL)
    check_the_agents_model(project().workflow)
    # ...or an agent that names none, but the default model through LiteLLM.
    with pytest.raises(BadSetting):
        check_the_agents_model(agent_of_model(None))
    # And at a model call of a model the start did not see: for good.
    with pytest.raises(ApplicationError) as failed:
        model_provider(3).get_model(MODEL)
    assert failed.value.message == MISSING
    assert failed.value.non_retryable and failed.value.type == LITELLM_MISSING


def test_loading_litellm_reaches_for_no_network() -> None:
    # LiteLLM fetches its table of model prices from GitHub when imported,
    # unless told not to: the worker tells it. Every connection or name
    # lookup the import attempts is refused and counted.
    script = (
        "import socket\n"
        "attempts = []\n"
        "def refuse(*args, **kwargs):\n"
        "    attempts.append(args)\n"
        "    raise OSError('no network')\n"
        "socket.getaddrinfo = refuse\n"
        "socket.socket.connect = refuse\n"
        "from sandbox_agent_runtime.settings import keep_litellm_offline\n"
        "keep_litellm_offline()\n"
        "from sandbox_agent_runtime.litellm_models import litellm_model_type\n"
        "litellm_model_type()\n"
        "import litellm\n"
        "print(len(attempts), 'gpt-4o' in litellm.model_cost)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "True"], done.stdout


def other_model_worker(model: str) -> list[str]:
    """The real worker command, its agent's model ``model``."""
    package = project().package
    helper = "sandbox_agent_runtime.testing.other_model_worker"
    return [sys.executable, "-m", helper, package, model]


@pytest.mark.process
async def test_a_run_through_litellm_completes_using_the_sandbox(
    temporal_client: Client,
) -> None:
    address = temporal_client.service_client.config.target_host
    with scripted_openai_server(["echo through-litellm"], apis=("chat_completions",)) as model:
        environment = service_environment(address, model.url)
        async with service(other_model_worker(MODEL), environment) as worker:
            await worker.wait_for("Worker polling")
            async with service([*STARTER, "Say it."], environment) as asking:
                status = await asking.exit_status()

    assert status == 0, asking.output
    assert "through-litellm" in "\n".join(asking.output)
    # Two model calls over Chat Completions, by the name LiteLLM gives it:
    # the command, then the answer.
    assert model.apis_called == ["chat_completions"] * 2
    assert [body["model"] for body in model.bodies] == ["gpt-test"] * 2
    # apply_patch went as a function of one string, as Chat Completions takes it.
    tools = {tool["function"]["name"]: tool for tool in model.bodies[0]["tools"]}
    assert {"exec_command", "apply_patch"} <= set(tools)
    patch = tools["apply_patch"]["function"]["parameters"]["properties"]
    assert list(patch) == ["input"] and patch["input"]["type"] == "string"
    assert "context_management" not in str(model.bodies)
    # The command's output came back to the model.
    assert any(
        message.get("role") == "tool" and "through-litellm" in str(message.get("content"))
        for message in model.bodies[1]["messages"]
    ), model.bodies[1]["messages"]


RETRY_AFTER = 6


@pytest.mark.process
@pytest.mark.long  # waits out the Retry-After
async def test_a_rate_limit_through_litellm_is_waited_out_as_retry_after_asks(
    temporal_client: Client,
) -> None:
    address = temporal_client.service_client.config.target_host
    with scripted_openai_server(["echo calm again"], apis=("chat_completions",)) as model:
        # One 429, with its Retry-After, then calm (the worker's own retries
        # wait 2 s first: MODEL_RETRY_POLICY).
        model.storm, model.retry_after = 0.5, RETRY_AFTER
        environment = service_environment(address, model.url)
        async with service(other_model_worker(MODEL), environment) as worker:
            await worker.wait_for("Worker polling")
            async with service([*STARTER, "Say it once it is calm."], environment) as asking:
                status = await asking.exit_status(timeout=90)

    assert status == 0, asking.output
    assert "calm again" in "\n".join(asking.output)
    statuses = [status for _, status in model.answered]
    # One request for the attempt that met the 429 (LiteLLM retried nothing),
    # then the two calls of the run.
    assert statuses == [429, 200, 200], statuses
    waited = model.answered[1][0] - model.answered[0][0]
    assert RETRY_AFTER <= waited < RETRY_AFTER + 10, waited
    # Temporal made the second request, as the model call's second attempt.
    handle = with_plugins(temporal_client).get_workflow_handle(started_id("\n".join(asking.output)))
    attempts = [step.attempt for step in await activities(handle) if step.is_model_call]
    assert attempts == [2, 1], attempts


@pytest.mark.process
async def test_a_404_through_litellm_is_the_providers_not_a_missing_api(
    temporal_client: Client,
) -> None:
    # A model LiteLLM's provider does not serve fails the run at once, with
    # LiteLLM's own line, not with advice on OPENAI_API (model_api.py), which
    # LiteLLM's models do not read.
    address = temporal_client.service_client.config.target_host
    with scripted_openai_server(["true"], apis=("responses",)) as model:
        environment = service_environment(address, model.url)
        async with service(other_model_worker(MODEL), environment) as worker:
            await worker.wait_for("Worker polling")
            async with service([*STARTER, "Say it."], environment) as asking:
                status = await asking.exit_status(timeout=60)

    assert status == 1, asking.output
    [line] = [line for line in asking.output if line.startswith("Workflow ")]
    assert "OPENAI_API" not in line, line
    assert "litellm.NotFoundError" in line, line
    # The worker's log has the failed call (Temporal's warning), without
    # LiteLLM's banner printed at every error.
    banner = ("Give Feedback / Get Help", "LiteLLM.Info")
    assert not [line for line in worker.output if line.startswith(banner)], worker.output


def test_a_worker_without_litellm_for_a_litellm_model_stops_at_start_in_one_line() -> None:
    # The real worker command (its agent's model through LiteLLM), in a
    # process where LiteLLM cannot be imported, as on a worker without the
    # extra: it stops before it connects, in one line, with status 1.
    script = (
        "import runpy, sys\n"
        "sys.modules['litellm'] = None\n"
        f"sys.argv = ['other_model_worker', {project().package!r}, {MODEL!r}]\n"
        "runpy.run_module('sandbox_agent_runtime.testing.other_model_worker', run_name='__main__')\n"
    )
    environment = service_environment("127.0.0.1:1", "http://127.0.0.1:9")
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [MISSING], done.stderr
