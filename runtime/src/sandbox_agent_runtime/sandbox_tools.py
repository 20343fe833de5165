"""The sandbox's tools as the agent gets them: plain shells, and mistakes
the model can read.

Every command runs in a plain shell, so the command the run's history shows
(and, with approvals, the one a person approves) is all that runs
(``command_of()``). A call the model got wrong (arguments that are not the
tool's, an empty command, a path outside the workspace, a malformed patch)
reaches the model as that tool's error and the run goes on, instead of
ending the whole run (until the SDK's version the Temporal plugin requires
does this itself); failures of the sandbox itself still end the run.
"""

import json
from dataclasses import dataclass
from typing import Any, Final

from agents.sandbox.capabilities.filesystem import FilesystemToolSet
from agents.sandbox.capabilities.shell import ShellToolSet
from agents.sandbox.capabilities.tools.shell_tool import ExecCommandArgs
from agents.sandbox.errors import SandboxError
from agents.tool import CustomTool, FunctionTool
from agents.tool_context import ToolContext
from pydantic import ValidationError

# The run configuration's answer to a call of a tool the agent lacks.
TOLD_WHEN_NOT_FOUND: Final = "return_error_to_model"

# The shells a command may name: the one it runs in anyway.
PLAIN_SHELLS = (None, "sh", "/bin/sh")
# Arguments the model is not offered (each command runs in PLAIN_SHELLS).
NOT_OFFERED = ("shell", "login")


class BadCall(ValueError):
    """A tool call the model got wrong; its message is the tool's result."""


@dataclass(frozen=True)
class Command:
    """A command as it will run: in ``sh -c``, in ``workdir`` (None: the
    workspace), with the SDK's other arguments as given."""

    arguments: ExecCommandArgs
    # The model asked for a login shell, which it does not get.
    asked_for_login: bool = False


def command_of(raw_arguments: str) -> Command:
    """The command an ``exec_command`` call runs; ``BadCall`` if it runs none.

    The one reading of a command's arguments: the command that runs, what
    the model is told of a bad call and, with approvals, the request a
    person approves all come from it. It runs in a plain ``sh -c``: never a
    login shell (which would first run ``$HOME/.profile``, a file the agent
    could have written) nor another shell the model names (refused;
    ``login`` is accepted and has no effect)."""
    try:
        arguments = json.loads(raw_arguments or "{}")
    except ValueError as e:
        raise BadCall(f"its arguments are not JSON ({e})") from e
    if not isinstance(arguments, dict):
        raise BadCall('its arguments must be a JSON object, such as {"cmd": "ls"}')
    unknown = sorted(set(arguments) - set(ExecCommandArgs.model_fields))
    if unknown:
        known = ", ".join(name for name in ExecCommandArgs.model_fields if name not in NOT_OFFERED)
        raise BadCall(f"it has no argument {', '.join(unknown)} (it takes {known})")
    if arguments.get("shell") not in PLAIN_SHELLS:
        raise BadCall(
            f"commands run in sh -c only, not in {arguments['shell']!r}: leave out 'shell'"
        )
    asked_for_login = bool(arguments.get("login", False))
    try:
        parsed = ExecCommandArgs.model_validate({**arguments, "shell": None, "login": False})
    except ValidationError as e:
        raise BadCall(one_line(e)) from e
    if not parsed.cmd.strip():
        raise BadCall("its command is empty")
    return Command(parsed, asked_for_login)


def one_line(error: ValidationError) -> str:
    """What pydantic found wrong, in one line."""
    return "; ".join(
        f"{'.'.join(str(part) for part in problem['loc']) or 'arguments'}: {problem['msg']}"
        for problem in error.errors()
    )


def tell_mistakes(tool: FunctionTool | CustomTool) -> None:
    """Make a call the model got wrong return the reason as the tool's
    result instead of ending the run."""
    invoke = tool.on_invoke_tool

    async def on_invoke_tool(context: ToolContext[Any], raw_arguments: str) -> Any:
        try:
            return await invoke(context, raw_arguments)
        except (ValueError, TypeError, SandboxError) as e:
            # Not a failure of the sandbox's activities (those are Temporal
            # errors, and end the run): the call itself was wrong.
            reason = str(e).strip() or type(e).__name__
            return f"The {tool.name} call was not carried out: {reason}"

    tool.on_invoke_tool = on_invoke_tool


def plain_shell(tools: ShellToolSet) -> None:
    """Shell's ``configure_tools``: each command in ``sh -c``, and mistakes
    told to the model.

    Args:
        tools: the shell's tools, as the Agents SDK hands them.
    """
    run = tools.exec_command

    async def run_command(context: ToolContext[Any], raw_arguments: str) -> str:
        return await run.run(command_of(raw_arguments).arguments)

    run.on_invoke_tool = run_command
    schema = dict(run.params_json_schema)
    schema["properties"] = {
        name: spec for name, spec in schema.get("properties", {}).items() if name not in NOT_OFFERED
    }
    run.params_json_schema = schema
    tell_mistakes(run)
    if tools.write_stdin is not None:
        tell_mistakes(tools.write_stdin)


def careful_filesystem(tools: FilesystemToolSet) -> None:
    """Filesystem's ``configure_tools``: mistakes told to the model.

    Args:
        tools: the filesystem's tools, as the Agents SDK hands them.
    """
    tell_mistakes(tools.view_image)
    tell_mistakes(tools.apply_patch)
