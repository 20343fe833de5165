"""How the agent's own tools (tools.py) are called: as activities, retried a
few times, and told to the model when they fail for good.

Rarely edited: agent.py hands each tool to ``agent_tool()``.
"""

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from agents import FunctionTool, Tool
from agents.tool_context import ToolContext
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, CancelledError, FailureError
from temporalio.openai_agents.workflow import activity_as_tool

# A tool call that keeps failing is retried a few times (about 15 seconds of
# back-off); then the model is told it failed (told_to_the_model), and goes on
# without it. An error no retry can fix (non_retryable) is told at once.
TOOL_RETRY_POLICY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=5,
)


def agent_tool(
    activity: Callable[..., Any], timeout: timedelta, retry_policy: RetryPolicy = TOOL_RETRY_POLICY
) -> FunctionTool:
    """The tool the model calls to run ``activity``: each call an activity,
    its failure told to the model.

    Args:
        activity: one of the service's tool activities (its tools.py).
        timeout: the longest one attempt may take.
        retry_policy: how a failed attempt is retried.

    Returns:
        The tool, for the agent's ``tools``.
    """
    return told_to_the_model(
        activity_as_tool(activity, start_to_close_timeout=timeout, retry_policy=retry_policy)
    )


def told_to_the_model(tool: Tool) -> FunctionTool:
    """``tool`` (a function tool), whose failure (once its retries are spent)
    the model reads as the tool's result and can act on, instead of ending
    the run."""
    assert isinstance(tool, FunctionTool)
    invoke = tool.on_invoke_tool

    async def on_invoke_tool(context: ToolContext[Any], arguments: str) -> Any:
        try:
            return await invoke(context, arguments)
        except ActivityError as e:
            if isinstance(e.cause, CancelledError):
                raise  # the run is being cancelled
            reason = e.cause.message if isinstance(e.cause, FailureError) else str(e)
            return f"The tool {tool.name} failed: {reason}"

    tool.on_invoke_tool = on_invoke_tool
    return tool
