"""Models no OpenAI-compatible endpoint serves (Anthropic, Bedrock, Vertex
and the rest), through LiteLLM: the extra ``sandbox-agent-runtime[litellm]``.

A model named ``litellm/<provider>/<model>`` has its calls made by LiteLLM,
with the provider's own credentials from the worker's environment, and its
tools given as over Chat Completions. LiteLLM never retries a call itself:
Temporal does, waiting the provider's Retry-After. LiteLLM is kept offline
(its price table read from its own copy) and imported at the worker's start,
not in the middle of a model call where it would hold up every other run; a
``litellm/`` model without the extra is refused in one line naming what to
install.
"""

import dataclasses
from collections.abc import AsyncIterator, Callable
from typing import Any

from agents import ModelResponse, ModelSettings, Tool, TResponseInputItem
from agents.items import TResponseStreamEvent
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
            _add_retry_headers(e)
            raise

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        *args: Any,
        **kwargs: Any,
    ) -> AsyncIterator[TResponseStreamEvent]:
        stream = self.model.stream_response(
            system_instructions, input, _once(model_settings), *args, **kwargs
        )
        try:
            async for event in stream:
                yield event
        except APIStatusError as e:
            _add_retry_headers(e)
            raise
        finally:
            close = getattr(stream, "aclose", None)
            if close is not None:
                await close()


def _add_retry_headers(e: APIStatusError) -> None:
    """Give LiteLLM's error ``e``'s response the provider's Retry-After
    headers: its response is one of its own, without them (it keeps them
    aside), and the plugin reads them there."""
    answered = getattr(e, "litellm_response_headers", None) or {}
    for name in RETRY_HEADERS:
        if name in answered and name not in e.response.headers:
            e.response.headers[name] = answered[name]


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
