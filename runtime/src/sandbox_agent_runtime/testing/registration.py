"""Which project the test helpers serve (``use``), and workflow types the
helpers define on top of the project's own."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sandbox_agent_runtime.service import Service, current


@dataclass(frozen=True)
class Project:
    """A project, as its tests describe it to the helpers."""

    # Its directory: pyproject.toml, deploy/, tests/.
    root: Path
    # Its import package ("support_agent"): ``python -m <package>.worker``.
    package: str
    # Its workflow type (workflow.py's SandboxAgentWorkflow).
    workflow: type
    # Its tools' activities (tools.py's ACTIVITIES).
    tool_activities: Sequence[Callable[..., Any]]
    # The model its agent talks to (agent.py's MODEL).
    model: str
    # Its MCP servers' providers (tools.py's MCP_SERVERS).
    mcp_servers: Sequence[Any] = ()


_registered: Project | Callable[[], Project] | None = None


def use(project: Project | Callable[[], Project]) -> None:
    """Make ``project`` the one the helpers serve. Again with the same one changes
    nothing; with another, refuses: a test process tests one project.

    Args:
        project: a ``Project``, or a function that makes it at its first use
            (so that pytest-xdist's process that only hands tests out never
            imports the project and its SDKs).
    """
    global _registered
    if _registered is not None and _registered is not project and _registered != project:
        raise RuntimeError(
            f"the test helpers already serve the project {_describe(_registered)}: "
            "a test process tests one project"
        )
    _registered = project


def project() -> Project:
    """The project the helpers serve.

    Returns:
        The registered ``Project``, made now if ``use`` was given a function.
    """
    global _registered
    if _registered is None:
        raise RuntimeError(
            "no project is registered for sandbox_agent_runtime.testing: call "
            "sandbox_agent_runtime.testing.use(Project(...)) in the tests' conftest.py "
            "(before the tests import the helpers' functions); in a workflow sandbox, "
            "give the worker or replayer worker.workflow_runner(), which passes the "
            "runtime through"
        )
    if not isinstance(_registered, Project):
        _registered = _registered()
    return _registered


def project_service() -> Service:
    """The configured service, the registered project made first if there is one
    (making it imports its package, which configures the service).

    Returns:
        ``current()``.
    """
    if _registered is not None:
        project()
    return current()


def _describe(registered: Project | Callable[[], Project]) -> str:
    return repr(registered.package) if isinstance(registered, Project) else repr(registered)


def workflow_type(cls: type[Any], name: str) -> type[Any]:
    """``cls``, a class a helper defines in a function (a subclass of the
    project's workflow type, which is known only once the project is
    registered), made a workflow type registered as ``name``: Temporal takes
    none defined in a function (it finds a workflow type by its module and its
    name), so ``cls`` and its methods are named as at module level, and its
    ``run`` (undecorated) is made its run method, as ``@workflow.run`` would."""
    from temporalio import workflow

    cls.__qualname__ = cls.__name__
    for attribute in vars(cls).values():
        if callable(attribute) and hasattr(attribute, "__qualname__"):
            attribute.__qualname__ = f"{cls.__name__}.{attribute.__name__}"
    workflow.run(vars(cls)["run"])
    defined: type[Any] = workflow.defn(name=name)(cls)
    return defined


def defined_at_first_use(
    names: frozenset[str], define: Callable[[type[Any]], dict[str, type[Any]]]
) -> Callable[[str], type[Any]]:
    """A module's ``__getattr__`` for workflow types that subclass the
    project's (``Project.workflow``, known only once the project is
    registered): ``define`` makes them all at the first use of one of
    ``names``, once per process; any other name is not there."""
    defined: dict[str, type[Any]] = {}

    def __getattr__(name: str) -> type[Any]:
        if name not in names:
            raise AttributeError(f"no attribute {name!r}")
        if not defined:
            defined.update(define(project().workflow))
        return defined[name]

    return __getattr__


if TYPE_CHECKING:
    from sandbox_agent_runtime.chain import Carried
    from sandbox_agent_runtime.run_request import RunAnswer, RunRequest
    from sandbox_agent_runtime.workflow import AgentWorkflow

    class WorkflowVariant(AgentWorkflow):
        """What the type checker knows of a workflow type defined at first
        use: a subclass of the project's workflow type, with its run method."""

        async def run(self, request: RunRequest, carried: Carried | None = None) -> RunAnswer: ...
