"""The path a run takes through the service's modules, as its recorded
history replays.

    python benchmarks/in_project.py run_path
    python benchmarks/in_project.py --backend daytona run_path --path

Each history in the project's ``tests/histories/`` is replayed as the
project's own replay test replays it (``tests/test_histories.py``: the
worker's plugins, data converter and workflow runner), with a profiler
(``sys.setprofile``, and ``threading.setprofile`` for the workflow's
threads) noting the module of every call from the workflow's
``run_agent`` on, in the runtime's modules and the project's package. The
modules the data converter calls on its own (``encryption``, ``payloads``)
are not the run's path and are left out, as are the test helpers.

Printed for each history: how many modules the path goes through, how many
times it enters a module (a call into a module other than its caller's, the
caller being the nearest of these modules up the stack, the SDKs' frames in
between skipped), how many of those enter a module it had entered before,
how many climb:
enter a module above the caller's in the runtime's layers (the
``[tool.importlinter]`` contract of runtime/pyproject.toml, read from the
runtime the project takes from a directory: a call back up, into a module
that imports the caller's; none counted for a runtime from git); and the
modules entered most.
``--path`` prints the entries too, each as ``caller > called``.
"""

import argparse
import asyncio
import sys
import threading
import tomllib
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path.cwd()))

RUNTIME = "sandbox_agent_runtime."
# Called by the SDK's data converter, whatever the run does.
CONVERTER = ("encryption", "payloads")


def layers() -> dict[str, int]:
    """Each top-level module of the runtime, by its layer (0: the lowest),
    from the runtime's import contract: in the pyproject.toml of the
    runtime the project takes from a directory (its ``[tool.uv.sources]``);
    none for a runtime from git or an index."""
    sources = tomllib.loads(Path("pyproject.toml").read_text())["tool"]["uv"]["sources"]
    directory = sources.get("sandbox-agent-runtime", {}).get("path")
    if directory is None:
        return {}
    runtime = tomllib.loads((Path(directory) / "pyproject.toml").read_text())
    contracts = runtime["tool"]["importlinter"]["contracts"]
    [top] = [c for c in contracts if c.get("containers") == ["sandbox_agent_runtime"]]
    order = list(reversed(top["layers"]))
    return {name.strip(): level for level, layer in enumerate(order) for name in layer.split("|")}


def first_party(frame: FrameType, package: str) -> str | None:
    """The module of ``frame`` when it is the runtime's (but the test
    helpers' and the data converter's) or the project's; else None."""
    module = str(frame.f_globals.get("__name__", ""))
    if module.startswith(RUNTIME):
        module = module.removeprefix(RUNTIME)
        return None if module.startswith(("testing", *CONVERTER)) else module
    return module if module.startswith(package + ".") else None


def traced(history: Path, package: str) -> list[tuple[str, str]]:
    """Each entry into a module while ``history`` replays, in order: the
    calling module (the nearest of the service's modules up the stack, the
    SDKs' frames between them skipped) and the module called."""
    from tests.test_histories import replay

    entries: list[tuple[str, str]] = []
    following = False

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal following
        if event != "call":
            return
        called = first_party(frame, package)
        if called is None:
            return
        if frame.f_code.co_name == "run_agent" and called == "workflow":
            following = True
        if not following:
            return
        caller = frame.f_back
        while caller is not None and first_party(caller, package) is None:
            caller = caller.f_back
        calling = first_party(caller, package) if caller is not None else None
        if calling is not None and calling != called:
            entries.append((calling, called))

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        asyncio.run(replay(history))
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return entries


def figures(entries: list[tuple[str, str]], levels: dict[str, int]) -> tuple[int, int, int, int]:
    """Modules, entries, entries into a module entered before, climbs."""
    called = [module for _, module in entries]
    again = sum(1 for i, module in enumerate(called) if module in called[:i])

    def level(module: str) -> int | None:
        return levels.get(module.split(".")[0])

    climbs = 0
    for calling, module in entries:
        below, above = level(calling), level(module)
        if below is not None and above is not None and above > below:
            climbs += 1
    return len({m for entry in entries for m in entry}), len(entries), again, climbs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", action="store_true", help="print each path too")
    args = parser.parse_args()
    # Importing the project's conftest registers the project with the helpers.
    import tests.conftest  # noqa: F401, I001
    from sandbox_agent_runtime.testing import project
    from tests.test_histories import RECORDED

    package = project().package
    levels = layers()
    print("history                                  modules  entries  again  climbs  most entered")
    for history in RECORDED:
        entries = traced(history, package)
        modules, entered, again, climbs = figures(entries, levels)
        counted = Counter(module for _, module in entries)
        most = ", ".join(f"{m} {n}" for m, n in counted.most_common(3))
        print(f"{history.name:40} {modules:7} {entered:8} {again:6} {climbs:7}  {most}")
        if args.path:
            print("  " + ", ".join(f"{calling} > {module}" for calling, module in entries))


if __name__ == "__main__":
    main()
