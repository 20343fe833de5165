"""The runtime's tests: the guarantees of a service, proven once, against a
stand-in for a generated project.

- tests/project/ (the default): a default render's package, the local
  backend on the worker's host, no approvals;
- tests/remote_project/, with ``SANDBOX_AGENT_STAND_IN=remote``: a render
  with every remote backend beside the local one (Daytona first), approvals
  of commands and file edits, and two forwarded secrets (the template's
  tests/test_runtime.py keeps both identical to renders).

The tests in tests/remote/ run against the second one, every other test
module against the default one, and those in ``BOTH`` against either: a run
against one stand-in does not collect the other's modules (each imports its
own project).

The fixtures, the hooks and the helpers are the ones a generated project's
tests use (sandbox_agent_runtime.testing): this file registers the stand-in
with them, as a project's conftest.py registers itself, imported at its
first use (pytest-xdist's process that only hands tests out never imports
it)."""

import importlib
import os
from pathlib import Path

import pytest

from sandbox_agent_runtime.testing import Project, use

pytest_plugins = ["sandbox_agent_runtime.testing.plugin"]

# Each stand-in: its directory and its package.
STAND_INS = {"default": ("project", "sandbox_agent"), "remote": ("remote_project", "remote_agent")}
STAND_IN = os.environ.get("SANDBOX_AGENT_STAND_IN", "default")


def pytest_configure(config: pytest.Config) -> None:
    if STAND_IN not in STAND_INS:
        raise pytest.UsageError(
            f"SANDBOX_AGENT_STAND_IN={STAND_IN!r} is not a stand-in: use {' or '.join(STAND_INS)}"
        )


def stand_in_project() -> Project:
    directory, package = STAND_INS[STAND_IN]
    agent = importlib.import_module(f"{package}.agent")
    tools = importlib.import_module(f"{package}.tools")
    workflow = importlib.import_module(f"{package}.workflow")
    return Project(
        root=Path(__file__).resolve().parent / directory,
        package=package,
        workflow=workflow.SandboxAgentWorkflow,
        tool_activities=tools.ACTIVITIES,
        model=agent.MODEL,
        mcp_servers=tools.MCP_SERVERS,
    )


use(stand_in_project)


# The modules at the top of tests/ that run against the remote stand-in too:
# what they prove rests on whether the run's sandbox lives on the worker's
# host (conversations, failures, durability, affinity, long runs and chains,
# a deploy while runs are in flight, the metrics' host label, the starter's
# steps), or on approvals (hostile calls, the commands' exit statuses, the
# service stopped under them, a chain resumed after each approved command,
# a command of an agent handed off to, an MCP server's tool under approval).
BOTH = (
    "test_sessions.py",
    "test_failures.py",
    "test_hostile_calls.py",
    "test_exit_statuses.py",
    "test_service_faults.py",
    "test_durability.py",
    "test_versioning.py",
    "test_affinity.py",
    "test_long_runs.py",
    "test_metrics.py",
    "test_starter.py",
    "test_other_agents.py",
    "test_mcp.py",
)

# What a run against one stand-in leaves out: the other's modules.
if STAND_IN == "default":
    collect_ignore = ["remote"]
else:
    collect_ignore = [
        path.name for path in Path(__file__).parent.glob("test_*.py") if path.name not in BOTH
    ]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Against the remote stand-in, leave out the tests of ``BOTH`` marked
    ``default_stand_in``: what they prove (a worker's signals, a Temporal
    service that restarts or goes away, a stateless model endpoint) does not
    rest on the stand-in, and the default one proves it. Against the default
    one, leave out those marked ``remote_stand_in``: they need what only the
    remote stand-in has (approvals)."""
    other = "default_stand_in" if STAND_IN != "default" else "remote_stand_in"
    once = [item for item in items if item.get_closest_marker(other)]
    if once:
        config.hook.pytest_deselected(items=once)
        items[:] = [item for item in items if item not in once]
