"""The API's routes, each declared once as a route of an ``APIRouter``: its
method and path, the caller (a dependency), its body and answer (models.py)
and the problems it answers with, as the OpenAPI document shows them. Each
reads its request and hands the rest to runs.py or events.py."""

import asyncio
import functools
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path as FilePath
from typing import Annotated, Any, cast

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from temporalio.client import Client

from sandbox_agent_runtime import callbacks
from sandbox_agent_runtime.api import runs
from sandbox_agent_runtime.api.bodies import (
    LARGEST_JSON,
    Body,
    body_of,
    boolean,
    budgets_in,
    json_object,
    json_types,
    prompt_in,
    read_body,
)
from sandbox_agent_runtime.api.callers import Caller, Issuer, IssuerUnreachable, Tokens
from sandbox_agent_runtime.api.document import (
    EVENTS,
    LAST_EVENT_ID,
    RUN_LINKS,
    problems,
    request_body,
)
from sandbox_agent_runtime.api.events import BadEventId, Followers, event_id_parts
from sandbox_agent_runtime.api.limits import HeldStream, SharedFiles, Slots, runs_in_flight
from sandbox_agent_runtime.api.metrics import ApiMetrics
from sandbox_agent_runtime.api.models import (
    Approvals,
    Decided,
    DecisionBody,
    Ending,
    FollowedUp,
    FollowUpBody,
    RunBody,
    RunState,
    Started,
)
from sandbox_agent_runtime.api.problems import Problem
from sandbox_agent_runtime.archives import BadInput, repo_of
from sandbox_agent_runtime.run_request import FollowUp, RunRequest
from sandbox_agent_runtime.service import current
from sandbox_agent_runtime.settings import ApiSettings

log = logging.getLogger("api")

# A run's id, as the API makes them (task queue, "-", a UUID) or a
# starter's --workflow-id: printable, no slash.
RUN_ID = re.compile(r"[A-Za-z0-9._:@=+-]{1,255}")


@dataclass
class Served:
    """What the routes serve with: the Temporal client and what the API's
    settings made (app.py: create_app)."""

    settings: ApiSettings
    client: Client
    tokens: Tokens
    issuer: Issuer | None
    # The approver's key unsigned decisions are signed with (API_APPROVER_KEY_FILE).
    server_key: Ed25519PrivateKey | None
    metrics: ApiMetrics
    followers: Followers
    streams: Slots
    downloads: Slots
    archives: SharedFiles

    @property
    def has_store(self) -> bool:
        return self.settings.starter.object_store is not None


def served(request: Request) -> Served:
    return cast(Served, request.app.state.served)


ServedBy = Annotated[Served, Depends(served)]
# Declares the bearer token in the OpenAPI document; caller() reads it.
BEARER = HTTPBearer(
    auto_error=False, description="A token from API_TOKENS, or an OIDC access token."
)


async def caller(
    request: Request,
    api: ServedBy,
    # The token as the document declares it; read below as it came.
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)],
) -> Caller:
    """Who calls, from their bearer token; a 401 for no one, a 503 when the
    OIDC issuer does not answer."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Problem(
            401, "no bearer token: send Authorization: Bearer TOKEN (a token from API_TOKENS)."
        )
    found = api.tokens.caller(token.strip())
    if found is None and api.issuer is not None and token.count(".") == 2:
        try:
            found = await api.issuer.caller(token.strip())
        except IssuerUnreachable as e:
            log.warning("the OIDC issuer did not answer: %s", e)
            raise Problem(503, "the OIDC issuer did not answer: ask again shortly.") from e
    if found is None:
        raise Problem(
            401,
            "the bearer token is not one of this API's (API_TOKENS), nor a valid access token.",
        )
    return found


CalledBy = Annotated[Caller, Depends(caller)]
# A run's id in a path; one that is not an id of a run is a 404, as a run
# that does not exist.
RunId = Annotated[str, Path(description="The run's id, as POST /v1/runs answered it.")]


def run_id_of(text: str) -> str:
    if not RUN_ID.fullmatch(text):
        raise Problem(404, f"run {text[:80]!r}: no such run of yours.")
    return text


async def run_request_of(body: Body, api: Served) -> RunRequest:
    """The run a body asks for (a run's, or a schedule's runs'), through
    every check a run's request gets; a ``Problem`` for the first it fails."""
    prompt = prompt_in(body.fields)
    token_budget, cost_budget = budgets_in(body.fields)
    provider = str(body.fields.get("provider") or "")
    providers = list(current().providers)
    if provider and provider not in providers:
        raise Problem(
            422,
            f"provider {provider[:60]!r} is not one of this service's: {', '.join(providers)}.",
        )
    repo = None
    if body.fields.get("repo"):
        try:
            repo = await asyncio.to_thread(
                repo_of, str(body.fields["repo"]), api.settings.starter.repos
            )
        except BadInput as e:
            raise Problem(422, str(e).replace("--repo", "field 'repo'") + ".") from e
    callback_url = str(body.fields.get("callback_url") or "")
    if callback_url:
        try:
            await asyncio.to_thread(
                callbacks.checked, callback_url, api.settings.starter.callbacks, True
            )
        except callbacks.BadCallback as e:
            raise Problem(422, f"field 'callback_url' {e}.") from e
    return RunRequest(
        prompt=prompt,
        provider=provider or current().sandbox_provider,
        inputs=body.inputs,
        repo=repo,
        follow_ups=boolean(body.fields, "follow_ups"),
        token_budget=token_budget,
        cost_budget_usd=cost_budget,
        callback_url=callback_url,
    )


router = APIRouter(prefix="/v1/runs")


@router.post(
    "",
    status_code=201,
    operation_id="start_run",
    summary="Start a run",
    response_model=Started,
    responses={
        201: {
            "description": "Started: its id and routes",
            "headers": {"Location": {"description": "The run", "schema": {"type": "string"}}},
            "links": RUN_LINKS,
        },
        **problems(400, 401, 411, 413, 415, 422, 429, 503),
    },
    openapi_extra=request_body(RunBody, files=True),
)
async def start_run(
    request: Request, response: Response, api: ServedBy, caller: CalledBy
) -> dict[str, Any]:
    await runs_in_flight(api.client, caller, api.settings.runs_per_caller)
    body = await read_body(request, RunBody, api.has_store)
    run = await run_request_of(body, api)
    workflow_id = await runs.start_run(api.client, caller, run)
    log.info("%s started run %s", caller.owner, workflow_id)
    response.headers["Location"] = f"/v1/runs/{workflow_id}"
    return {"id": workflow_id, "links": runs.links(workflow_id)}


@router.get(
    "/{run}",
    operation_id="run_state",
    summary="Where a run stands",
    response_model=RunState,
    response_model_exclude_unset=True,
    responses=problems(401, 404, 503, 504),
)
async def run_state(run: RunId, api: ServedBy, caller: CalledBy) -> dict[str, Any]:
    return await runs.run_state(api.client, caller, run_id_of(run))


@router.get(
    "/{run}/events",
    operation_id="run_events",
    summary="A run's live events (Server-Sent Events)",
    description=EVENTS,
    response_class=Response,
    responses={
        200: {"description": "text/event-stream", "content": {"text/event-stream": {}}},
        **problems(400, 401, 404, 429),
    },
)
async def run_events(
    run: RunId,
    request: Request,
    api: ServedBy,
    caller: CalledBy,
    last_event_id: Annotated[
        str,
        Query(
            description="The id of the last event received (as the Last-Event-ID header); "
            "empty: from the first.",
            json_schema_extra={"pattern": LAST_EVENT_ID},
        ),
    ] = "",
) -> Response:
    workflow_id = run_id_of(run)
    await runs.own_run(api.client, caller, workflow_id)
    after = request.headers.get("last-event-id") or last_event_id
    if after:
        try:
            event_id_parts(after)
        except BadEventId as e:
            raise Problem(400, str(e)) from e
    return HeldStream(
        api.followers.stream(workflow_id, False, after or None),
        api.streams.take(caller),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


@router.post(
    "/{run}/messages",
    status_code=202,
    operation_id="follow_up",
    summary="A follow-up to a conversation that has answered",
    response_model=FollowedUp,
    responses=problems(400, 401, 404, 409, 411, 413, 415, 422, 504),
    openapi_extra=request_body(FollowUpBody, files=True),
)
async def message(run: RunId, request: Request, api: ServedBy, caller: CalledBy) -> dict[str, Any]:
    workflow_id = run_id_of(run)
    await runs.own_run(api.client, caller, workflow_id)
    body = await read_body(request, FollowUpBody, api.has_store)
    prompt = prompt_in(body.fields)
    token_budget, cost_budget = budgets_in(body.fields)
    follow_up = FollowUp(prompt, body.inputs, token_budget, cost_budget)
    number = await runs.follow_up(api.client, caller, workflow_id, follow_up)
    return {"id": workflow_id, "prompt": number, "links": runs.links(workflow_id)}


@router.post(
    "/{run}/end",
    status_code=202,
    operation_id="end_run",
    summary="End a conversation: its sandbox is removed",
    response_model=Ending,
    responses=problems(401, 404, 409, 504),
)
async def end(run: RunId, api: ServedBy, caller: CalledBy) -> dict[str, Any]:
    workflow_id = run_id_of(run)
    await runs.end(api.client, caller, workflow_id)
    return {"id": workflow_id, "state": "ending", "links": runs.links(workflow_id)}


# What a download sends at a time, read from its file on disk.
DOWNLOAD_CHUNK = 256 * 1024


async def file_chunks(path: FilePath) -> AsyncIterator[bytes]:
    with path.open("rb") as file:
        while chunk := await asyncio.to_thread(file.read, DOWNLOAD_CHUNK):
            yield chunk


@router.get(
    "/{run}/outputs",
    operation_id="run_outputs",
    summary="The run's outputs: a gzipped tar (the patch inside, as changes.patch)",
    response_class=Response,
    responses={
        200: {"description": "application/gzip", "content": {"application/gzip": {}}},
        **problems(401, 404, 409, 429, 504),
    },
)
async def outputs(run: RunId, api: ServedBy, caller: CalledBy) -> Response:
    workflow_id = run_id_of(run)
    release = api.downloads.take(caller)
    # The archive is made on disk, once for the caller's downloads of the
    # run at the same time, and sent from there, a chunk at a time.
    try:
        archive, let_go = await api.archives.get(
            (caller.owner, workflow_id),
            functools.partial(runs.outputs, api.client, caller, workflow_id),
        )
    except BaseException:
        release()
        raise

    def done() -> None:
        let_go()
        release()

    return HeldStream(
        file_chunks(archive),
        done,
        media_type="application/gzip",
        headers={
            "Content-Disposition": f'attachment; filename="{workflow_id}-outputs.tar.gz"',
            "Content-Length": str(archive.stat().st_size),
        },
    )


@router.get(
    "/{run}/approvals",
    operation_id="run_approvals",
    summary="What waits for a person in the run, as the run shows it",
    response_model=Approvals,
    responses=problems(401, 404, 504),
)
async def approvals(run: RunId, api: ServedBy, caller: CalledBy) -> dict[str, Any]:
    return await runs.approvals(api.client, caller, run_id_of(run))


@router.post(
    "/{run}/approvals/{call_id}",
    operation_id="decide",
    summary="A person's decision, signed with their key (docs: approvals)",
    response_model=Decided,
    responses=problems(400, 401, 404, 409, 422, 504),
    openapi_extra=request_body(DecisionBody),
)
async def decide(
    run: RunId, call_id: str, request: Request, api: ServedBy, caller: CalledBy
) -> dict[str, Any]:
    workflow_id = run_id_of(run)
    await runs.own_run(api.client, caller, workflow_id)
    fields = json_object(await body_of(request, LARGEST_JSON), json_types(DecisionBody))
    for name in ("run_id", "approve"):
        if name not in fields:
            raise Problem(
                422, f"field {name!r} is missing: a decision names its run and says yes or no."
            )
    decision = {
        "run_id": fields["run_id"],
        "call_id": call_id,
        "approve": fields["approve"],
        "reason": fields.get("reason", ""),
        "always": fields.get("always", False),
        "approver": fields.get("approver", ""),
        "signature": fields.get("signature", ""),
    }
    answer = await runs.decide(api.client, caller, workflow_id, decision, api.server_key)
    return {"call_id": call_id, "decision": answer}


# The page for people (page/): its files, served as they are, with no
# build step. It runs only its own scripts, talks only to this API, and no
# other site may frame it.
PAGE = FilePath(__file__).parent / "page"
PAGE_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
    "base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def page_file(name: str) -> Response:
    """One of the page's files, by its plain name; a 404 for anything else."""
    files = {path.name: path for path in PAGE.iterdir() if path.suffix in PAGE_TYPES}
    if name not in files:
        raise Problem(404, f"{name[:80]!r} is not a file of the page.")
    path = files[name]
    return Response(path.read_bytes(), media_type=PAGE_TYPES[path.suffix], headers=PAGE_HEADERS)


# What needs no caller, and stays out of the OpenAPI document: the page,
# the metrics and the probes.
unlisted = APIRouter(include_in_schema=False)


@unlisted.get("/")
async def page() -> Response:
    return page_file("index.html")


@unlisted.get("/page/{name}")
async def page_asset(name: str) -> Response:
    return page_file(name)


@unlisted.get("/metrics")
async def metrics_text(api: ServedBy) -> Response:
    return Response(generate_latest(api.metrics.registry), media_type=CONTENT_TYPE_LATEST)


@unlisted.get("/livez")
async def livez() -> dict[str, str]:
    return {"status": "alive"}


@unlisted.get("/readyz")
async def readyz(api: ServedBy) -> dict[str, str]:
    try:
        await asyncio.wait_for(api.client.service_client.check_health(), 5)
    except Exception as e:
        raise Problem(503, "Temporal is not answering: not ready.") from e
    return {"status": "ready"}
