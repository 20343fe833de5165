"""The agent: its instructions, its model settings and its tools.

This is the module to change to make the agent yours. The workflow builds
the agent from ``sandbox_agent()`` at the start of every run (workflow.py),
so whatever is here reaches every new run; runs already started keep the
agent they started with only on versioned workers (docs/versioning.md).

To add a tool that reaches outside the sandbox (an API, the clock, a file on
the worker): write it as an activity in tools.py, add it to
``tools.ACTIVITIES``, and add ``told_to_the_model(activity_as_tool(tools.<it>,
...))`` to ``TOOLS`` below. docs/tools.md says when a tool may instead be a plain
``@function_tool`` (only when it computes from its arguments alone).
"""

from datetime import timedelta
from typing import Any

from agents import FunctionTool, ModelSettings, Tool
from agents.sandbox import SandboxAgent
from agents.sandbox.capabilities import Compaction, Filesystem, Shell, StaticCompactionPolicy
from agents.tool_context import ToolContext
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, CancelledError, FailureError
from temporalio.openai_agents.workflow import activity_as_tool
{%- if cookiecutter.approval == "commands_and_writes" %}

from {{ cookiecutter.package_name }} import approvals, tools
{%- elif cookiecutter.approval == "commands" %}

from {{ cookiecutter.package_name }} import approvals, sandbox_tools, tools
{%- else %}

from {{ cookiecutter.package_name }} import sandbox_tools, tools
{%- endif %}
from {{ cookiecutter.package_name }}.shared import COMPACTION_THRESHOLD, MODEL

NAME = {{ cookiecutter.project_name | tojson }}

INSTRUCTIONS = (
    "You have a sandbox with a shell and a filesystem. Use it to do the work "
    "rather than answering from memory, then report what the commands returned."
)

# The model's settings (temperature, reasoning effort, ...): the model's own
# defaults unless set here.
MODEL_SETTINGS = ModelSettings()

# A tool call that keeps failing is retried a few times (about 15 seconds of
# back-off); then the model is told it failed (told_to_the_model), and goes on
# without it. An error no retry can fix (non_retryable) is told at once.
TOOL_RETRY_POLICY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=5,
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


# The agent's own tools, beside the sandbox's shell and filesystem.
{%- if cookiecutter.approval != "none" %} To make
# one wait for a person's decision like the sandbox's commands (approvals.py),
# set needs_approval=True on it: told_to_the_model(activity_as_tool(...)) is a
# FunctionTool, whose needs_approval may also be a function of the call.
{%- endif %}
TOOLS: list[Tool] = [
    told_to_the_model(
        activity_as_tool(
            tools.current_time,
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=TOOL_RETRY_POLICY,
        )
    ),
]


def sandbox_agent() -> SandboxAgent[None]:
    """The agent of every run: a default SandboxAgent's capabilities
    (filesystem, shell, compaction; only the compaction threshold differs),
    and the tools above."""
    return SandboxAgent[None](
        name=NAME,
        instructions=INSTRUCTIONS,
        model=MODEL,
        model_settings=MODEL_SETTINGS,
        tools=TOOLS,
        capabilities=[
{%- if cookiecutter.approval == "commands_and_writes" %}
            # Every command and every file edit waits for a person (approvals.py).
            Filesystem(configure_tools=approvals.wait_for_writes),
            Shell(configure_tools=approvals.wait_for_commands),
{%- elif cookiecutter.approval == "commands" %}
            Filesystem(configure_tools=sandbox_tools.careful_filesystem),
            # Every command waits for a person (approvals.py).
            Shell(configure_tools=approvals.wait_for_commands),
{%- else %}
            # Commands in a plain shell, mistakes told to the model (sandbox_tools.py).
            Filesystem(configure_tools=sandbox_tools.careful_filesystem),
            Shell(configure_tools=sandbox_tools.plain_shell),
{%- endif %}
            Compaction(policy=StaticCompactionPolicy(threshold=COMPACTION_THRESHOLD)),
        ],
    )
