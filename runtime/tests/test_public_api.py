"""The runtime's public API is its two faces, ``sandbox_agent_runtime`` and
``sandbox_agent_runtime.testing``: each serves exactly the names of its
``__all__``, each name imported at its first use from the module the type
checker is told, and importing either imports neither Temporal nor the
Agents SDK."""

import ast
import subprocess
import sys
from importlib import import_module
from pathlib import Path
from types import ModuleType

import pytest

FACES = ["sandbox_agent_runtime", "sandbox_agent_runtime.testing"]


def face(name: str) -> ModuleType:
    return import_module(name)


def declared_for_the_type_checker(module: ModuleType) -> dict[str, str]:
    """Each name the face's ``if TYPE_CHECKING:`` block imports, and where
    from: "module" (the same name there), "module:name", or "module:" (the
    module itself), as the face's ``_PUBLIC`` writes it."""
    for public in module.__all__:
        getattr(module, public)  # imports each module a name comes from
    tree = ast.parse(Path(str(module.__file__)).read_text())
    [block] = [
        node
        for node in tree.body
        if isinstance(node, ast.If)
        and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
    ]
    declared: dict[str, str] = {}
    for statement in block.body:
        assert isinstance(statement, ast.ImportFrom), ast.unparse(statement)
        assert statement.module is not None
        source = statement.module.removeprefix("sandbox_agent_runtime.")
        for alias in statement.names:
            name = alias.asname or alias.name
            if f"{statement.module}.{alias.name}" in sys.modules:
                declared[name] = f"{source}.{alias.name}:"
            elif name != alias.name:
                declared[name] = f"{source}:{alias.name}"
            else:
                declared[name] = source
    return declared


@pytest.mark.parametrize("name", FACES)
def test_a_face_serves_exactly_its_all_from_where_the_type_checker_is_told(name: str) -> None:
    module = face(name)
    public: dict[str, str] = vars(module)["_PUBLIC"]
    defined_here = {"PYTEST_PLUGIN"} & set(vars(module))
    assert sorted(module.__all__) == module.__all__, "__all__ is kept sorted"
    assert len(set(module.__all__)) == len(module.__all__)
    assert set(module.__all__) == set(public) | defined_here
    assert declared_for_the_type_checker(module) == public
    assert set(module.__all__) <= set(dir(module))


@pytest.mark.parametrize("name", FACES)
def test_every_public_name_resolves(name: str) -> None:
    module = face(name)
    for public in module.__all__:
        assert getattr(module, public) is not None, public


@pytest.mark.parametrize("name", FACES)
def test_a_name_a_face_does_not_serve_is_an_attribute_error(name: str) -> None:
    with pytest.raises(AttributeError, match="has no attribute 'run_agent'"):
        getattr(face(name), "run_agent")  # noqa: B009


def test_importing_the_faces_imports_neither_temporal_nor_the_agents_sdk() -> None:
    program = (
        "import sys, sandbox_agent_runtime, sandbox_agent_runtime.testing\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'temporalio', 'agents', 'openai'}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
