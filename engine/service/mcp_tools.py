"""The MCP tools of PMW: generated from the command registry and the World's reads, never hand-copied.

Every tool is one World call of :data:`engine.service.calls.WORLD_CALLS` and has that call's name:

- a **command** (``engine.commands.COMMANDS``, minus the runtime's bookkeeping): its description and its
  input schema are the command model's (``cls.description``, ``cls.model_json_schema()``);
- a **read** (``engine.service.calls.WORLD_READS``): its input schema is built with pydantic from the World
  method's signature and type hints, its description is the first paragraph of the method's docstring.

Neither schema has the principal parameter (``actor``; ``worker`` for wakes): the token decides who acts
(``engine.service.calls.bind``). The output schema is the JSON schema of the World method's return
annotation (serialization mode); a result that is not a JSON object (a list, an optional model) is wrapped as
``{"result": ...}`` so that ``structuredContent`` is always an object, and its output schema says so.

A refused call is an ``isError`` result whose ``structuredContent`` is PMW's error: ``code`` (stable),
``message``, ``exit_code`` and the error's fields (``current`` of a ``version_conflict``...), so an agent can
branch on the code. Nothing here calls the World: see ``engine.service.mcp_backend``.
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import mcp_types as types
from pydantic import BaseModel, ConfigDict, TypeAdapter, create_model

from engine.commands import COMMANDS, RUNTIME_CALLS, parse
from engine.errors import PMWError
from engine.service.calls import WORLD_CALLS, WORLD_READS
from engine.world import World

#: The key of a request's ``_meta`` that carries the operation id of a write (``op_id``: safe to retry).
OP_ID_META_KEY = "pmw/op_id"
#: The member that holds a result that is not a JSON object.
RESULT_MEMBER = "result"


@dataclass(frozen=True)
class ToolSpec:
    """One tool: the World call it makes, what it takes and what it answers."""

    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    #: whether the result is wrapped as ``{"result": ...}`` (it is not a JSON object by itself)
    wrapped: bool
    write: bool

    def tool(self) -> types.Tool:
        """The tool as MCP lists it."""
        annotations = types.ToolAnnotations(read_only_hint=not self.write, destructive_hint=False,
                                            open_world_hint=False)
        return types.Tool(name=self.name, description=self.description, input_schema=self.input_schema,
                          output_schema=self.output_schema, annotations=annotations)

    def structured(self, wire: Any) -> dict[str, Any]:
        """``structuredContent`` of a result already in JSON values (``engine.service.wire.to_wire``)."""
        if self.wrapped:
            return {RESULT_MEMBER: wire}
        if not isinstance(wire, dict):
            raise TypeError(f"{self.name} answered {type(wire).__name__}, not the object its schema says")
        return wire


def first_paragraph(doc: str | None) -> str:
    """The first paragraph of ``doc``, made one line (reST double backticks made single)."""
    text = inspect.cleandoc(doc or "")
    return " ".join(text.split("\n\n", 1)[0].split()).replace("``", "`")


#: The wire form of bytes that are not UTF-8 (``engine.service.wire.bytes_to_wire``).
BASE64_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"$base64": {"type": "string",
                                                                             "contentEncoding": "base64"}},
                                 "required": ["$base64"], "additionalProperties": False}


def _binary_allowed(schema: Any) -> Any:
    """``schema`` with every bytes field (``"format": "binary"`` string) also allowing the base64 marker."""
    if isinstance(schema, list):
        return [_binary_allowed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    if schema.get("type") == "string" and schema.get("format") == "binary":
        plain = {k: v for k, v in schema.items() if k != "title"}
        return {**({"title": schema["title"]} if "title" in schema else {}), "anyOf": [plain, BASE64_SCHEMA]}
    return {k: _binary_allowed(v) for k, v in schema.items()}


def _output(annotation: Any) -> tuple[dict[str, Any], bool]:
    """The output schema of a return annotation and whether the result is wrapped in ``{"result": ...}``
    (bytes fields allow the base64 marker of bytes that are not UTF-8)."""
    schema = _binary_allowed(TypeAdapter(annotation).json_schema(mode="serialization"))
    if isinstance(annotation, type) and issubclass(annotation, BaseModel) and schema.get("type") == "object":
        return schema, False
    defs = schema.pop("$defs", None)
    wrapped: dict[str, Any] = {"type": "object", "properties": {RESULT_MEMBER: schema}, "required": [RESULT_MEMBER]}
    if defs:
        wrapped["$defs"] = defs
    return wrapped, True


def _read_input(name: str, method: Any, principal_params: tuple[str, ...]) -> dict[str, Any]:
    """The input schema of a read: its parameters (principal excluded) as a pydantic model's schema."""
    hints = typing.get_type_hints(method)
    fields: dict[str, Any] = {}
    for param in inspect.signature(method).parameters.values():
        if param.name == "self" or param.name in principal_params:
            continue
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (hints.get(param.name, Any), default)
    model = create_model(f"{name}_arguments", __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False),
                         **fields)
    schema = model.model_json_schema()
    schema.pop("title", None)
    return schema


def _read_description(name: str, method: Any, principal_params: tuple[str, ...]) -> str:
    """The first paragraph of the read's docstring; an undocumented read is described by its signature."""
    found = first_paragraph(inspect.getdoc(method))
    if found:
        return found
    params = [p for p in inspect.signature(method).parameters if p != "self" and p not in principal_params]
    answer = typing.get_type_hints(method).get("return")
    args = typing.get_args(answer)
    shown = (f"a list of {getattr(args[0], '__name__', args[0])}" if typing.get_origin(answer) is list and args
             else getattr(answer, "__name__", str(answer)))
    return f"Read `{name}({', '.join(params)})` as the token's agent (the policy decides); answers {shown}."


def _build() -> dict[str, ToolSpec]:
    tools: dict[str, ToolSpec] = {}
    for name, cls in COMMANDS.items():
        if name in RUNTIME_CALLS or name not in WORLD_CALLS:
            continue
        method = getattr(World, name)
        output, wrapped = _output(typing.get_type_hints(method).get("return", Any))
        tools[name] = ToolSpec(name, cls.description, cls.model_json_schema(), output, wrapped, True)
    for name in sorted(WORLD_READS):
        method = getattr(World, name)
        spec = WORLD_CALLS[name]
        output, wrapped = _output(typing.get_type_hints(method).get("return", Any))
        tools[name] = ToolSpec(name, _read_description(name, method, spec.principal_params),
                               _read_input(name, method, spec.principal_params), output, wrapped, False)
    return tools


#: Every tool, by name: the commands in registry order, then the reads by name.
TOOLS: Mapping[str, ToolSpec] = MappingProxyType(_build())


def split_command(name: str, arguments: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A command tool's arguments as ``(the command's fields, the rest)``: the fields are what the command
    model validates; the rest (``op_id``, a principal parameter, anything unknown) is left to the call's
    binding (``engine.service.calls.bind``), which refuses what the call does not take."""
    fields = COMMANDS[name].model_fields
    return ({k: v for k, v in arguments.items() if k in fields},
            {k: v for k, v in arguments.items() if k not in fields})


def world_arguments(name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The World call's keyword arguments for tool ``name``: a command's fields validated by its model and
    shaped for the World (``Command.arguments``: artifact content as bytes...), the rest as given; a read's
    arguments as given (the World validates them). Bad input is ``InvalidInput`` naming the field."""
    if name not in COMMANDS:
        return dict(arguments)
    fields, rest = split_command(name, arguments)
    return {**parse(name, fields).arguments(), **rest}


def error_payload(exc: PMWError) -> dict[str, Any]:
    """PMW's error as JSON values: ``code``, ``message``, ``exit_code`` and the error's fields."""
    from engine.service.wire import to_wire

    return {**to_wire(exc.to_dict()), "code": exc.code, "message": exc.message, "exit_code": exc.exit_code}


def _text(payload: Any) -> list[types.TextContent]:
    return [types.TextContent(type="text", text=json.dumps(payload, ensure_ascii=False, sort_keys=True))]


def artifact_resource(structured: Mapping[str, Any]) -> types.EmbeddedResource | None:
    """The content of a ``read_artifact`` answer as an embedded resource
    (``pmw://artifacts/{id}/versions/{version}``): a blob (base64) for bytes that are not UTF-8, else text."""
    from engine.service.wire import BASE64_KEY

    head, content = structured.get("artifact"), structured.get("content")
    if not isinstance(head, Mapping):
        return None
    uri = f"pmw://artifacts/{head.get('artifact_id')}/versions/{head.get('version')}"
    contents: types.BlobResourceContents | types.TextResourceContents
    if isinstance(content, Mapping) and isinstance(content.get(BASE64_KEY), str):
        contents = types.BlobResourceContents(uri=uri, mime_type="application/octet-stream", blob=content[BASE64_KEY])
    elif isinstance(content, str):
        contents = types.TextResourceContents(uri=uri, mime_type="text/plain; charset=utf-8", text=content)
    else:
        return None
    return types.EmbeddedResource(type="resource", resource=contents)


def success_result(spec: ToolSpec, wire: Any) -> types.CallToolResult:
    """A tool's answer: ``structuredContent`` (the result's JSON) and the same JSON as text; ``read_artifact``
    also answers the content as an embedded resource (:func:`artifact_resource`: a blob when it is not UTF-8)."""
    structured = spec.structured(wire)
    content: list[types.ContentBlock] = list(_text(structured))
    if spec.name == "read_artifact" and (embedded := artifact_resource(structured)) is not None:
        content.append(embedded)
    return types.CallToolResult(content=content, structured_content=structured, is_error=False)


def error_result(exc: PMWError) -> types.CallToolResult:
    """A refused call: ``isError`` with PMW's error as ``structuredContent`` and as text."""
    payload = error_payload(exc)
    return types.CallToolResult(content=_text(payload), structured_content=payload, is_error=True)


__all__ = ["OP_ID_META_KEY", "RESULT_MEMBER", "TOOLS", "ToolSpec", "error_payload", "error_result",
           "first_paragraph", "split_command", "success_result", "world_arguments"]
