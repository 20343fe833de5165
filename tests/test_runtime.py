"""The runtime (runtime/, the sandbox-agent-runtime package every project
depends on) is plain Python, checked once here rather than in every render: no
Jinja, ruff-clean with its own settings, and strictly typed with every
backend's SDK installed (each backend's module type-checks against its SDK)."""

import re
import shutil
from pathlib import Path

import pytest

from .baked import TEMPLATE, run, tool

RUNTIME = TEMPLATE / "runtime"
JINJA = re.compile(r"\{%|\{\{ *cookiecutter|cookiecutter\.")


def test_the_runtime_holds_no_jinja() -> None:
    found = [
        str(path.relative_to(RUNTIME))
        for path in RUNTIME.rglob("*")
        if path.is_file() and ".venv" not in path.parts and "__pycache__" not in path.parts
        if JINJA.search(path.read_text(errors="replace"))
    ]
    assert not found, found


def test_the_runtime_is_ruff_clean() -> None:
    lint = run(tool("ruff"), "check", "--no-cache", ".", cwd=RUNTIME)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    fmt = run(tool("ruff"), "format", "--check", "--no-cache", ".", cwd=RUNTIME)
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


@pytest.mark.slow
def test_the_runtime_type_checks_strictly_with_every_backend(tmp_path: Path) -> None:
    # A copy: the checkout keeps no virtualenv or lock of the runtime's.
    copy = tmp_path / "runtime"
    shutil.copytree(RUNTIME, copy, ignore=shutil.ignore_patterns(".venv", "__pycache__", "uv.lock"))
    installed = run(tool("uv"), "sync", "--all-extras", "--no-python-downloads", cwd=copy)
    assert installed.returncode == 0, installed.stderr
    typed = run(tool("uv"), "run", "--no-sync", "mypy", "src", cwd=copy)
    assert typed.returncode == 0, typed.stdout + typed.stderr
    assert "Success: no issues found" in typed.stdout
