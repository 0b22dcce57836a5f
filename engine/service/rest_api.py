"""The commands and the World's reads as REST resources and actions, mounted on ``pmw serve``'s app.

Every route of ``engine.service.rest_routes`` becomes one FastAPI operation whose work goes through the one
door (``service.dispatch``: :meth:`~engine.service.dispatch.Dispatcher.run` authenticates the bearer token
and :meth:`~engine.service.dispatch.Dispatcher.world_call` binds the call with the principal forced from
it). In order, nothing read or written before each step passes:

1. a body over the size cap is refused (413, from ``Content-Length`` before a byte is read);
2. the token is authenticated (401);
3. a path parameter that must name the token's agent and names another is refused (403 ``not_permitted``,
   the check :func:`engine.service.calls.bind` makes of principal parameters);
4. a command's body is parsed (JSON object) and, with the fields its path fills, the ``Idempotency-Key``
   (``op_id``) and ``If-Match`` (``expected_version``), validated by the command's own model (400
   ``invalid_input`` naming the field);
5. the World call runs (the PDP decides it; its errors are the problem answered).

Answers are the call's result as JSON (the result model itself, not wrapped); a versioned resource answers
``ETag: "<version>"``; the answer is encoded on the worker thread that made the call (orjson), so the event
loop only sends bytes, and a call proves its token from the store and is made in one trip to that thread. A
command's token is also checked before its body is read: by the dispatcher's gate (a proof of the last second,
no store read) or, when the gate does not know it, by one more trip to prove it. Errors are ``application/problem+json``
(``engine.service.http_app.problem``), with 413 for a body over the cap. ``GET /v1/openapi.json`` serves the
OpenAPI 3.1 document (``engine.service.rest_openapi``), with no token.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

import orjson
from anyio import to_thread
from fastapi import FastAPI, Header, Path, Request
from fastapi.responses import JSONResponse, Response

from engine.commands import COMMANDS, parse
from engine.errors import InvalidInput, NotFound, PayloadTooLarge, PMWError
from engine.models.tokens import TokenPrincipal
from engine.service.calls import CallSpec, bind
from engine.service.http_app import bearer, body_of, problem, refuse_declared_size
from engine.service.rest_headers import apply_headers, etag_of, op_id_of
from engine.service.rest_openapi import openapi_document
from engine.service.rest_reads import QueryParam, query_params
from engine.service.rest_routes import Route, all_routes, check_routes
from engine.service.wire import to_wire
from engine.validation import parse_json_text
from engine.world import World

if TYPE_CHECKING:
    from engine.service.host import Service

PROBLEM_413 = 413


def rest_problem(exc: PMWError) -> JSONResponse:
    """``exc`` as a problem document; a whole body over the size cap is 413 here (the ``/v1/world`` calls
    keep their 400; a field over its own limit inside a body is 400 ``payload_too_large`` naming it)."""
    too_large = isinstance(exc, PayloadTooLarge) and exc.field == "body"
    return problem(exc, status=PROBLEM_413 if too_large else None)


def body_object(raw: bytes) -> dict[str, Any]:
    """A command's JSON body as an object (empty body: ``{}``); not UTF-8, bad JSON or not an object is
    ``InvalidInput`` (depth, NaN and unstorable values refused as the CLI refuses them)."""
    if not raw.strip():
        return {}
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput("body", f"not UTF-8: {exc}") from None
    body = parse_json_text("body", text)
    if not isinstance(body, dict):
        raise InvalidInput("body", "must be a JSON object (the command's fields)")
    return body


def own_check(route: Route, principal: TokenPrincipal, path: Mapping[str, str]) -> None:
    """Refuse (``NotPermitted``) a path parameter of ``route.own`` naming another agent than the token's:
    the very check :func:`~engine.service.calls.bind` makes of a call's principal parameters."""
    for param in route.own:
        bind(CallSpec(route.call, False, (param,)), principal, {param: path[param]})


def command_arguments(route: Route, path: Mapping[str, str], raw: bytes, headers: Mapping[str, str | None]
                      ) -> dict[str, Any]:
    """The World call's keyword arguments for a command route: the body with the path's fields and the
    headers' version, validated by the command's model, plus the operation id."""
    command = COMMANDS[route.call]
    body = body_object(raw)
    for param, target in route.fills.items():
        if target in body and body[target] != path[param]:
            raise InvalidInput(target, f"is given by the path ({param}); leave it out of the body")
        body[target] = path[param]
    body = apply_headers(command, body, headers.get("if-match"), headers.get("if-none-match"))
    arguments = parse(route.call, body).arguments()
    return {**arguments, **op_id_of(command, headers.get("idempotency-key"))}


def read_arguments(route: Route, path: Mapping[str, str], query: Mapping[str, Any],
                   given: set[str]) -> dict[str, Any]:
    """The World read's keyword arguments: the path's fields and the query parameters the request gave."""
    arguments = {target: path[param] for param, target in route.fills.items()}
    arguments.update({name: value for name, value in query.items() if name in given})
    return arguments


def json_bytes(wire: Any) -> bytes:
    """JSON values as compact UTF-8 JSON (orjson; the standard encoder for what orjson refuses: an integer
    beyond 64 bits)."""
    try:
        return orjson.dumps(wire)
    except TypeError:
        return json.dumps(wire, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


class Encoded:
    """A call's result as its answer's bytes and ``ETag`` (made on the worker thread, sent by the loop)."""

    __slots__ = ("body", "etag")

    def __init__(self, value: Any) -> None:
        self.etag = etag_of(value)
        self.body = json_bytes(to_wire(value))

    def response(self) -> Response:
        return Response(self.body, media_type="application/json",
                        headers={"ETag": self.etag} if self.etag is not None else None)


def answer(value: Any) -> Response:
    """A call's result as JSON, with ``ETag`` for a versioned resource."""
    return Encoded(value).response()


def endpoint(route: Route, service: Service, params: tuple[QueryParam, ...]) -> Any:
    """The FastAPI endpoint of ``route`` (its signature declares the path, query and header parameters, so
    FastAPI documents them; a query parameter FastAPI refuses is a 400 ``invalid_input``)."""
    path_names = tuple(route.fills)
    headers_taken = ("idempotency-key", "if-match", "if-none-match")

    async def serve(request: Request, **values: Any) -> Response:
        token = bearer(request)
        path = {name: str(values[name]) for name in path_names}
        dispatch = service.dispatch
        headers = {name: request.headers.get(name) for name in headers_taken}
        query = {p.name: values.get(p.name) for p in params}
        given = set(request.query_params)
        raw = b""

        def work(principal: TokenPrincipal) -> Encoded:
            own_check(route, principal, path)
            arguments = (command_arguments(route, path, raw, headers) if route.is_command
                         else read_arguments(route, path, query, given))
            return Encoded(dispatch.world_call(principal, route.call, arguments))
        try:  # a declared oversize body first (nothing read), then the token, then the body
            refuse_declared_size(request)
            if route.is_command and dispatch.gate(token) is None:  # not proven within the last second: the
                await to_thread.run_sync(dispatch.principal, token)  # token proven before a byte of the body
            if route.is_command:
                raw = await body_of(request)
            # the call made under a proof from the store, in the same trip to the thread as the call
            encoded = await to_thread.run_sync(lambda: dispatch.run(token, work))
        except PMWError as exc:
            return rest_problem(exc)
        return encoded.response()

    declared = [inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Request)]
    declared += [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[str, Path()])
                 for name in path_names]
    declared += [p.parameter() for p in params]
    if route.is_command:
        declared += [inspect.Parameter(name.replace("-", "_"), inspect.Parameter.KEYWORD_ONLY, default=None,
                                       annotation=Annotated[str, Header(alias=name.title())])
                     for name in headers_taken if _takes_header(route, name)]
    serve.__signature__ = inspect.Signature(declared)  # type: ignore[attr-defined]
    serve.__name__ = route.operation_id
    return serve


def _takes_header(route: Route, name: str) -> bool:
    command = COMMANDS[route.call]
    if name == "idempotency-key":
        return command.takes_op_id
    return "expected_version" in command.model_fields


def mount(app: FastAPI, service: Service) -> None:
    """Mount every REST route on ``app`` and ``GET /v1/openapi.json``."""
    routes = all_routes()
    check_routes(routes, World)
    for route in routes:
        params = () if route.is_command else query_params(World, route.call, set(route.fills.values()))
        app.add_api_route(route.mounted_path, endpoint(route, service, params), methods=[route.method],
                          operation_id=route.operation_id, tags=[route.resource], name=route.operation_id,
                          summary=route.summary or None)
    app.state.rest_routes = routes

    @app.post("/v1/actions/{command}", include_in_schema=False)
    async def unknown_action(command: str) -> Response:
        """A name that is not a command (runtime bookkeeping included) is 404, as nothing is looked up by it."""
        return rest_problem(NotFound("command", command[:100]))
    document: dict[str, Any] = {}

    @app.get("/v1/openapi.json", include_in_schema=False)
    async def openapi() -> Response:
        if not document:
            document.update(openapi_document(app, routes, World))
        return JSONResponse(document)


__all__ = ["body_object", "command_arguments", "mount", "own_check", "rest_problem"]
