"""A render depends on the runtime's public API alone: its src/, tests/ and
benchmarks/ import only ``sandbox_agent_runtime`` and ``sandbox_agent_runtime.testing``
(the runtime's two faces; every other module of it is private and may change
at any release), and use of those only the names their ``__all__`` lists."""

import ast
from pathlib import Path

import pytest

from .baked import TEMPLATE, BakedProject

FACES = {
    "sandbox_agent_runtime": TEMPLATE / "runtime/src/sandbox_agent_runtime/__init__.py",
    "sandbox_agent_runtime.testing": TEMPLATE / "runtime/src/sandbox_agent_runtime/testing/__init__.py",
}


def public_names(face: Path) -> set[str]:
    """The names of a face's ``__all__``, read from its source."""
    for node in ast.parse(face.read_text()).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"]:
            return set(ast.literal_eval(node.value))
    raise AssertionError(f"{face} has no __all__")


PUBLIC = {face: public_names(path) for face, path in FACES.items()}


def private_uses(source: str) -> list[str]:
    """What ``source`` takes from the runtime besides its faces' public
    names: an import of another module of it, a name a face does not
    export, or another module of it named in a string (a pytest plugin, an
    ``import_module``)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [
                f"import {alias.name}"
                for alias in node.names
                if alias.name.split(".")[0] == "sandbox_agent_runtime" and alias.name not in PUBLIC
            ]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "sandbox_agent_runtime":
            public = PUBLIC.get(str(node.module), set())
            found += [f"from {node.module} import {alias.name}" for alias in node.names if alias.name not in public]
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.startswith("sandbox_agent_runtime.")
            and node.value.replace(".", "").replace("_", "").isalnum()
            and node.value not in PUBLIC
        ):
            found.append(repr(node.value))
    return found


def test_private_uses_finds_each_way_of_reaching_past_the_faces() -> None:
    source = (
        "import sandbox_agent_runtime\n"
        "import sandbox_agent_runtime.worker\n"
        "from sandbox_agent_runtime import Service, worker\n"
        "from sandbox_agent_runtime.testing import Project, support\n"
        "from sandbox_agent_runtime.shared import END\n"
        "plugins = ['sandbox_agent_runtime.testing.plugin']\n"
        "'''A docstring naming sandbox_agent_runtime.worker in prose.'''\n"
    )
    assert private_uses(source) == [
        "import sandbox_agent_runtime.worker",
        "from sandbox_agent_runtime import worker",
        "from sandbox_agent_runtime.testing import support",
        "from sandbox_agent_runtime.shared import END",
        "'sandbox_agent_runtime.testing.plugin'",
    ]


@pytest.mark.parametrize(
    "project",
    [
        pytest.param({"sandbox_backend": "local"}, id="default"),
        pytest.param({"sandbox_backend": "daytona", "approval": "commands"}, id="daytona-approvals"),
    ],
    indirect=True,
)
def test_a_render_imports_only_the_runtimes_public_api(project: BakedProject) -> None:
    sources = sorted(
        [*project.path.glob("src/**/*.py"), *project.path.glob("tests/**/*.py"), *project.path.glob("benchmarks/*.py")]
    )
    assert len(sources) > 20, sources
    found = {str(path.relative_to(project.path)): uses for path in sources if (uses := private_uses(path.read_text()))}
    assert found == {}, "import these from sandbox_agent_runtime or sandbox_agent_runtime.testing"
