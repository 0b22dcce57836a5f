"""The HTTP face of ``pmw serve``: a FastAPI application over one :class:`~engine.service.host.Service`.

Every route but ``GET /v1/health`` needs ``Authorization: Bearer <token>`` (``engine.auth.tokens``); the
token's agent is the principal of every call it makes. Routes:

- ``GET  /v1/health``: the server, its PDP (up, down, restarting) and the policy epoch; 503 while the PDP is
  down (work waits, fail closed). Shows no secret and needs no token.
- ``GET  /v1/whoami``: the token's agent, token id, scope and expiry.
- ``POST /v1/world/{call}``: one World call (``engine.service.calls``): body ``{"arguments": {...}}``.
- ``POST /v1/governance/{call}``: one governance call (``engine.service.governance``), the same way.
- ``POST /v1/wakes/pull``: the token's agent's most urgent due wake, leased, with its projection (or null).
- ``POST /v1/wakes/{wake_id}/decision``: the agent's decision (a decision envelope, or today's
  ``AgentDecision``) for a wake it pulled; answers the receipt.

Answers are ``{"result": ...}`` (JSON of the call's models). Errors are ``application/problem+json``
(RFC 9457) with PMW's stable ``code``, the CLI's ``exit_code`` and the error's fields. A request body over
:data:`MAX_BODY_BYTES` is refused before it is parsed; JSON nested too deep or holding NaN is refused as
the CLI refuses it. A request whose ``Host`` is not the server's own name (DNS rebinding) is refused (400).
FastAPI's own validation errors are PMW's 400 ``invalid_input`` naming the field; an unknown route or
method is a problem document too. These routes are not in the OpenAPI document; the REST resources are
(``engine.service.rest_api``, ``GET /v1/openapi.json``).
Calls are served one at a time (``engine.service.dispatch``: one lock around the world), which is what one SQLite
writer allows anyway.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any

from anyio import to_thread
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from engine.errors import InvalidInput, PayloadTooLarge, PMWError
from engine.models.tokens import TokenPrincipal
from engine.service.calls import WORLD_CALLS, CallSpec, bind, invoke, spec_of
from engine.service.mcp_origin import host_allowed
from engine.service.transports import mount_transports
from engine.service.wire import model_name, to_wire
from engine.validation import parse_json_text

if TYPE_CHECKING:
    from engine.service.host import Service

MAX_BODY_BYTES = 8 * 1024 * 1024
STATUS_OF_EXIT = {1: 500, 3: 400, 4: 404, 5: 409, 6: 403, 7: 500, 8: 503, 9: 503, 10: 401}


#: The problem document's own members (RFC 9457 and PMW's): an error's field of one of these names is sent
#: only in ``fields``, never over the member.
PROBLEM_MEMBERS = frozenset({"type", "title", "status", "detail", "instance", "code", "message", "exit_code",
                             "fields"})


def problem(exc: PMWError, *, status: int | None = None, headers: dict[str, str] | None = None) -> JSONResponse:
    """``exc`` as an RFC 9457 problem document with PMW's ``code``, ``exit_code`` and the error's fields: all
    of them in ``fields``, and each also as a member of its own name unless that name is one of the
    document's (:data:`PROBLEM_MEMBERS`: ``IllegalTransition.status`` never overwrites the HTTP status). Its
    HTTP status is the exit code's (:data:`STATUS_OF_EXIT`) unless ``status`` says otherwise."""
    status = status if status is not None else STATUS_OF_EXIT.get(exc.exit_code, 500)
    fields = to_wire(exc.details())
    body = {**{k: v for k, v in fields.items() if k not in PROBLEM_MEMBERS},
            "type": f"urn:pmw:error:{exc.code}", "title": exc.code, "status": status, "detail": exc.message,
            "code": exc.code, "message": exc.message, "exit_code": exc.exit_code, "fields": fields}
    headers = dict(headers or {})
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="pmw"'
    return JSONResponse(body, status_code=status, media_type="application/problem+json", headers=headers or None)


def invalid_from_request(exc: RequestValidationError) -> InvalidInput:
    """FastAPI's own validation error (a path, query or header parameter it refused) as PMW's
    ``invalid_input`` naming the first field it refused."""
    first: dict[str, Any] = dict(next(iter(exc.errors()), {}))
    location = [str(part) for part in first.get("loc", ()) if part not in ("query", "path", "header", "body")]
    return InvalidInput(".".join(location) or "request", str(first.get("msg", "refused"))[:200])


class HostCheck:
    """DNS rebinding: a request whose ``Host`` is not one of the server's own names is refused (400
    ``invalid_input`` naming ``Host``, as a problem document) before anything else runs (pure ASGI, so a
    streamed answer is never buffered)."""

    def __init__(self, app: ASGIApp, allowed_hosts: Sequence[str]) -> None:
        self.app = app
        self.allowed = frozenset(allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or "*" in self.allowed:
            await self.app(scope, receive, send)
            return
        host = Headers(scope=scope).get("host", "")
        if host_allowed(host, self.allowed):  # exactly a name, or a name and a port: nothing else after it
            await self.app(scope, receive, send)
            return
        refused = problem(InvalidInput("Host", f"{host[:100]!r} is not this server's host name (DNS rebinding)"))
        await refused(scope, receive, send)


def bearer(request: Request) -> str | None:
    """The token of ``Authorization: Bearer <token>`` (None when there is no such header)."""
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def refuse_declared_size(request: Request) -> None:
    """``PayloadTooLarge`` when the request's ``Content-Length`` is over :data:`MAX_BODY_BYTES` (nothing read)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise PayloadTooLarge("body", int(declared), MAX_BODY_BYTES)


async def body_of(request: Request) -> bytes:
    """The request's body, refused (``PayloadTooLarge``) over :data:`MAX_BODY_BYTES`: from its
    ``Content-Length`` before a byte is read, and, for a body of no declared length (chunked), as it
    arrives: reading stops at the first chunk over the cap, so no more than the cap is ever held. Nothing is
    parsed here: the routes read a body only once its token has been proven (:func:`arguments_of` parses)."""
    refuse_declared_size(request)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise PayloadTooLarge("body", size, MAX_BODY_BYTES)
        chunks.append(chunk)
    return b"".join(chunks)


def arguments_of(raw: bytes) -> tuple[dict[str, Any], list[Any]]:
    """A body's ``{"arguments": {...}, "positional": [...]}`` (both optional; an empty body: no arguments);
    bad JSON is ``InvalidInput``."""
    if not raw.strip():
        return {}, []
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput("body", f"not UTF-8: {exc}") from None
    body = parse_json_text("body", text)  # depth, NaN/Infinity and unstorable values refused before parsing
    if not isinstance(body, dict):
        raise InvalidInput("body", "must be a JSON object")
    unknown = set(body) - {"arguments", "positional"}
    if unknown:
        raise InvalidInput("body", f"unknown members {sorted(unknown)[:5]}; send {{\"arguments\": {{...}}}}")
    found, positional = body.get("arguments", {}), body.get("positional", [])
    if not isinstance(found, dict):
        raise InvalidInput("arguments", "must be a JSON object of keyword arguments")
    if not isinstance(positional, list):
        raise InvalidInput("positional", "must be a JSON array")
    return found, positional


def add_error_handlers(app: FastAPI) -> None:
    """Every error the framework or a bug raises, answered as a problem document."""
    @app.exception_handler(404)
    async def not_found(_request: Request, _exc: Exception) -> Response:
        return problem(InvalidInput("path", "no such route; see docs/operations.md and docs/rest.md for the API"))

    @app.exception_handler(RequestValidationError)
    async def refused_parameter(_request: Request, exc: RequestValidationError) -> Response:
        return problem(invalid_from_request(exc))  # FastAPI's 422 is PMW's 400 invalid_input

    @app.exception_handler(Exception)
    async def unexpected(_request: Request, exc: Exception) -> Response:
        """A bug (an error that is no PMW error): 500 as a problem document that shows nothing of it (the
        server's log has the traceback)."""
        return problem(PMWError(f"internal error ({type(exc).__name__}); see the server's log"))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> Response:
        """Any other HTTP error of the framework (405 a method the route does not take, ...) as a problem
        document with its own status."""
        if exc.status_code == 404:
            return problem(InvalidInput("path", "no such route; see docs/operations.md and docs/rest.md"))
        reason = f"{exc.detail}"[:200]
        return problem(InvalidInput("method" if exc.status_code == 405 else "request", reason),
                       status=exc.status_code, headers=dict(exc.headers or {}))


def build_app(service: Service) -> FastAPI:
    """The application serving ``service``'s world."""
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        """Enter what the transports need while the server runs (``app.state.lifespans``: async context
        managers' factories, entered in order and left in reverse)."""
        async with contextlib.AsyncExitStack() as stack:
            for enter in app.state.lifespans:
                await stack.enter_async_context(enter())
            yield

    app = FastAPI(title="PMW", version="1", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.lifespans = []
    # DNS rebinding: a page that resolves its own name to 127.0.0.1 reaches the server with its own Host header
    app.add_middleware(HostCheck, allowed_hosts=list(service.allowed_hosts))
    dispatch = service.dispatch

    async def proven(request: Request) -> str | None:
        """The request's token, checked: a declared oversize body refused first (nothing read), then the
        token proven (``Unauthenticated``) before the routes read a byte of the body: by the dispatcher's
        gate (a proof of the last second, no store read) or on a worker thread."""
        refuse_declared_size(request)
        token = bearer(request)
        if dispatch.gate(token) is None:
            await to_thread.run_sync(dispatch.principal, token)
        return token

    async def served(token: str | None, work: Callable[[TokenPrincipal], Any]) -> Response:
        """Run ``work`` for the principal ``token`` proves (from the store, in the same trip to a worker thread
        as the call; one call at a time: ``engine.service.dispatch``) and answer its result."""
        def run() -> Any:
            value = dispatch.run(token, work)
            return {"result": to_wire(value), "model": model_name(value)}
        try:
            answer = await to_thread.run_sync(run)
        except PMWError as exc:
            return problem(exc)
        return JSONResponse(answer)

    @app.exception_handler(PMWError)
    async def pmw_error(_request: Request, exc: PMWError) -> Response:
        return problem(exc)

    @app.get("/v1/health", include_in_schema=False)
    async def health() -> Response:
        report = await to_thread.run_sync(service.health)
        return JSONResponse(to_wire(report), status_code=200 if report.status == "ok" else 503)

    @app.get("/v1/whoami", include_in_schema=False)
    async def whoami(request: Request) -> Response:
        return await served(await proven(request), lambda principal: principal)

    @app.post("/v1/world/{call}", include_in_schema=False)
    async def world_call(call: str, request: Request) -> Response:
        spec_of(WORLD_CALLS, "world", call)  # an unknown call is refused before the body is read
        token = await proven(request)
        raw = await body_of(request)

        def call_world(p: TokenPrincipal) -> Any:
            arguments, positional = arguments_of(raw)
            return dispatch.world_call(p, call, arguments, positional)
        return await served(token, call_world)

    @app.post("/v1/governance/{call}", include_in_schema=False)
    async def governance_call(call: str, request: Request) -> Response:
        spec = spec_of(service.governance_calls, "governance", call)
        token = await proven(request)
        raw = await body_of(request)
        facade = service.governance

        def call_governance(p: TokenPrincipal) -> Any:
            arguments, positional = arguments_of(raw)
            return invoke(facade, spec, bind(spec, p, arguments, positional, target=facade))
        return await served(token, call_governance)

    @app.post("/v1/wakes/pull", include_in_schema=False)
    async def pull(request: Request) -> Response:
        token = await proven(request)
        raw = await body_of(request)
        spec = CallSpec("pull", True, ())
        return await served(token, lambda p: service.pull(p, bind(spec, p, arguments_of(raw)[0])))

    @app.post("/v1/wakes/{wake_id}/decision", include_in_schema=False)
    async def decision(wake_id: str, request: Request) -> Response:
        token = await proven(request)
        raw = await body_of(request)
        spec = CallSpec("decide", True, ())
        return await served(token, lambda p: service.decide(p, wake_id, bind(spec, p, arguments_of(raw)[0])))

    mount_transports(app, service)

    add_error_handlers(app)
    return app


__all__ = ["MAX_BODY_BYTES", "PROBLEM_MEMBERS", "HostCheck", "bearer", "body_of", "build_app", "invalid_from_request",
           "problem", "refuse_declared_size"]
