"""What an evaluation found, added up and written for machines and people,
and two evaluations compared (evals/stats.py, report.py, compare.py): rates
carry their 95% interval, unknown figures stay unknown, nothing from a run
adds markup to a page, and only a drop beyond chance (or the threshold
given) fails a comparison."""

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sandbox_agent_runtime.evals.compare import compare
from sandbox_agent_runtime.evals.report import (
    PARTS,
    Attempt,
    Price,
    build,
    cost_of,
    markdown,
    write,
)
from sandbox_agent_runtime.evals.stats import wilson


@pytest.mark.parametrize(
    ("successes", "trials", "interval"),
    [
        pytest.param(5, 5, (0.566, 1.0), id="all"),
        pytest.param(0, 5, (0.0, 0.434), id="none"),
        pytest.param(3, 5, (0.231, 0.882), id="three-of-five"),
        pytest.param(7, 10, (0.397, 0.892), id="seven-of-ten"),
        pytest.param(0, 0, (0.0, 1.0), id="no-trials"),
    ],
)
def test_wilson_intervals(successes: int, trials: int, interval: tuple[float, float]) -> None:
    low, high = wilson(successes, trials)
    assert (round(low, 3), round(high, 3)) == interval


PRICES = {"gpt-test": Price(input=2.0, cached_input=0.5, output=8.0)}


def test_cached_tokens_are_charged_at_their_price_out_of_the_input() -> None:
    # 1M input of which 400k cached, 100k output: 0.6 * 2 + 0.4 * 0.5 + 0.1 * 8.
    assert cost_of("gpt-test", 1_000_000, 400_000, 100_000, PRICES) == pytest.approx(2.2)
    assert cost_of("gpt-unknown", 1_000_000, 0, 0, PRICES) is None


def attempt(case_id: str, repetition: int, passed: bool, **figures: Any) -> Attempt:
    run_id = f"eval-{case_id}-{repetition}"
    made = Attempt(
        case_id=case_id,
        repetition=repetition,
        passed=passed,
        failed=None if passed else "file_contains total.txt",
        reason="" if passed else "total.txt does not hold '1234'",
        run_id=run_id,
        link=f"http://localhost:8233/namespaces/default/workflows/{run_id}",
        turns=4,
        input_tokens=10_000,
        cached_tokens=2_000,
        output_tokens=500,
        cost=0.02,
        duration_seconds=10.0,
    )
    return replace(made, **figures)


# A steady case, a flaky one (3 of 5) and one that always fails, 5 times each.
ATTEMPTS = [
    *(
        attempt("steady", n, True, turns=n, rubric_score=0.8, rubric_reason="Clear.")
        for n in (1, 2, 3, 4, 5)
    ),
    *(attempt("flaky", n, n in (1, 3, 5), duration_seconds=float(n)) for n in (5, 4, 3, 2, 1)),
    *(
        attempt("broken", n, False, failed="timeout", reason="no answer in 600 s")
        for n in range(1, 6)
    ),
]


def report_of(attempts: list[Attempt]) -> dict[str, Any]:
    return build(
        attempts,
        dataset="evals/tasks.yaml",
        model="gpt-test",
        repeat=5,
        started="2026-01-01T00:00:00Z",
        finished="2026-01-01T00:05:00Z",
    )


def test_build_adds_up_the_attempts_case_by_case() -> None:
    report = report_of(ATTEMPTS)
    assert report["pass_rate"] == pytest.approx(8 / 15)
    assert (report["attempts"], report["passed"]) == (15, 8)
    assert report["interval"] == pytest.approx(list(wilson(8, 15)))
    assert report["cost"] == pytest.approx(0.3)
    assert report["duration_seconds"] == pytest.approx(5 * 10 + 15 + 5 * 10)
    assert [case["id"] for case in report["cases"]] == ["steady", "flaky", "broken"]
    steady, flaky, broken = report["cases"]
    assert (steady["pass_rate"], steady["turns"], steady["rubric"]) == (1.0, 3.0, 0.8)
    assert steady["failures"] == []
    assert flaky["pass_rate"] == 0.6
    assert [round(bound, 3) for bound in flaky["interval"]] == [0.231, 0.882]
    assert (flaky["attempts"], flaky["passed"], flaky["duration_seconds"]) == (5, 3, 3.0)
    assert (flaky["input_tokens"], flaky["output_tokens"]) == (10_000, 500)
    assert flaky["cost"] == pytest.approx(0.02)
    assert flaky["rubric"] is None
    # Its failures, by repetition, each with its run.
    assert flaky["failures"] == [
        {
            "repetition": n,
            "failed": "file_contains total.txt",
            "reason": "total.txt does not hold '1234'",
            "run_id": f"eval-flaky-{n}",
            "link": f"http://localhost:8233/namespaces/default/workflows/eval-flaky-{n}",
        }
        for n in (2, 4)
    ]
    assert broken["pass_rate"] == 0.0
    assert {failure["failed"] for failure in broken["failures"]} == {"timeout"}
    json.dumps(report, allow_nan=False)


def test_a_cost_unknown_is_null_not_zero() -> None:
    report = report_of([attempt("a", 1, True, cost=None), attempt("a", 2, True)])
    assert report["cost"] is None
    assert report["cases"][0]["cost"] is None


def test_write_makes_the_three_files_and_escapes_what_runs_said(tmp_path: Path) -> None:
    hostile = "<script>alert(1)</script>"
    attempts = [
        *ATTEMPTS,
        attempt(
            "esc<script>", 1, False, reason=f"found {hostile} | here", link="javascript:alert(1)"
        ),
    ]
    report = report_of(attempts)
    directory = tmp_path / "reports" / "today"
    paths = write(report, directory)
    assert [path.name for path in paths] == ["report.json", "report.md", "report.html"]
    assert json.loads((directory / "report.json").read_text()) == report
    markdown = (directory / "report.md").read_text()
    assert markdown.splitlines()[2].startswith("**Pass rate 50%** (95% interval 28%-72%)")
    assert "| flaky | 60% | 23%-88% | 3/5 |" in markdown
    assert (
        "[eval-flaky-2](http://localhost:8233/namespaces/default/workflows/eval-flaky-2)"
        in markdown
    )
    page = (directory / "report.html").read_text()
    assert "<script" not in page.lower() and "<script" not in markdown
    assert "esc&lt;script&gt;" in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; | here" in page
    assert 'href="javascript' not in page and "](javascript" not in markdown
    assert page.count("<svg") == 1 and "http://" not in page.split("<body>")[0]
    # Written again: the files are replaced, not added to.
    write(report_of(ATTEMPTS[:5]), directory)
    assert "flaky" not in (directory / "report.html").read_text()


def test_a_report_is_written_over_a_link_in_its_directory_never_through_it(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "reports"
    directory.mkdir()
    kept = tmp_path / "kept.txt"
    kept.write_text("a file the links lead to\n")
    (directory / "report.html").symlink_to(kept)
    (directory / "report.md").symlink_to(tmp_path / "nowhere.txt")
    paths = write(report_of(ATTEMPTS), directory)
    assert kept.read_text() == "a file the links lead to\n"
    assert not (tmp_path / "nowhere.txt").exists()
    for path in paths:
        assert not path.is_symlink() and path.read_text().strip()
    # Nothing else left behind: no file half-written beside them.
    assert sorted(each.name for each in directory.iterdir()) == [
        "report.html",
        "report.json",
        "report.md",
    ]


def case_report(rates: dict[str, tuple[int, int]], cost: float = 0.02) -> dict[str, Any]:
    """A report of cases with (passed, attempts) each, at ``cost`` a run."""
    attempts = [
        attempt(case_id, n, n <= passed, cost=cost)
        for case_id, (passed, runs) in rates.items()
        for n in range(1, runs + 1)
    ]
    return report_of(attempts)


def test_a_drop_beyond_the_intervals_is_a_regression() -> None:
    old = case_report({"steady": (5, 5), "flaky": (3, 5)})
    new = case_report({"steady": (1, 5), "flaky": (3, 5)})
    lines, status = compare(old, new)
    assert status == 1
    assert lines[0].startswith(
        "steady: worse: pass rate 100% -> 20% (-80 points, beyond the intervals); "
        "cost $0.0200 (unchanged)"
    )
    assert lines[1].startswith("flaky: unchanged: pass rate 60%")
    assert lines[-1] == "Regression: steady, overall got worse beyond the intervals."


def test_a_drop_within_the_intervals_is_not() -> None:
    lines, status = compare(case_report({"a": (5, 5)}), case_report({"a": (3, 5)}))
    assert status == 0
    assert lines[0].startswith("a: worse: pass rate 100% -> 60% (-40 points, within the intervals)")
    assert lines[-1] == "No regression: nothing got worse beyond the intervals."


def test_each_part_of_the_cost_is_in_the_report_and_its_comparison() -> None:
    parts = {
        "token_cost": 0.01,
        "sandbox_seconds": 30.0,
        "sandbox_cost": 0.009,
        "actions": 40,
        "actions_cost": 0.001,
    }
    old = report_of([attempt("a", n, True, **parts) for n in (1, 2)])
    # Added up over the report, a mean over each case's attempts.
    assert {part: old[part] for part in PARTS} == pytest.approx(
        {key: value * 2 for key, value in parts.items()}
    )
    assert {part: old["cases"][0][part] for part in PARTS} == pytest.approx(parts)
    assert (
        "cost $0.0400 (tokens $0.0200, sandbox $0.0180 for 60.0 s, 80 Temporal actions $0.0020)"
        in markdown(old)
    )
    new = report_of([attempt("a", n, True, **{**parts, "sandbox_cost": 0.018}) for n in (1, 2)])
    lines, _ = compare(old, new)
    assert lines[0] == (
        "a: unchanged: pass rate 100%; cost $0.0200 (unchanged) (tokens' cost $0.0100 "
        "(unchanged), sandbox cost $0.0090 -> $0.0180 (+100%), actions' cost $0.0010 "
        "(unchanged)); time 10.0 s (unchanged)"
    )
    # A report made before the parts were counted is compared on its cost alone.
    before = {key: value for key, value in old.items() if key not in PARTS}
    before["cases"] = [
        {key: value for key, value in case.items() if key not in PARTS} for case in old["cases"]
    ]
    assert "tokens' cost" not in compare(before, before)[0][0]


def test_equal_reports_compare_clean() -> None:
    report = case_report({"a": (5, 5), "b": (2, 5)})
    lines, status = compare(report, json.loads(json.dumps(report)))
    assert status == 0
    assert all("unchanged: pass rate" in line for line in lines[:-1])


def test_a_better_case_is_said_so_and_costs_in_percent() -> None:
    lines, status = compare(
        case_report({"a": (1, 5)}, cost=0.02), case_report({"a": (5, 5)}, cost=0.03)
    )
    assert status == 0
    assert lines[0] == (
        "a: better: pass rate 20% -> 100% (+80 points); cost $0.0200 -> $0.0300 (+50%); "
        "time 10.0 s (unchanged)"
    )


@pytest.mark.parametrize(
    ("max_drop", "status"),
    [
        pytest.param(0.3, 0, id="a-drop-of-20-points-within-30"),
        pytest.param(0.2, 0, id="a-drop-of-20-points-at-20"),
        pytest.param(0.1, 1, id="a-drop-of-20-points-over-10"),
    ],
)
def test_max_drop_is_the_most_a_rate_may_fall(max_drop: float, status: int) -> None:
    old, new = case_report({"a": (5, 5)}), case_report({"a": (4, 5)})
    lines, got = compare(old, new, max_drop=max_drop)
    assert got == status
    limit = f"{max_drop * 100:.0f} points"
    how = "over" if status else "within"
    assert lines[0].startswith(
        f"a: worse: pass rate 100% -> 80% (-20 points, {how} the {limit} allowed)"
    )


def test_cases_in_one_report_only_are_named() -> None:
    lines, status = compare(
        case_report({"a": (5, 5), "gone": (5, 5)}), case_report({"a": (5, 5), "new": (2, 5)})
    )
    assert status == 0
    assert "new: only in the new report: pass rate 40%" in lines
    assert "gone: only in the old report (pass rate 100%): not run this time" in lines
    assert lines[-2].endswith("(not judged: the reports hold different cases)")


def test_a_report_not_of_an_evaluation_is_refused() -> None:
    with pytest.raises(
        ValueError, match=r"^not an evaluation report: it has no list of 'cases' \(the new one\)$"
    ):
        compare(case_report({"a": (1, 1)}), {"pass_rate": 1.0})


@pytest.mark.parametrize(
    ("change", "line"),
    [
        pytest.param(
            {"pass_rate": math.nan},
            "not an evaluation report: pass_rate nan is not allowed: a report gives a fraction "
            "from 0 to 1",
            id="nan",
        ),
        pytest.param(
            {"pass_rate": math.inf},
            "not an evaluation report: pass_rate inf is not allowed: a report gives a fraction "
            "from 0 to 1",
            id="inf",
        ),
        pytest.param(
            {"case": {"pass_rate": -0.5}},
            "not an evaluation report: case 1 ('a'): pass_rate -0.5 is not allowed: a report "
            "gives a fraction from 0 to 1",
            id="negative",
        ),
        pytest.param(
            {"case": {"pass_rate": 1.5}},
            "not an evaluation report: case 1 ('a'): pass_rate 1.5 is not allowed: a report "
            "gives a fraction from 0 to 1",
            id="over-1",
        ),
        pytest.param(
            {"case": {"interval": [math.nan, 1.0]}},
            "not an evaluation report: case 1 ('a'): interval [nan, 1.0] is not allowed: a "
            "report gives [low, high], fractions from 0 to 1",
            id="nan-interval",
        ),
        pytest.param(
            {"cost": "$1"},
            "not an evaluation report: cost '$1' is not allowed: a report gives a number from "
            "0, or null",
            id="cost-not-a-number",
        ),
        pytest.param(
            {"case": {"passed": 6}},
            "not an evaluation report: case 1 ('a'): passed 6 of attempts 5 is not allowed: a "
            "report gives whole numbers, passed at most attempts",
            id="more-passed-than-run",
        ),
    ],
)
def test_a_figure_no_report_holds_is_refused_not_compared(
    change: dict[str, Any], line: str
) -> None:
    new = case_report({"a": (1, 5)})
    new["cases"][0].update(change.pop("case", {}))
    new.update(change)
    with pytest.raises(ValueError) as refused:
        compare(case_report({"a": (5, 5)}), new)
    assert str(refused.value) == f"{line} (the new one)"
