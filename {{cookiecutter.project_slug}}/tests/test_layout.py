"""Whose room is whose: the README's file map is the package as it is, the
team's modules say they are theirs, the package holds only what is the
service's own (the runtime is a dependency, sandbox_agent_runtime), and
imports go one way: the runtime never imports the service."""

import ast
import re
from pathlib import Path

import sandbox_agent_runtime

PROJECT = Path(__file__).resolve().parents[1]
PACKAGE_NAME = "{{ cookiecutter.package_name }}"
PACKAGE = PROJECT / "src" / PACKAGE_NAME
RUNTIME = Path(sandbox_agent_runtime.__file__).parent
# The team's own modules.
TEAMS = ("agent.py", "tools.py", "runs.py")
# What carries the service's names: its description for the runtime, its
# workflow type, and its commands.
NAMED = (
    "service.py",
    "workflow.py",
    "worker.py",
    "starter.py",
    "codec_server.py",
    "api.py",
    "evals.py",
    "histories.py",
    "sandboxes.py",
)


def file_map() -> set[str]:
    """The files the README's "Where things are" map names, relative to
    the project (``src/<package>/agent.py``, ``tests/``)."""
    readme = (PROJECT / "README.md").read_text()
    section = readme.split("## Where things are", 1)[1]
    block = re.search(r"```text\n(.*?)```", section, re.S)
    assert block, "the README's file map is gone"
    named: set[str] = set()
    parents: list[tuple[int, str]] = []
    for line in block.group(1).splitlines():
        indent = len(line) - len(line.lstrip())
        name, _, description = line.strip().partition(" ")
        while parents and parents[-1][0] >= indent:
            parents.pop()
        path = "".join(parent for _, parent in parents) + name
        named.add(path)
        if name.endswith("/"):
            parents.append((indent, name))
            # A directory of modules may list them after a colon.
            listed = description.rpartition(":")[2]
            named.update(path + module for module in re.findall(r"[\w]+\.py", listed))
    return named


def modules_of_the_package() -> set[str]:
    return {
        str(path.relative_to(PROJECT))
        for path in PACKAGE.rglob("*.py")
        if path.name != "__init__.py"
    }


def test_the_readme_maps_every_module_of_the_package_and_only_those() -> None:
    mapped = file_map()
    modules = {path for path in mapped if path.endswith(".py")}
    assert modules == modules_of_the_package()
    for directory in (path for path in mapped if path.endswith("/")):
        assert (PROJECT / directory).is_dir(), f"the README maps {directory}, which is not there"


def test_the_package_holds_the_teams_modules_and_its_names_and_nothing_of_the_runtime() -> None:
    assert {path.name for path in PACKAGE.rglob("*.py")} == {"__init__.py", *TEAMS, *NAMED}


def test_the_teams_modules_say_they_are_theirs_and_the_others_say_what_they_are() -> None:
    for name in TEAMS:
        docstring = ast.get_docstring(ast.parse((PACKAGE / name).read_text())) or ""
        assert "Yours to change." in docstring.splitlines()[0], name
    for name in NAMED:
        assert ast.get_docstring(ast.parse((PACKAGE / name).read_text())), f"{name} says nothing"


def imported_modules(path: Path, top: str = PACKAGE_NAME) -> set[str]:
    """The modules of the package ``top`` that ``path`` imports, as dotted names."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.split(".")[0] == top}


def test_the_runtime_never_imports_the_service() -> None:
    for path in RUNTIME.rglob("*.py"):
        assert not imported_modules(path), f"the runtime's {path.name} imports the service"


def test_only_the_workflow_and_the_worker_take_the_agent_and_its_tools() -> None:
    builds_the_agent = {f"{PACKAGE_NAME}.agent", f"{PACKAGE_NAME}.tools"}
    for name in NAMED:
        taken = imported_modules(PACKAGE / name) & builds_the_agent
        if name not in ("workflow.py", "worker.py"):
            # The evaluations take the agent's model and its settings (their
            # report, its cost, a rubric's grader), and nothing else of it.
            allowed = {f"{PACKAGE_NAME}.agent"} if name == "evals.py" else set()
            assert taken <= allowed, f"{name} imports {sorted(taken - allowed)}"


def test_the_settings_a_team_chooses_import_nothing_of_the_service() -> None:
    # runs.py holds values that any part may read: it must not pull the
    # runtime (or the Agents SDK) in with it.
    assert imported_modules(PACKAGE / "runs.py") == set()
    assert imported_modules(PACKAGE / "runs.py", "sandbox_agent_runtime") == set()
