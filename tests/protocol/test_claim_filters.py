"""claim_wake for a set of agents (a worker: the agents it has adapters for), on every store backend: the due
query filters by agent, so a claimer never leases a wake of an agent outside its set, however urgent."""

from __future__ import annotations

from typing import Any

import pytest

from engine.commands.wakes import MAX_CLAIM_AGENTS
from engine.errors import InvalidInput
from engine.models.wakes import WakeStatus
from engine.world import World
from store.gateway import CLAIM_LISTED_TARGETS
from tests.conftest import book_of


@pytest.fixture
def team(world: World) -> World:
    for name in ("a", "b", "c"):
        world.register_agent(name, name.upper(), "worker", f"t-{name}")
    return world


def counts(world: World) -> dict[str, Any]:
    return book_of(world).store.read.counts_and_versions()


def test_a_claim_for_a_set_of_agents_leases_only_their_wakes_most_urgent_first(team: World) -> None:
    team.enqueue_wake("ctl", "c", "for c", "kc", priority=9)  # the most urgent, of an agent outside the set
    team.enqueue_wake("ctl", "a", "for a", "ka", priority=1)
    team.enqueue_wake("ctl", "b", "for b", "kb", priority=5)
    first = team.claim_wake("w", agent_ids=["a", "b", "b"])  # repeats are harmless
    second = team.claim_wake("w", agent_ids=["b", "a"])
    assert (first and first.target_agent, second and second.target_agent) == ("b", "a")
    assert team.claim_wake("w", agent_ids=["a", "b"]) is None
    assert [w.target_agent for w in team.list_wakes(status=WakeStatus.PENDING.value)] == ["c"]
    claimed = team.claim_wake("w", agent_ids=["c"])
    assert claimed is not None and claimed.target_agent == "c"


@pytest.mark.parametrize("size", [CLAIM_LISTED_TARGETS, CLAIM_LISTED_TARGETS + 1, 600])
def test_a_large_set_is_filtered_as_a_small_one(team: World, size: int) -> None:
    """Beyond ``CLAIM_LISTED_TARGETS`` agents the set is bound as one parameter (an array on PostgreSQL, JSON
    text on SQLite): the same wakes are leased, in the same order."""
    others = [f"x{i:04d}" for i in range(size - 2)]  # agents without wakes (most not even registered)
    team.enqueue_wake("ctl", "c", "for c", "kc", priority=9)
    team.enqueue_wake("ctl", "a", "for a", "ka", priority=1)
    team.enqueue_wake("ctl", "b", "for b", "kb", priority=5)
    served = [*others[: len(others) // 2], "b", *others[len(others) // 2:], "a"]
    assert len(set(served)) == size
    leased = [team.claim_wake("w", agent_ids=served) for _ in range(3)]
    assert [w.target_agent if w else None for w in leased] == ["b", "a", None]
    assert [w.target_agent for w in team.list_wakes(status=WakeStatus.PENDING.value)] == ["c"]


def test_an_empty_set_claims_nothing(team: World) -> None:
    team.enqueue_wake("ctl", "a", "for a", "ka")
    before = counts(team)
    assert team.claim_wake("w", agent_ids=[]) is None
    assert counts(team) == before


@pytest.mark.parametrize("call", [
    {"agent_id": "a", "agent_ids": ["a"]},                        # one filter or the other
    {"agent_ids": ["a", "not an id"]},
    {"agent_ids": "a"},                                           # a list, not a string
    {"agent_ids": [f"a{i}" for i in range(MAX_CLAIM_AGENTS + 1)]},
])
def test_a_bad_agent_set_is_invalid_input_and_claims_nothing(team: World, call: dict[str, Any]) -> None:
    team.enqueue_wake("ctl", "a", "for a", "ka")
    before = counts(team)
    with pytest.raises(InvalidInput) as refused:
        team.claim_wake("w", **call)
    assert refused.value.field.startswith("agent_ids")
    assert counts(team) == before
