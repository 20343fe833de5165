"""The model endpoint's API (OPENAI_API): OpenAI's Responses API, the
default, or Chat Completions, which many OpenAI-compatible endpoints speak
alone (vLLM and Ollama servers, a team's gateway, Azure OpenAI deployments
without the Responses API). The worker's model provider takes the one set
(capacity.py); an endpoint that lacks it is found at the first model call,
not by a probe at start, which would cost a call: the call fails, for good,
with one line that names OPENAI_API and what to set (``NamesAMissingApi``).

Chat Completions lacks two things the agent's capabilities use, which
``FreeformToolsAsFunctions`` makes up for: freeform tools (the sandbox's
``apply_patch``), offered as functions of one string and their calls turned
back; and ``context_management``, the Responses API's compaction of a long
conversation (the Compaction capability's), left out. What bounds a
conversation there is the runtime's own cut (chain.bounded()): each model
call's input, and what one run of a chain hands the next, stays within
CONVERSATION_LIMIT bytes: the request and the latest items, with a note
saying how many earlier items were left out.

A model named ``litellm/<provider>/<model>`` is no endpoint's: it goes
through LiteLLM (litellm_models.py), whatever OPENAI_API says, and a 404 it
meets is its provider's, not a missing API's."""

import dataclasses
import json
from typing import Any

from agents import CustomTool, FunctionTool, ModelResponse, ModelSettings, Tool, TResponseInputItem
from agents.models.default_models import get_default_model
from agents.models.interface import Model
from openai import NotFoundError
from openai.types.responses import ResponseCustomToolCall, ResponseFunctionToolCall
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from sandbox_agent_runtime.shared import MODEL_ACTIVITIES

RESPONSES, CHAT_COMPLETIONS = "responses", "chat_completions"
# Each API: its name in a sentence, and its path under OPENAI_BASE_URL.
APIS = {
    RESPONSES: ("the Responses API", "/responses"),
    CHAT_COMPLETIONS: ("Chat Completions", "/chat/completions"),
}
# The type of the failure a missing API fails the model call with.
MISSING_API = "ModelApiMissing"

# The prefix of a model name that goes through LiteLLM (the Agents SDK's own
# MultiProvider routes the same names there).
LITELLM_PREFIX = "litellm/"


def through_litellm(model_name: str | None) -> bool:
    """Whether a model call of ``model_name`` (None: the default model,
    OPENAI_DEFAULT_MODEL or the Agents SDK's) goes through LiteLLM."""
    return (model_name or get_default_model()).startswith(LITELLM_PREFIX)


def missing_api(api: str, error: NotFoundError) -> str:
    """The line for an endpoint that answered 404 to ``api``'s path."""
    name, path = APIS[api]
    other = CHAT_COMPLETIONS if api == RESPONSES else RESPONSES
    url = str(error.request.url) if error.request is not None else path
    return (
        f"The model endpoint answered 404 Not Found to {url}: it does not serve {name} "
        f"(OPENAI_API={api}); if it serves {APIS[other][0]}, set OPENAI_API={other}, or "
        f"point OPENAI_BASE_URL at an endpoint that serves {name}"
    )


class NamesAMissingApi(Interceptor):
    """A model call the endpoint answers 404 (not for an unknown model: for
    the API's path) fails with the line that says what to set."""

    def __init__(self, api: str) -> None:
        self.api = api

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _NamesAMissingApi(next, self.api)


class _NamesAMissingApi(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, api: str) -> None:
        super().__init__(next)
        self.api = api

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        try:
            return await super().execute_activity(input)
        except ApplicationError as e:
            cause = e.__cause__
            if (
                activity.info().activity_type in MODEL_ACTIVITIES
                and not through_litellm(_model_name(input))
                and isinstance(cause, NotFoundError)
                and getattr(cause, "code", None) != "model_not_found"
            ):
                # Its own line, not the 404's: a run's failure says the
                # deepest cause (failures.py).
                raise ApplicationError(
                    missing_api(self.api, cause), type=MISSING_API, non_retryable=True
                ) from None
            raise


def _model_name(input: ExecuteActivityInput) -> str | None:
    """The model a model call names (its input's ``model_name``)."""
    given = input.args[0] if input.args else None
    name = given.get("model_name") if isinstance(given, dict) else None
    return name if isinstance(name, str) else None


# A freeform tool (the sandbox's apply_patch) as Chat Completions takes a
# tool: a function of one string argument.
FREEFORM_ARGUMENT = "input"


def _as_function(tool: CustomTool) -> FunctionTool:
    async def never(*_: Any) -> str:  # the model only reads its schema
        raise AssertionError("a model's copy of a tool is never called")

    return FunctionTool(
        name=tool.name,
        description=tool.description,
        params_json_schema={
            "type": "object",
            "properties": {
                FREEFORM_ARGUMENT: {
                    "type": "string",
                    "description": "The tool's whole input, exactly as its description says.",
                }
            },
            "required": [FREEFORM_ARGUMENT],
            "additionalProperties": False,
        },
        on_invoke_tool=never,
        strict_json_schema=True,
    )


def _item_as_function(item: Any, freeform: set[str]) -> Any:
    """A conversation item of a freeform tool as one of a function tool."""
    if not isinstance(item, dict):
        return item
    if item.get("type") == "custom_tool_call" and item.get("name") in freeform:
        return {
            "type": "function_call",
            "call_id": item["call_id"],
            "name": item["name"],
            "arguments": json.dumps({FREEFORM_ARGUMENT: item.get("input", "")}),
            **({"id": item["id"]} if item.get("id") else {}),
        }
    if item.get("type") == "custom_tool_call_output":
        return {
            "type": "function_call_output",
            "call_id": item["call_id"],
            "output": item.get("output", ""),
        }
    return item


def _call_as_freeform(item: Any, freeform: set[str]) -> Any:
    """The model's call of a freeform tool, made as a function's, as the
    freeform call the agent's tool takes."""
    if isinstance(item, ResponseFunctionToolCall) and item.name in freeform:
        try:
            text = json.loads(item.arguments).get(FREEFORM_ARGUMENT, "")
        except (ValueError, AttributeError):
            text = item.arguments
        return ResponseCustomToolCall(
            call_id=item.call_id,
            input=str(text),
            name=item.name,
            type="custom_tool_call",
            id=item.id,
        )
    return item


class FreeformToolsAsFunctions(Model):
    """A Chat Completions model, given freeform tools (which that API lacks)
    as functions of one string, and their calls back as freeform calls: the
    agent's tools run as they do over the Responses API; and given no
    ``context_management``, the Responses API's compaction."""

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
        # The Responses API's own compaction, which Chat Completions lacks
        # (its client refuses the argument): the chain bounds a conversation.
        # (The sandbox agent's Compaction capability puts it in extra_args.)
        extra = {
            k: v for k, v in (model_settings.extra_args or {}).items() if k != "context_management"
        }
        model_settings = dataclasses.replace(
            model_settings, context_management=None, extra_args=extra or None
        )
        freeform = {tool.name for tool in tools if isinstance(tool, CustomTool)}
        if not freeform:
            return await self.model.get_response(
                system_instructions, input, model_settings, tools, *args, **kwargs
            )
        given: list[Tool] = [
            _as_function(tool) if isinstance(tool, CustomTool) else tool for tool in tools
        ]
        items = (
            input
            if isinstance(input, str)
            else [_item_as_function(item, freeform) for item in input]
        )
        response = await self.model.get_response(
            system_instructions, items, model_settings, given, *args, **kwargs
        )
        response.output = [_call_as_freeform(item, freeform) for item in response.output]
        return response

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        return self.model.stream_response(*args, **kwargs)
