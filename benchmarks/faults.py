"""What the generated service's runs survive: the figures of its fault tests.

    python benchmarks/faults.py [--rounds N] [--backends local docker]

Renders each backend's default project, installs it, and runs its fault tests
(`uv run pytest -m faults`: the Temporal server restarted, the worker cut off
from it, a model storm, malformed JSON, hostile commands, a Docker engine
restarted) N times. Each test adds a line of figures to FAULT_FIGURES
(tests/faults.py in the project); this prints them added up: faults injected,
runs completed, runs failed with a reason, runs lost (neither: must be 0),
and commands run more than once. The Docker tests need a Docker engine, and
the engine restart needs root (they are left out otherwise).
"""

import argparse
import json
import platform
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TEMPLATE))

from benchmarks.time_to_green import OFFLINE, render, timed  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="times each project's fault tests run")
    parser.add_argument("--backends", nargs="+", default=["local", "docker"], choices=["local", "docker"])
    args = parser.parse_args()

    totals: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    with tempfile.TemporaryDirectory() as scratch:
        for backend in args.backends:
            project = render(backend, Path(scratch) / backend)
            timed(project.install)
            figures = Path(scratch) / f"{backend}.jsonl"
            for _ in range(args.rounds):
                timed(lambda p=project: p.run_tests("-m", "faults", FAULT_FIGURES=str(figures), **OFFLINE))
            for line in figures.read_text().splitlines():
                figure = json.loads(line)
                total = totals[f"{figure['fault']} ({backend})"]
                total["injected"] += 1
                for name in ("runs", "completed", "failed", "lost", "twice"):
                    total[name] += figure[name]

    print(f"Python {platform.python_version()}, {platform.machine()}, {args.rounds} round(s)\n")
    print("| Fault (backend) | Injected | Runs | Completed | Failed with a reason | Lost | Commands run twice |")
    print("|---|---|---|---|---|---|---|")
    for fault, total in totals.items():
        counts = " | ".join(str(total[name]) for name in ("injected", "runs", "completed", "failed", "lost", "twice"))
        print(f"| {fault} | {counts} |")
    if any(total["lost"] for total in totals.values()):
        sys.exit("runs were lost")


if __name__ == "__main__":
    main()
