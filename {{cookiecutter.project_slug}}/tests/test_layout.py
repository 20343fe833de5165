"""Whose room is whose: the README's file map is the package as it is, the
team's modules say they are theirs, and imports go one way (the machinery
takes the agent and its tools from machinery/registry.py alone)."""

import ast
import re
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
PACKAGE_NAME = "{{ cookiecutter.package_name }}"
PACKAGE = PROJECT / "src" / PACKAGE_NAME
MACHINERY = PACKAGE / "machinery"
# The team's own modules, and the one module of the machinery that imports
# those of them that build the agent.
TEAMS = ("agent.py", "tools.py", "runs.py")
REGISTRY = MACHINERY / "registry.py"


def file_map() -> set[str]:
    """The files the README's "Where things are" map names, relative to
    the project (``src/<package>/machinery/workflow.py``, ``tests/``)."""
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


def test_the_teams_modules_say_they_are_theirs_and_the_machinery_says_what_it_is() -> None:
    for name in TEAMS:
        docstring = ast.get_docstring(ast.parse((PACKAGE / name).read_text())) or ""
        assert "Yours to change." in docstring.splitlines()[0], name
    for path in MACHINERY.rglob("*.py"):
        if path.name != "__init__.py":
            assert ast.get_docstring(ast.parse(path.read_text())), f"{path.name} says nothing"
    package = ast.get_docstring(ast.parse((MACHINERY / "__init__.py").read_text())) or ""
    assert "Rarely edited." in package


def imported_modules(path: Path) -> set[str]:
    """The modules of the package that ``path`` imports, as dotted names."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.split(".")[0] == PACKAGE_NAME}


def test_the_machinery_takes_the_agent_and_its_tools_from_the_registry_alone() -> None:
    builds_the_agent = {f"{PACKAGE_NAME}.agent", f"{PACKAGE_NAME}.tools"}
    for path in MACHINERY.rglob("*.py"):
        taken = imported_modules(path) & builds_the_agent
        if path == REGISTRY:
            assert taken == builds_the_agent
        else:
            assert not taken, f"{path.relative_to(PACKAGE)} imports {sorted(taken)}"


def test_the_settings_a_team_chooses_import_nothing_of_the_service() -> None:
    # runs.py holds values that any part may read: it must not pull the
    # machinery (or the Agents SDK) in with it.
    assert imported_modules(PACKAGE / "runs.py") == set()
