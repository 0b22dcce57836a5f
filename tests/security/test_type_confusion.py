"""Review finding 7 (issue 9): values of the wrong type. A ``budget`` or ``limit`` given as a string, a target
that is not a string, ``changes`` that are not a list, a ``subject_id`` that is a dict (which came back as
``store_unavailable``: retry forever) or ``weights`` of the wrong shape must be ``InvalidInput`` naming the
parameter, never a raw ``TypeError``/``AttributeError`` or ``StoreUnavailable``, and change nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from engine.errors import InvalidInput
from engine.world import World
from tests.conftest import add_agent, book_of

GOV = "gov"
WRONG: dict[str, Any] = {"str": "x", "none": None, "float": 1.5, "list": [1], "dict": {"a": 1}, "bool": True,
                         "bytes": b"x", "object": object()}
NOT_INTS = dict(WRONG)
NOT_STRS = {k: v for k, v in WRONG.items() if k != "str"}

CALLS: dict[str, tuple[str, dict[str, Any], Callable[[World, Any], Any]]] = {
    "project_world budget": ("budget", NOT_INTS, lambda w, v: w.project_world("alice", budget=v, actor="alice")),
    "project_world weights": ("weights", {**{k: v for k, v in WRONG.items() if k != "none"},
                                          "bad field": {"relevance": "high"}, "negative": {"recency": -1}},
                              lambda w, v: w.project_world("alice", weights=v, actor="alice")),
    "project_world widen": ("widen", {k: v for k, v in WRONG.items() if k not in ("none", "bool")},
                            lambda w, v: w.project_world("alice", widen=v, actor="alice")),
    "list_traces limit": ("limit", NOT_INTS, lambda w, v: w.list_traces(limit=v, actor=GOV)),
    "list_memory limit": ("limit", NOT_INTS, lambda w, v: w.list_memory("alice", limit=v)),
    "unread limit": ("limit", NOT_INTS, lambda w, v: w.unread("agent:bob", limit=v, actor="bob")),
    "unread target": ("target", NOT_STRS, lambda w, v: w.unread(v, actor="bob")),
    "resolve_target target": ("target", NOT_STRS, lambda w, v: w.resolve_target(v, actor="bob")),
    "change_topology changes": ("changes", {k: v for k, v in WRONG.items() if k != "list"},
                                lambda w, v: w.change_topology(GOV, v)),
    "subscriptions subject_id": ("subject_id", {k: v for k, v in NOT_STRS.items() if k != "none"},
                                 lambda w, v: w.subscriptions(subject_id=v, actor=GOV)),
    "subscriptions agent_id": ("agent_id", {k: v for k, v in NOT_STRS.items() if k != "none"},
                               lambda w, v: w.subscriptions(agent_id=v, actor=GOV)),
    "events limit": ("limit", NOT_INTS, lambda w, v: w.events(0, v, actor=GOV)),
    "events after_seq": ("after_seq", NOT_INTS, lambda w, v: w.events(v, 10, actor=GOV)),
}


@pytest.fixture
def seeded(pworld: World) -> World:
    add_agent(pworld, "alice", ["memory.write", "topology.write"])
    add_agent(pworld, "bob")
    pworld.store_memory("alice", "a note", "observation")
    pworld.subscribe("bob", "task-1")
    return pworld


@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_value_of_the_wrong_type_is_invalid_input_and_writes_nothing(seeded: World, call: str) -> None:
    field, values, run = CALLS[call]
    before = book_of(seeded).store.read.last_seq()
    for label, value in values.items():
        with pytest.raises(InvalidInput) as refused:
            run(seeded, value)
        assert refused.value.field.split(".")[0] == field, (label, refused.value)
    assert book_of(seeded).store.read.last_seq() == before


def test_the_right_types_still_work(seeded: World) -> None:
    assert seeded.project_world("alice", budget=3, weights={"relevance": 2.0}, actor="alice").budget in (3, 6)
    assert seeded.project_world("alice", budget=10**6, actor="alice").budget >= 1  # clamped, as before
    assert [s.subject_id for s in seeded.subscriptions(subject_id="task-1", actor=GOV)] == ["task-1"]
    assert len(seeded.list_memory("alice", limit=1)) == 1
    assert seeded.list_traces(limit=5, actor=GOV) == []
