"""A controller step's ``route_review`` decision records its reviewer on the memory candidate
(``Memory.reviewer``), in the step's own transaction: that reviewer, and no other, then reviews it. A memory
the route no longer fits (not a candidate, already held by a reviewer) is left as it is."""

from __future__ import annotations

from typing import Any

import pytest

from engine.errors import NotPermitted
from engine.world import World
from engine.world.controller_steps import ControllerStep
from tests.conftest import add_agent, book_of


def route(memory_id: str, reviewer: str) -> dict[str, Any]:
    """The record the run loop commits for a RouteReview decision (kind, rule, its signature)."""
    return {"kind": "route_review", "rule": "memory_review/route_memory_candidate", "memory": memory_id,
            "reviewer": reviewer}


def step(position: int, expected_version: int, *decisions: dict[str, Any]) -> ControllerStep:
    return ControllerStep(world_id="w-test", position=position, expected_version=expected_version,
                          decisions=list(decisions))


@pytest.fixture
def team(world: World) -> World:
    for agent in ("ada", "rita", "ria"):
        add_agent(world, agent, ["memory.write", "memory.review"])
    return world


def candidate(world: World, content: str) -> str:
    mem = world.store_memory("ada", content, "inference")
    return world.propose_memory("ada", mem.memory_id).memory_id


def test_the_first_route_sets_the_reviewer_and_only_it_may_promote(team: World) -> None:
    mid = candidate(team, "the API allows 100 requests/s")
    book_of(team).commit_controller_step("gov", step(1, 0, route(mid, "rita"), route(mid, "ria")))
    mem = team.get_memory("ada", mid)
    assert (mem.status.value, mem.reviewer) == ("candidate", "rita")
    with pytest.raises(NotPermitted, match="under review by rita"):
        team.promote_memory("ria", mid)
    assert team.get_memory("ada", mid).reviewer == "rita"  # the refusal changed nothing
    assert team.promote_memory("rita", mid).status.value == "shared"


def test_a_route_that_no_longer_fits_changes_nothing(team: World) -> None:
    held = candidate(team, "held by a reviewer already")
    team.review_memory("ria", held)  # ria took it into review before the route committed
    private = team.store_memory("ada", "never proposed", "inference").memory_id
    before = {m: team.get_memory("ada", m) for m in (held, private)}
    result = book_of(team).commit_controller_step("gov", step(1, 0, route(held, "rita"), route(private, "rita"),
                                                              route("mem_missing", "rita")))
    assert result.decisions == 3
    assert {m: team.get_memory("ada", m) for m in (held, private)} == before
