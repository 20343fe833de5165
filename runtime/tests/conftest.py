"""The runtime's tests: the guarantees of a service, proven once, against
the stand-in project in tests/project/ (a default render's package: the
local backend on the worker's host, no approvals).

The fixtures, the hooks and the helpers are the ones a generated project's
tests use (sandbox_agent_runtime.testing): this file registers the stand-in
project with them, as a project's conftest.py registers itself, imported at
its first use (pytest-xdist's process that only hands tests out never
imports it)."""

from pathlib import Path

from sandbox_agent_runtime.testing import Project, use

pytest_plugins = ["sandbox_agent_runtime.testing.plugin"]


def stand_in_project() -> Project:
    from sandbox_agent.agent import MODEL
    from sandbox_agent.tools import ACTIVITIES
    from sandbox_agent.workflow import SandboxAgentWorkflow

    return Project(
        root=Path(__file__).resolve().parent / "project",
        package="sandbox_agent",
        workflow=SandboxAgentWorkflow,
        tool_activities=ACTIVITIES,
        model=MODEL,
    )


use(stand_in_project)
