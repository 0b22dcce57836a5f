"""The OpenAPI 3.1 document of the REST routes, generated: FastAPI lays out the operations and their path,
query and header parameters; the request bodies are the commands' own pydantic models and the answers the
World calls' result models (their JSON schemas, under ``components.schemas``).

Every operation states its security (``bearer``: ``Authorization: Bearer <token>``), its answer (with the
``ETag`` header for a versioned resource), links to the operations that take what it answered (a created
task's ``task_id`` -> ``GET /v1/tasks/{task_id}`` ...; what schemathesis' stateful tests follow), and the
problems it may answer as ``application/problem+json`` (the ``Problem`` component: RFC 9457 members plus
PMW's ``code`` (one of every ``engine.errors`` code), ``exit_code`` and the error's fields): 400 bad input,
401 no or a dead token, 403 refused, 404 no such object, 409 conflicts (writes), 413 a body over the cap
(commands), 503 store or PDP unavailable. FastAPI's own 422 never happens (it is answered 400) and is left
out. The generic ``/v1/world``, ``/v1/governance`` and ``/v1/wakes/pull|{id}/decision`` calls are not in
the document (``docs/rest.md``).
"""

from __future__ import annotations

import copy
import typing
from collections.abc import Iterator, Sequence
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from engine import errors
from engine.commands import COMMANDS
from engine.service.rest_headers import HEADER_DOCS
from engine.service.rest_routes import Route

REF = "#/components/schemas/{model}"
PROBLEM_STATUSES: dict[int, str] = {
    400: "Bad input (`invalid_input` and its kinds), naming the field; nothing was read or written.",
    401: "No token, or one that is unknown, expired or revoked (`unauthenticated`).",
    403: "Refused: `not_permitted` (another agent's id, a read-only token), `policy_denied` (the PDP), ...",
    404: "No such object (`not_found`).",
    409: "A conflict: `version_conflict` (with the current version), `operation_conflict`, `already_exists`, ...",
    413: "The body is over the size cap (`payload_too_large`), refused before it was read.",
    503: "The store or the PDP is unavailable (`store_unavailable`, `policy_unavailable`): retry later.",
}


def error_codes() -> list[str]:
    """Every stable code of ``engine.errors``, sorted."""
    found = {cls.code for cls in vars(errors).values()
             if isinstance(cls, type) and issubclass(cls, errors.PMWError)}
    return sorted(found)


def problem_schema() -> dict[str, Any]:
    """The ``Problem`` component: an RFC 9457 problem document with PMW's code, exit code and fields."""
    return {
        "type": "object", "title": "Problem",
        "description": "An RFC 9457 problem document; the error's own fields (e.g. `current_version` of a "
                       "`version_conflict`, `field` of an `invalid_input`) are members too.",
        "required": ["type", "title", "status", "code", "exit_code"],
        "properties": {
            "type": {"type": "string", "pattern": "^urn:pmw:error:[a-z_]+$"},
            "title": {"type": "string"}, "status": {"type": "integer"}, "detail": {"type": "string"},
            "code": {"type": "string", "enum": error_codes()}, "exit_code": {"type": "integer"},
            "message": {"type": "string"},
        },
        "additionalProperties": True,
    }


def _model_of(annotation: Any) -> tuple[type[BaseModel] | None, str]:
    """The model a result annotation holds and its shape: ``one``, ``list`` or ``optional``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, "one"
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is list and args and isinstance(args[0], type) and issubclass(args[0], BaseModel):
        return args[0], "list"
    members = [a for a in args if a is not type(None)]
    if len(members) == 1 and isinstance(members[0], type) and issubclass(members[0], BaseModel):
        return members[0], "optional"
    return None, "any"


def _results(routes: Sequence[Route], world: type) -> dict[str, tuple[type[BaseModel] | None, str]]:
    return {r.call: _model_of(typing.get_type_hints(getattr(world, r.call)).get("return")) for r in routes}


def _operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            yield path, method.upper(), operation


def _body_schema(component: dict[str, Any], filled: set[str]) -> dict[str, Any]:
    """The command's schema without the fields its path fills."""
    schema = copy.deepcopy(component)
    for name in filled:
        schema.get("properties", {}).pop(name, None)
    if "required" in schema:
        schema["required"] = [n for n in schema["required"] if n not in filled]
        if not schema["required"]:
            del schema["required"]
    return schema


def openapi_document(app: FastAPI, routes: Sequence[Route], world: type) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``routes`` as mounted on ``app`` (``world``: the World class, whose
    methods' return annotations are the answers)."""
    by_id = {r.operation_id: r for r in routes}
    mounted = [r for r in app.routes if isinstance(r, APIRoute) and r.operation_id in by_id]
    doc = get_openapi(title="PMW", version="1", openapi_version="3.1.0", routes=mounted,
                      description="The PMW world's commands and reads as REST resources (docs/rest.md).")
    results = _results(routes, world)
    inputs: list[tuple[type[BaseModel], JsonSchemaMode]] = [(COMMANDS[r.call], "validation")
                                                            for r in routes if r.is_command]
    outputs: list[tuple[type[BaseModel], JsonSchemaMode]] = [(m, "serialization") for m, _ in results.values()
                                                             if m is not None]
    keys, defs = models_json_schema(list(dict.fromkeys(inputs + outputs)), ref_template=REF)
    schemas: dict[str, Any] = dict(defs.get("$defs", {}))
    schemas["Problem"] = problem_schema()
    doc["components"] = {"schemas": schemas,
                         "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                                        "description": "An agent token (`pmw tokens issue`)."}}}

    def ref(model: type[BaseModel], mode: JsonSchemaMode) -> dict[str, Any]:
        return dict(keys[(model, mode)])

    def component(model: type[BaseModel], mode: JsonSchemaMode) -> dict[str, Any]:
        name = str(keys[(model, mode)]["$ref"]).rsplit("/", 1)[-1]
        return dict(schemas[name])

    for _path, _method, operation in _operations(doc):
        route = by_id[operation["operationId"]]
        model, shape = results[route.call]
        operation["security"] = [{"bearer": []}]
        if route.is_command:
            command = COMMANDS[route.call]
            operation["description"] = command.description
            fields = component(command, "validation").get("properties", {})
            for param in operation.get("parameters", []):
                if param["in"] == "path" and route.fills.get(param["name"]) in fields:
                    param["schema"] = fields[route.fills[param["name"]]]
                elif param["in"] == "header" and param["name"] in HEADER_DOCS:
                    param.update(copy.deepcopy(HEADER_DOCS[param["name"]]))
            body = (ref(command, "validation") if not route.fills
                    else _body_schema(component(command, "validation"), set(route.fills.values())))
            operation["requestBody"] = {"required": bool(body.get("required")) or "$ref" in body,
                                        "content": {"application/json": {"schema": body}}}
        else:
            operation["description"] = " ".join((getattr(world, route.call).__doc__ or "").split())
        answer = _answer_schema(model, shape, ref)
        ok: dict[str, Any] = {"description": "The call's result.",
                              "content": {"application/json": {"schema": answer}}}
        if model is not None and "version" in model.model_fields:
            ok["headers"] = {"ETag": {"description": 'The resource\'s version, `"<version>"`: send it back '
                                                     "as If-Match.", "schema": {"type": "string"}}}
        links = _links(route, model, routes)
        if links:
            ok["links"] = links
        responses: dict[str, Any] = {"200": ok}
        for status, text in PROBLEM_STATUSES.items():
            if status in (409, 413) and not route.is_command:
                continue
            responses[str(status)] = {"description": text, "content": {
                "application/problem+json": {"schema": {"$ref": REF.format(model="Problem")}}}}
        operation["responses"] = responses
    for stale in ("HTTPValidationError", "ValidationError"):
        schemas.pop(stale, None)
    return doc


def _answer_schema(model: type[BaseModel] | None, shape: str, ref: Any) -> dict[str, Any]:
    if model is None:
        return {}
    one = ref(model, "serialization")
    if shape == "list":
        return {"type": "array", "items": one}
    if shape == "optional":
        return {"anyOf": [one, {"type": "null"}]}
    return dict(one)


def _links(route: Route, model: type[BaseModel] | None, routes: Sequence[Route]) -> dict[str, Any]:
    """Links from ``route``'s answer to the operations of its resource whose one path parameter is a field
    of that answer (a created task's ``task_id`` -> ``GET /v1/tasks/{task_id}``, its claim, ...)."""
    if model is None or route.method == "GET" or route.resource == "actions":
        return {}
    found: dict[str, Any] = {}
    for other in routes:
        if other is route or other.resource != route.resource or len(other.fills) != 1 or other.own:
            continue
        (param,) = other.fills
        if param in model.model_fields:
            found[other.operation_id] = {"operationId": other.operation_id,
                                         "parameters": {param: f"$response.body#/{param}"}}
    return found


__all__ = ["PROBLEM_STATUSES", "error_codes", "openapi_document", "problem_schema"]
