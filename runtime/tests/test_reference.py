"""The API reference builds (tests/reference.py: pdoc over the two public
modules), and documents every public name: each with its docstring, each
public function that takes arguments with their ``Args:`` and what it gives
back under ``Returns:``."""

import inspect
import re
import subprocess
import sys
import typing
from pathlib import Path
from types import ModuleType

import pytest

import sandbox_agent_runtime
import sandbox_agent_runtime.testing

TESTS = Path(__file__).resolve().parent
FACES = {
    "sandbox_agent_runtime": "sandbox_agent_runtime.html",
    "sandbox_agent_runtime.testing": "sandbox_agent_runtime/testing.html",
}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reference")
    built = subprocess.run(
        [sys.executable, str(TESTS / "reference.py"), "-o", str(out)],
        cwd=TESTS.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    # pdoc warns of a public name it cannot resolve or document.
    assert "Warn" not in built.stderr, built.stderr
    return out


def documented(page: str) -> dict[str, bool]:
    """Each top-level name a pdoc page documents, and whether it shows a
    docstring."""
    parts = re.split(r'<section id="([A-Za-z_][A-Za-z0-9_]*)">', page)
    # (A class's own docstring comes before its members' sections.)
    return {
        name: 'class="docstring"' in body.partition("<section id=")[0]
        for name, body in zip(parts[1::2], parts[2::2], strict=True)
    }


@pytest.mark.parametrize("face", FACES)
def test_the_reference_documents_every_public_name_with_its_docstring(
    reference: Path, face: str
) -> None:
    module = sys.modules[face]
    shown = documented((reference / FACES[face]).read_text())
    # A module pdoc leaves off the page (docker_backend, for a Docker
    # render's tests): its own docstring is its reference.
    modules = {name for name in module.__all__ if isinstance(getattr(module, name), ModuleType)}
    assert modules <= {"docker_backend"}
    assert all(getattr(module, name).__doc__ for name in modules)
    assert set(shown) == set(module.__all__) - modules
    assert [name for name, has_docstring in shown.items() if not has_docstring] == []


def functions(module: ModuleType) -> dict[str, typing.Callable[..., object]]:
    return {
        name: value
        for name in module.__all__
        if inspect.isfunction(value := inspect.unwrap(getattr(module, name)))
    }


@pytest.mark.parametrize("face", FACES)
def test_each_public_function_says_its_arguments_and_what_it_returns(face: str) -> None:
    missing = []
    for name, function in functions(sys.modules[face]).items():
        signature = inspect.signature(function)
        doc = inspect.getdoc(function) or ""
        gives = signature.return_annotation
        if signature.parameters and "Args:" not in doc:
            missing.append(f"{name}: Args")
        if gives not in (None, "None", typing.NoReturn, "NoReturn") and "Returns:" not in doc:
            missing.append(f"{name}: Returns")
    assert missing == []


def test_documented_finds_a_name_without_its_docstring() -> None:
    page = (
        '<section id="a"><div class="docstring">A.</div></section>'
        '<section id="b"><div class="attr"></div>'
        '<section id="b.c"><div class="docstring">A member.</div></section></section>'
    )
    assert documented(page) == {"a": True, "b": False}
    assert sandbox_agent_runtime.testing.__name__ in FACES
