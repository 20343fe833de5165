"""The model endpoint's API (OPENAI_API): OpenAI's Responses API, the
default, or Chat Completions, which many OpenAI-compatible endpoints speak
alone (vLLM and Ollama servers, a team's gateway, Azure OpenAI deployments).

An endpoint that lacks the API set is found at the first model call (a probe
at start would cost a call), which fails for good in one line naming
OPENAI_API (``NamesAMissingApi``). Chat Completions lacks freeform tools and
compaction (``FreeformToolsAsFunctions``); the runtime's own cut bounds a
conversation there. An unusable answer (no answer, a web page, JSON cut
short, an error object) fails its call at once, for good
(``refuse_unusable_answers``), and a usage count is kept within what a call
can use, so it cannot dodge a budget (``within_bounds()``).
"""

import dataclasses
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx2
from agents import (
    CustomTool,
    FunctionTool,
    ModelResponse,
    ModelSettings,
    Tool,
    TResponseInputItem,
    Usage,
)
from agents.items import TResponseStreamEvent
from agents.models.default_models import get_default_model
from agents.models.interface import Model
from openai import APIStatusError, NotFoundError
from openai.types.responses import (
    ResponseCompletedEvent,
    ResponseCustomToolCall,
    ResponseFunctionToolCall,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
)
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from sandbox_agent_runtime.display import visible, without_credentials
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
                # deepest cause.
                raise ApplicationError(
                    missing_api(self.api, cause), type=MISSING_API, non_retryable=True
                ) from None
            raise


def _model_name(input: ExecuteActivityInput) -> str | None:
    """The model a model call names (its input's ``model_name``)."""
    given = input.args[0] if input.args else None
    name = given.get("model_name") if isinstance(given, dict) else None
    return name if isinstance(name, str) else None


# The type of the failure a model call fails with when the endpoint answered
# a success that holds no answer.
UNUSABLE_ANSWER = "ModelAnswerUnusable"
# How many characters of such an answer its line shows.
SHOWN_OF_AN_ANSWER = 200
# The most tokens a model call counts, each way, whatever its endpoint
# reports: five times the largest context window (2M tokens).
MOST_TOKENS = 10_000_000


class UnusableAnswer(APIStatusError):
    """A success (2xx) from the model endpoint that holds no answer; its
    message is the line that says so. An OpenAIError, which the OpenAI
    client hands on as it is when its HTTP client raises it."""


async def refuse_unusable_answers(response: httpx2.Response) -> None:
    """The model client's hook on each response it receives: a success
    whose body is not a JSON object, or holds an error, raises
    UnusableAnswer. A streamed answer is left to the client."""
    if not response.is_success or "event-stream" in response.headers.get("content-type", ""):
        return
    await response.aread()
    what = unusable(response.content, response.headers.get("content-type", ""))
    if what is not None:
        url = without_credentials(str(response.request.url))
        line = f"The model endpoint answered {response.status_code} {response.reason_phrase} "
        raise UnusableAnswer(f"{line}to {url} with {what}", response=response, body=None)


def unusable(body: bytes, content_type: str) -> str | None:
    """What a successful answer whose body is ``body`` (of ``content_type``)
    holds instead of an answer, in words, or None when it is a JSON object
    without an error."""
    try:
        data = json.loads(body)
    except ValueError as e:
        text = body.decode(errors="replace")
        if not text.strip():
            return "an empty body"
        if "json" in content_type:
            return f"JSON it cannot read ({e}): {trimmed(text)}"
        kind = content_type.partition(";")[0].strip() or "a body"
        return (
            f"{visible(kind)}, not JSON: {trimmed(text)} (OPENAI_BASE_URL must lead to the "
            "model API itself)"
        )
    if not isinstance(data, dict):
        return f"JSON that is not an answer: {trimmed(json.dumps(data))}"
    error = data.get("error")
    if not error:
        return None
    if isinstance(error, dict):
        said = [error.get("code") or error.get("type"), error.get("message")]
        error = ": ".join(str(part) for part in said if part) or json.dumps(error)
    return f"an error: {trimmed(str(error))}"


def trimmed(text: str) -> str:
    """``text`` on one line, visibly (display.visible()), cut at
    SHOWN_OF_AN_ANSWER characters."""
    line = " ".join(text.split())
    cut = line[:SHOWN_OF_AN_ANSWER] + ("..." if len(line) > SHOWN_OF_AN_ANSWER else "")
    return repr(visible(cut))


def within_bounds(usage: Usage) -> list[str]:
    """Bring ``usage`` (a model call's, as its endpoint reported it) within
    what a model call can use: its input and output tokens each from 0 to
    MOST_TOKENS, the cached input tokens no more than the input ones, the
    reasoning tokens no more than the output ones, the total their sum.
    Returns each count it changed, as "name reported as counted"."""
    changed: list[str] = []

    def bound(name: str, value: Any, most: int) -> int:
        try:
            number = int(value or 0)
        except (TypeError, ValueError, OverflowError):
            number = 0
        counted = min(max(number, 0), most)
        if counted != value:
            changed.append(f"{name} {value!r} as {counted:,}")
        return counted

    usage.input_tokens = bound("input_tokens", usage.input_tokens, MOST_TOKENS)
    usage.output_tokens = bound("output_tokens", usage.output_tokens, MOST_TOKENS)
    details = usage.input_tokens_details
    details.cached_tokens = bound("cached_tokens", details.cached_tokens, usage.input_tokens)
    output = usage.output_tokens_details
    output.reasoning_tokens = bound(
        "reasoning_tokens", output.reasoning_tokens, usage.output_tokens
    )
    if changed:
        usage.total_tokens = usage.input_tokens + usage.output_tokens
    return changed


def streamed_usage(answer: Any) -> Any:
    """The usage a streamed model call's answer (its stream's events)
    reports, in its completed event; None without one."""
    if not isinstance(answer, list):
        return None
    for event in reversed(answer):
        response = getattr(event, "response", None)
        if getattr(event, "type", None) == "response.completed" and response is not None:
            return response.usage
    return None


class ChecksTheAnswer(Interceptor):
    """A model call the endpoint answered with a success that holds no
    answer (UnusableAnswer) fails at once, for good, with its line; the
    usage of one it answered is counted within bounds (within_bounds()),
    and a count out of them is said in the worker's log."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ChecksTheAnswer(next)


class _ChecksTheAnswer(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        if info.activity_type not in MODEL_ACTIVITIES:
            return await super().execute_activity(input)
        try:
            answer = await super().execute_activity(input)
        except ApplicationError as e:
            # The plugin's failure for any status error: retried unless the
            # answer said otherwise. This one is for good.
            if isinstance(e.__cause__, UnusableAnswer):
                raise ApplicationError(
                    e.__cause__.message, type=UNUSABLE_ANSWER, non_retryable=True
                ) from None
            raise
        # Streamed, the usage is in the stream's last event (streaming.py).
        usage = answer.usage if isinstance(answer, ModelResponse) else streamed_usage(answer)
        if usage is not None:
            changed = within_bounds(usage)
            if changed:
                print(
                    f"The model endpoint reported usage no model call has for run "
                    f"{info.workflow_id}: counted {', '.join(changed)} (each count from 0 to "
                    f"{MOST_TOKENS:,} tokens).",
                    file=sys.stderr,
                    flush=True,
                )
        return answer


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
        freeform, items, settings, given = _as_chat_completions(input, model_settings, tools)
        response = await self.model.get_response(
            system_instructions, items, settings, given, *args, **kwargs
        )
        response.output = [_call_as_freeform(item, freeform) for item in response.output]
        return response

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        *args: Any,
        **kwargs: Any,
    ) -> AsyncIterator[TResponseStreamEvent]:
        """As ``get_response``, streamed (LiteLLM's models stream over Chat
        Completions): each item the stream carries, in its output item's
        events and in its completed response, made freeform again."""
        freeform, items, settings, given = _as_chat_completions(input, model_settings, tools)
        stream = self.model.stream_response(
            system_instructions, items, settings, given, *args, **kwargs
        )
        # Closed with this one: a caller that stops reading (a retry, a worker
        # dropping the run) closes the model's stream at once, not at the
        # garbage collector's next pass.
        try:
            async for event in stream:
                yield _event_as_freeform(event, freeform)
        finally:
            close = getattr(stream, "aclose", None)
            if close is not None:
                await close()


def _as_chat_completions(
    input: str | list[TResponseInputItem], model_settings: ModelSettings, tools: list[Tool]
) -> tuple[set[str], str | list[TResponseInputItem], ModelSettings, list[Tool]]:
    """A model call's input, settings and tools as Chat Completions takes
    them, and the names of its freeform tools."""
    # The Responses API's own compaction, which Chat Completions lacks (its
    # client refuses the argument): the chain bounds a conversation. (The
    # sandbox agent's Compaction capability puts it in extra_args.)
    extra = {
        k: v for k, v in (model_settings.extra_args or {}).items() if k != "context_management"
    }
    settings = dataclasses.replace(
        model_settings, context_management=None, extra_args=extra or None
    )
    freeform = {tool.name for tool in tools if isinstance(tool, CustomTool)}
    if not freeform:
        return freeform, input, settings, tools
    given: list[Tool] = [
        _as_function(tool) if isinstance(tool, CustomTool) else tool for tool in tools
    ]
    items = (
        input if isinstance(input, str) else [_item_as_function(item, freeform) for item in input]
    )
    return freeform, items, settings, given


def _event_as_freeform(event: TResponseStreamEvent, freeform: set[str]) -> TResponseStreamEvent:
    """A streamed event whose item (an output item's) or response (the
    completed one's) holds a call of a freeform tool made as a function's,
    with the freeform call instead."""
    if not freeform:
        return event
    if isinstance(event, ResponseOutputItemAddedEvent | ResponseOutputItemDoneEvent):
        event.item = _call_as_freeform(event.item, freeform)
    elif isinstance(event, ResponseCompletedEvent):
        event.response.output = [
            _call_as_freeform(item, freeform) for item in event.response.output
        ]
    return event
