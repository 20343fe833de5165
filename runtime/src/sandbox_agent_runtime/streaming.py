"""A run's stream: the model's text as it is written, and the start and end
of each model turn and tool call, in the run's Workflow Stream
(``temporalio.contrib.workflow_streams``), offset-addressed.

Two topics. ``model``: the model's raw stream events, published by the
plugin's streaming model activity in batches (one signal each
``streaming_batch_interval``, so history grows by batches, not tokens).
``run``: the workflow's own, published in memory (no history event): each
turn's and tool call's start and end; a turn's end carries its whole text.

Whether a run streams is decided once, at its start, in a replay-safe way
(``streamed_run()``): a run started before streaming existed replays whole.
``read_run_stream()`` is how a client reads it."""

import asyncio
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from agents import Agent, Model, ModelProvider, ModelResponse, RunContextWrapper, RunHooks, Tool
from agents.run import get_default_agent_runner
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseTextDeltaEvent,
    ResponseUsage,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails
from temporalio import workflow
from temporalio.contrib.workflow_streams import (
    PollInput,
    WorkflowStream,
    WorkflowStreamState,
)

# Private names of temporalio 1.35's workflow_streams: the poll update's name,
# and the failure type its client waits and polls again on.
from temporalio.contrib.workflow_streams._stream import _POLL as POLL
from temporalio.contrib.workflow_streams._types import STREAM_DRAINING_ERROR_TYPE
from temporalio.exceptions import ApplicationError
from temporalio.openai_agents import ModelActivityParameters

from sandbox_agent_runtime.shared import RUN_TOPIC

# How much of its stream a run hands on to the next run of its chain: its
# latest model turns whose events fit here (the latest one always). A reader
# that fell behind by less reads on across the continue-as-new, missing
# nothing; the next run's history starts with at most this much more.
CARRIED_STREAM_BYTES = 256 * 1024

# The patch that records, in a run's history, that it streams.
STREAMED = "model-turns-streamed"


@dataclass
class StreamingParameters(ModelActivityParameters):
    """The plugin's model parameters, saying whether new runs stream
    (``stream_new_runs``: the worker's STREAM_MODEL_TURNS). Its topic is
    always set, so a run that streams goes on streaming on any worker."""

    stream_new_runs: bool = True


def streamed_run() -> bool:
    """Whether this run streams, decided at its start and recorded in its
    history (a patch marker), so its replay decides the same: a run begun
    before streaming existed, or on a worker that streams no new run, has
    no marker and stays whole; one that streams goes on streaming."""
    params = getattr(get_default_agent_runner(), "model_params", None)
    if getattr(params, "streaming_topic", None) is None:
        return False
    if workflow.unsafe.is_replaying() or getattr(params, "stream_new_runs", False):
        # Replayed: whether the marker is there; new: it is written.
        return workflow.patched(STREAMED)
    return False


def turn_text(response: ModelResponse) -> str:
    """The text a model turn wrote (its messages' output text, in order)."""
    return "".join(
        part.text
        for item in response.output
        if item.type == "message"
        for part in item.content
        if part.type == "output_text"
    )


class RunStream:
    """The run's Workflow Stream (made in the workflow's ``__init__``, from
    what the chain's earlier run handed on), and where its model turns
    started."""

    def __init__(self, stream: WorkflowStream) -> None:
        self.stream = stream
        self.topic = stream.topic(RUN_TOPIC)
        # Where its model turns started: the first is where what the
        # chain's earlier run handed on starts (a turn's start, or 0).
        self.turns: list[int] = [stream.get_state().base_offset]
        # Whether the run waits for its host's local activity (phases/begin.py).
        self.choosing_host = False
        workflow.set_update_handler(POLL, stream._on_poll, validator=self._validate_poll)  # noqa: SLF001

    def _validate_poll(self, poll: PollInput) -> None:
        """A reader's poll while the run chooses its host is refused, as a
        draining stream refuses it (its client polls again after its
        cooldown): a poll accepted in the workflow task that resolves the
        host's local activity was replayed after that activity's result
        (Core gives it alone on replay), in another order than it ran
        (TMPRL1100)."""
        if self.choosing_host:
            raise ApplicationError("The run chooses its host.", type=STREAM_DRAINING_ERROR_TYPE)
        self.stream._validate_poll(poll)  # noqa: SLF001

    def publish(self, kind: str, agent: Agent[Any], **more: str) -> None:
        """Publish one of the workflow's own events (in memory: no history event)."""
        if kind == "turn_started":
            self.turns.append(self.stream._on_offset())  # noqa: SLF001 (its offset query)
        self.topic.publish({"kind": kind, "agent": agent.name, **more})

    def handed_on(self) -> WorkflowStreamState:
        """What the next run of the chain starts its stream from: this one's,
        from the start of its latest model turns that fit
        CARRIED_STREAM_BYTES (a client reading from an offset dropped reads
        from the earliest kept). Its readers are released first
        (``detach_pollers()``, before the run waits for its handlers)."""
        state = self.stream.get_state()
        sizes = [len(item.data) for item in state.log]
        kept = self.turns[-1]
        for start in reversed(self.turns[:-1]):
            if sum(sizes[start - state.base_offset :]) > CARRIED_STREAM_BYTES:
                break
            kept = start
        if kept == state.base_offset:
            return state
        self.stream.truncate(kept)
        return self.stream.get_state()


class Published(RunHooks[Any]):
    """``hooks`` (the run's own: budgets, history), with each model turn's
    and tool call's start and end published on the run's stream."""

    def __init__(self, hooks: RunHooks[Any], stream: RunStream) -> None:
        self.hooks = hooks
        self.stream = stream

    async def on_llm_start(
        self,
        context: RunContextWrapper[Any],
        agent: Agent[Any],
        system_prompt: str | None,
        input_items: list[Any],
    ) -> None:
        # After the run's own hooks: a turn its budget stops never starts.
        await self.hooks.on_llm_start(context, agent, system_prompt, input_items)
        self.stream.publish("turn_started", agent)

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        self.stream.publish("turn_ended", agent, text=turn_text(response))
        await self.hooks.on_llm_end(context, agent, response)

    async def on_agent_start(self, context: Any, agent: Agent[Any]) -> None:
        await self.hooks.on_agent_start(context, agent)

    async def on_agent_end(self, context: Any, agent: Agent[Any], output: Any) -> None:
        await self.hooks.on_agent_end(context, agent, output)

    async def on_handoff(
        self, context: RunContextWrapper[Any], from_agent: Agent[Any], to_agent: Agent[Any]
    ) -> None:
        await self.hooks.on_handoff(context, from_agent, to_agent)

    async def on_tool_start(
        self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool
    ) -> None:
        await self.hooks.on_tool_start(context, agent, tool)
        self.stream.publish("tool_started", agent, tool=tool.name)

    async def on_tool_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool, result: object
    ) -> None:
        self.stream.publish("tool_ended", agent, tool=tool.name)
        await self.hooks.on_tool_end(context, agent, tool, result)


def _response(model_response: ModelResponse, output: list[Any]) -> Response:
    usage = model_response.usage
    return Response(
        id=model_response.response_id or "resp_streamed",
        created_at=0,
        model="",
        object="response",
        output=output,
        parallel_tool_calls=False,
        tool_choice="auto",
        tools=[],
        usage=ResponseUsage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            total_tokens=usage.input_tokens + usage.output_tokens,
            input_tokens_details=InputTokensDetails(
                cached_tokens=usage.input_tokens_details.cached_tokens, cache_write_tokens=0
            ),
            output_tokens_details=OutputTokensDetails(
                reasoning_tokens=usage.output_tokens_details.reasoning_tokens
            ),
        ),
    )


async def stream_of(
    model_response: ModelResponse, chars: int = 0, every: float = 0.0
) -> AsyncIterator[Any]:
    """``model_response`` as the Responses API streams it: created, its
    messages' text in deltas of ``chars`` characters (0: each whole), one
    each ``every`` seconds, then completed with the whole response.

    Args:
        model_response: the whole response.
        chars: the characters of each delta (0: a message's text in one).
        every: the seconds between two deltas.

    Returns:
        An async iterator of the Responses API's stream events.
    """
    sequence = 0
    yield ResponseCreatedEvent(
        response=_response(model_response, []), sequence_number=sequence, type="response.created"
    )
    for index, item in enumerate(model_response.output):
        if item.type != "message":
            continue
        text = "".join(part.text for part in item.content if part.type == "output_text")
        step = chars or max(1, len(text))
        for start in range(0, len(text), step):
            if every:
                await asyncio.sleep(every)
            sequence += 1
            yield ResponseTextDeltaEvent(
                content_index=0,
                delta=text[start : start + step],
                item_id=item.id,
                logprobs=[],
                output_index=index,
                sequence_number=sequence,
                type="response.output_text.delta",
            )
    yield ResponseCompletedEvent(
        response=_response(model_response, list(model_response.output)),
        sequence_number=sequence + 1,
        type="response.completed",
    )


# Text deltas that come within this long of each other (or up to this many
# characters) go on as one: the model activity returns every event it
# publishes, and one a token would pass Temporal's 2 MB payload limit on an
# answer of some ten thousand tokens.
COALESCE_SECONDS = 0.05
COALESCE_CHARS = 4096


# The end of a model's stream, in the queue it is handed over by.
_ENDED = object()


@dataclass(frozen=True)
class _Failed:
    """What ended a model's stream with an error, handed over in its queue."""

    error: Exception


async def pumped(events: Callable[[], AsyncIterator[Any]], into: "asyncio.Queue[Any]") -> None:
    """Read the stream ``events()`` gives to its end (or its error), each
    event put ``into`` the queue as it comes, then its end, always: its
    reader never waits for ever. The stream is begun, read and closed in
    this one task: the Agents SDK keeps its tracing spans in context
    variables, which a stream that moved from one task to another would
    reset in the wrong context."""
    ended: Any = _ENDED
    stream = None
    try:
        # A model without a stream may raise here (``def stream_response``).
        stream = events()
        async for event in stream:
            into.put_nowait(event)
    except Exception as e:  # handed over: the model activity fails with it
        ended = _Failed(e)
    except BaseException:
        ended = _Failed(RuntimeError("the model's stream was stopped before its end"))
        raise
    finally:
        into.put_nowait(ended)
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()


async def coalesced(first: Any, queue: "asyncio.Queue[Any]") -> AsyncIterator[Any]:
    """``first`` then the events ``queue`` hands over (``pumped``), to their
    end, consecutive text deltas of one part joined while they come within
    COALESCE_SECONDS of the first of them. A joined delta goes on when that
    time is up, whether or not another event came: a model that pauses
    mid-answer has its text so far published."""
    held: Any = None
    began = 0.0
    texts: list[str] = []

    def joined() -> Any:
        return held.model_copy(update={"delta": "".join(texts)})

    event = first
    while event is not _ENDED:
        if isinstance(event, _Failed):
            raise event.error
        if getattr(event, "type", None) == "response.output_text.delta":
            same = held is not None and (held.item_id, held.content_index) == (
                event.item_id,
                event.content_index,
            )
            if same and sum(len(text) for text in texts) < COALESCE_CHARS:
                texts.append(event.delta)
            else:
                if held is not None:
                    yield joined()
                held, began, texts = event, time.monotonic(), [event.delta]
        else:
            if held is not None:
                yield joined()
                held, texts = None, []
            yield event
        if held is not None and queue.empty():
            left = COALESCE_SECONDS - (time.monotonic() - began)
            try:
                event = await asyncio.wait_for(queue.get(), max(left, 0.001))
                continue
            except TimeoutError:
                yield joined()
                held, texts = None, []
        event = await queue.get()
    if held is not None:
        yield joined()


class WholeWhenUnstreamed(Model):
    """A model that streams if it can; one that cannot (its
    ``stream_response`` not implemented) gives its turns whole, through the
    same stream (its text in one delta), the worker's log saying so once."""

    told: ClassVar[set[str]] = set()

    def __init__(self, model: Model) -> None:
        self.model = model

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return await self.model.get_response(*args, **kwargs)

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        queue: asyncio.Queue[Any] = asyncio.Queue()
        pump = asyncio.create_task(
            pumped(lambda: self.model.stream_response(*args, **kwargs), queue)
        )
        try:
            first = await queue.get()
            if first is _ENDED or (
                isinstance(first, _Failed) and isinstance(first.error, NotImplementedError)
            ):
                # Not implemented, or a stream without a single event (an
                # endpoint that answers otherwise): asked again, whole, its
                # answer checked as any whole one is.
                name = type(self.model).__name__
                if name not in self.told:
                    self.told.add(name)
                    print(
                        f"The model {name} did not stream: its turns come whole.", file=sys.stderr
                    )
                async for event in stream_of(await self.model.get_response(*args, **kwargs)):
                    yield event
                return
            async for event in coalesced(first, queue):
                yield event
        finally:
            # Read no further (a call cancelled, a failure): the stream is
            # closed in its own task.
            pump.cancel()

    async def close(self) -> None:
        await self.model.close()


class StreamingProvider(ModelProvider):
    """``provider``, its models wrapped in ``WholeWhenUnstreamed``."""

    def __init__(self, provider: ModelProvider) -> None:
        self.provider = provider

    def get_model(self, model_name: str | None) -> Model:
        return WholeWhenUnstreamed(self.provider.get_model(model_name))

    async def aclose(self) -> None:
        await self.provider.aclose()
