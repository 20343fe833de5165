"""The starter's command line, in one place: the parser (its options depend
on the service: the approval options with approvals, ``--provider`` with
several sandbox providers), the checks on which options go together, and
the prompt, from the argument, a file or standard input."""

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from sandbox_agent_runtime import approvers
from sandbox_agent_runtime.schedules import OVERLAPS
from sandbox_agent_runtime.service import budgets_given, current
from sandbox_agent_runtime.shared import LONGEST_PROMPT
from sandbox_agent_runtime.starter.statuses import EXIT_USAGE, exit_statuses, starter_command

DEFAULT_PROMPT = (
    "Write a file holding the first 20 Fibonacci numbers, one per line, "
    "then tell me how many lines it has and what the last one is."
)


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # argparse's own status for bad usage (2) would collide with
        # "cannot reach Temporal".
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def add_approval_arguments(
    parser: argparse.ArgumentParser, mode: argparse._MutuallyExclusiveGroup
) -> None:
    """The options that list and decide requests for approval (with approvals)."""
    mode.add_argument(
        "--pending", metavar="WORKFLOW_ID", help="list the run's requests that wait for a person"
    )
    mode.add_argument(
        "--approve",
        nargs=2,
        metavar=("WORKFLOW_ID", "CALL_ID"),
        help="approve a call that waits for a person",
    )
    mode.add_argument(
        "--reject", nargs=2, metavar=("WORKFLOW_ID", "CALL_ID"), help="reject a call that waits"
    )
    parser.add_argument("--reason", default="", help="with --reject: why (the agent reads it)")
    parser.add_argument(
        "--always", action="store_true", help="with --approve: that tool for the rest of the run"
    )
    mode.add_argument(
        "--new-approver-key",
        metavar="NAME",
        help=f"make an approver's key pair (the private key in {approvers.KEY_FILE_VARIABLE}, "
        f"default {approvers.default_key_file()}) and print the line for the workers' APPROVERS",
    )


def parse_arguments(
    argv: Sequence[str] | None = None, *, description: str = ""
) -> argparse.Namespace:
    """The starter's arguments: the approval options only with approvals,
    --provider only with several sandbox providers. ``description`` heads
    --help: main() gives it the first line of the starter's overview (the
    package's docstring, starter/__init__.py)."""
    service = current()
    several = len(service.providers) > 1
    statuses = "".join(f"    {status:<5}{meaning}\n" for status, meaning in exit_statuses().items())
    parser = _ArgumentParser(
        prog=starter_command(),
        description=description,
        epilog=f"Exit status:\n\n{statuses}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("prompt", nargs="?", help="what to ask the agent (default: a small task)")
    parser.add_argument(
        "--prompt-file",
        metavar="PATH",
        help="read the prompt from PATH (UTF-8; - for standard input) instead",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--no-wait",
        action="store_true",
        help="start the run, print its id and Web UI link, and exit",
    )
    mode.add_argument(
        "--attach",
        metavar="WORKFLOW_ID",
        help="follow a run started earlier instead of starting one (a conversation: its "
        "latest prompt, or where it stands)",
    )
    mode.add_argument(
        "--continue",
        dest="follow_up",
        metavar="WORKFLOW_ID",
        help="send the prompt to a run that has answered, as a follow-up in the same workspace "
        '(--continue ID "PROMPT"; --input and --output as for a first prompt)',
    )
    mode.add_argument(
        "--end",
        metavar="WORKFLOW_ID",
        help="end a conversation: its run removes its sandbox and closes with its last answer",
    )
    mode.add_argument(
        "--schedules", action="store_true", help="list this service's schedules and exit"
    )
    mode.add_argument(
        "--unschedule",
        metavar="SCHEDULE_ID",
        help="delete a schedule (the runs it started go on)",
    )
    if service.approvals:
        add_approval_arguments(parser, mode)
    parser.add_argument(
        "--every",
        metavar="SECONDS",
        help="make a schedule that starts the prompt as a run every SECONDS (at least "
        "SCHEDULE_MIN_INTERVAL), print its id and exit",
    )
    parser.add_argument(
        "--cron",
        metavar="EXPR",
        help='make a schedule that starts the prompt on a calendar, in UTC ("0 6 * * *": at '
        "06:00 every day; @hourly, @daily, ...), print its id and exit",
    )
    parser.add_argument(
        "--overlap",
        choices=tuple(OVERLAPS),
        help="with --every or --cron: what a run due while the last still runs does "
        "(default: skip)",
    )
    parser.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="PATH",
        help="a file or a directory the workspace starts with, under its own name (repeatable)",
    )
    parser.add_argument(
        "--repo",
        metavar="URL[@REF]",
        help="a git repository the workspace starts with, at a branch, tag or commit",
    )
    parser.add_argument(
        "--callback",
        metavar="URL",
        help="an http(s) URL of a server the operator allows (CALLBACK_HOSTS) that gets a POST "
        "when the run ends, signed as Standard Webhooks says",
    )
    parser.add_argument(
        "--output",
        metavar="DIR",
        type=Path,
        help="write every file the run created or changed under DIR (made if missing)",
    )
    parser.add_argument(
        "--token-budget",
        metavar="N",
        help="the most tokens (input and output) the prompt may use; then it stops, saying so "
        "(default: the service's TOKEN_BUDGET)",
    )
    parser.add_argument(
        "--cost-budget",
        metavar="USD",
        help="the most the prompt's tokens may cost, in USD at the model's price (default: the "
        "service's COST_BUDGET_USD)",
    )
    if several:
        parser.add_argument(
            "--provider",
            choices=tuple(service.providers),
            help=f"the sandbox provider the run uses (default: {service.sandbox_provider})",
        )
    args = parser.parse_args(argv)
    if args.prompt is not None and args.prompt_file is not None:
        parser.error("give the prompt as an argument or with --prompt-file, not both")
    asked = args.prompt is not None or args.prompt_file is not None
    if args.attach is not None and (asked or args.input or args.repo):
        parser.error("--attach follows an existing run; it takes no prompt, --input or --repo")
    if args.callback is not None and not asked:
        parser.error("--callback goes with a run's prompt: the run it starts calls back")
    if args.callback is not None and args.follow_up is not None:
        parser.error("--continue: a run's callback is given at its start (--callback)")
    if args.follow_up is not None and not asked:
        parser.error('--continue needs the prompt: --continue ID "PROMPT" (or --prompt-file PATH)')
    if args.follow_up is not None and args.repo:
        parser.error(
            "--continue: a repository is cloned at a run's start; a follow-up takes --input"
        )
    if args.end is not None and (asked or args.input or args.repo or args.output):
        parser.error("--end ends a conversation; it takes no prompt, --input, --repo or --output")
    if args.no_wait and args.output is not None:
        parser.error(
            "--no-wait does not wait for the files: fetch them later with --attach ID --output DIR"
        )
    if args.output is not None and args.output.exists() and not args.output.is_dir():
        parser.error(f"--output {args.output}: it exists and is not a directory")
    if service.approvals:
        deciding = args.pending or args.approve or args.reject or args.new_approver_key
        if deciding and (asked or args.input or args.repo or args.output):
            parser.error(
                "--pending, --approve, --reject and --new-approver-key take no prompt, "
                "--input, --repo or --output"
            )
        if args.reason and not args.reject:
            parser.error("--reason goes with --reject")
        if args.always and not args.approve:
            parser.error("--always goes with --approve")
    scheduled = args.every is not None or args.cron is not None
    if args.every is not None and args.cron is not None:
        parser.error("give --every or --cron, not both: a schedule runs on one")
    if args.overlap is not None and not scheduled:
        parser.error("--overlap goes with --every or --cron")
    others = ("no_wait", "attach", "follow_up", "end", "schedules", "unschedule", "output")
    if scheduled and any(getattr(args, other, None) for other in others):
        parser.error(
            "--every and --cron make a schedule of a new run's prompt: no --no-wait, --attach, "
            "--continue, --end, --schedules, --unschedule or --output"
        )
    if (args.schedules or args.unschedule) and (asked or args.input or args.repo or args.output):
        parser.error("--schedules and --unschedule take no prompt, --input, --repo or --output")
    budgeted = args.token_budget is not None or args.cost_budget is not None
    modes = (
        "attach",
        "end",
        "pending",
        "approve",
        "reject",
        "new_approver_key",
        "schedules",
        "unschedule",
    )
    if budgeted and any(getattr(args, mode, None) for mode in modes):
        parser.error("--token-budget and --cost-budget go with a prompt: a new run or --continue")
    try:
        args.token_budget, args.cost_budget = budgets_given(
            args.token_budget,
            args.cost_budget,
            ("--token-budget", "--cost-budget"),
            current().budget(),
        )
    except ValueError as e:
        parser.error(str(e))
    if several and (args.attach or args.follow_up or args.end) and args.provider is not None:
        parser.error(
            "--provider goes with a new run: an existing one keeps the provider it started with"
        )
    return args


class BadPrompt(Exception):
    """A prompt the starter cannot send; its message says why, in one line."""


def prompt_of(args: argparse.Namespace) -> str:
    """The prompt: the argument, the file (- for standard input) or the
    default; ``BadPrompt`` for one that is empty, unreadable or over
    LONGEST_PROMPT."""
    if args.prompt_file is None:
        prompt = args.prompt or DEFAULT_PROMPT
    else:
        where = "standard input" if args.prompt_file == "-" else repr(args.prompt_file)
        try:
            if args.prompt_file == "-":
                prompt = sys.stdin.buffer.read().decode()
            else:
                with open(args.prompt_file, "rb") as file:
                    prompt = file.read(LONGEST_PROMPT + 1).decode()
        except OSError as e:
            raise BadPrompt(f"--prompt-file {where}: cannot read it ({e.strerror})") from e
        except UnicodeDecodeError as e:
            raise BadPrompt(f"--prompt-file {where}: not UTF-8 text (byte {e.start})") from e
        if not prompt.strip():
            raise BadPrompt(f"--prompt-file {where}: the prompt is empty")
    size = len(prompt.encode())
    if size > LONGEST_PROMPT:
        # A file is read only that far.
        read_whole = args.prompt_file is None or args.prompt_file == "-"
        raise BadPrompt(
            f"the prompt is over {LONGEST_PROMPT:,} bytes{f' ({size:,})' if read_whole else ''}, "
            "the most a run takes (LONGEST_PROMPT): put the material in the workspace and "
            "ask about it instead"
        )
    return prompt
