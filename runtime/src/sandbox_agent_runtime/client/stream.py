"""Reading a run's stream, which the worker writes (streaming.py): the
model's text as it is written, and the start and end of each model turn and
tool call, by offset, across the runs of its chain. Free of the Agents SDK:
the starter and the API read it."""

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.contrib.workflow_streams import WorkflowStreamClient

from sandbox_agent_runtime.shared import MODEL_TOPIC, RUN_TOPIC


@dataclass(frozen=True)
class StreamEvent:
    """One event of a run's stream, as ``read_run_stream()`` gives it.

    ``kind``: "delta" (``text``: what the model wrote next), "turn_started",
    "turn_ended" (``text``: the turn's whole text, which its deltas
    concatenate to), "turn_restarted" (the model call was redone, after its
    worker was lost: drop the turn's deltas so far, they come again),
    "tool_started" or "tool_ended" (``tool``: its name). ``offset``: where
    it is in the stream (read again after it: ``from_offset=offset + 1``).
    ``turn``: the offset of its turn's start (-1 when read from inside a
    turn whose start was not read); ``agent``: the agent whose turn it is."""

    kind: str
    offset: int
    turn: int = -1
    agent: str = ""
    text: str = ""
    tool: str = ""


async def read_run_stream(
    client: Client,
    workflow_id: str,
    from_offset: int = 0,
    poll_every: timedelta = timedelta(milliseconds=100),
) -> AsyncIterator[StreamEvent]:
    """Read a run's stream as it is written, across the runs of its chain,
    until its run ends (what it holds by then included).

    Args:
        client: a client of the run's namespace.
        workflow_id: the run's workflow id.
        from_offset: the first offset to read (0: from the start; an offset
            a continue-as-new dropped reads from the earliest turn kept).
        poll_every: how long to wait between two reads once caught up (each
            read is an update in the run's history).

    Returns:
        An async iterator of ``StreamEvent``, in the stream's order.
    """
    stream = WorkflowStreamClient.create(client, workflow_id)
    turn, agent, written = -1, "", False
    async for item in stream.subscribe(
        [MODEL_TOPIC, RUN_TOPIC], from_offset, poll_cooldown=poll_every
    ):
        data: dict[str, Any] = item.data if isinstance(item.data, dict) else {}
        kind = str(data.get("kind") if item.topic == RUN_TOPIC else data.get("type"))
        if kind == "turn_started":
            turn, agent, written = item.offset, str(data.get("agent", "")), False
        if item.topic == RUN_TOPIC:
            yield StreamEvent(
                kind,
                item.offset,
                turn,
                str(data.get("agent", agent)),
                str(data.get("text", "")),
                str(data.get("tool", "")),
            )
        elif kind == "response.output_text.delta":
            written = True
            yield StreamEvent("delta", item.offset, turn, agent, str(data.get("delta", "")))
        elif kind == "response.created" and written:
            written = False
            yield StreamEvent("turn_restarted", item.offset, turn, agent)


async def stream_offset(client: Client, workflow_id: str) -> int:
    """Where a run's stream ends now: the offset its next event will have
    (a query, which a worker answers).

    Args:
        client: a client of the run's namespace.
        workflow_id: the run's workflow id.

    Returns:
        The offset to read from for what the run writes from now on.
    """
    return await WorkflowStreamClient.create(client, workflow_id).get_offset()
