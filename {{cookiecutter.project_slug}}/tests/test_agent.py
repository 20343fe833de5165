"""The agent of agent.py is the one the model hears: its instructions, its
model, and that model's settings (the Agents SDK's defaults for it unless
agent.py sets others), in every request the worker sends."""

from agents.models.default_models import get_default_model_settings
from temporalio.client import Client

from sandbox_agent_runtime import start
from sandbox_agent_runtime.testing import openai_model, running_worker, scripted_openai_server

from {{ cookiecutter.package_name }}.agent import INSTRUCTIONS, MODEL, MODEL_SETTINGS, sandbox_agent


async def test_every_request_carries_the_agents_instructions_model_and_settings(
    temporal_client: Client,
) -> None:
    with scripted_openai_server(["echo hello"]) as server:
        async with running_worker(temporal_client, openai_model(server.url)) as (client, _):
            answer = (await (await start(client, "Say hello.")).result()).answer

    assert answer.endswith("hello\n")
    assert len(server.bodies) == 2
    for body in server.bodies:
        assert body["model"] == MODEL
        assert INSTRUCTIONS in body["instructions"]  # after the SandboxAgent's own
        assert body.get("reasoning") == (
            {"effort": MODEL_SETTINGS.reasoning.effort} if MODEL_SETTINGS.reasoning else None
        )
        assert body.get("text", {}).get("verbosity") == MODEL_SETTINGS.verbosity


def test_the_agents_settings_are_the_sdks_defaults_for_its_model() -> None:
    # A bare ModelSettings() in agent.py would lose them without a word: the
    # SDK applies a model's defaults only to an agent that leaves its settings
    # alone. What they are is the SDK's to say, for any model: a GPT-5 model's
    # reasoning effort and verbosity, the verbosity alone for a variant whose
    # efforts it does not know (gpt-5-mini), none for another model or a chat
    # alias (gpt-5-chat-latest). (Set others in agent.py, and say so here.)
    defaults = get_default_model_settings(MODEL)
    assert defaults == MODEL_SETTINGS
    assert sandbox_agent().model_settings == defaults
