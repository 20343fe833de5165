"""What an evaluation found, for machines and for people: the runs of each
case added up into a report, and the report written out.

A figure nothing measured is null, never a made-up zero (the cost of a
model without a price, the grade of a case without a rubric) (``build()``).
The pages people read are self-contained, and every string from the report
is escaped where it lands: a case id, a check's output or a model's reason
cannot add markup to them (``write()``).
"""

import html
import json
import os
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox_agent_runtime.evals.stats import wilson

# The service's prices, which its budgets use too: one way to turn tokens
# into money.
from sandbox_agent_runtime.service import Price, cost_of, usd

__all__ = ["Attempt", "Price", "build", "cost_of", "markdown", "page", "wilson", "write"]

# The report's format: compare.py reads reports of this one.
FORMAT = 1


@dataclass(frozen=True)
class Attempt:
    """One run of one case, and what its checks found."""

    case_id: str
    # Which of the case's runs it is (from 1).
    repetition: int
    passed: bool
    # The check that failed ("file_contains out.txt", "answer_matches",
    # "timeout", "run failed"), None when it passed; and why, in a line.
    failed: str | None
    reason: str
    # The run's workflow id, and its page in the Temporal Web UI.
    run_id: str
    link: str
    turns: int
    # Input tokens include the cached ones, as the model's usage reports them.
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    # In USD, the whole cost: tokens, sandbox and actions (the run's usage);
    # None when the price table has no price for the model.
    cost: float | None
    duration_seconds: float
    # The rubric's grade (0 to 1) and the grader's reason, with a rubric.
    rubric_score: float | None = None
    rubric_reason: str = ""
    # The parts of the cost: the tokens' (None without a price), the
    # seconds the run held a sandbox and what they cost, its Temporal actions
    # and what they cost (the sandbox_agent_runtime.costs module).
    token_cost: float | None = None
    sandbox_seconds: float = 0.0
    sandbox_cost: float = 0.0
    actions: int = 0
    actions_cost: float = 0.0


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _known(values: Sequence[float | None]) -> list[float] | None:
    """``values``, or None when any is unknown (a cost unknown is not zero)."""
    known = [value for value in values if value is not None]
    return known if values and len(known) == len(values) else None


# The parts of a run's cost, as a report gives them (beside its "cost").
PARTS = ("token_cost", "sandbox_seconds", "sandbox_cost", "actions", "actions_cost")


def _parts(runs: Sequence[Attempt], figure: Callable[[Sequence[float]], float]) -> dict[str, Any]:
    """Each part of the runs' cost, as ``figure`` (a mean, a sum) makes it of
    their values; a part unknown in any run is None."""
    parts: dict[str, Any] = {}
    for part in PARTS:
        known = _known([getattr(run, part) for run in runs])
        parts[part] = None if known is None else figure(known)
    return parts


def _case(case_id: str, runs: list[Attempt]) -> dict[str, Any]:
    passed = sum(run.passed for run in runs)
    costs = _known([run.cost for run in runs])
    grades = [run for run in runs if run.rubric_score is not None]
    return {
        "id": case_id,
        "pass_rate": passed / len(runs),
        "interval": list(wilson(passed, len(runs))),
        "attempts": len(runs),
        "passed": passed,
        "turns": _mean([run.turns for run in runs]),
        "input_tokens": _mean([run.input_tokens for run in runs]),
        "cached_tokens": _mean([run.cached_tokens for run in runs]),
        "output_tokens": _mean([run.output_tokens for run in runs]),
        "cost": None if costs is None else _mean(costs),
        **_parts(runs, _mean),
        "duration_seconds": _mean([run.duration_seconds for run in runs]),
        "failures": [
            {
                "repetition": run.repetition,
                "failed": run.failed or "failed",
                "reason": run.reason,
                "run_id": run.run_id,
                "link": run.link,
            }
            for run in runs
            if not run.passed
        ],
        "rubric": _mean([run.rubric_score or 0.0 for run in grades]) if grades else None,
        "rubric_grades": [
            {"repetition": run.repetition, "score": run.rubric_score, "reason": run.rubric_reason}
            for run in grades
        ],
        "runs": [
            {"repetition": run.repetition, "passed": run.passed, "run_id": run.run_id}
            for run in runs
        ],
    }


def build(
    attempts: Sequence[Attempt],
    *,
    dataset: str,
    model: str,
    repeat: int,
    started: str,
    finished: str,
) -> dict[str, Any]:
    """The report of ``attempts`` as a JSON-able dict: the overall figures
    at the top (``pass_rate``, ``interval``, ...) and ``cases``, one per
    case in the order of its first attempt, its attempts by repetition:
    its pass rate with its 95% Wilson interval, mean turns, tokens, cost and
    time, each failure with the check that failed and the run's id and Web
    UI link, and the rubric's mean grade, apart from the checks."""
    by_case: dict[str, list[Attempt]] = {}
    for attempt in attempts:
        by_case.setdefault(attempt.case_id, []).append(attempt)
    passed = sum(attempt.passed for attempt in attempts)
    costs = _known([attempt.cost for attempt in attempts])
    grades = [a.rubric_score for a in attempts if a.rubric_score is not None]
    return {
        "format": FORMAT,
        "dataset": dataset,
        "model": model,
        "repeat": repeat,
        "started": started,
        "finished": finished,
        "pass_rate": passed / len(attempts) if attempts else 0.0,
        "interval": list(wilson(passed, len(attempts))),
        "attempts": len(attempts),
        "passed": passed,
        "cost": None if costs is None else sum(costs),
        **_parts(attempts, sum),
        # The runs' time added up (they may overlap: finished - started is the wall clock).
        "duration_seconds": sum(attempt.duration_seconds for attempt in attempts),
        "rubric": _mean(grades) if grades else None,
        "cases": [
            _case(case_id, sorted(runs, key=lambda run: run.repetition))
            for case_id, runs in by_case.items()
        ],
    }


# ------------------------------------------------------------------ figures


def percent(rate: float) -> str:
    return f"{rate * 100:.0f}%"


def interval_text(interval: Sequence[float]) -> str:
    return f"{percent(interval[0])}-{percent(interval[1])}"


def money(cost: float | None) -> str:
    return "n/a" if cost is None else usd(cost)


def seconds(value: float) -> str:
    if value < 120:
        return f"{value:.1f} s"
    minutes, rest = divmod(round(value), 60)
    return f"{minutes} min {rest:02d} s"


def _tokens(value: float) -> str:
    return f"{value:,.0f}"


def _link(link: str) -> str | None:
    """``link`` when it is a plain http(s) URL a page may point to."""
    if re.fullmatch(r"https?://[^\s\"'<>()\\`]+", link):
        return link
    return None


def _summary(report: Mapping[str, Any]) -> str:
    cases = len(report["cases"])
    return (
        f"{report['passed']} of {report['attempts']} runs passed: "
        f"{cases} case{'s' if cases != 1 else ''} x {report['repeat']} "
        f"repeat{'s' if report['repeat'] != 1 else ''}, "
        f"model {report['model']}, cost {money(report['cost'])}{_cost_parts(report)}, "
        f"{seconds(report['duration_seconds'])} of runs; "
        f"started {report['started']}, finished {report['finished']}."
    )


def _cost_parts(figures: Mapping[str, Any]) -> str:
    """The parts of a report's cost, as its summary says them ("" in a report
    made before they were counted)."""
    if "sandbox_cost" not in figures:
        return ""
    return (
        f" (tokens {money(figures.get('token_cost'))}, sandbox {money(figures['sandbox_cost'])} "
        f"for {seconds(figures.get('sandbox_seconds') or 0.0)}, "
        f"{figures.get('actions') or 0:,.0f} Temporal actions {money(figures.get('actions_cost'))})"
    )


def _row(case: Mapping[str, Any]) -> list[str]:
    """A case's cells, as both pages show them (unescaped)."""
    rubric = "" if case["rubric"] is None else f"{case['rubric']:.2f}"
    return [
        case["id"],
        percent(case["pass_rate"]),
        interval_text(case["interval"]),
        f"{case['passed']}/{case['attempts']}",
        f"{case['turns']:.1f}",
        f"{_tokens(case['input_tokens'])} / {_tokens(case['output_tokens'])}",
        money(case["cost"]),
        seconds(case["duration_seconds"]),
        rubric,
    ]


_HEADINGS = [
    "Case",
    "Pass rate",
    "95% interval",
    "Passed",
    "Turns",
    "Tokens in / out",
    "Cost",
    "Time",
    "Rubric",
]


# ----------------------------------------------------------------- markdown


def _md(text: str) -> str:
    """``text`` as Markdown shows it literally, on one line, in a table too."""
    escaped = html.escape(" ".join(str(text).split()), quote=False)
    return re.sub(r"([\\`*_\[\]|#])", r"\\\1", escaped)


def markdown(report: Mapping[str, Any]) -> str:
    """The report as Markdown: the overall line first, a table of the
    cases, then each failure with its run, then the rubric's grades."""
    lines = [
        f"# Evaluation of {_md(report['dataset'])}",
        "",
        f"**Pass rate {percent(report['pass_rate'])}** "
        f"(95% interval {interval_text(report['interval'])}): {_md(_summary(report))}",
        "",
        "| " + " | ".join(_HEADINGS) + " |",
        "|" + "---|" * len(_HEADINGS),
    ]
    lines += [
        "| " + " | ".join(_md(cell) for cell in _row(case)) + " |" for case in report["cases"]
    ]
    failures = [(case, failure) for case in report["cases"] for failure in case["failures"]]
    if failures:
        lines += ["", "## Failures", ""]
        for case, failure in failures:
            link = _link(failure["link"])
            run = _md(failure["run_id"])
            lines.append(
                f"- **{_md(case['id'])}** run {failure['repetition']}: "
                f"{_md(failure['failed'])}: {_md(failure['reason'])} "
                f"({f'[{run}]({link})' if link else run})"
            )
    graded = [case for case in report["cases"] if case["rubric_grades"]]
    if graded:
        lines += ["", "## Rubric", ""]
        for case in graded:
            for grade in case["rubric_grades"]:
                lines.append(
                    f"- **{_md(case['id'])}** run {grade['repetition']}: "
                    f"{grade['score']:.2f}: {_md(grade['reason'])}"
                )
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------- HTML

_STYLE = """
body { font: 15px/1.4 system-ui, sans-serif; margin: 2em auto; max-width: 60em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { padding: 0.3em 0.7em; border-bottom: 1px solid #ddd; text-align: right; }
th:first-child, td:first-child { text-align: left; }
li { margin: 0.3em 0; }
code { background: #f4f4f4; padding: 0 0.2em; }
"""

# The chart's geometry, in SVG units: the labels' column, the bars' width,
# a row's height.
_LABEL, _WIDTH, _ROW = 220, 440, 26


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def chart(report: Mapping[str, Any]) -> str:
    """The cases' pass rates as inline SVG: a bar each, its 95% interval
    as an error bar, the percentages on a grid."""
    cases = report["cases"]
    height = _ROW * len(cases) + 30
    width = _LABEL + _WIDTH + 60
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="Pass rate of each case, with its 95% interval">'
    ]
    for tick in (0, 0.25, 0.5, 0.75, 1):
        x = _LABEL + tick * _WIDTH
        parts.append(
            f'<line x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{height - 20}" stroke="#ddd"/>'
            f'<text x="{x:.1f}" y="{height - 5}" font-size="11" text-anchor="middle" '
            f'fill="#666">{percent(tick)}</text>'
        )
    for row, case in enumerate(cases):
        y = row * _ROW + 4
        middle = y + (_ROW - 8) / 2
        rate, (low, high) = case["pass_rate"], case["interval"]
        label = case["id"] if len(case["id"]) <= 28 else case["id"][:27] + "..."
        colour = "#2e7d32" if rate >= 0.999 else "#f9a825" if rate > 0 else "#c62828"
        title = (
            f"{case['id']}: {percent(rate)} ({case['passed']} of {case['attempts']}), "
            f"95% interval {interval_text(case['interval'])}"
        )
        parts.append(
            f"<g><title>{_e(title)}</title>"
            f'<text x="{_LABEL - 8}" y="{middle + 4:.1f}" font-size="12" '
            f'text-anchor="end">{_e(label)}</text>'
            f'<rect x="{_LABEL}" y="{y}" width="{rate * _WIDTH:.1f}" height="{_ROW - 8}" '
            f'fill="{colour}" opacity="0.75"/>'
            f'<line x1="{_LABEL + low * _WIDTH:.1f}" y1="{middle:.1f}" '
            f'x2="{_LABEL + high * _WIDTH:.1f}" y2="{middle:.1f}" stroke="#222"/>'
            f'<line x1="{_LABEL + low * _WIDTH:.1f}" y1="{y + 3}" '
            f'x2="{_LABEL + low * _WIDTH:.1f}" y2="{y + _ROW - 11}" stroke="#222"/>'
            f'<line x1="{_LABEL + high * _WIDTH:.1f}" y1="{y + 3}" '
            f'x2="{_LABEL + high * _WIDTH:.1f}" y2="{y + _ROW - 11}" stroke="#222"/>'
            f'<text x="{_LABEL + _WIDTH + 6}" y="{middle + 4:.1f}" '
            f'font-size="12">{percent(rate)}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)


def page(report: Mapping[str, Any]) -> str:
    """The report as a self-contained HTML page: the overall line, the
    chart, the table, the failures and the rubric's grades."""
    title = f"Evaluation of {report['dataset']}"
    rows = "".join(
        "<tr>" + "".join(f"<td>{_e(cell)}</td>" for cell in _row(case)) + "</tr>"
        for case in report["cases"]
    )
    body = [
        f"<h1>{_e(title)}</h1>",
        f"<p><strong>Pass rate {percent(report['pass_rate'])}</strong> "
        f"(95% interval {interval_text(report['interval'])}): {_e(_summary(report))}</p>",
        chart(report),
        "<table><thead><tr>"
        + "".join(f"<th>{_e(heading)}</th>" for heading in _HEADINGS)
        + f"</tr></thead><tbody>{rows}</tbody></table>",
    ]
    failures = [(case, failure) for case in report["cases"] for failure in case["failures"]]
    if failures:
        items = []
        for case, failure in failures:
            link = _link(failure["link"])
            run = (
                f'<a href="{_e(link)}">{_e(failure["run_id"])}</a>'
                if link
                else f"<code>{_e(failure['run_id'])}</code>"
            )
            items.append(
                f"<li><strong>{_e(case['id'])}</strong> run {_e(failure['repetition'])}: "
                f"<code>{_e(failure['failed'])}</code>: {_e(failure['reason'])} ({run})</li>"
            )
        body.append(f"<h2>Failures</h2><ul>{''.join(items)}</ul>")
    grades = [
        f"<li><strong>{_e(case['id'])}</strong> run {_e(grade['repetition'])}: "
        f"{grade['score']:.2f}: {_e(grade['reason'])}</li>"
        for case in report["cases"]
        for grade in case["rubric_grades"]
    ]
    if grades:
        body.append(f"<h2>Rubric</h2><ul>{''.join(grades)}</ul>")
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def write(report: dict[str, Any], directory: Path) -> list[Path]:
    """Write ``report.json``, ``report.md`` and ``report.html`` in
    ``directory`` (made if missing), over any already there; their paths.
    Each is written to a new file beside it, then renamed over its name:
    a symbolic link already there is replaced, never written through (its
    target is left as it was), and a reader never sees half a report."""
    directory.mkdir(parents=True, exist_ok=True)
    written = {
        "report.json": json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False) + "\n",
        "report.md": markdown(report),
        "report.html": page(report),
    }
    paths = []
    for name, text in written.items():
        path = directory / name
        # A name of its own, made by this call (O_EXCL: never a file or link already there).
        temporary = directory / f".{name}.{uuid.uuid4().hex}"
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8") as file:
                file.write(text)
            os.replace(temporary, path)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        paths.append(path)
    return paths
