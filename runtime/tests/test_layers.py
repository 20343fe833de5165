"""The runtime reads from the top down: each module imports only from the
layers below its own (the contract ``[tool.importlinter]`` of pyproject.toml
writes down), and no modules import each other in a circle, inside a
package either (backends/, testing/). An import added against the grain
fails here, naming the chain of imports that breaks the contract."""

import subprocess
import sys
from pathlib import Path

import grimp

RUNTIME = Path(__file__).resolve().parent.parent
PACKAGE = "sandbox_agent_runtime"


def test_the_modules_import_only_from_the_layers_below_their_own() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    checked = subprocess.run(
        [str(lint_imports), "--no-cache"], cwd=RUNTIME, capture_output=True, text=True, timeout=60
    )
    # (What broke, without import-linter's banner.)
    assert checked.returncode == 0, checked.stdout.partition("Broken contracts")[2] + checked.stderr
    assert "Contracts: 9 kept, 0 broken." in checked.stdout, checked.stdout


def circles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other in a circle, each
    sorted (Tarjan's strongly connected components of more than one
    module, or of one that imports itself)."""
    order: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        order[module] = lowest[module] = len(order)
        stack.append(module)
        for imported in imports[module]:
            if imported not in order:
                visit(imported)
                lowest[module] = min(lowest[module], lowest[imported])
            elif imported in stack:
                lowest[module] = min(lowest[module], order[imported])
        if lowest[module] == order[module]:
            group = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            if len(group) > 1 or module in imports[module]:
                found.append(sorted(group))

    for module in sorted(imports):
        if module not in order:
            visit(module)
    return found


def test_circles_finds_a_circle_and_only_one() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_modules_import_each_other_in_a_circle() -> None:
    # Imports only for the types (``if TYPE_CHECKING:``) count: a reader
    # follows them too.
    graph = grimp.build_graph(PACKAGE, cache_dir=None)
    imports = {
        module: graph.find_modules_directly_imported_by(module) & graph.modules
        for module in graph.modules
    }
    assert len(imports) > 50, sorted(imports)
    assert circles(imports) == []
