"""Same limits everywhere: for every command of the registry and every limit its JSON schema states
(``tests/commands/schema_cases.py`` generates the cases from the schema, nested models and list items
included), a value just past the limit is refused by the command model, by the agent effect, by
``pmw exec`` (exit 3, nothing written) and by the World method itself (``InvalidInput`` naming the field,
nothing written); a value exactly at the limit is accepted by the command and the effect.

The World is the real one, decided by the real PDP, holding the objects that some methods read before
they validate (an artifact, a wake), so that a refusal is the limit's and not a missing object's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from engine.commands import COMMANDS, json_schema, parse
from engine.errors import InvalidInput
from engine.policy.cerbos_adapter import CerbosPdp
from engine.protocol.adapters import EFFECTS, AgentDecision
from engine.world import World
from tests.cli_support import Pdp, assert_clean_failure, invoke, pdp_fixture
from tests.commands.schema_cases import Case, Schema
from tests.commands.support import counts, world_kwargs
from tests.conftest import add_agent, close_world, open_pdp_world

pdp = pdp_fixture
ACTOR = "alice"
CAPABILITIES = ["artifact.write", "handoff.create", "memory.review", "memory.write", "message.send", "room.open",
                "state.write", "task.assign", "task.create", "task.work", "topology.write", "wake.enqueue"]
SCHEMAS = {name: Schema(json_schema(name)) for name in COMMANDS}
CASES = [(name, case) for name, schema in SCHEMAS.items() for case in schema.cases()]

# Where the World names a field differently from its parameter (the request model's own field name).
WORLD_FIELD: dict[tuple[str, str], str] = {}

# Limits the World does not enforce today (found by this test). Each is strict: when the World enforces
# the limit (validating with the command class), the case passes and its entry must go.
WORLD_GAPS: dict[tuple[str, str], str] = {}


def _world_params() -> Iterator[Any]:
    for name, case in CASES:
        key = (name, case.label)
        reason = WORLD_GAPS.get(key)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        yield pytest.param(name, case, id=f"{name}:{case.label}", marks=marks)


@pytest.fixture(scope="module")
def limits_world(tmp_path_factory: pytest.TempPathFactory, pdp_client: CerbosPdp) -> Iterator[
        tuple[World, dict[str, str], str]]:
    """A PDP-decided world with ``alice`` (every capability), an artifact and a wake of hers."""
    root: Path = tmp_path_factory.mktemp("limits")
    url = f"sqlite:///{root / 'world.db'}"
    world = open_pdp_world(url, pdp_client, root / "artifacts")
    add_agent(world, ACTOR, CAPABILITIES)
    artifact = world.register_artifact(ACTOR, "report", b"draft")
    wake = world.enqueue_wake(ACTOR, ACTOR, "limits", "limits-1").wake
    yield world, {"artifact_id": artifact.artifact_id, "wake_id": wake.wake_id}, url
    close_world(world)


def _accepts(name: str) -> Callable[[dict[str, Any]], bool]:
    def accepts(body: dict[str, Any]) -> bool:
        try:
            COMMANDS[name].model_validate(body)
        except ValidationError:
            return False
        return True
    return accepts


def _bodies(name: str, case: Case, existing: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The request with the value past the limit, and the one with the value at it (None: no such value),
    on the first minimal body that the command accepts with the value at the limit (the objects of the
    world filled in where the body names them)."""
    schema = SCHEMAS[name]
    accepts = _accepts(name)
    at_value = case.at() if case.at is not None else None
    chosen: dict[str, Any] | None = None
    for candidate in schema.bases():
        base = {**candidate, **{k: v for k, v in existing.items() if k in candidate}}
        # with a value at the limit, the body with it must be accepted (so only the value differs in the one
        # past it); without one, the base itself
        if accepts(schema.body(base, case.path, at_value) if case.at is not None else base):
            chosen = base
            break
    assert chosen is not None, f"no minimal body of {name} takes {case.label} at its limit"
    past = schema.body(chosen, case.path, case.past())
    return past, schema.body(chosen, case.path, at_value) if case.at is not None else None


def _effect_refused(name: str, body: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        AgentDecision.model_validate({"decision": "act", "effects": [{**body, "effect": name}]})


@pytest.mark.parametrize(("name", "case"), [pytest.param(n, c, id=f"{n}:{c.label}") for n, c in CASES])
def test_past_the_limit_refused_by_command_effect_and_cli(name: str, case: Case, pdp: Pdp,
                                                         limits_world: tuple[World, dict[str, str], str]) -> None:
    world, existing, url = limits_world
    past, at = _bodies(name, case, existing)
    with pytest.raises(InvalidInput) as refused:
        parse(name, past)
    assert refused.value.field.split(".")[0] == case.path[0], refused.value
    if name in EFFECTS:
        _effect_refused(name, past)
    before = counts(world)
    result = invoke(url, "exec", name, "--json", json.dumps(past, ensure_ascii=False), actor=ACTOR, as_json=True,
                    env=pdp.env)
    assert_clean_failure(result, 3)
    assert json.loads(result.stderr)["code"] in ("invalid_input", "payload_too_large")
    assert counts(world) == before
    if at is not None:  # exactly at the limit: accepted
        parse(name, at)
        if name in EFFECTS:
            AgentDecision.model_validate({"decision": "act", "effects": [{**at, "effect": name}]})


@pytest.mark.parametrize(("name", "case"), list(_world_params()))
def test_past_the_limit_refused_by_the_world(name: str, case: Case,
                                            limits_world: tuple[World, dict[str, str], str]) -> None:
    world, existing, _ = limits_world
    past, _ = _bodies(name, case, existing)
    kwargs = world_kwargs(world, name, ACTOR, past)
    before = counts(world)
    with pytest.raises(InvalidInput) as refused:
        getattr(world, name)(**kwargs)
    assert counts(world) == before
    assert refused.value.field.split(".")[0] == WORLD_FIELD.get((name, str(case.path[0])), case.path[0])


def test_every_command_has_limits_to_test() -> None:
    """The generator finds limits in every command with fields (a schema without any would test nothing)."""
    for name, cls in COMMANDS.items():
        if cls.model_fields:
            assert any(n == name for n, _ in CASES), name


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_same_fields_everywhere(name: str, pdp: Pdp, limits_world: tuple[World, dict[str, str], str]) -> None:
    """A field the command does not have, or a required one left out, is refused by the command, the effect
    and ``pmw exec`` alike (and the World's own signature has exactly the command's fields: test_registry)."""
    world, _, url = limits_world
    schema = SCHEMAS[name]
    base = next(b for b in schema.bases() if _accepts(name)(b))
    wrong = [{**base, "zz_not_a_field": 1}, *({k: v for k, v in base.items() if k != required}
                                             for required in schema.root.get("required", []))]
    for body in wrong:
        with pytest.raises(InvalidInput):
            parse(name, body)
        if name in EFFECTS:
            _effect_refused(name, body)
        before = counts(world)
        result = invoke(url, "exec", name, "--json", json.dumps(body), actor=ACTOR, as_json=True, env=pdp.env)
        assert_clean_failure(result, 3)
        assert counts(world) == before
