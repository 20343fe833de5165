"""The path a run takes through the service's modules, as its recorded
history replays.

    python benchmarks/in_project.py run_path
    python benchmarks/in_project.py --backend daytona run_path --path

Each history in the project's ``tests/histories/`` is replayed as the
project's own replay test replays it (``tests/test_histories.py``: the
worker's plugins, data converter and workflow runner), traced as the
runtime's own test traces it (``sandbox_agent_runtime.testing.run_path``:
every call, from the workflow's ``run_agent`` on, into a module of the
runtime or of the project's package from another of them; a coroutine
resumed is not a call; the data converter's and the test helpers' modules
left out).

Printed for each history: how many modules the path goes through; how many
times it enters a module (*entries*); how many of those enter a module it had
entered before (*again*); how many *climb* into a module above the caller's
in the runtime's layers (its ``[tool.importlinter]`` contracts, read from the
runtime the project takes from a directory: its ``[tool.uv.sources]``; none
counted for a runtime from git); the most modules any of the run's phases
(``PHASES``: workflow.py and phases/, but the records they share) is entered
from; and the modules entered most.
``--path`` prints the entries too, each as ``caller > called.function``.
"""

import argparse
import sys
import tomllib
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path.cwd()))


def runtime_pyproject() -> Path | None:
    """The pyproject.toml of the runtime the project takes from a
    directory; None for a runtime from git or an index."""
    sources = tomllib.loads(Path("pyproject.toml").read_text())["tool"]["uv"]["sources"]
    directory = sources.get("sandbox-agent-runtime", {}).get("path")
    return None if directory is None else Path(directory) / "pyproject.toml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", action="store_true", help="print each path too")
    args = parser.parse_args()
    # Importing the project's conftest registers the project with the helpers.
    import tests.conftest  # noqa: F401, I001
    from sandbox_agent_runtime.testing import project
    from sandbox_agent_runtime.testing.run_path import PHASES, Layers, traced
    from tests.test_histories import RECORDED, replay

    package = project().package
    pyproject = runtime_pyproject()
    layers = Layers(pyproject) if pyproject is not None else None
    print(
        "history                                  modules  entries  again  climbs"
        "  phase callers  most entered"
    )
    for history in RECORDED:
        entries = traced(lambda history=history: replay(history), package)
        called = [entry.called for entry in entries]
        again = sum(1 for i, module in enumerate(called) if module in called[:i])
        climbs = len(layers.climbs(entries)) if layers is not None else 0
        modules = len({m for entry in entries for m in (entry.calling, entry.called)})
        callers: dict[str, set[str]] = defaultdict(set)
        for entry in entries:
            callers[entry.called].add(entry.calling)
        phase_callers = max((len(callers[m]) for m in PHASES if m in callers), default=0)
        most = ", ".join(f"{m} {n}" for m, n in Counter(called).most_common(3))
        print(
            f"{history.name:40} {modules:7} {len(entries):8} {again:6} {climbs:7}"
            f"  {phase_callers:13}  {most}"
        )
        if args.path:
            print("  " + ", ".join(f"{e.calling} > {e.called}.{e.function}" for e in entries))


if __name__ == "__main__":
    main()
