"""Evaluations: whether a change made the agent better, on the team's own
tasks, with the real model, several times each.

The command is ``command.main`` (``cli`` as installed); dataset.py reads a
dataset, runner.py runs its cases through the service, report.py and
compare.py say how they did.
"""

from sandbox_agent_runtime.evals.command import (
    EXIT_DONE,
    EXIT_REGRESSION,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    cli,
    exit_statuses,
    main,
)

__all__ = [
    "EXIT_DONE",
    "EXIT_REGRESSION",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "cli",
    "exit_statuses",
    "main",
]
