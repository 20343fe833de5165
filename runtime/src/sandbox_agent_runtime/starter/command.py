"""The starter: asks the agent to do something, shows each step as it happens, and prints the answer.

    <service>-starter "Count the files in /etc"      # start, follow, print the answer
    <service>-starter --no-wait "Count the files"    # start, print id and link, exit
    <service>-starter --attach WORKFLOW_ID           # follow a run started earlier
    <service>-starter --prompt-file task.md          # the prompt from a file (- for stdin)
    <service>-starter --input data.csv --output out/ "Summarise data.csv into summary.txt"
    <service>-starter --repo https://github.com/org/repo@v1.2 --output out/ "Fix the typo"
    <service>-starter --attach WORKFLOW_ID --output out/  # a finished run's files
    <service>-starter --continue WORKFLOW_ID "Now plot it by month"  # a follow-up
    <service>-starter --end WORKFLOW_ID              # end a conversation, free its sandbox
    <service>-starter --provider NAME "Count the files"  # with several sandbox providers

(``<service>-starter`` is the command a project installs, and ``python -m
<package>.starter`` the same: the runtime's starter, for the service the
project's package configures, service.py.) It prints the workflow id and a
link to the run in the Temporal Web UI. The link starts with
``TEMPORAL_UI_URL`` when that is set; otherwise with https://cloud.temporal.io
for a Temporal Cloud address, and with the dev server's http://localhost:8233
for anything else.

``--input PATH`` (repeatable) puts a file or a directory at the top of the
workspace under its own name, ``--repo URL[@REF]`` a git repository cloned
at a branch, tag or commit (by the worker). ``--output DIR`` writes every
file the run created or changed under DIR (and, with ``--repo``, the run's
changes as ``DIR/changes.patch``), keeping each relative path, and never
anything outside DIR (archives.py). An agent with an ``output_type`` (agent.py)
answers in JSON, printed as JSON. docs/inputs-and-outputs.md has the rest.

After the answer, one line says what the run used of the model (calls,
input and output tokens, across its chain) and what that cost at the
model's price (runs.PRICES; "cost n/a" without one), and one how to follow
up. ``--token-budget N`` and ``--cost-budget USD`` give the prompt (a new
run's, or a follow-up's) its own budget instead of the service's
(TOKEN_BUDGET, COST_BUDGET_USD); a prompt that reaches its budget stops,
says why, and the starter exits EXIT_NOT_COMPLETED: its workspace is kept,
and a follow-up goes on with a fresh budget.
Progress is read from the run's history, so it shows what Temporal recorded:
the sandbox provider the run uses (and, when the service has a host-bound backend, the
host its sandbox lives on, or that any worker reaches it), the build a versioned worker
pinned it to, then one line per model turn and per
sandbox operation (each shell command with the command itself, each snapshot
and restore of the workspace), in the order the workflow scheduled them. A
long run continues as new runs of the same workflow (same id, same sandbox);
progress follows it from run to run, and ``--attach`` reads it from the
first run of the chain.

Every run the starter starts is a conversation (``RunRequest.follow_ups``):
after its answer it waits for a follow-up in the same workspace, until it is
ended or SESSION_LIFETIME (shared.py) passes without one, so it is started
without a workflow execution timeout (the service's max_turns bounds each prompt). The
starter follows it to its answer and exits. ``--continue ID "PROMPT"`` (with
``--input`` and ``--output`` as for a first prompt) sends the next prompt
(the FOLLOW_UP update) and follows it, from the moment the run took it, to
its answer: right after the last answer or days later. A run that is still
working, was started without follow-ups or has ended refuses it in one
line (EXIT_REFUSED). ``--end ID`` ends a conversation (the END update) and
waits until its sandbox is removed. ``--attach ID`` follows the prompt a
conversation works on to its answer or, when it waits for a follow-up
(holding its sandbox, or released, its workspace in a snapshot), says so and
prints the latest answer.

While it follows a run, the starter rides out a restart of the Temporal
service (SERVICE_OUTAGE_LIMIT); a service that stays gone ends it with one
line, saying how to follow the run again.

What it prints of a run (steps, failures and, with approvals, requests for approval) goes through
display.py first, so no byte the model or a command chose reaches the
terminal as a control sequence; the answer is printed as the model wrote it.

Its exit status tells a script how the run ended: exit_statuses()
(statuses.py) says what each one means, and ``--help`` lists them.

The package's modules, one concern each, import only from those below
them (pyproject.toml's ``[tool.importlinter]``); what it shares with the
API and the evaluations (connecting, following, approvals, follow-ups) is
the runtime's client package.
"""

import asyncio
import sys
from collections.abc import Sequence
from typing import NoReturn

from sandbox_agent_runtime.archives import BadInput, inputs_of, repo_of
from sandbox_agent_runtime.encryption import UnknownKey, WrongKey
from sandbox_agent_runtime.exits import exit_after
from sandbox_agent_runtime.run_request import FollowUp, RunRequest
from sandbox_agent_runtime.service import current
from sandbox_agent_runtime.settings import BadSetting, starter_settings
from sandbox_agent_runtime.starter.approving import (
    approvals,
    decide,
    list_pending,
    new_approver_key,
)
from sandbox_agent_runtime.starter.arguments import BadPrompt, parse_arguments, prompt_of
from sandbox_agent_runtime.starter.attach import attach
from sandbox_agent_runtime.starter.conversation import continue_conversation, end_conversation
from sandbox_agent_runtime.starter.start import run
from sandbox_agent_runtime.starter.statuses import (
    EXIT_INTERRUPTED,
    EXIT_UNDECRYPTABLE,
    EXIT_USAGE,
)


def main(argv: Sequence[str] | None = None) -> None:
    """The starter command: start or follow a run; exit with one of its statuses
    (``--help`` lists them).

    Args:
        argv: its arguments; None for ``sys.argv``.
    """
    args = parse_arguments(argv, description=(__doc__ or "").partition("\n")[0])
    try:
        settings = starter_settings()
        if args.attach is not None:
            status = asyncio.run(attach(args.attach, settings, args.output))
        elif args.follow_up is not None:
            inputs = inputs_of(args.input, has_store=settings.object_store is not None)
            follow_up = FollowUp(
                prompt=prompt_of(args),
                inputs=inputs,
                token_budget=args.token_budget,
                cost_budget_usd=args.cost_budget,
            )
            status = asyncio.run(
                continue_conversation(args.follow_up, follow_up, settings, args.output)
            )
        elif args.end is not None:
            status = asyncio.run(end_conversation(args.end, settings))
        elif approvals() and args.pending is not None:
            status = asyncio.run(list_pending(args.pending))
        elif approvals() and (args.approve or args.reject):
            workflow_id, call_id = args.approve or args.reject
            approve = bool(args.approve)
            reason = "" if approve else args.reason or "Rejected by a person."
            key_file = settings.approver_key_file
            status = asyncio.run(
                decide(workflow_id, call_id, approve, reason, args.always, key_file)
            )
        elif approvals() and args.new_approver_key is not None:
            status = new_approver_key(args.new_approver_key, settings.approver_key_file)
        else:
            repo = repo_of(args.repo) if args.repo else None
            inputs = inputs_of(args.input, has_store=settings.object_store is not None)
            if repo is not None and repo.name in {item.name for item in inputs}:
                raise BadInput(
                    f"--repo {args.repo}: its directory {repo.name!r} is the name of an --input "
                    "too; each must have its own name"
                )
            if args.repo:
                # Allowed by REPO_ALLOWED_*, its host's addresses looked up.
                repo = repo_of(args.repo, settings.repos)
            request = RunRequest(
                prompt=prompt_of(args),
                # --provider, with several providers; else the primary one.
                provider=getattr(args, "provider", None) or current().sandbox_provider,
                inputs=inputs,
                repo=repo,
                follow_ups=True,
                token_budget=args.token_budget,
                cost_budget_usd=args.cost_budget,
            )
            status = asyncio.run(run(request, settings, not args.no_wait, args.output))
    except (BadPrompt, BadInput) as e:
        print(f"ERROR: {e}.", file=sys.stderr)
        status = EXIT_USAGE
    except BadSetting as e:
        print(f"ERROR: {e}", file=sys.stderr)
        status = EXIT_USAGE
    except (UnknownKey, WrongKey) as e:
        print(f"ERROR: {e}.", file=sys.stderr)
        status = EXIT_UNDECRYPTABLE
    except KeyboardInterrupt:
        status = EXIT_INTERRUPTED
    sys.exit(status)


def cli() -> NoReturn:
    """The installed starter command: ``main()``, then exit with its status."""
    exit_after(main)
