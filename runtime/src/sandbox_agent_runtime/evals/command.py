"""Evaluations: whether a change made the agent better, on the team's own
tasks, with the real model, several times each (agents are not
deterministic: one run per task says little).

Every case runs through the real service, and its checks run in the run's
own sandbox: nothing the agent wrote runs on the machine that evaluates it.
A render's docs/evaluations.md is the guide (the dataset, the reports,
``--compare``, ``--approve-all``, exit statuses).
"""

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from sandbox_agent_runtime.exits import exit_after
from sandbox_agent_runtime.service import current

if TYPE_CHECKING:
    from sandbox_agent_runtime.evals.report import Attempt, Price

# The modules beside this one are imported when the command runs: importing
# the package (for its report's Price, say) costs nothing.

EXIT_DONE = 0
EXIT_REGRESSION = 1
EXIT_UNREACHABLE = 2
EXIT_USAGE = 3


def exit_statuses() -> dict[int, str]:
    return {
        EXIT_DONE: "the evaluation ran and its reports are written; or --compare found nothing worse",
        EXIT_REGRESSION: "--compare found a case (or the whole) worse beyond the threshold",
        EXIT_UNREACHABLE: "Temporal or the object store did not answer",
        EXIT_USAGE: "a bad dataset, report or option (one line, before any run starts)",
    }


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # argparse's own status for bad usage (2) would read as "unreachable".
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(
        prog=current().command("eval"),
        description=" ".join((__doc__ or "").partition("\n\n")[0].split()),
        epilog="exit statuses: " + "; ".join(f"{k} {v}" for k, v in exit_statuses().items()),
    )
    parser.add_argument(
        "dataset", nargs="?", type=Path, help="a dataset (YAML) or a directory of them"
    )
    parser.add_argument(
        "--repeat", type=int, default=1, metavar="K", help="runs of each case (default 1)"
    )
    parser.add_argument(
        "--concurrency", type=int, default=4, metavar="N", help="runs at once (default 4)"
    )
    parser.add_argument(
        "--report-dir",
        type=Path,
        default=Path("eval-report"),
        metavar="DIR",
        help="default: eval-report/",
    )
    parser.add_argument(
        "--approve-all",
        action="store_true",
        help="with approvals: approve every request of the evaluation's runs with the approver's key "
        "(APPROVER_KEY_FILE), as a person who trusts the dataset's tasks would",
    )
    parser.add_argument(
        "--compare", nargs=2, type=Path, metavar=("OLD", "NEW"), help="compare two report.json"
    )
    parser.add_argument(
        "--max-drop",
        type=float,
        metavar="FRACTION",
        help="with --compare: a drop in a case's pass rate over this (0.1: 10 points) is a regression "
        "(default: any drop outside the two intervals)",
    )
    return parser


def refuse(message: str) -> NoReturn:
    print(f"ERROR: {message}", file=sys.stderr)
    sys.exit(EXIT_USAGE)


def read_report(path: Path) -> dict[str, Any]:
    """The evaluation report at ``path``, checked whole (compare.check):
    refused with status 3, in one line naming the file and what is wrong."""
    from sandbox_agent_runtime.evals.compare import check

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        refuse(f"--compare {path}: cannot read it ({e.strerror or e}).")
    except UnicodeDecodeError as e:
        refuse(f"--compare {path}: not UTF-8 text (byte {e.start}).")
    try:
        report = json.loads(text)
    except ValueError as e:
        refuse(f"--compare {path}: not JSON ({e}).")
    except RecursionError:
        refuse(f"--compare {path}: not an evaluation report: nested too deep.")
    try:
        return check(report)
    except ValueError as e:
        refuse(f"--compare {path}: {e}.")


def shown(attempt: "Attempt") -> str:
    head = "pass" if attempt.passed else "FAIL"
    line = f"  {head}  {attempt.case_id} #{attempt.repetition}  {attempt.duration_seconds:.1f} s  {attempt.turns} turns"
    if not attempt.passed:
        line += f"  {attempt.failed}: {attempt.reason}  {attempt.link}"
    return line


async def evaluate(
    args: argparse.Namespace,
    model: str,
    prices: Mapping[str, "Price"],
    grader_model: Any = None,
    model_settings: Any = None,
) -> int:
    from sandbox_agent_runtime import approvers
    from sandbox_agent_runtime.archives import BadInput
    from sandbox_agent_runtime.client import connected
    from sandbox_agent_runtime.connection import ConnectionFailed
    from sandbox_agent_runtime.evals.dataset import BadDataset, load
    from sandbox_agent_runtime.evals.report import build, write
    from sandbox_agent_runtime.evals.rubric import grade
    from sandbox_agent_runtime.evals.runner import prepare, run_all
    from sandbox_agent_runtime.object_store import ObjectStoreUnreachable
    from sandbox_agent_runtime.settings import BadSetting, starter_settings

    try:
        cases = load(args.dataset)
        settings = starter_settings()
        prepared = prepare(cases, settings.object_store is not None, settings.repos)
        approver = approvers.load_key(settings.approver_key_file) if args.approve_all else None
    except (BadDataset, BadSetting, BadInput, approvers.BadKey) as e:
        refuse(str(e).rstrip("."))
    try:
        client = await connected(settings)
    except (ConnectionFailed, ObjectStoreUnreachable) as e:
        print(e, file=sys.stderr)
        return EXIT_UNREACHABLE
    runs = len(cases) * args.repeat
    print(
        f"Evaluating {len(cases)} cases, {args.repeat} times each ({runs} runs, {args.concurrency} at once)"
    )
    started = datetime.now(UTC).isoformat(timespec="seconds")
    attempts = await run_all(
        client,
        prepared,
        args.repeat,
        args.concurrency,
        model,
        prices,
        settings.ui_url,
        progress=lambda done: print(shown(done), flush=True),
        approver=approver,
        grader=lambda prompt, rubric, answer: grade(
            grader_model, model_settings, prompt, rubric, answer
        ),
    )
    finished = datetime.now(UTC).isoformat(timespec="seconds")
    report = build(
        attempts,
        dataset=str(args.dataset),
        model=model,
        repeat=args.repeat,
        started=started,
        finished=finished,
    )
    written = write(report, args.report_dir)
    low, high = report["interval"]
    print(
        f"Pass rate {report['pass_rate']:.0%} (95% interval {low:.0%} to {high:.0%}), {report['passed']}/{report['attempts']}"
    )
    for path in written:
        print(f"Wrote {path}")
    return EXIT_DONE


def main(
    argv: Sequence[str] | None = None,
    *,
    model: str = "",
    prices: "Mapping[str, Price] | None" = None,
    model_settings: Any = None,
    grader: Any = None,
) -> None:
    """The evaluation command: run the datasets through the service and write
    what each case scored and cost.

    Args:
        argv: its arguments; None for ``sys.argv``.
        model: the agent's model (agent.py's ``MODEL``).
        prices: the price of each model's tokens, for the cost estimates.
        model_settings: the agent's model settings.
        grader: the model that grades a rubric (an Agents SDK model, or a
            model's name); None for ``model``.
    """
    args = _parser().parse_args(argv)
    if args.compare is not None:
        if args.dataset is not None:
            refuse("--compare takes two reports and no dataset.")
        if args.max_drop is not None and not 0 <= args.max_drop <= 1:
            refuse(
                f"--max-drop {args.max_drop:g} is not allowed: use a fraction from 0 to 1 (0.1: 10 points)."
            )
        from sandbox_agent_runtime.evals.compare import compare

        old, new = (read_report(path) for path in args.compare)
        lines, status = compare(old, new, args.max_drop)
        for line in lines:
            print(line)
        sys.exit(status)
    if args.dataset is None:
        refuse("give a dataset (a YAML file or a directory of them), or --compare OLD NEW.")
    if args.approve_all and not current().approvals:
        refuse("--approve-all: this service asks no one for approval; leave it out.")
    if args.repeat < 1 or args.repeat > 100:
        refuse(f"--repeat {args.repeat} is not allowed: use a whole number from 1 to 100.")
    if args.concurrency < 1 or args.concurrency > 64:
        refuse(f"--concurrency {args.concurrency} is not allowed: use a whole number from 1 to 64.")
    sys.exit(asyncio.run(evaluate(args, model, prices or {}, grader or model, model_settings)))


def cli(
    *, model: str = "", prices: "Mapping[str, Price] | None" = None, model_settings: Any = None
) -> NoReturn:
    exit_after(lambda: main(model=model, prices=prices, model_settings=model_settings))
