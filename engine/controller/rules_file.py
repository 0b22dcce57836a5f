"""Rule files (``rules/*.yaml``): their schema, validation with clear errors, and compilation.

A rule file::

    version: 1
    description: what these rules are for
    constants:                    # named values, used as "$name" in conditions and parameters
      max_depth: 3
    rules:
      - name: storm_depth         # unique across the directory; [a-z][a-z0-9_]*
        description: ...
        priority: 2               # lower fires first (0..1000, default 0); see docs/controller.md
        when:                     # alias -> pattern, all must match (conditions.py has the language)
          wake: {kind: wake_candidate, depth: {gte: $max_depth}}
        unless: {}                # alias -> pattern that must not match
        action: suppress_wake     # a name from actions.ACTIONS
        params: {reason: depth, detail: "depth {wake.depth} >= $max_depth"}

Everything is checked before anything changes: YAML syntax, duplicate keys, unknown keys, fact kinds and
fields, operators, constants, aliases and references, action names and parameters, unique rule names, and
finally that durable_rules compiles the set. The first problem is raised as :class:`RuleFileError` with
the file, the line (from the YAML node) and the rule.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from engine.controller.actions import ACTIONS, PLACEHOLDER, ActionSpec, Params
from engine.controller.conditions import (
    ConditionError,
    RulePath,
    compile_conditions,
    parse_ref,
    refs_in,
    resolve_constant,
)
from engine.controller.durable_host import Binding, RuleSet
from engine.controller.errors import RuleFileError
from engine.errors import YamlRefused
from engine.yaml_input import load_yaml, node_line

RULESET_NAME = "pmw"
Name = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,63}$")]
Alias = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,31}$")]
ConstantValue = str | int | float | bool | list[str | int | float | bool]
_CONSTANT_IN_TEXT = re.compile(r"\$([a-z][a-z0-9_]*)")


class RuleSpec(BaseModel):
    """One rule as written in a file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Name
    description: str = ""
    priority: int = Field(default=0, ge=0, le=1000)
    when: dict[Alias, dict[str, Any]] = Field(min_length=1)
    unless: dict[Alias, dict[str, Any]] = Field(default_factory=dict)
    action: str = Field(min_length=1)
    params: dict[str, Any] = Field(default_factory=dict)


class RuleFile(BaseModel):
    """One ``rules/*.yaml`` file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: Literal[1]
    description: str = ""
    constants: dict[Name, ConstantValue] = Field(default_factory=dict)
    rules: list[RuleSpec] = Field(min_length=1)


@dataclass(frozen=True)
class CompiledRule:
    qualified: str  # "<file stem>/<rule name>"
    definition: dict[str, Any]
    binding: Binding


def load_rule_dir(directory: Path, actions: Mapping[str, ActionSpec] = ACTIONS) -> RuleSet:
    """Validate every ``*.yaml`` in ``directory`` and compile them into one :class:`RuleSet` (durable_rules
    compiles it when a host is built from it). Raises :class:`RuleFileError` on the first problem."""
    files = sorted(directory.glob("*.yaml")) if directory.is_dir() else []
    if not files:
        raise RuleFileError(str(directory), "no rule files (*.yaml) in this directory")
    definition: dict[str, dict[str, Any]] = {}
    bindings: dict[str, Binding] = {}
    owners: dict[str, str] = {}
    digest = hashlib.sha256()
    for path in files:
        for rule in load_rule_file(path, actions):
            name = rule.binding.rule.rpartition("/")[2]
            if name in owners:
                raise RuleFileError(str(path), f"rule name {name!r} is already defined in {owners[name]}",
                                    line=rule.binding.line, rule=name)
            owners[name] = str(path)
            definition[rule.qualified] = rule.definition
            bindings[rule.qualified] = rule.binding
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return RuleSet(RULESET_NAME, definition, bindings, source=str(directory), digest=digest.hexdigest())


def load_rule_file(path: Path, actions: Mapping[str, ActionSpec] = ACTIONS) -> list[CompiledRule]:
    """Validate and compile one rule file."""
    data, node = _parse(path)
    try:
        model = RuleFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(first["loc"])
        raise RuleFileError(str(path), _message(first), line=_line_of(node, loc), rule=_rule_name(data, loc)) from exc
    return [_compile_rule(path, node, model, i, spec, actions) for i, spec in enumerate(model.rules)]


# -- YAML -------------------------------------------------------------------------------------------------

def _parse(path: Path) -> tuple[Any, Any]:
    """The file's plain data and its root node, read by :mod:`engine.yaml_input` (UTF-8, size, depth and
    alias expansion bounded); every problem is a :class:`RuleFileError` naming the file and, when known,
    the line."""
    try:
        document = load_yaml(path)
    except OSError as exc:
        raise RuleFileError(str(path), f"cannot read the file: {exc}") from exc
    except YamlRefused as exc:
        raise RuleFileError(str(path), exc.reason, line=exc.line or None) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        line = mark.line + 1 if mark is not None else None
        raise RuleFileError(str(path), f"YAML syntax error: {problem}", line=line) from exc
    if document.node is None:
        raise RuleFileError(str(path), "the file is empty")
    _check_duplicate_keys(path, document.node)
    return document.data, document.node


def _check_duplicate_keys(path: Path, node: Any) -> None:
    """PyYAML keeps the last of two equal keys; a rule file must not have any."""
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                if key.value in seen:
                    raise RuleFileError(str(path), f"duplicate key {key.value!r}", line=key.start_mark.line + 1)
                seen.add(key.value)
            _check_duplicate_keys(path, value)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _check_duplicate_keys(path, item)


def _line_of(node: Any, loc: Sequence[str | int]) -> int | None:
    """The 1-based line of the deepest YAML node on ``loc`` (a pydantic or condition path)."""
    return node_line(node, loc)


def _rule_name(data: Any, loc: Sequence[str | int]) -> str | None:
    if len(loc) >= 2 and loc[0] == "rules" and isinstance(loc[1], int) and isinstance(data, dict):
        rules = data.get("rules")
        if isinstance(rules, list) and loc[1] < len(rules) and isinstance(rules[loc[1]], dict):
            name = rules[loc[1]].get("name")
            return str(name) if name is not None else f"#{loc[1] + 1}"
    return None


def _message(error: Any) -> str:
    loc = ".".join(str(p) for p in error["loc"])
    if error["type"] == "extra_forbidden":
        return f"unknown field {str(error['loc'][-1])!r}"
    if error["type"] == "missing":
        return f"missing field {loc!r}"
    return f"{loc}: {error['msg']}" if loc else str(error["msg"])


# -- one rule ---------------------------------------------------------------------------------------------

def _compile_rule(path: Path, node: Any, model: RuleFile, index: int, spec: RuleSpec,
                  actions: Mapping[str, ActionSpec]) -> CompiledRule:
    here: RulePath = ("rules", index)
    line = _line_of(node, here)
    try:
        entries, scope = compile_conditions(spec.when, spec.unless, model.constants)
        action = actions.get(spec.action)
        if action is None:
            raise ConditionError(("action",), f"unknown action {spec.action!r} (known: {', '.join(sorted(actions))})")
        params = _bind_params(spec, action, scope, model.constants)
    except ConditionError as exc:
        raise RuleFileError(str(path), exc.reason, line=_line_of(node, (*here, *exc.path)), rule=spec.name) from exc
    qualified = f"{path.stem}/{spec.name}"
    binding = Binding(qualified, action.name, action.handler, params, str(path), line)
    return CompiledRule(qualified, {"all": entries, "pri": spec.priority, "run": qualified}, binding)


def _bind_params(spec: RuleSpec, action: ActionSpec, scope: Mapping[str, str],
                 constants: Mapping[str, Any]) -> Params:
    raw = {name: _resolve_param(name, value, action, constants) for name, value in spec.params.items()}
    try:
        params = action.params.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        path: RulePath = ("params", *(p for p in first["loc"]))
        raise ConditionError(path, f"bad parameter for action {action.name!r}: {_message(first)}") from exc
    for name, kind in action.aliases.items():
        _check_alias(action, name, getattr(params, name), kind, scope)
    for name in action.refs:
        for ref in refs_in(getattr(params, name)):
            parse_ref(ref, scope, ("params", name))
    for name in action.templates:
        for m in PLACEHOLDER.finditer(str(getattr(params, name))):
            parse_ref(f"{m.group(1)}.{m.group(2)}", scope, ("params", name))
    return params


def _resolve_param(name: str, value: Any, action: ActionSpec, constants: Mapping[str, Any]) -> Any:
    path: RulePath = ("params", name)
    if name in action.templates and isinstance(value, str):
        def constant(m: re.Match[str]) -> str:
            return str(resolve_constant(m.group(0), constants, path))
        return _CONSTANT_IN_TEXT.sub(constant, value)
    if isinstance(value, list):
        return [resolve_constant(v, constants, (*path, i)) for i, v in enumerate(value)]
    return resolve_constant(value, constants, path)


def _check_alias(action: ActionSpec, name: str, alias: Any, kind: str | None, scope: Mapping[str, str]) -> None:
    if alias is None:
        return
    if alias not in scope:
        known = ", ".join(scope)
        raise ConditionError(("params", name), f"action {action.name!r} parameter {name!r} names alias {alias!r}, "
                                               f"which is not in 'when' (aliases: {known})")
    if kind is not None and scope[alias] != kind:
        raise ConditionError(("params", name), f"action {action.name!r} needs alias {alias!r} to match kind "
                                               f"{kind!r}; it matches {scope[alias]!r}")


__all__ = ["RULESET_NAME", "CompiledRule", "RuleFile", "RuleSpec", "load_rule_dir", "load_rule_file"]
