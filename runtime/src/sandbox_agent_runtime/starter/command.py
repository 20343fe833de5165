"""The starter: asks the agent to do something, shows each step as it happens, and prints the answer.

Every option is in ``--help``, with the exit statuses a script can tell runs
apart by; a render's docs/inputs-and-outputs.md and docs/approvals.md are
its guide. Progress is read from the run's history, so it shows what
Temporal recorded, across a chain of runs and a restart of the Temporal
service; nothing the model or a command chose reaches the terminal as a
control sequence.
"""

import asyncio
import sys
from collections.abc import Sequence
from typing import NoReturn

from sandbox_agent_runtime import callbacks, schedules
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
from sandbox_agent_runtime.starter.scheduling import list_schedules, make_schedule, unschedule
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
        elif args.schedules:
            status = asyncio.run(list_schedules(settings))
        elif args.unschedule is not None:
            status = asyncio.run(unschedule(args.unschedule, settings))
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
            if args.callback:
                # Allowed by CALLBACK_HOSTS, its host's addresses looked up.
                try:
                    callbacks.checked(args.callback, settings.callbacks, unresolved_ok=True)
                except callbacks.BadCallback as e:
                    raise BadInput(f"--callback {e}") from None
            scheduled = args.every is not None or args.cron is not None
            if scheduled:
                spec, when = schedules.spec_of(
                    args.cron, args.every, settings.schedule_min_interval, ("--cron", "--every")
                )
            request = RunRequest(
                prompt=prompt_of(args),
                # --provider, with several providers; else the primary one.
                provider=getattr(args, "provider", None) or current().sandbox_provider,
                inputs=inputs,
                repo=repo,
                # A schedule's runs are jobs: no one is there to follow up.
                follow_ups=not scheduled,
                token_budget=args.token_budget,
                cost_budget_usd=args.cost_budget,
                callback_url=args.callback or "",
            )
            if scheduled:
                overlap = args.overlap or "skip"
                status = asyncio.run(make_schedule(request, spec, when, overlap, settings))
            else:
                status = asyncio.run(run(request, settings, not args.no_wait, args.output))
    except (BadPrompt, BadInput, schedules.BadSchedule) as e:
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
