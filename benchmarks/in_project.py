"""The benchmarks that measure the generated service for the template's docs
(docs/benchmarks.md), each run inside a default project rendered for it.

    python benchmarks/in_project.py durability                    # about two minutes
    python benchmarks/in_project.py durability --steps 3 --concurrency 1 --rounds 1
    python benchmarks/in_project.py long_runs --steps 10 50
    python benchmarks/in_project.py starter --times 3
    python benchmarks/in_project.py inputs --times 1
    python benchmarks/in_project.py deploy --rounds 1 --in-flight 2
    python benchmarks/in_project.py run_path                      # seconds
    python benchmarks/in_project.py streaming --runs 20
    python benchmarks/in_project.py --project /tmp/p/sandbox-agent starter
    python benchmarks/in_project.py --answer max_turns=40 versus_sample --sample DIR
    python benchmarks/in_project.py --backend daytona versus_sample --sample DIR

Renders the default (local) project in a temporary directory (``--backend``
for another backend, ``--answer`` for other answers), or takes
``--project``, one rendered with the default names before; installs it with
``uv sync --compile-bytecode``; copies ``benchmarks/project/NAME.py`` into its
``benchmarks/``, with the scripts of benchmarks/project/ it imports
(``from benchmarks.OTHER import ...``); and runs ``uv run python -m
benchmarks.NAME ARGS`` there, with Python allowed to write bytecode as on a
user's machine (tests/baked.py). The
docstring of each script in benchmarks/project/ says what it measures and
prints. A generated project ships one benchmark of its own, for its team:
``uv run python -m benchmarks.capacity`` (docs/capacity.md).
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TEMPLATE))

from benchmarks.time_to_green import render  # noqa: E402
from local_extensions import BACKENDS  # noqa: E402
from tests.baked import NOT_A_USERS, tool  # noqa: E402

SCRIPTS = TEMPLATE / "benchmarks" / "project"
NAMES = sorted(path.stem for path in SCRIPTS.glob("*.py"))


def shared(name: str) -> list[str]:
    """The scripts of benchmarks/project/ that script ``name`` imports, it first."""
    names = [name]
    for wanted in names:
        text = (SCRIPTS / f"{wanted}.py").read_text()
        imported = re.findall(r"^from benchmarks\.(\w+) import", text, re.MULTILINE)
        names += [other for other in imported if other not in names and (SCRIPTS / f"{other}.py").exists()]
    return names


def run_in(project: Path, name: str, arguments: list[str]) -> int:
    environment = {k: v for k, v in os.environ.items() if k not in NOT_A_USERS}
    synced = subprocess.run(
        [tool("uv"), "sync", "-q", "--compile-bytecode", "--no-python-downloads"], cwd=project, env=environment
    )
    if synced.returncode != 0:
        return synced.returncode
    for each in shared(name):
        shutil.copy(SCRIPTS / f"{each}.py", project / "benchmarks" / f"{each}.py")
    command = [tool("uv"), "run", "--no-sync", "python", "-m", f"benchmarks.{name}", *arguments]
    return subprocess.run(command, cwd=project, env=environment).returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--project", type=Path, help="a project rendered with the defaults (default: a fresh render)")
    parser.add_argument("--backend", default="local", choices=BACKENDS, help="the rendered project's sandbox_backend")
    parser.add_argument(
        "--answer", action="append", default=[], metavar="KEY=VALUE", help="another answer for the render (repeatable)"
    )
    parser.add_argument("name", choices=NAMES, help="the benchmark, a script of benchmarks/project/")
    parser.add_argument("arguments", nargs=argparse.REMAINDER, help="the benchmark's own arguments")
    args = parser.parse_args()

    if args.project is not None:
        if not (args.project / "src" / "sandbox_agent").is_dir():
            sys.exit(f"--project {args.project}: not a project rendered with the defaults (no src/sandbox_agent)")
        sys.exit(run_in(args.project, args.name, args.arguments))
    with tempfile.TemporaryDirectory() as scratch:
        answers = dict(answer.partition("=")[::2] for answer in args.answer)
        project = render(args.backend, Path(scratch), answers)
        sys.exit(run_in(project.path, args.name, args.arguments))


if __name__ == "__main__":
    main()
