"""The tests' fixtures and hooks are the runtime's pytest plugin
(sandbox_agent_runtime.testing.PYTEST_PLUGIN: a Temporal dev server for the
session, one finished run, the bounds on slow tests); its helpers
(sandbox_agent_runtime.testing) are told here which project they test.

Importing the project's package configures its service
(sandbox_agent_runtime.current()), which the helpers read the rest from. It
is imported when a test first needs the project, not here: the process that
only hands tests out to the test processes (pytest-xdist's) loads this file
too, and need not spend seconds importing the SDKs."""

from pathlib import Path

from sandbox_agent_runtime.testing import PYTEST_PLUGIN, Project, use

pytest_plugins = [PYTEST_PLUGIN]


def this_project() -> Project:
    from {{ cookiecutter.package_name }}.agent import MODEL
    from {{ cookiecutter.package_name }}.tools import ACTIVITIES, MCP_SERVERS
    from {{ cookiecutter.package_name }}.workflow import SandboxAgentWorkflow

    return Project(
        root=Path(__file__).resolve().parents[1],
        package={{ cookiecutter.package_name | tojson }},
        workflow=SandboxAgentWorkflow,
        tool_activities=ACTIVITIES,
        model=MODEL,
        mcp_servers=MCP_SERVERS,
    )


use(this_project)
