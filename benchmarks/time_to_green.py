"""How long a freshly generated project takes to go green, per backend.

    python benchmarks/time_to_green.py            # about two minutes
    python benchmarks/time_to_green.py --runs 3 --backends local

For each backend it renders the default project and times what a new user
runs: ``uv sync`` (dependencies already in uv's cache, as on any machine that
has synced once), then ``uv run pytest`` twice: the first run also compiles
every imported module to bytecode, in each of its test processes (uv does not
compile at install), the second is what each later run costs. It does the
same with ``uv sync --compile-bytecode``, which compiles once, at install, as
the generated CI workflow does. The same commands the template's own suite
uses (``tests/baked.py``), offline and without an API key, with Python allowed
to write bytecode as on a user's machine. Figures are medians over ``--runs``
fresh renders.
"""

import argparse
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

from cookiecutter.main import cookiecutter

TEMPLATE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TEMPLATE))

from local_extensions import BACKENDS  # noqa: E402
from tests.baked import BakedProject, tool  # noqa: E402

OFFLINE = {"OPENAI_API_KEY": "", "OPENAI_BASE_URL": "http://127.0.0.1:9"}


def timed(step: Callable[[], CompletedProcess[str]]) -> float:
    began = time.perf_counter()
    done = step()
    elapsed = time.perf_counter() - began
    if done.returncode != 0:
        sys.exit(f"{' '.join(map(str, done.args))} failed:\n{done.stdout}{done.stderr}")
    return elapsed


def render(backend: str, where: Path, answers: dict[str, str] | None = None) -> BakedProject:
    context = {"sandbox_backend": backend, **(answers or {})}
    path = cookiecutter(str(TEMPLATE), no_input=True, extra_context=context, output_dir=str(where))
    return BakedProject(Path(path), {"python_version": "3.11", **context})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1, help="fresh renders per backend (the median is shown)")
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    args = parser.parse_args()

    uv = tool("uv")
    print(f"Python {platform.python_version()}, {platform.machine()}, median of {args.runs} fresh renders\n")
    print("| backend | install | install time (warm cache) | first `uv run pytest` | later `uv run pytest` | install + first run |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        for backend in args.backends:
            # Fill uv's cache with this backend's dependencies first, untimed.
            warm = render(backend, Path(scratch) / "warm")
            timed(warm.install)
            shutil.rmtree(warm.path)
            for install in ([], ["--compile-bytecode"]):
                syncs, firsts, laters = [], [], []
                for run in range(args.runs):
                    project = render(backend, Path(scratch) / f"run{run}")
                    syncs.append(timed(lambda p=project: p.install(*install)))
                    firsts.append(timed(lambda p=project: p.run_tests(**OFFLINE)))
                    laters.append(timed(lambda p=project: p.run_tests(**OFFLINE)))
                    shutil.rmtree(project.path)
                sync, first, later = (statistics.median(x) for x in (syncs, firsts, laters))
                command = " ".join(["`uv sync", *install]) + "`"
                print(
                    f"| {backend} | {command} | {sync:.1f} s | {first:.1f} s | {later:.1f} s | {sync + first:.1f} s |",
                    flush=True,
                )
    version = subprocess.run([uv, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"\n({version}; the suites run offline with no API key)")


if __name__ == "__main__":
    main()
