"""The API: the service over HTTP, for web apps, chat bots, CI jobs and other
teams' services that want the agent without speaking Temporal's protocol.

The command is ``command.main`` (``cli`` as installed); the routes are app.py's.
"""

from sandbox_agent_runtime.api.command import (
    EXIT_CANNOT_SERVE,
    EXIT_STOPPED,
    EXIT_UNREACHABLE,
    cli,
    exit_statuses,
    main,
)

__all__ = [
    "EXIT_CANNOT_SERVE",
    "EXIT_STOPPED",
    "EXIT_UNREACHABLE",
    "cli",
    "exit_statuses",
    "main",
]
