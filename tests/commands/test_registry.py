"""The command registry is the one vocabulary of the World's writes: for every command, the World method
it names takes exactly its fields (names, defaults, optionality), the agent effect derived from it has its
JSON schema plus the ``effect`` tag, and ``pmw commands NAME --schema`` prints exactly its JSON schema. Every
public World method that writes is a command or one of the runtime's bookkeeping calls, so a new write
without a command fails here."""

from __future__ import annotations

import ast
import inspect
import json
import textwrap
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError
from pydantic.fields import FieldInfo

from engine.commands import COMMANDS, RUNTIME_CALLS, Command, base, command, fields, json_schema, parse, registry
from engine.commands.approvals import INVOKABLE_KINDS
from engine.errors import InvalidInput
from engine.policy.model import ACTIONS
from engine.protocol import adapters
from engine.protocol.adapters import EFFECTS, LEGACY_EFFECT_NAMES, AgentDecision, upgrade_effect
from engine.world import World
from engine.world.book import RuntimeBook
from tests.cli_support import invoke

# World methods that take ``**kwargs``: the model the World builds them into, and what of it the World
# fills itself (these fields are then not the caller's).
KWARGS_MODELS: dict[str, tuple[type[Any], set[str]]] = {}
# Calls that decide a read and record a refusal (the ``policy.denied`` audit record) are not writes.
AUDIT_ONLY = {"_authorize", "record_denial"}


# -- every write is a command ----------------------------------------------------------------------------

def _self_calls(func: Callable[..., Any]) -> set[str]:
    """The ``self.<name>(...)`` calls in ``func``'s body (its nested plans and lambdas included)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    return {node.func.attr for node in ast.walk(tree) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "self"}


def world_writes(of: type = World) -> set[str]:
    """Public methods of the World (or of ``of``: the runtime's book) that reach ``WorldCore._write``
    (transitively, through its other methods)."""
    methods: dict[str, Callable[..., Any]] = {}
    for cls in reversed(of.__mro__):
        if cls.__module__.startswith("engine.world"):
            methods.update({n: f for n, f in vars(cls).items() if inspect.isfunction(f)})
    calls = {name: _self_calls(f) - AUDIT_ONLY for name, f in methods.items()}
    writes: dict[str, bool] = {}

    def reaches(name: str, seen: frozenset[str]) -> bool:
        if name == "_write":
            return True
        if name not in writes:
            writes[name] = any(reaches(c, seen | {name}) for c in calls.get(name, ()) if c not in seen)
        return writes[name]
    return {name for name in methods if not name.startswith("_") and name != "execute" and name not in AUDIT_ONLY
            and reaches(name, frozenset())}


def test_every_public_world_write_is_a_command_or_runtime_bookkeeping() -> None:
    """The World's writes are commands; the runtime's bookkeeping is on its book (RuntimeBook), not the World."""
    writes = world_writes()
    bookkeeping = world_writes(RuntimeBook) - writes
    assert "compare_and_set_state" in writes and "record_decision" in bookkeeping  # the analysis sees writes
    assert "get_state" not in writes and "allowed_actions" not in writes      # and reads as reads
    assert writes - set(COMMANDS) == set(), "a World write without a command"
    assert not writes & set(RUNTIME_CALLS), "runtime bookkeeping on the agent-facing World"
    assert bookkeeping - set(RUNTIME_CALLS) == set(), "a write of the runtime's book that is no runtime call"
    assert set(COMMANDS) <= writes, "a command that writes nothing"
    assert set(RUNTIME_CALLS) <= bookkeeping, "a runtime call that writes nothing"
    assert not set(COMMANDS) & set(RUNTIME_CALLS)


# -- (a) the World method takes exactly the command's fields ----------------------------------------------

def _default(field: FieldInfo) -> Any:
    return field.get_default(call_default_factory=True)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_world_method_takes_exactly_the_command_fields(name: str) -> None:
    cls = COMMANDS[name]
    params = dict(inspect.signature(getattr(World, name)).parameters)
    params.pop("self")
    assert cls.actor_param in params, f"{name} has no caller parameter {cls.actor_param!r}"
    var_kw = [p for p in params.values() if p.kind is inspect.Parameter.VAR_KEYWORD]
    # op_id and the cause are named parameters (create_handoff: in its **packet)
    assert ("op_id" in params or bool(var_kw)) if cls.takes_op_id else "op_id" not in params
    if cls.cause_param is not None:
        assert cls.cause_param in params or var_kw
    else:
        assert "cause" not in params
    for taken in (cls.actor_param, "op_id", cls.cause_param):
        params.pop(taken or "", None)
    named = {n: p for n, p in params.items() if p.kind is not inspect.Parameter.VAR_KEYWORD}
    fields = cls.model_fields
    assert set(named) <= set(fields), f"{name}: World parameters without a field: {set(named) - set(fields)}"
    for pname, param in named.items():
        field = fields[pname]
        if param.default is inspect.Parameter.empty:
            assert field.is_required(), f"{name}.{pname}: required in the World, optional in the command"
        else:
            assert not field.is_required(), f"{name}.{pname}: optional in the World, required in the command"
            assert _default(field) == param.default, f"{name}.{pname}: default {_default(field)!r} != {param.default!r}"
    extra = set(fields) - set(named)
    if var_kw:
        model, filled = KWARGS_MODELS[name]
        assert extra == set(model.model_fields) - set(named) - filled, name
        for fname in extra:
            mine, theirs = fields[fname], model.model_fields[fname]
            assert mine.is_required() == theirs.is_required(), f"{name}.{fname}"
            if not mine.is_required():
                assert _default(mine) == _default(theirs), f"{name}.{fname}"
    else:
        assert extra == set(), f"{name}: fields the World does not take: {extra}"


# -- (b) effects: the command's schema plus the tag ------------------------------------------------------

def test_effects_are_the_commands_agents_may_use() -> None:
    assert list(EFFECTS) == [name for name, cls in COMMANDS.items() if cls.agent_effect]
    assert {"compare_and_set_state", "create_handoff", "claim_task", "store_memory", "commit_answer",
            "register_artifact", "subscribe", "append_event", "send_message"} <= set(EFFECTS)
    assert not set(EFFECTS) & {"grant", "register_agent", "claim_wake", "ack_wake", "enqueue_wake",
                               "activate_session", "close_stale_rooms"}
    schema = AgentDecision.model_json_schema()
    mapping = schema["properties"]["effects"]["items"]["discriminator"]["mapping"]
    assert set(mapping) == set(EFFECTS)


@pytest.mark.parametrize("name", list(EFFECTS))
def test_effect_schema_is_the_command_schema_plus_the_tag(name: str) -> None:
    effect = EFFECTS[name].model_json_schema()
    tag = effect["properties"].pop("effect")
    assert tag == {"const": name, "default": name, "title": "Effect", "type": "string"}
    assert effect["required"][0] == "effect"
    effect["required"].remove("effect")
    if not effect["required"]:
        del effect["required"]
    assert effect == json_schema(name)
    assert issubclass(EFFECTS[name], COMMANDS[name]) and EFFECTS[name].__name__ == COMMANDS[name].__name__


def test_effect_names_of_call_sites_and_old_decisions() -> None:
    assert adapters.SetState is EFFECTS["compare_and_set_state"]
    assert adapters.Handoff is EFFECTS["create_handoff"]
    assert adapters.ReviseArtifact is EFFECTS["new_artifact_version"]
    for old in ("CompleteTask", "StoreMemory", "ClaimTask", "ReviewMemory", "JoinRoom", "CommitAnswer",
                "CloseRoom", "SendMessage"):
        cls = getattr(adapters, old)
        assert cls is EFFECTS[cls.name]
    state = adapters.SetState(key="k", expected_version=0, value=1)
    assert state.effect == "compare_and_set_state"
    plain = state.command()
    assert type(plain) is COMMANDS["compare_and_set_state"] and plain.model_dump() == {
        "key": "k", "expected_version": 0, "value": 1}
    assert set(LEGACY_EFFECT_NAMES.values()) <= set(EFFECTS)
    decided = AgentDecision.model_validate({"decision": "act", "effects": [
        {"effect": "set_state", "key": "k", "expected_version": 0, "value": 1},
        {"effect": "handoff", "target_agent": "b", "task_id": "t", "goal": "g"},
        {"effect": "review_memory", "memory_id": "m", "verdict": "promote", "reason": None},
        {"effect": "review_memory", "memory_id": "m", "verdict": "reject", "reason": None},
        {"effect": "review_memory", "memory_id": "m", "verdict": "review"},
        {"effect": "revise_artifact", "artifact_id": "a", "content": "x", "expected_version": 2}]})
    assert [e.effect for e in decided.effects] == ["compare_and_set_state", "create_handoff", "promote_memory",
                                                   "reject_memory", "review_memory", "new_artifact_version"]
    assert decided.effects[3].command().model_dump() == {"memory_id": "m", "reason": "rejected in review",
                                                          "expected_version": None}
    for bad in ({"effect": "review_memory", "memory_id": "m", "verdict": "approve"},
                {"effect": "review_memory", "memory_id": "m", "verdict": "promote", "reason": "why"},
                {"effect": "grant", "agent_id": "a"}, {"effect": "record_decision"}):
        with pytest.raises(ValidationError):
            AgentDecision.model_validate({"decision": "act", "effects": [bad]})
    assert upgrade_effect({"effect": "claim_task", "task_id": "t"}) == {"effect": "claim_task", "task_id": "t"}


# -- (c) the CLI prints the registry's schema -----------------------------------------------------------

@pytest.mark.parametrize("name", list(COMMANDS))
def test_cli_prints_exactly_the_command_schema(name: str) -> None:
    result = invoke(None, "commands", name, "--schema")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == json_schema(name)


def test_cli_lists_every_command() -> None:
    result = invoke(None, "commands", as_json=True)
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)
    assert [c["name"] for c in listed] == list(COMMANDS)
    assert all(c["description"] == COMMANDS[c["name"]].description for c in listed)
    assert [c["name"] for c in listed if c["effect"]] == list(EFFECTS)
    human = invoke(None, "commands")
    assert human.exit_code == 0 and "claim_task" in human.stdout and "record_decision" not in human.stdout
    for args in (("commands", "record_decision", "--schema"), ("commands", "--schema")):
        refused = invoke(None, *args, as_json=True)
        assert refused.exit_code == 3, refused.output
        assert json.loads(refused.stderr)["code"] == "invalid_input"


# -- the metadata an agent is shown ----------------------------------------------------------------------

@pytest.mark.parametrize("name", list(COMMANDS))
def test_metadata_is_complete(name: str) -> None:
    cls = COMMANDS[name]
    assert cls.name == name and command(name) is cls
    assert len(cls.description) >= 40 and "\n" not in cls.description
    assert json_schema(name)["description"] == cls.description
    assert cls.events and all(e.count(".") >= 1 or e == "<event_type>" for e in cls.events)
    assert json_schema(name)["additionalProperties"] is False
    if cls.agent_effect:  # the worker names what an effect wrote in the receipt
        assert cls.ref_field is not None or cls.ref is not Command.ref, name


def test_unknown_and_runtime_names_are_not_commands() -> None:
    for name in (*RUNTIME_CALLS, "nope", "execute", "_write"):
        with pytest.raises(InvalidInput):
            command(name)
    with pytest.raises(InvalidInput) as refused:
        parse("compare_and_set_state", {"key": "k", "expected_version": 0, "value": 1, "actor": "gov"})
    assert refused.value.field == "actor"  # the caller is never a field


def test_invokable_kinds_are_the_policy_ones() -> None:
    assert set(INVOKABLE_KINDS) == {kind for kind, actions in ACTIONS.items() if "invoke" in actions}
    assert set(COMMANDS["invoke"].model_json_schema()["properties"]["kind"]["enum"]) == set(INVOKABLE_KINDS)


def test_command_modules_never_import_the_world() -> None:
    """engine.world may import engine.commands, never the reverse (nor the policy layer)."""
    modules = [base, fields, registry, *registry.DOMAINS]
    for module in modules:
        imported = {n.module for n in ast.walk(ast.parse(inspect.getsource(module)))
                    if isinstance(n, ast.ImportFrom) and n.module}
        assert not {m for m in imported if m.startswith(("engine.world", "engine.policy", "engine.protocol"))}, module
