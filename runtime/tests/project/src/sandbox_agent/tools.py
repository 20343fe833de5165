"""The agent's own tools that need the world outside its sandbox. Yours to change.

Each is a Temporal activity (``@activity.defn``): the worker registers every
one in ``ACTIVITIES``, and agent.py hands it to the agent with
``agent_tool()``. The model's call then runs on a worker, is retried
like any activity, and shows in the run's history, the starter's progress
and the ``agent_tool_calls`` metric under the tool's name. A tool must be an
activity whenever its result depends on anything but its arguments: the
network, the clock, files or processes on the worker (workflow code replays,
and must compute the same thing every time). docs/tools.md has more.
"""

from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.openai_agents import StatefulMCPServerProvider, StatelessMCPServerProvider


@activity.defn
async def current_time(zone: str) -> str:
    """The current date and time in a time zone.

    Args:
        zone: An IANA time zone name, such as "Europe/Paris" or "UTC".
    """
    try:
        found = ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        # Retrying cannot fix a wrong name: the model reads this and tries another.
        raise ApplicationError(
            f"Unknown time zone {zone!r}: use an IANA name such as 'Europe/Paris' or 'UTC'.",
            type="UnknownTimeZone",
            non_retryable=True,
        ) from None
    return datetime.now(found).isoformat(timespec="seconds")


# Every tool activity, registered on the worker (worker.py).
ACTIVITIES = [current_time]

# The MCP servers the worker connects to, each built on the worker from its
# environment (its credentials stay there); agent.py names each one with
# mcp_server(). docs/mcp.md has an example.
MCP_SERVERS: list[StatelessMCPServerProvider | StatefulMCPServerProvider] = []
