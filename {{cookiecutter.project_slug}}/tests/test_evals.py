"""The evaluation in evals/ runs as a team runs it (`{{ cookiecutter.project_slug }}-eval evals/`),
through the real workflow and worker with a scripted model: the shell commands
of a right solution pass every case and write both reports; those of wrong
ones fail each case, naming the check that caught it. What the evaluations
guarantee in general (repetitions, time limits, --compare, a bad dataset) is
proven by the runtime's own tests (tests/test_evals.py there)."""

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from sandbox_agent_runtime.testing import EvalModel, load_dataset, running_worker

from {{ cookiecutter.package_name }} import evals

DATASET = Path(__file__).resolve().parents[1] / "evals"
# Each region's total, a line each.
TOTALS = (
    "awk -F, 'NR > 1 {t[$2] += $3} END {for (r in t) printf \"%s %.2f\\n\", r, t[r]}' sales.csv"
)

# What a right solution runs, by case id.
SOLVES = {
    "csv-total": [
        "awk -F, 'NR > 1 {s += $3} END {printf \"%.2f\\n\", s}' sales.csv > total.txt",
    ],
    "fix-failing-test": [
        "cd calculator && python3 -m unittest -q",
        "sed -i 's|/ (len(values) + 1)|/ len(values)|' calculator/calculator.py",
        "cd calculator && python3 -m unittest -q",
    ],
    "write-report": [
        "{ printf '# Sales\\n\\n%s sales\\n\\n' $(($(wc -l < sales.csv) - 1)); "
        + TOTALS
        + "; } > report.md",
        f"{TOTALS} | sort -k2 -n -r | head -n 1 | cut -d' ' -f1",
    ],
}
# What wrong ones run, and the check that must catch each.
FAILS = {
    "csv-total": (["printf '600.00\\n' > total.txt"], "file_contains total.txt"),
    "fix-failing-test": (
        # The tests changed to pass, rather than the bug fixed.
        ["sed -i 's/2.5)/2.0)/; s/, 7)/, 3.5)/' calculator/test_calculator.py"],
        "file_sha256 calculator/test_calculator.py",
    ),
    "write-report": (
        ["{ printf '# Sales\\n\\n'; " + TOTALS + "; } > report.md", "echo north"],
        "answer_matches",
    ),
}


def scripts(commands: Mapping[str, Sequence[str]]) -> dict[str, Callable[[int], Sequence[str]]]:
    """The scripted model's commands, keyed by each case's prompt."""
    prompts = {case.id: case.prompt for case in load_dataset(DATASET)}
    assert set(prompts) == set(commands), (
        f"evals/ has the cases {sorted(prompts)}: give each a right and a wrong script here"
    )
    return {prompts[case]: every_time(each) for case, each in commands.items()}


def every_time(commands: Sequence[str]) -> Callable[[int], Sequence[str]]:
    """The same commands for every repetition."""
    return lambda repetition: commands


async def evaluate(
    temporal_client: Client,
    commands: Mapping[str, Sequence[str]],
    report: Path,
    capsys: pytest.CaptureFixture[str],
) -> tuple[int, str, dict[str, Any]]:
    """`<slug>-eval evals/ --report-dir REPORT` with the model running
    ``commands``: its exit status, what it printed, its report's cases by id."""
    async with running_worker(temporal_client, EvalModel(scripts(commands))):
        # The command runs its own event loop: in a thread, beside the worker.
        status = await asyncio.to_thread(command, [str(DATASET), "--report-dir", str(report)])
    cases = json.loads((report / "report.json").read_text())["cases"]
    return status, capsys.readouterr().out, {case["id"]: case for case in cases}


def command(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as stopped:
        evals.main(argv)
    return int(stopped.value.code or 0)


@pytest.mark.usefixtures("starter_env")
async def test_the_dataset_passes_when_solved_and_fails_each_case_by_its_check_when_not(
    temporal_client: Client, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, solved = await evaluate(temporal_client, SOLVES, tmp_path / "solved", capsys)

    assert status == 0, out
    assert {case: each["pass_rate"] for case, each in solved.items()} == dict.fromkeys(SOLVES, 1.0)
    assert "Pass rate 100%" in out, out
    for name in ("report.json", "report.md", "report.html"):
        assert (tmp_path / "solved" / name).is_file(), name

    wrong = {case: each for case, (each, _) in FAILS.items()}
    status, out, failed = await evaluate(temporal_client, wrong, tmp_path / "failed", capsys)

    # The evaluation ran: a low pass rate is its finding, not its failure.
    assert status == 0, out
    for case, (_, check) in FAILS.items():
        assert failed[case]["pass_rate"] == 0.0, (case, out)
        [failure] = failed[case]["failures"]
        assert failure["failed"] == check, (case, failure)
