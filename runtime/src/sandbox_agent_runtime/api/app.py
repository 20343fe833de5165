"""The API's application: its routes (routes.py) behind the layers every
answer goes through: the count of requests (/metrics), every error as a
``Problem`` (problems.py) answered as ``application/problem+json``, and the
connection closed after an answer given before the body was read."""

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from sandbox_agent_runtime import approvers
from sandbox_agent_runtime.api import schedules
from sandbox_agent_runtime.api.callers import Issuer, Tokens
from sandbox_agent_runtime.api.document import finished
from sandbox_agent_runtime.api.events import Followers
from sandbox_agent_runtime.api.limits import SharedFiles, Slots
from sandbox_agent_runtime.api.metrics import ApiMetrics, method_label, status_label
from sandbox_agent_runtime.api.problems import PROBLEM_JSON, Problem
from sandbox_agent_runtime.api.routes import Served, router, unlisted
from sandbox_agent_runtime.service import current
from sandbox_agent_runtime.settings import ApiSettings, BadSetting

log = logging.getLogger("api")


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
    """The API's application, whose outermost layer is ``UnreadBodies``,
    and whose OpenAPI document carries the service's own bounds."""

    def build_middleware_stack(self) -> ASGIApp:
        return UnreadBodies(super().build_middleware_stack())

    def openapi(self) -> dict[str, Any]:
        if self.openapi_schema is None:
            served: Served = self.state.served
            starter = served.settings.starter
            self.openapi_schema = finished(super().openapi(), starter.schedule_min_interval)
        return self.openapi_schema


def problem_response(problem: Problem, request: Request) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if problem.status == 401 else {}
    if problem.retry_after is not None:
        headers["Retry-After"] = str(problem.retry_after)
    return JSONResponse(
        problem.body(request.url.path), problem.status, headers=headers, media_type=PROBLEM_JSON
    )


async def count(request: Request, call_next: Any) -> Response:
    """Each request in /metrics, by its method, route and status."""
    metrics: ApiMetrics = request.app.state.served.metrics
    status = 500
    try:
        response: Response = await call_next(request)
        status = response.status_code
        return response
    finally:
        route = getattr(request.scope.get("route"), "path", "unmatched")
        metrics.requests.labels(method_label(request.method), route, status_label(status)).inc()


async def on_problem(request: Request, problem: Problem) -> JSONResponse:
    return problem_response(problem, request)


def routes_of(routes: list[Any]) -> list[Any]:
    """Every route, those of the routers included (FastAPI keeps them apart) too."""
    found = []
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            found += routes_of(included.routes)
        elif getattr(route, "path_regex", None) is not None:
            found.append(route)
    return found


async def on_http(request: Request, error: HTTPException) -> JSONResponse:
    detail = {
        404: f"{request.url.path[:200]!r} is not a route of this API (see /openapi.json).",
        405: f"{request.method} is not allowed on {request.url.path[:200]!r} (see /openapi.json).",
    }.get(error.status_code, str(error.detail))
    response = problem_response(Problem(error.status_code, detail), request)
    # A 405's Allow: the methods the route takes.
    response.headers.update(error.headers or {})
    if error.status_code == 405:
        # Every route of the path's, not only the first that matched it.
        methods = [
            method
            for route in routes_of(request.app.router.routes)
            if route.path_regex.match(request.url.path)
            for method in sorted(getattr(route, "methods", None) or ())
        ]
        response.headers["Allow"] = ", ".join(dict.fromkeys(methods))
    return response


async def on_invalid(request: Request, error: RequestValidationError) -> JSONResponse:
    first = error.errors()[0] if error.errors() else {}
    where = ".".join(str(part) for part in first.get("loc", ()))
    return problem_response(Problem(422, f"{where}: {first.get('msg', 'not valid')}."), request)


async def on_rpc(request: Request, error: RPCError) -> JSONResponse:
    if error.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED):
        problem = Problem(503, "Temporal is not answering just now: ask again shortly.")
    else:
        log.error("Temporal refused %s %s: %s", request.method, request.url.path, error)
        problem = Problem(500, "Temporal refused the API's call: the API's log says why.")
    return problem_response(problem, request)


async def on_error(request: Request, error: Exception) -> JSONResponse:
    log.exception("%s %s failed", request.method, request.url.path)
    return problem_response(
        Problem(500, "the API failed on this request: its log says why."), request
    )


# The answer to each error: a problem.
EXCEPTION_HANDLERS: dict[int | type[Exception], Any] = {
    Problem: on_problem,
    HTTPException: on_http,
    RequestValidationError: on_invalid,
    RPCError: on_rpc,
    Exception: on_error,
}


def create_app(settings: ApiSettings, client: Client) -> FastAPI:
    """The API's application.

    Args:
        settings: the API's settings (its callers, bounds, approver key).
        client: the Temporal client, with the payloads' keys and the object
            store.

    Returns:
        The FastAPI application, its routes, limits and error answers in place;
        ``BadSetting`` for an approver key file it cannot read.
    """
    server_key = None
    if settings.approver_key_file is not None:
        try:
            server_key = approvers.load_key(settings.approver_key_file)
        except approvers.BadKey as e:
            raise BadSetting(str(e).replace("APPROVER_KEY_FILE", "API_APPROVER_KEY_FILE", 1)) from e
    metrics = ApiMetrics()
    served = Served(
        settings=settings,
        client=client,
        tokens=Tokens(settings.tokens),
        issuer=Issuer(settings.oidc_issuer, settings.oidc_audience)
        if settings.oidc_issuer and settings.oidc_audience
        else None,
        server_key=server_key,
        metrics=metrics,
        followers=Followers(client, metrics),
        streams=Slots("event streams", (settings.streams_per_caller, "API_STREAMS_PER_CALLER")),
        downloads=Slots(
            "downloads",
            (settings.downloads_per_caller, "API_DOWNLOADS_PER_CALLER"),
            (settings.downloads_at_once, "API_DOWNLOADS_AT_ONCE"),
        ),
        archives=SharedFiles(),
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await served.followers.close()

    app = Api(
        title=f"{current().name} API",
        version="1",
        description="Start runs of the agent, follow their steps live, follow up, decide "
        "approvals and fetch outputs. Every route under /v1/ needs a bearer token.",
        openapi_url="/openapi.json",
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
        exception_handlers=EXCEPTION_HANDLERS,
    )
    app.state.served = served
    app.include_router(unlisted)
    app.include_router(router)
    app.include_router(schedules.router)
    app.middleware("http")(count)
    return app
