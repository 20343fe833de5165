"""The API's routes (FastAPI): each reads its request, checks it and the
caller, and hands the rest to runs.py or events.py. Every error is a
``Problem`` (problems.py), answered as ``application/problem+json``."""

import asyncio
import contextlib
import dataclasses
import functools
import json
import logging
import re
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from sandbox_agent_runtime import approvers
from sandbox_agent_runtime.api import runs
from sandbox_agent_runtime.api.callers import Caller, Issuer, IssuerUnreachable, Tokens
from sandbox_agent_runtime.api.events import BadEventId, Followers, event_id_parts
from sandbox_agent_runtime.api.limits import HeldStream, SharedFiles, Slots, runs_in_flight
from sandbox_agent_runtime.api.metrics import ApiMetrics, method_label, status_label
from sandbox_agent_runtime.api.problems import PROBLEM_JSON, PROBLEM_SCHEMA, TITLES, Problem
from sandbox_agent_runtime.archives import BadInput, inputs_of, repo_of, size_text
from sandbox_agent_runtime.run_request import FollowUp, Input, RunRequest
from sandbox_agent_runtime.service import budgets_given, current
from sandbox_agent_runtime.settings import ApiSettings, BadSetting
from sandbox_agent_runtime.shared import (
    INLINE_FILES_LIMIT,
    LONGEST_PROMPT,
    MOST_FILES,
    STORED_FILES_LIMIT,
)

log = logging.getLogger("api")

# The most a JSON body may weigh (a prompt is at most LONGEST_PROMPT bytes).
LARGEST_JSON = LONGEST_PROMPT + 64 * 1024
# What a multipart body may weigh beside its files: its fields and the
# parts' headers.
MULTIPART_OVERHEAD = LONGEST_PROMPT + 1024 * 1024
# Without an object store, a run's request (or a follow-up) travels in
# history as one payload, which Temporal takes up to 2 MiB: its files,
# packed (each a gzipped tar in base64, with its name and checksum), weigh
# at most what is left beside the longest prompt. INLINE_FILES_LIMIT of
# files in one input fits; thousands of small ones may not.
INLINE_REQUEST = 2 * 1024 * 1024 - LONGEST_PROMPT - 64 * 1024
# A run's id, as the API makes them (task queue, "-", a UUID) or a
# starter's --workflow-id: printable, no slash.
RUN_ID = re.compile(r"[A-Za-z0-9._:@=+-]{1,255}")


# An answer given before the request's body was read to its end (401
# without a token, 404, 405, 411, 413, 415, 429, any answer): the
# connection closes after it, so a client that goes on sending (an endless
# body) costs nothing more; kept open, the server would read whatever comes
# and throw it away. Before it answers, the API reads and throws away what
# is left of the body, up to this many bytes, for at most this long. A
# connection closed with bytes of the client's still unread is reset (RST)
# rather than closed, and a reset may drop the answer on its way: the client
# then sees its connection broken instead of the problem (CI at 8b0e234: a
# chunked form refused with 411). A body up to the limit (an oversized JSON
# prompt among them) is read to its end and the answer arrives whole; an
# endless one, or a form whose Content-Length is past it, is cut there.
DRAIN_LIMIT = 1024 * 1024
DRAIN_TIME = 1.0


class UnreadBodies:
    """ASGI around the whole API (every answer, a 500 among them): an answer
    that starts while the request's body is still arriving ends its
    connection, once what is left of the body is read and thrown away: to its
    end, DRAIN_LIMIT bytes or DRAIN_TIME, whichever comes first."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers") or ()) if scope["type"] == "http" else {}
        pending = b"transfer-encoding" in headers or headers.get(b"content-length", b"0") != b"0"
        if not pending:
            await self.app(scope, receive, send)
            return

        async def receiving() -> Message:
            nonlocal pending
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                pending = False
            return message

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start" and pending:
                await drain()
                if pending:
                    close = (b"connection", b"close")
                    message = {**message, "headers": [*message.get("headers", ()), close]}
            await send(message)

        async def drain() -> None:
            read = 0
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(DRAIN_TIME):
                    while pending and read <= DRAIN_LIMIT:
                        read += len((await receiving()).get("body", b""))

        await self.app(scope, receiving, sending)


class Api(FastAPI):
    """The API's application, whose outermost layer is ``UnreadBodies``."""

    def build_middleware_stack(self) -> ASGIApp:
        return UnreadBodies(super().build_middleware_stack())


def problem_response(problem: Problem, request: Request) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if problem.status == 401 else {}
    if problem.retry_after is not None:
        headers["Retry-After"] = str(problem.retry_after)
    return JSONResponse(
        problem.body(request.url.path), problem.status, headers=headers, media_type=PROBLEM_JSON
    )


# The fields of each route's body, as the OpenAPI document shows them.
PROMPT_FIELD = {"type": "string", "minLength": 1, "pattern": "\\S"}


def budget_fields() -> dict[str, Any]:
    """A prompt's own budgets: at most the service's (a higher one is refused)."""
    budget = current().budget()
    # null, or the field left out: the service's.
    tokens: dict[str, Any] = {"type": ["integer", "null"], "minimum": 1}
    cost: dict[str, Any] = {"type": ["number", "null"], "exclusiveMinimum": 0}
    if budget.tokens is not None:
        tokens["maximum"] = budget.tokens
    if budget.cost_usd is not None:
        cost["maximum"] = budget.cost_usd
    return {"token_budget": tokens, "cost_budget_usd": cost}


def run_fields() -> dict[str, Any]:
    return {
        "prompt": PROMPT_FIELD,
        "follow_ups": {"type": "boolean", "default": False},
        "provider": {"type": "string", "enum": ["", *current().providers]},
        "repo": {"type": "string", "description": "URL[@REF]", "pattern": "^\\S*$"},
        **budget_fields(),
    }


DECISION_FIELDS: dict[str, Any] = {
    "run_id": {"type": "string"},
    "approve": {"type": "boolean"},
    "reason": {"type": "string"},
    "always": {"type": "boolean"},
    "approver": {"type": "string"},
    "signature": {"type": "string"},
}


def form_field(field: dict[str, Any]) -> dict[str, Any]:
    """A JSON field as a form's: never null (a form leaves it out instead)."""
    kind = field.get("type")
    if isinstance(kind, list):
        return {**field, "type": next(each for each in kind if each != "null")}
    return field


def request_body(
    fields: dict[str, Any], required: list[str], files: bool = False
) -> dict[str, Any]:
    """The OpenAPI document's entry for a route's body: a JSON object of
    ``fields`` and nothing else, or (``files``) a form of them with files."""

    def schema(properties: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        }

    content = {"application/json": {"schema": schema(fields)}}
    if files:
        binary = {"type": "array", "items": {"type": "string", "format": "binary"}}
        # A form's yes or no is text (boolean() reads it).
        text = {"type": "string", "enum": ["true", "false", "1", "0", "yes", "no", "on", "off"]}
        in_form = {
            name: text if field.get("type") == "boolean" else form_field(field)
            for name, field in fields.items()
        }
        content["multipart/form-data"] = {"schema": schema({**in_form, "files": binary})}
    return {"requestBody": {"required": True, "content": content}}


def problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI document's entry for the problems a route answers with."""
    return {
        status: {
            "description": TITLES[status],
            "content": {PROBLEM_JSON: {"schema": PROBLEM_SCHEMA}},
        }
        for status in statuses
    }


def run_id_of(text: str) -> str:
    if not RUN_ID.fullmatch(text):
        raise Problem(404, f"run {text[:80]!r}: no such run of yours.")
    return text


async def body_of(request: Request, limit: int) -> bytes:
    """The request's body, refused (413) past ``limit`` bytes before more is read."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise Problem(
            413, f"the body weighs {int(length):,} bytes, over the {limit:,} this route takes."
        )
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise Problem(413, f"the body weighs over {limit:,} bytes, the most this route takes.")
    return bytes(body)


def json_object(body: bytes, allowed: dict[str, type]) -> dict[str, Any]:
    """``body`` as a JSON object of ``allowed`` fields, each of its type."""
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise Problem(400, f"the body is not JSON ({e}): send a JSON object.") from e
    except RecursionError as e:
        raise Problem(
            400,
            "the body nests too deep to read: send a JSON object of this route's fields, "
            "each a string, a number or a boolean.",
        ) from e
    if not isinstance(value, dict):
        raise Problem(
            400, f"the body is a JSON {type(value).__name__}, not an object: send a JSON object."
        )
    for name, field_value in value.items():
        if isinstance(field_value, str):
            text_field(name, field_value)
        if name not in allowed:
            raise Problem(
                422, f"field {name[:40]!r} is not one of this route's: {', '.join(allowed)}."
            )
        kind = allowed[name]
        if not isinstance(field_value, kind) or (kind is int and isinstance(field_value, bool)):
            raise Problem(
                422,
                f"field {name!r} is a JSON {type(field_value).__name__}: it must be a "
                f"{'boolean' if kind is bool else 'string' if kind is str else kind.__name__}.",
            )
    return value


def text_field(name: str, value: str) -> str:
    """``value``, refused (422) when it holds a lone surrogate: JSON's
    ``\\ud800`` escape, half of a pair, which no UTF-8 carries (a run's
    request could not be sent to its worker)."""
    try:
        value.encode()
    except UnicodeEncodeError as e:
        raise Problem(
            422,
            f"field {name[:40]!r} holds a lone surrogate ({value[e.start]!r}) at character "
            f"{e.start}: send Unicode text; a surrogate only as half of a pair.",
        ) from e
    return value


def prompt_in(fields: dict[str, Any]) -> str:
    prompt = fields.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise Problem(422, "field 'prompt' is missing or blank: say what the agent should do.")
    if len(prompt.encode()) > LONGEST_PROMPT:
        raise Problem(
            413,
            f"field 'prompt' weighs {len(prompt.encode()):,} bytes, over the {LONGEST_PROMPT:,} a run "
            "takes (LONGEST_PROMPT): put the material in a file and ask about it instead.",
        )
    return prompt


# A prompt's own budget (None: the service's), a JSON number or a form's text.
BUDGETS: dict[str, type] = {"token_budget": object, "cost_budget_usd": object}


def budgets_in(fields: dict[str, Any]) -> tuple[int | None, float | None]:
    """The request's own token and cost budgets (None: the service's)."""
    tokens = fields.get("token_budget")
    # A whole number written with a point (JSON's 1500.0) is a whole number.
    if isinstance(tokens, float) and tokens.is_integer() and abs(tokens) < 2**53:
        tokens = int(tokens)
    try:
        return budgets_given(
            tokens,
            fields.get("cost_budget_usd"),
            ("field 'token_budget'", "field 'cost_budget_usd'"),
            current().budget(),
        )
    except ValueError as e:
        raise Problem(422, f"{e}.") from e


def boolean(fields: dict[str, Any], name: str) -> bool:
    value = fields.get(name, False)
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off", ""):
        return False
    raise Problem(422, f"field {name!r} is {str(value)[:40]!r}: use true or false.")


def plain_file_name(name: str) -> str:
    """An uploaded file's name, as the top of the workspace takes it: one
    plain name, nothing that climbs or hides."""
    if (
        not name
        or name in (".", "..")
        or "/" in name
        or "\\" in name
        or not name.isprintable()
        or len(name.encode()) > 255
    ):
        raise Problem(
            400,
            f"file name {name[:80]!r} is not allowed: use a plain name (no '/', '\\', '..' or "
            "characters that do not print), at most 255 bytes.",
        )
    return name


class Body:
    """A run's or a follow-up's request: its fields and, from a multipart
    body, its files, saved in a directory of their own until they are packed."""

    def __init__(self, fields: dict[str, Any], inputs: list[Input]) -> None:
        self.fields = fields
        self.inputs = inputs


async def read_body(request: Request, allowed: dict[str, type], has_store: bool) -> Body:
    """A JSON or ``multipart/form-data`` body with ``allowed`` fields, and
    files (``files`` parts) packed as ``--input`` packs them, with the same
    limits; nothing of it is kept once packed or refused."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "application/json":
        return Body(json_object(await body_of(request, LARGEST_JSON), allowed), [])
    if kind not in ("multipart/form-data", "application/x-www-form-urlencoded"):
        raise Problem(
            415,
            f"content type {kind or 'none'!r} is not taken here: send application/json, or "
            "multipart/form-data (with files) or application/x-www-form-urlencoded.",
        )
    files_limit = STORED_FILES_LIMIT if has_store else INLINE_FILES_LIMIT
    length = request.headers.get("content-length")
    if length is None or not length.isdigit():
        raise Problem(411, "a form's body needs a Content-Length: send its length.")
    if int(length) > files_limit + MULTIPART_OVERHEAD:
        how = (
            "through the object store"
            if has_store
            else "without an object store (OBJECT_STORE_URL)"
        )
        raise Problem(
            413,
            f"the body weighs {int(length):,} bytes; a run takes at most "
            f"{size_text(files_limit)} of files {how}.",
        )
    directory = Path(tempfile.mkdtemp(prefix="api-inputs-"))
    try:
        try:
            form = await request.form(max_files=MOST_FILES, max_fields=len(allowed) + 1)
        except HTTPException as e:
            raise Problem(
                400, f"the multipart body cannot be read: {str(e.detail).rstrip('.')}."
            ) from e
        try:
            fields: dict[str, Any] = {}
            paths: list[str] = []
            for name, value in form.multi_items():
                if isinstance(value, UploadFile):
                    if name != "files":
                        raise Problem(
                            422, f"part {name[:40]!r} holds a file: send files as 'files' parts."
                        )
                    file_name = plain_file_name(value.filename or "")
                    path = directory / file_name
                    if path.exists():
                        raise Problem(
                            400, f"two files are named {file_name!r}: each must have its own name."
                        )
                    with path.open("wb") as out:
                        await asyncio.to_thread(shutil.copyfileobj, value.file, out)
                    paths.append(str(path))
                    continue
                if name not in allowed or name in fields:
                    raise Problem(
                        422,
                        f"part {name[:40]!r} is not one of this route's (once each): "
                        f"{', '.join([*allowed, 'files'])}.",
                    )
                fields[name] = text_field(name, value)
        finally:
            await form.close()
        try:
            inputs = await asyncio.to_thread(inputs_of, paths, has_store)
        except BadInput as e:
            text = str(e).replace(str(directory) + "/", "").replace("--input", "file")
            raise Problem(413 if "weigh" in text else 422, text + ".") from e
        if not has_store:
            packed = len(json.dumps([dataclasses.asdict(each) for each in inputs]))
            if packed > INLINE_REQUEST:
                raise Problem(
                    413,
                    f"field 'files': {len(inputs):,} files pack to {size_text(packed)}, over the "
                    f"{size_text(INLINE_REQUEST)} a request carries without an object store "
                    "(OBJECT_STORE_URL): send fewer files (many small ones as one archive), or "
                    "set OBJECT_STORE_URL.",
                )
        return Body(fields, inputs)
    finally:
        await asyncio.to_thread(shutil.rmtree, directory, True)


# The page for people (page/): its files, served as they are, with no
# build step. It runs only its own scripts, talks only to this API, and no
# other site may frame it.
PAGE = Path(__file__).parent / "page"
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


# What a download sends at a time, read from its file on disk.
DOWNLOAD_CHUNK = 256 * 1024


async def file_chunks(path: Path) -> AsyncIterator[bytes]:
    with path.open("rb") as file:
        while chunk := await asyncio.to_thread(file.read, DOWNLOAD_CHUNK):
            yield chunk


def page_file(name: str) -> Response:
    """One of the page's files, by its plain name; a 404 for anything else."""
    files = {path.name: path for path in PAGE.iterdir() if path.suffix in PAGE_TYPES}
    if name not in files:
        raise Problem(404, f"{name[:80]!r} is not a file of the page.")
    path = files[name]
    return Response(path.read_bytes(), media_type=PAGE_TYPES[path.suffix], headers=PAGE_HEADERS)


def create_app(settings: ApiSettings, client: Client) -> FastAPI:
    """The API over ``client`` (the Temporal service, with the payloads'
    keys and the object store), for the callers ``settings`` names."""
    tokens = Tokens(settings.tokens)
    server_key = None
    if settings.approver_key_file is not None:
        try:
            server_key = approvers.load_key(settings.approver_key_file)
        except approvers.BadKey as e:
            raise BadSetting(str(e).replace("APPROVER_KEY_FILE", "API_APPROVER_KEY_FILE", 1)) from e
    issuer = (
        Issuer(settings.oidc_issuer, settings.oidc_audience)
        if settings.oidc_issuer and settings.oidc_audience
        else None
    )
    metrics = ApiMetrics()
    followers = Followers(client, metrics)
    streams = Slots("event streams", (settings.streams_per_caller, "API_STREAMS_PER_CALLER"))
    downloads = Slots(
        "downloads",
        (settings.downloads_per_caller, "API_DOWNLOADS_PER_CALLER"),
        (settings.downloads_at_once, "API_DOWNLOADS_AT_ONCE"),
    )
    archives = SharedFiles()
    has_store = settings.starter.object_store is not None

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await followers.close()

    app = Api(
        title=f"{current().name} API",
        version="1",
        description="Start runs of the agent, follow their steps live, follow up, decide "
        "approvals and fetch outputs. Every route under /v1/ needs a bearer token.",
        openapi_url="/openapi.json",
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.followers = followers

    @app.middleware("http")
    async def count(request: Request, call_next: Any) -> Response:
        status = 500
        try:
            response: Response = await call_next(request)
            status = response.status_code
            return response
        finally:
            route = getattr(request.scope.get("route"), "path", "unmatched")
            metrics.requests.labels(method_label(request.method), route, status_label(status)).inc()

    @app.exception_handler(Problem)
    async def on_problem(request: Request, problem: Problem) -> JSONResponse:
        return problem_response(problem, request)

    @app.exception_handler(HTTPException)
    async def on_http(request: Request, error: HTTPException) -> JSONResponse:
        detail = {
            404: f"{request.url.path[:200]!r} is not a route of this API (see /openapi.json).",
            405: f"{request.method} is not allowed on {request.url.path[:200]!r} (see /openapi.json).",
        }.get(error.status_code, str(error.detail))
        response = problem_response(Problem(error.status_code, detail), request)
        # A 405's Allow: the methods the route takes.
        response.headers.update(error.headers or {})
        return response

    @app.exception_handler(RequestValidationError)
    async def on_invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        first = error.errors()[0] if error.errors() else {}
        where = ".".join(str(part) for part in first.get("loc", ()))
        return problem_response(Problem(422, f"{where}: {first.get('msg', 'not valid')}."), request)

    @app.exception_handler(RPCError)
    async def on_rpc(request: Request, error: RPCError) -> JSONResponse:
        if error.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED):
            problem = Problem(503, "Temporal is not answering just now: ask again shortly.")
        else:
            log.error("Temporal refused %s %s: %s", request.method, request.url.path, error)
            problem = Problem(500, "Temporal refused the API's call: the API's log says why.")
        return problem_response(problem, request)

    @app.exception_handler(Exception)
    async def on_error(request: Request, error: Exception) -> JSONResponse:
        log.exception("%s %s failed", request.method, request.url.path)
        return problem_response(
            Problem(500, "the API failed on this request: its log says why."), request
        )

    async def caller_of(request: Request) -> Caller:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Problem(
                401, "no bearer token: send Authorization: Bearer TOKEN (a token from API_TOKENS)."
            )
        found = tokens.caller(token.strip())
        if found is None and issuer is not None and token.count(".") == 2:
            try:
                found = await issuer.caller(token.strip())
            except IssuerUnreachable as e:
                log.warning("the OIDC issuer did not answer: %s", e)
                raise Problem(503, "the OIDC issuer did not answer: ask again shortly.") from e
        if found is None:
            raise Problem(
                401,
                "the bearer token is not one of this API's (API_TOKENS), nor a valid access token.",
            )
        return found

    @app.get("/", include_in_schema=False)
    async def page() -> Response:
        return page_file("index.html")

    @app.get("/page/{name}", include_in_schema=False)
    async def page_asset(name: str) -> Response:
        return page_file(name)

    @app.get("/metrics", include_in_schema=False)
    async def metrics_text() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/livez", include_in_schema=False)
    async def livez() -> dict[str, str]:
        return {"status": "alive"}

    @app.get("/readyz", include_in_schema=False)
    async def readyz() -> dict[str, str]:
        try:
            await asyncio.wait_for(client.service_client.check_health(), 5)
        except Exception as e:
            raise Problem(503, "Temporal is not answering: not ready.") from e
        return {"status": "ready"}

    @app.post(
        "/v1/runs",
        status_code=201,
        summary="Start a run",
        responses=problems(400, 401, 411, 413, 415, 422, 429, 503),
        openapi_extra=request_body(run_fields(), ["prompt"], files=True),
    )
    async def start_run(request: Request) -> JSONResponse:
        caller = await caller_of(request)
        await runs_in_flight(client, caller, settings.runs_per_caller)
        body = await read_body(
            request,
            {"prompt": str, "follow_ups": bool, "provider": str, "repo": str, **BUDGETS},
            has_store,
        )
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
                    repo_of, str(body.fields["repo"]), settings.starter.repos
                )
            except BadInput as e:
                raise Problem(422, str(e).replace("--repo", "field 'repo'") + ".") from e
        request_ = RunRequest(
            prompt=prompt,
            provider=provider or current().sandbox_provider,
            inputs=body.inputs,
            repo=repo,
            follow_ups=boolean(body.fields, "follow_ups"),
            token_budget=token_budget,
            cost_budget_usd=cost_budget,
        )
        workflow_id = await runs.start_run(client, caller, request_)
        log.info("%s started run %s", caller.owner, workflow_id)
        return JSONResponse(
            {"id": workflow_id, "links": runs.links(workflow_id)},
            201,
            headers={"Location": f"/v1/runs/{workflow_id}"},
        )

    @app.get("/v1/runs/{run}", summary="Where a run stands", responses=problems(401, 404, 503, 504))
    async def run_state(run: str, request: Request) -> dict[str, Any]:
        caller = await caller_of(request)
        return await runs.run_state(client, caller, run_id_of(run))

    @app.get(
        "/v1/runs/{run}/events",
        summary="A run's live events (Server-Sent Events)",
        responses={
            200: {"description": "text/event-stream", "content": {"text/event-stream": {}}},
            **problems(400, 401, 404, 429),
        },
    )
    async def run_events(
        run: str, request: Request, last_event_id: str | None = None
    ) -> StreamingResponse:
        caller = await caller_of(request)
        workflow_id = run_id_of(run)
        await runs.own_run(client, caller, workflow_id)
        after = request.headers.get("last-event-id") or last_event_id
        if after:
            try:
                event_id_parts(after)
            except BadEventId as e:
                raise Problem(400, str(e)) from e
        return HeldStream(
            followers.stream(workflow_id, False, after),
            streams.take(caller),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    @app.post(
        "/v1/runs/{run}/messages",
        status_code=202,
        summary="A follow-up to a conversation that has answered",
        responses=problems(400, 401, 404, 409, 411, 413, 415, 422, 504),
        openapi_extra=request_body(
            {"prompt": PROMPT_FIELD, **budget_fields()}, ["prompt"], files=True
        ),
    )
    async def message(run: str, request: Request) -> dict[str, Any]:
        caller = await caller_of(request)
        workflow_id = run_id_of(run)
        await runs.own_run(client, caller, workflow_id)
        body = await read_body(request, {"prompt": str, **BUDGETS}, has_store)
        prompt = prompt_in(body.fields)
        token_budget, cost_budget = budgets_in(body.fields)
        follow_up = FollowUp(prompt, body.inputs, token_budget, cost_budget)
        number = await runs.follow_up(client, caller, workflow_id, follow_up)
        return {"id": workflow_id, "prompt": number, "links": runs.links(workflow_id)}

    @app.post(
        "/v1/runs/{run}/end",
        status_code=202,
        summary="End a conversation: its sandbox is removed",
        responses=problems(401, 404, 409, 504),
    )
    async def end(run: str, request: Request) -> dict[str, Any]:
        caller = await caller_of(request)
        workflow_id = run_id_of(run)
        await runs.end(client, caller, workflow_id)
        return {"id": workflow_id, "state": "ending", "links": runs.links(workflow_id)}

    @app.get(
        "/v1/runs/{run}/outputs",
        summary="The run's outputs: a gzipped tar (the patch inside, as changes.patch)",
        responses={
            200: {"description": "application/gzip", "content": {"application/gzip": {}}},
            **problems(401, 404, 409, 429, 504),
        },
    )
    async def outputs(run: str, request: Request) -> Response:
        caller = await caller_of(request)
        workflow_id = run_id_of(run)
        release = downloads.take(caller)
        # The archive is made on disk, once for the caller's downloads of the
        # run at the same time, and sent from there, a chunk at a time.
        try:
            archive, let_go = await archives.get(
                (caller.owner, workflow_id),
                functools.partial(runs.outputs, client, caller, workflow_id),
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

    @app.get(
        "/v1/runs/{run}/approvals",
        summary="What waits for a person in the run, as the run shows it",
        responses=problems(401, 404, 504),
    )
    async def approvals(run: str, request: Request) -> dict[str, Any]:
        caller = await caller_of(request)
        return await runs.approvals(client, caller, run_id_of(run))

    @app.post(
        "/v1/runs/{run}/approvals/{call_id}",
        summary="A person's decision, signed with their key (docs: approvals)",
        responses=problems(400, 401, 404, 409, 422, 504),
        openapi_extra=request_body(DECISION_FIELDS, ["run_id", "approve"]),
    )
    async def decide(run: str, call_id: str, request: Request) -> dict[str, Any]:
        caller = await caller_of(request)
        workflow_id = run_id_of(run)
        await runs.own_run(client, caller, workflow_id)
        fields = json_object(
            await body_of(request, LARGEST_JSON),
            {
                "run_id": str,
                "approve": bool,
                "reason": str,
                "always": bool,
                "approver": str,
                "signature": str,
            },
        )
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
        answer = await runs.decide(client, caller, workflow_id, decision, server_key)
        return {"call_id": call_id, "decision": answer}

    return app
