"""Models no OpenAI-compatible endpoint serves (Anthropic, Bedrock, Vertex
and the rest), through LiteLLM: the extra ``sandbox-agent-runtime[litellm]``.

An agent whose model is named ``litellm/<provider>/<model>`` (agent.py's
MODEL, or OPENAI_DEFAULT_MODEL for an agent that names none) has its model
calls made by LiteLLM, with ``<provider>/<model>`` as LiteLLM names it
(``litellm/anthropic/claude-sonnet-4-5``); every other name goes to the
OpenAI-compatible endpoint as before (capacity.py). LiteLLM reads each
provider's own credentials and endpoint from the worker's environment
(``ANTHROPIC_API_KEY``, ``AWS_*`` for Bedrock, ...).

Such a model is given what the agent's tools need as over Chat Completions
(model_api.FreeformToolsAsFunctions): the sandbox's ``apply_patch`` as a
function of one string, and no compaction of the Responses API's (the
runtime's own cut bounds the conversation). LiteLLM never retries a call
itself: Temporal retries the model call, as for any model, and a rate limit
waits the Retry-After the provider answered, which LiteLLM keeps aside
(``litellm_response_headers``) and this module hands on to the plugin.

LiteLLM would fetch its table of model prices from the internet when it is
imported: the worker has it read its own copy instead
(settings.keep_litellm_offline(), at the worker's start), so that no model
call needs that network. Its import costs seconds of CPU: the worker does it at start
for its agent's model (capacity.check_the_agents_model()), not in the middle
of a model call, where it would hold up every other run. A ``litellm/``
model on a worker without the extra stops that worker at start, or fails the
model call for good, with one line naming the model and what to install.
"""

import dataclasses
from collections.abc import Callable
from typing import Any

from agents import ModelResponse, ModelSettings, Tool, TResponseInputItem
from agents.models.default_models import get_default_model
from agents.models.interface import Model, ModelProvider
from openai import APIStatusError
from temporalio.exceptions import ApplicationError

from sandbox_agent_runtime.model_api import (
    LITELLM_PREFIX,
    FreeformToolsAsFunctions,
    through_litellm,
)

# The type of the failure a model call fails with when LiteLLM is missing.
LITELLM_MISSING = "LiteLLMMissing"

# The headers of the provider's answer that say when to retry, which the
# plugin reads from the error's response (temporalio.openai_agents).
RETRY_HEADERS = ("retry-after", "retry-after-ms", "x-should-retry")


def missing(model_name: str) -> str:
    """The line for a ``litellm/`` model on a worker without LiteLLM."""
    return (
        f"The agent's model {model_name!r} goes through LiteLLM, which is not installed: "
        "add the litellm extra to the runtime in pyproject.toml's dependencies "
        '("sandbox-agent-runtime[...,litellm]"), then uv sync'
    )


def litellm_model_type() -> Callable[[str], Model]:
    """The Agents SDK's LiteLLM model (given the name LiteLLM knows the model
    by), imported: seconds, once. Raises ImportError without the extra."""
    import litellm
    from agents.extensions.models.litellm_model import LitellmModel

    # Its "Give Feedback / Get Help" banner, printed on every error.
    litellm.suppress_debug_info = True
    return LitellmModel


class WithoutRetries(Model):
    """A LiteLLM model that makes each call once (Temporal retries it), and
    whose errors carry the provider's Retry-After where the plugin reads it."""

    def __init__(self, model: Model) -> None:
        self.model = model

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        *args: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        try:
            return await self.model.get_response(
                system_instructions, input, _once(model_settings), tools, *args, **kwargs
            )
        except APIStatusError as e:
            # LiteLLM's error has a response of its own, without the
            # provider's headers; it keeps those aside.
            answered = getattr(e, "litellm_response_headers", None) or {}
            for name in RETRY_HEADERS:
                if name in answered and name not in e.response.headers:
                    e.response.headers[name] = answered[name]
            raise

    def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        return self.model.stream_response(
            system_instructions, input, _once(model_settings), *args, **kwargs
        )


def _once(model_settings: ModelSettings) -> ModelSettings:
    """``model_settings`` with LiteLLM's retries (its own, and its clients') off."""
    once = {**(model_settings.extra_args or {}), "num_retries": 0, "max_retries": 0}
    return dataclasses.replace(model_settings, extra_args=once)


def litellm_model(model_name: str) -> Model:
    """The model of ``model_name`` (``litellm/<provider>/<model>``), through
    LiteLLM. Raises a non-retryable ApplicationError, in one line, without
    the extra."""
    try:
        model_type = litellm_model_type()
    except ImportError:
        raise ApplicationError(
            missing(model_name), type=LITELLM_MISSING, non_retryable=True
        ) from None
    model = model_type(model_name.removeprefix(LITELLM_PREFIX))
    return FreeformToolsAsFunctions(WithoutRetries(model))


class ThroughLiteLLM(ModelProvider):
    """The worker's model provider: ``litellm/`` models through LiteLLM, and
    every other name through ``others`` (the OpenAI-compatible endpoint's)."""

    def __init__(self, others: ModelProvider) -> None:
        self.others = others

    def get_model(self, model_name: str | None) -> Model:
        if through_litellm(model_name):
            return litellm_model(model_name or get_default_model())
        return self.others.get_model(model_name)
