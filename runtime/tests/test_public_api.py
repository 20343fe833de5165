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
    """Each runtime name the face's ``if TYPE_CHECKING:`` block imports, and
    where from: "module" (the same name there), "module:name", or "module:"
    (the module itself), as the face's ``_PUBLIC`` writes it."""
    for public in module.__all__:
        getattr(module, public)  # imports each module a name comes from
    [block] = [
        node
        for node in ast.parse(Path(str(module.__file__)).read_text()).body
        if isinstance(node, ast.If)
        and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
    ]
    declared: dict[str, str] = {}
    for statement in block.body:
        assert isinstance(statement, ast.ImportFrom), ast.unparse(statement)
        assert statement.module is not None
        if statement.module.split(".")[0] != "sandbox_agent_runtime":
            continue  # a type the annotations below name (Path, timedelta)
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


def annotated(module: ModuleType) -> dict[str, str]:
    """The face's constants: each annotated at module level (with its
    docstring below it), and its annotation."""
    return {
        node.target.id: ast.unparse(node.annotation)
        for node in ast.parse(Path(str(module.__file__)).read_text()).body
        if isinstance(node, ast.AnnAssign)
        and isinstance(node.target, ast.Name)
        and node.value is None
    }


@pytest.mark.parametrize("name", FACES)
def test_a_face_serves_exactly_its_all_from_where_the_type_checker_is_told(name: str) -> None:
    module = face(name)
    public: dict[str, str] = vars(module)["_PUBLIC"]
    defined_here = {"PYTEST_PLUGIN"} & set(vars(module))
    assert sorted(module.__all__) == module.__all__, "__all__ is kept sorted"
    assert len(set(module.__all__)) == len(module.__all__)
    assert set(module.__all__) == set(public) | defined_here
    declared, constants = declared_for_the_type_checker(module), annotated(module)
    assert not set(declared) & set(constants)
    assert declared == {name: where for name, where in public.items() if name not in constants}
    assert set(constants) <= set(public)
    assert set(module.__all__) <= set(dir(module))


@pytest.mark.parametrize("name", FACES)
def test_every_public_name_resolves(name: str) -> None:
    module = face(name)
    for public in module.__all__:
        assert getattr(module, public) is not None, public


@pytest.mark.parametrize("name", FACES)
def test_each_constant_is_what_its_annotation_says(name: str) -> None:
    module = face(name)
    types = {**vars(module), **_annotation_types()}
    for constant, annotation in annotated(module).items():
        expected = eval(annotation, types)  # noqa: S307  (the face's own annotations)
        assert isinstance(getattr(module, constant), getattr(expected, "__origin__", expected)), (
            constant
        )


def _annotation_types() -> dict[str, object]:
    from datetime import timedelta
    from pathlib import Path

    from sandbox_agent_runtime.testing import StarterSettings, WorkerSettings

    return {
        "timedelta": timedelta,
        "Path": Path,
        "StarterSettings": StarterSettings,
        "WorkerSettings": WorkerSettings,
    }


def test_the_api_and_the_codec_server_share_the_status_of_a_command_that_cannot_serve() -> None:
    from sandbox_agent_runtime import EXIT_CANNOT_SERVE, api, codec_server

    assert api.EXIT_CANNOT_SERVE == codec_server.EXIT_CANNOT_SERVE == EXIT_CANNOT_SERVE


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
