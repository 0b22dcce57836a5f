"""Review finding 5 (issue 9): ``allowed_actions`` on another agent's private memory told the asker "owned by
alice", its status and whether the id existed; ``break_glass_read`` looked its row up before the PDP decided,
so a non-governor learnt whether X had committed a sealed answer (``PolicyDenied`` vs ``NotFound``). Now the
policy decides first: to an agent that may neither read nor break-glass the memory, every answer is
"refused: policy", the same whether or not the object exists."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from engine.errors import NotFound, PolicyDenied
from engine.world import World
from tests.conftest import add_agent, book_of

GOV = "gov"


@pytest.fixture
def secrets(pworld: World) -> World:
    add_agent(pworld, "alice", ["memory.write", "room.open"])
    add_agent(pworld, "bob", ["memory.write"])
    add_agent(pworld, "mallory", ["memory.write", "memory.review", "state.write"])
    pworld.store_memory("alice", "ALICE-SECRET", "observation", memory_id="m-secret")
    pworld.create_room("alice", "blind", members=["bob"], room_id="r1")
    pworld.commit_answer("alice", "r1", "ALICE-ANSWER")
    return pworld


def _answer(world: World, ident: str) -> dict[str, Any]:
    return world.allowed_actions("mallory", "memory", ident).model_dump(exclude={"id"})


def test_allowed_actions_on_memory_one_may_not_see_says_policy_only(secrets: World) -> None:
    secret = _answer(secrets, "m-secret")
    assert secret["allowed"] == [] and set(secret["refused"].values()) == {"policy"}
    assert set(secret["why"].values()) == {"refused: policy"}
    assert "alice" not in str(secret) and "private" not in str(secret)
    assert _answer(secrets, "m-nonexistent") == secret  # the same answer: existence is not told either


def test_the_owner_and_a_governor_still_get_the_full_answer(secrets: World) -> None:
    own = secrets.allowed_actions("alice", "memory", "m-secret")
    assert "read" in own.allowed and "propose" in own.allowed
    assert "break_glass" in secrets.allowed_actions(GOV, "memory", "m-secret").allowed
    with pytest.raises(NotFound):  # a governor may break-glass anything: it is told what does not exist
        secrets.allowed_actions(GOV, "memory", "m-nonexistent")


CALLS: dict[str, Callable[[World, str], Any]] = {
    "break_glass memory": lambda w, i: w.break_glass_read("mallory", "memory", i, "curious"),
    "get_memory": lambda w, i: w.get_memory("mallory", i),
    "propose_memory": lambda w, i: w.propose_memory("mallory", i),
    "review_memory": lambda w, i: w.review_memory("mallory", i),
    "revoke_memory": lambda w, i: w.revoke_memory("mallory", i, "mine now", expected_version=7),
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_calls_on_memory_one_may_not_see_are_refused_by_policy_first(secrets: World, call: str) -> None:
    for ident in ("m-secret", "m-nonexistent"):
        with pytest.raises(PolicyDenied) as denied:
            CALLS[call](secrets, ident)
        assert "alice" not in str(denied.value) and "private" not in str(denied.value)
    assert secrets.get_memory("alice", "m-secret").content == "ALICE-SECRET"  # unchanged


def test_only_who_may_break_glass_is_told_that_memory_does_not_exist(secrets: World) -> None:
    with pytest.raises(NotFound):
        secrets.get_memory(GOV, "m-nonexistent")
    with pytest.raises(NotFound):
        secrets.propose_memory(GOV, "m-nonexistent")
    with pytest.raises(PolicyDenied):  # an ordinary agent, even one with memory of its own, is not
        secrets.get_memory("alice", "m-nonexistent")


def test_break_glass_on_a_sealed_answer_tells_no_one_but_a_governor_who_answered(secrets: World) -> None:
    for who in ("alice", "bob", "nobody"):
        before = book_of(secrets).store.read.count("events")
        with pytest.raises(PolicyDenied):
            secrets.break_glass_read("mallory", "room_answer", f"r1/{who}", "curious")
        assert book_of(secrets).store.read.count("events") == before + 1  # the denial's audit record only
    assert secrets.break_glass_read(GOV, "room_answer", "r1/alice", "dispute").memory.content == "ALICE-ANSWER"
    with pytest.raises(NotFound):
        secrets.break_glass_read(GOV, "room_answer", "r1/bob", "dispute")
