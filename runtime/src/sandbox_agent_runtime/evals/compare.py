"""Two evaluation reports side by side: which cases got better or worse,
by how much, and whether any got worse by more than chance (or a set
threshold) explains.

A drop within the noise of a few runs is reported, not failed on, so CI fails
a change for a regression the repetitions show, not for chance (``compare()``).
"""

import math
from collections.abc import Callable, Mapping
from typing import Any

from sandbox_agent_runtime.evals.dataset import shown
from sandbox_agent_runtime.evals.report import PARTS, money, percent, seconds
from sandbox_agent_runtime.evals.stats import clear_drop, wilson

# Rates closer than this are equal (a float's rounding is not a change).
_EPSILON = 1e-9


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _fraction(value: object) -> bool:
    """A number from 0 to 1 (never NaN, which every comparison calls false)."""
    return _number(value) and 0 <= value <= 1  # type: ignore[operator]


def _figures(figures: dict[str, Any], where: str) -> None:
    """The figures compare() reads of a case, or of the whole report: a
    ``pass_rate``, and if given an ``interval``, counts, cost and time it
    can trust; ``ValueError`` naming the first that is not."""
    rate = figures.get("pass_rate")
    if not _fraction(rate):
        raise ValueError(
            f"not an evaluation report: {where}pass_rate {shown(rate)} is not allowed: "
            "a report gives a fraction from 0 to 1"
        )
    interval = figures.get("interval")
    if interval is not None and not (
        isinstance(interval, list)
        and len(interval) == 2
        and all(map(_fraction, interval))
        and interval[0] <= interval[1]
    ):
        raise ValueError(
            f"not an evaluation report: {where}interval {shown(interval)} is not allowed: "
            "a report gives [low, high], fractions from 0 to 1"
        )
    passed, attempts = figures.get("passed"), figures.get("attempts")
    if (passed, attempts) != (None, None) and not (
        isinstance(passed, int)
        and isinstance(attempts, int)
        and not isinstance(passed, bool)
        and 0 <= passed <= attempts
    ):
        raise ValueError(
            f"not an evaluation report: {where}passed {shown(passed)} of attempts {shown(attempts)} "
            "is not allowed: a report gives whole numbers, passed at most attempts"
        )
    for name in ("cost", "duration_seconds", *PARTS):
        value = figures.get(name)
        if value is not None and not (_number(value) and 0 <= value < math.inf):
            raise ValueError(
                f"not an evaluation report: {where}{name} {shown(value)} is not allowed: "
                "a report gives a number from 0, or null"
            )


def check(report: object) -> dict[str, Any]:
    """``report`` when it is an evaluation report compare() can read;
    ``ValueError`` ("not an evaluation report: ...") in one line if not:
    a figure missing, or not one a report holds (a NaN, an infinity, a
    rate below 0 or above 1), or a case given twice."""
    if not isinstance(report, dict):
        raise ValueError("not an evaluation report: not a JSON object")
    if "pass_rate" not in report:
        raise ValueError("not an evaluation report: it has no 'pass_rate'")
    _figures(report, "")
    cases = report.get("cases")
    if not isinstance(cases, list):
        raise ValueError("not an evaluation report: it has no list of 'cases'")
    ids: set[str] = set()
    for place, case in enumerate(cases, start=1):
        if (
            not isinstance(case, dict)
            or not isinstance(case.get("id"), str)
            or "pass_rate" not in case
        ):
            raise ValueError(f"not an evaluation report: case {place} has no 'id' and 'pass_rate'")
        if case["id"] in ids:
            raise ValueError(
                f"not an evaluation report: case {place} ({shown(case['id'])}) is given twice"
            )
        ids.add(case["id"])
        _figures(case, f"case {place} ({shown(case['id'])}): ")
    return report


def _interval(figures: Mapping[str, Any]) -> tuple[float, float]:
    """The rate's 95% interval: as the report gives it, or from its counts."""
    interval = figures.get("interval")
    if isinstance(interval, list) and len(interval) == 2 and all(map(_number, interval)):
        return (float(interval[0]), float(interval[1]))
    passed, attempts = figures.get("passed"), figures.get("attempts")
    if isinstance(passed, int) and isinstance(attempts, int) and 0 <= passed <= attempts:
        return wilson(passed, attempts)
    rate = float(figures["pass_rate"])
    return (rate, rate)


def _points(change: float) -> str:
    text = f"{change * 100:+.1f}".removesuffix(".0")
    return f"{text} point{'' if abs(change * 100) == 1 else 's'}"


def _change(name: str, old: object, new: object, shown: Callable[[float], str]) -> str:
    """A figure's change in percent ("cost $0.0100 -> $0.0120 (+20%)")."""
    if not isinstance(old, int | float) or not isinstance(new, int | float):
        return f"{name} n/a"
    before, after = float(old), float(new)
    if abs(after - before) < _EPSILON:
        return f"{name} {shown(after)} (unchanged)"
    by = f" ({(after - before) / before * 100:+.0f}%)" if before > 0 else ""
    return f"{name} {shown(before)} -> {shown(after)}{by}"


def _line(
    name: str, old: Mapping[str, Any], new: Mapping[str, Any], max_drop: float | None
) -> tuple[str, bool]:
    """What changed of one case (or overall), and whether it is a regression."""
    before, after = float(old["pass_rate"]), float(new["pass_rate"])
    drop = before - after
    regression = False
    if abs(drop) < _EPSILON:
        rate = f"unchanged: pass rate {percent(after)}"
    elif drop < 0:
        rate = f"better: pass rate {percent(before)} -> {percent(after)} ({_points(-drop)})"
    else:
        if max_drop is None:
            regression = clear_drop(before, _interval(old), after, _interval(new))
            how = "beyond the intervals" if regression else "within the intervals"
        else:
            regression = drop > max_drop + _EPSILON
            limit = _points(max_drop).removeprefix("+")
            how = f"over the {limit} allowed" if regression else f"within the {limit} allowed"
        rate = f"worse: pass rate {percent(before)} -> {percent(after)} ({_points(-drop)}, {how})"
    cost = _change("cost", old.get("cost"), new.get("cost"), money)
    if any(figures.get(key) for figures in (old, new) for key in ("sandbox_cost", "actions_cost")):
        # Its parts, when more than the tokens cost (a report made before
        # the parts were counted has none).
        parts = (
            _change(f"{part} cost", old.get(key), new.get(key), money)
            for part, key in (
                ("tokens'", "token_cost"),
                ("sandbox", "sandbox_cost"),
                ("actions'", "actions_cost"),
            )
        )
        cost = f"{cost} ({', '.join(parts)})"
    time = _change("time", old.get("duration_seconds"), new.get("duration_seconds"), seconds)
    return f"{name}: {rate}; {cost}; {time}", regression


def compare(
    old: dict[str, Any], new: dict[str, Any], max_drop: float | None = None
) -> tuple[list[str], int]:
    """The lines saying what changed from ``old`` to ``new`` (the new
    report's cases in its order, then those only in the old one, then the
    overall line and the verdict) and the exit status: 1 on a regression, 0
    when nothing got worse beyond the intervals or ``max_drop``.

    A case, or the overall rate, is a regression when its pass rate dropped:
    with no threshold, beyond the intervals (the new rate below the old
    rate's 95% interval and the old rate above the new one's: 5 of 5 falling
    to 3 of 5 is noise, to 2 of 5 is not); with ``max_drop`` (a fraction: 0.1
    is 10 points), by more than that. A higher cost, a longer time or a case
    in one report only is reported, never failed on; the overall rate is
    judged only when both reports hold the same cases."""
    if max_drop is not None and not 0 <= max_drop <= 1:
        raise ValueError(f"max_drop {max_drop!r} is not a fraction from 0 to 1 (0.1: 10 points)")
    for which, report in (("the old one", old), ("the new one", new)):
        try:
            check(report)
        except ValueError as e:
            raise ValueError(f"{e} ({which})") from None
    before = {case["id"]: case for case in old["cases"]}
    after = {case["id"]: case for case in new["cases"]}
    lines: list[str] = []
    regressions: list[str] = []
    for case_id, case in after.items():
        if case_id not in before:
            lines.append(
                f"{case_id}: only in the new report: pass rate {percent(case['pass_rate'])}"
            )
            continue
        line, regression = _line(case_id, before[case_id], case, max_drop)
        lines.append(line)
        if regression:
            regressions.append(case_id)
    for case_id, case in before.items():
        if case_id not in after:
            lines.append(
                f"{case_id}: only in the old report (pass rate {percent(case['pass_rate'])}): "
                "not run this time"
            )
    line, regression = _line("Overall", old, new, max_drop)
    if before.keys() != after.keys():
        # Rates over different cases say nothing of the agent: only the cases are judged.
        line, regression = f"{line} (not judged: the reports hold different cases)", False
    lines.append(line)
    if regression:
        regressions.append("overall")
    beyond = (
        "beyond the intervals"
        if max_drop is None
        else f"by more than {_points(max_drop).removeprefix('+')}"
    )
    if regressions:
        lines.append(f"Regression: {', '.join(regressions)} got worse {beyond}.")
        return lines, 1
    lines.append(f"No regression: nothing got worse {beyond}.")
    return lines, 0
