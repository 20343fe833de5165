"""How long a render takes, next to a bare one-file template on the same machine.

    python benchmarks/render.py            # about half a minute
    python benchmarks/render.py --runs 9

For every combination in ``tests/combinations.py`` it renders the template
``--runs`` times and prints the median wall time, both through the Python API
(``cookiecutter.main.cookiecutter``, which is the template's own cost: prompts,
Jinja, hooks, files) and through the ``cookiecutter`` command a user types
(which adds the interpreter's start-up). Then the whole table of combinations,
rendered one after the other. The reference is a template with one variable
and one file, made in a temporary directory, rendered the same ways.
"""

import argparse
import json
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from cookiecutter.main import cookiecutter

TEMPLATE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TEMPLATE))

from tests.combinations import COMBINATIONS  # noqa: E402


def bare_template(where: Path) -> Path:
    """A one-variable, one-file template: what any render costs at least."""
    template = where / "bare-template"
    (template / "{{cookiecutter.project_slug}}").mkdir(parents=True)
    (template / "cookiecutter.json").write_text(json.dumps({"project_slug": "bare"}))
    (template / "{{cookiecutter.project_slug}}" / "README.md").write_text("# {{ cookiecutter.project_slug }}\n")
    return template


def median_seconds(render: Callable[[Path], object], runs: int, scratch: Path) -> float:
    times = []
    for _ in range(runs):
        out = Path(tempfile.mkdtemp(dir=scratch))
        began = time.perf_counter()
        render(out)
        times.append(time.perf_counter() - began)
        shutil.rmtree(out)
    return statistics.median(times)


def api(template: Path, answers: dict[str, object]) -> Callable[[Path], object]:
    return lambda out: cookiecutter(str(template), no_input=True, extra_context=answers, output_dir=str(out))


def command(template: Path, answers: dict[str, object]) -> Callable[[Path], object]:
    cli = shutil.which("cookiecutter") or str(Path(sys.executable).parent / "cookiecutter")
    args = [cli, "--no-input", "-o", "OUT", str(template), *(f"{k}={v}" for k, v in answers.items())]

    def run(out: Path) -> None:
        subprocess.run([str(out) if a == "OUT" else a for a in args], check=True, capture_output=True)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="renders per figure (the median is shown)")
    runs = parser.parse_args().runs

    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        bare = bare_template(scratch)
        bare_api = median_seconds(api(bare, {}), runs, scratch)
        bare_cli = median_seconds(command(bare, {}), runs, scratch)

        print(f"Python {platform.python_version()}, {platform.machine()}, median of {runs} renders\n")
        print("| render | API | ratio to bare | `cookiecutter` command | ratio to bare |")
        print("|---|---|---|---|---|")
        print(f"| bare one-file template | {bare_api * 1000:.0f} ms | 1.0x | {bare_cli * 1000:.0f} ms | 1.0x |")
        for param in COMBINATIONS:
            answers = dict(param.values[0])
            a = median_seconds(api(TEMPLATE, answers), runs, scratch)
            c = median_seconds(command(TEMPLATE, answers), runs, scratch)
            print(
                f"| {param.id} | {a * 1000:.0f} ms | {a / bare_api:.1f}x "
                f"| {c * 1000:.0f} ms | {c / bare_cli:.1f}x |",
                flush=True,
            )

        def whole_table(out: Path) -> None:
            for param in COMBINATIONS:
                cookiecutter(str(TEMPLATE), no_input=True, extra_context=dict(param.values[0]), output_dir=str(out))
                shutil.rmtree(next(p for p in out.iterdir() if p.is_dir()))

        table = median_seconds(whole_table, runs, scratch)
        print(
            f"| whole table ({len(COMBINATIONS)} combinations) | {table * 1000:.0f} ms "
            f"| {table / bare_api / len(COMBINATIONS):.1f}x per render | | |"
        )


if __name__ == "__main__":
    main()
