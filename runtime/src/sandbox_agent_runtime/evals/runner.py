"""Running an evaluation's cases through the real service: each case a run
started as the starter starts one (the same task queue, workers, backend
and model a user gets), several at once, each case as many times as asked;
what each run left checked in its own sandbox (the run's checks:
run_request.Check), its answer, turns and tokens checked here; each attempt
an ``Attempt`` for the report (report.py)."""

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from temporalio import exceptions
from temporalio.client import Client, WorkflowFailureError
from temporalio.service import RPCError

from sandbox_agent_runtime.archives import BadInput, inputs_of, repo_of
from sandbox_agent_runtime.client import (
    ClientError,
    send_decision,
    waiting_requests,
    web_ui_link,
    why_not_completed,
)
from sandbox_agent_runtime.evals import answers
from sandbox_agent_runtime.evals.dataset import Case
from sandbox_agent_runtime.evals.report import Attempt, Price, cost_of
from sandbox_agent_runtime.owners import service_memo
from sandbox_agent_runtime.repos import DEFAULT_POLICY, RepoPolicy
from sandbox_agent_runtime.run_request import Input, Repo, RunAnswer, RunRequest
from sandbox_agent_runtime.service import current
from sandbox_agent_runtime.shared import USAGE_MEMO, WORKFLOW_TYPE

# A rubric's grader (rubric.grade, given the model): the task, the rubric
# and the answer -> the grade (None: none could be had) and its reason.
Grader = Callable[[str, str, str], Awaitable[tuple[float | None, str]]]

# How long a run cancelled at its case's time limit has to remove its sandbox.
CLEAN_UP = timedelta(seconds=60)


@dataclass(frozen=True)
class Prepared:
    """A case with its inputs packed, once for all its attempts."""

    case: Case
    inputs: list[Input]
    repo: Repo | None = None


def prepare(
    cases: Sequence[Case], has_store: bool, repos: RepoPolicy = DEFAULT_POLICY
) -> list[Prepared]:
    """Every case's inputs packed and its repository checked (``repos``:
    the service's REPO_ALLOWED_* settings), before any run starts:
    ``BadInput`` (one line) for one a run cannot take."""
    return [
        Prepared(
            case,
            inputs_of([str(path) for path in case.inputs], has_store),
            allowed_repo(case, repos),
        )
        for case in cases
    ]


def allowed_repo(case: Case, repos: RepoPolicy) -> Repo | None:
    """The case's repository, allowed by ``repos``; ``BadInput`` naming the case."""
    if not case.repo:
        return None
    try:
        return repo_of(case.repo, repos)
    except BadInput as e:
        raise BadInput(f"case {case.id!r}: {str(e).replace('--repo', 'repo', 1)}") from None


def answer_text(answer: RunAnswer) -> str:
    return json.dumps(answer.answer) if answer.structured else str(answer.answer)


async def answer_failure(
    case: Case, answer: RunAnswer, usage: Mapping[str, int]
) -> tuple[str, str] | None:
    """The first of the case's checks on the answer, turns and tokens that
    fails, and why; None when they all pass. The answer's checks are made
    in a child process, each under a time limit (answers.py)."""
    text = answer_text(answer)
    for kind, given in (
        ("answer_matches", case.answer_matches),
        ("answer_json_schema", case.answer_json_schema),
    ):
        if given is not None:
            failed = await answers.checked(kind, given, text)
            if failed is not None:
                return failed
    turns = usage.get("model_calls", 0)
    if case.max_turns is not None and turns > case.max_turns:
        return "max_turns", f"it took {turns} turns, over {case.max_turns}"
    tokens = usage.get("input_tokens", 0) + usage.get("output_tokens", 0)
    if case.max_tokens is not None and tokens > case.max_tokens:
        return "max_tokens", f"it used {tokens:,} tokens, over {case.max_tokens:,}"
    return None


# What an evaluation's approvals say (--approve-all), and how often it asks.
APPROVED_BY_THE_EVALUATION = "approved by the evaluation (--approve-all)"
ASK_EVERY = timedelta(seconds=0.5)


async def approve_all(client: Client, workflow_id: str, key: Ed25519PrivateKey) -> None:
    """Approve every request of the run that waits for a person, signed with
    ``key``, as a person who chose to trust the evaluation's tasks would."""
    decided: set[str] = set()
    while True:
        await asyncio.sleep(ASK_EVERY.total_seconds())
        try:
            run_id, requests = await waiting_requests(client, workflow_id)
            for request in requests:
                call_id = str(request.get("call_id"))
                if call_id not in decided:
                    await send_decision(
                        client,
                        workflow_id,
                        run_id,
                        request,
                        True,
                        APPROVED_BY_THE_EVALUATION,
                        False,
                        key,
                    )
                    decided.add(call_id)
        except (RPCError, ClientError):
            continue  # no worker just now, the run moved on or ended: ask again


async def attempt(
    client: Client,
    prepared: Prepared,
    repetition: int,
    model: str,
    prices: Mapping[str, Price],
    ui_url: str | None,
    grader: Grader | None = None,
    approver: Ed25519PrivateKey | None = None,
) -> Attempt:
    """One run of one case, to its end; what it found; its rubric graded
    by ``grader`` (with a rubric and an answer); with ``approver``, every
    request for approval approved with that key (--approve-all)."""
    case = prepared.case
    service = current()
    request = RunRequest(
        prompt=case.prompt,
        provider=service.sandbox_provider,
        inputs=prepared.inputs,
        repo=prepared.repo,
        checks=list(case.sandbox_checks),
        # A case's max_tokens is its run's token budget too: a run past it
        # stops there (one model call's tokens past it at most) instead of
        # running on to its time limit.
        token_budget=case.max_tokens,
    )
    workflow_id = f"{service.task_queue}-eval-{case.id}-{repetition}-{uuid.uuid4().hex[:8]}"
    began = time.monotonic()
    handle = await client.start_workflow(
        WORKFLOW_TYPE,
        request,
        id=workflow_id,
        task_queue=service.task_queue,
        # The service's backstop, as for any run; the case's own limit is
        # kept below (the run is cancelled, and removes its sandbox).
        execution_timeout=max(
            service.workflow_execution_timeout, timedelta(seconds=case.timeout_seconds)
        ),
        result_type=RunAnswer,
        memo={**service_memo(), "evaluation": {"case": case.id, "repetition": repetition}},
    )
    failed: tuple[str, str] | None = None
    answer: RunAnswer | None = None
    approving = (
        None
        if approver is None
        else asyncio.create_task(approve_all(client, workflow_id, approver))
    )
    # asyncio.wait, not wait_for: a long poll of the run's history does not
    # end at once when cancelled, and wait_for would wait for it.
    waiting = asyncio.ensure_future(handle.result())
    try:
        done, _ = await asyncio.wait({waiting}, timeout=case.timeout_seconds)
        if done:
            answer = waiting.result()
        else:
            failed = ("timeout", f"no answer within {case.timeout_seconds:g} s")
            # Cancelled, the run stops its work and removes its sandbox.
            await handle.cancel()
            await asyncio.wait({waiting}, timeout=CLEAN_UP.total_seconds())
            waiting.cancel()
            with contextlib.suppress(WorkflowFailureError, asyncio.CancelledError):
                await waiting
    except WorkflowFailureError as e:
        timed_out = isinstance(e.cause, exceptions.TimeoutError)
        why = (
            "the service's WORKFLOW_EXECUTION_TIMEOUT passed"
            if timed_out
            else f"the run {why_not_completed(e)}"
        )
        failed = ("timeout" if timed_out else "run failed", why)
    finally:
        if approving is not None:
            approving.cancel()
    duration = time.monotonic() - began
    usage: dict[str, Any] = {}
    try:
        found = (await (await handle.describe()).memo()).get(USAGE_MEMO)
        usage = found if isinstance(found, dict) else {}
    except Exception:
        usage = {}
    if answer is not None and answer.stopped:
        # Stopped at its budget: its case's max_tokens, or the service's.
        token_stop = answer.stopped.startswith("stopped: token budget")
        kind = "max_tokens" if case.max_tokens is not None and token_stop else "budget"
        failed = (kind, answer.stopped)
    elif answer is not None:
        for result in answer.checks:
            if not result.passed:
                failed = (f"{result.kind} {result.subject}".strip(), result.detail or "it failed")
                break
        else:
            failed = await answer_failure(case, answer, usage)
    score: float | None = None
    graded = ""
    if case.rubric is not None and grader is not None:
        if answer is None:
            graded = "not graded: the run has no answer"
        else:
            score, graded = await grader(case.prompt, case.rubric, answer_text(answer))
    input_tokens = int(usage.get("input_tokens", 0))
    output_tokens = int(usage.get("output_tokens", 0))
    cached = int(usage.get("cached_input_tokens", 0))
    token_cost = cost_of(model, input_tokens, cached, output_tokens, prices)
    # The run's sandbox and its actions, at the worker's rates (costs.py).
    sandbox_cost = float(usage.get("sandbox_usd", 0.0))
    actions_cost = float(usage.get("actions_usd", 0.0))
    return Attempt(
        case_id=case.id,
        repetition=repetition,
        passed=failed is None,
        failed=None if failed is None else failed[0],
        reason="" if failed is None else failed[1],
        run_id=workflow_id,
        link=web_ui_link(client, workflow_id, ui_url),
        turns=int(usage.get("model_calls", 0)),
        input_tokens=input_tokens,
        cached_tokens=cached,
        output_tokens=output_tokens,
        cost=None if token_cost is None else token_cost + sandbox_cost + actions_cost,
        duration_seconds=duration,
        rubric_score=score,
        rubric_reason=graded,
        token_cost=token_cost,
        sandbox_seconds=float(usage.get("sandbox_seconds", 0.0)),
        sandbox_cost=sandbox_cost,
        actions=int(usage.get("actions", 0)),
        actions_cost=actions_cost,
    )


async def run_all(
    client: Client,
    prepared: Sequence[Prepared],
    repeat: int,
    concurrency: int,
    model: str,
    prices: Mapping[str, Price],
    ui_url: str | None,
    progress: Any = None,
    grader: Grader | None = None,
    approver: Ed25519PrivateKey | None = None,
) -> list[Attempt]:
    """Every case ``repeat`` times, ``concurrency`` runs at a time; the
    attempts in the dataset's order, then by repetition."""
    slots = asyncio.Semaphore(concurrency)

    async def one(each: Prepared, repetition: int) -> Attempt:
        async with slots:
            done = await attempt(client, each, repetition, model, prices, ui_url, grader, approver)
        if progress is not None:
            progress(done)
        return done

    return list(
        await asyncio.gather(
            *(one(each, repetition) for each in prepared for repetition in range(1, repeat + 1))
        )
    )
