"""How long the template's whole test suite takes, every generated suite included.

    python benchmarks/template_suite.py

Runs ``pytest -q`` in the template repository (what ``.ci/run`` runs) with
``--durations`` and prints the wall time and the slowest steps. uv's package
cache is shared by every generated project (each one still gets its own
virtualenv); the generated suites run one after the other.
"""

import os
import platform
import subprocess
import sys
import time
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parents[1]


def main() -> None:
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--durations=8", *sys.argv[1:]],
        cwd=TEMPLATE,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - began
    lines = done.stdout.splitlines()
    slowest = [line for line in lines if line.split(" ", 1)[0].endswith("s") and " call " in line]
    print(f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs")
    print(f"template suite: {wall:.0f} s wall ({lines[-1] if lines else 'no output'})")
    print("slowest:")
    for line in slowest:
        print(f"  {line}")
    if done.returncode != 0:
        sys.exit(done.stdout[-3000:] + done.stderr[-2000:])


if __name__ == "__main__":
    main()
