"""Authority is never transitive: handoffs attenuate, joining shares no permissions, private stays private."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.errors import NotPermitted, PolicyDenied
from engine.policy.attributes import principal
from engine.policy.cerbos_adapter import CerbosPdp
from engine.world import World
from tests.conftest import add_agent, book_of, close_world, open_pdp_world

CAPS = ["task.work", "handoff.create", "state.write", "memory.write", "artifact.write", "tool:deploy"]
SETTINGS = settings(max_examples=15, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def effective(world: World, agent: str, task_id: str) -> set[str]:
    row = book_of(world).store.read.get("agents", agent_id=agent)
    assert row is not None
    return set(principal(book_of(world).store.read, row, task_id=task_id).attr["capabilities"])


def test_a_handoff_cannot_hand_over_more_than_the_source_holds(pworld: World) -> None:
    add_agent(pworld, "a", ["task.create", "task.work", "handoff.create"])
    add_agent(pworld, "b", ["task.work", "tool:deploy", "handoff.create"])
    task = pworld.create_task("a", "x")
    pworld.claim_task("a", task.task_id)
    with pytest.raises(NotPermitted, match="exceeds"):
        pworld.create_handoff("a", "b", task.task_id, "go", authority_scope={"capabilities": ["tool:deploy"]})
    h = pworld.create_handoff("a", "b", task.task_id, "go", authority_scope={"capabilities": ["task.work"]})
    pworld.accept_handoff("b", h.handoff_id)
    assert effective(pworld, "b", task.task_id) == {"task.work"}  # its own tool:deploy does not apply here
    assert "tool:deploy" in effective(pworld, "b", "")  # elsewhere it keeps its own authority
    with pytest.raises(PolicyDenied):  # handoff.create was not handed over
        pworld.create_handoff("b", "a", task.task_id, "back")
    assert pworld.complete_task("b", task.task_id, {"ok": True}).status.value == "completed"


def test_authority_never_grows_along_a_chain_of_handoffs(pdp_client: CerbosPdp, tmp_path: Any) -> None:
    @SETTINGS
    @given(maxima=st.lists(st.lists(st.sampled_from(CAPS), unique=True), min_size=3, max_size=5),
           scopes=st.lists(st.lists(st.sampled_from(CAPS), unique=True), min_size=4, max_size=4))
    def chain(maxima: list[list[str]], scopes: list[list[str]]) -> None:
        world = open_pdp_world("sqlite://", pdp_client, tmp_path / "art")
        try:
            agents = [add_agent(world, f"c{i}", [*m, "task.work", "handoff.create"] if i == 0 else m)
                      for i, m in enumerate(maxima)]
            world.grant("gov", "c0", capabilities=[*maxima[0], "task.work", "handoff.create", "task.create"])
            task = world.create_task("c0", "carry me")
            world.claim_task("c0", task.task_id)
            before = effective(world, "c0", task.task_id)
            for source, target, scope in zip(agents, agents[1:], scopes, strict=False):
                try:
                    h = world.create_handoff(source, target, task.task_id, "next",
                                             authority_scope={"capabilities": scope})
                    world.accept_handoff(target, h.handoff_id)
                except (NotPermitted, PolicyDenied):
                    break  # refused: nothing was handed over
                after = effective(world, target, task.task_id)
                assert after <= before, (source, target, before, after)
                assert after <= set(scope)
                before = after
        finally:
            close_world(world)
    chain()


def test_private_memory_never_appears_in_another_agents_projection(pdp_client: CerbosPdp, tmp_path: Any) -> None:
    """MVP tests 5 and 9 as a property: whatever rooms are opened and joined, another agent's private memory
    is never in anyone else's projection."""
    @SETTINGS
    @given(joins=st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from([0, 1])), max_size=8),
           notes=st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=5))
    def scenario(joins: list[tuple[str, int]], notes: list[str]) -> None:
        world = open_pdp_world("sqlite://", pdp_client, tmp_path / "art")
        try:
            for agent in ("a", "b", "c"):
                add_agent(world, agent, ["memory.write", "room.open", "memory.invoke"], clearance=5)
            rooms = [world.create_room("a", f"room {i}").room_id for i in range(2)]
            for agent, room in joins:
                world.join_room("a", rooms[room], agent_id=agent)  # "a" opened both: it seats anyone, again
            private = {world.store_memory(owner, f"secret of {owner}", "inference").memory_id: owner
                       for owner in notes}
            for viewer in ("a", "b", "c"):
                seen = world.project_world(viewer).memory_ids()
                assert {m for m, owner in private.items() if owner != viewer}.isdisjoint(seen)
                assert {m for m, owner in private.items() if owner == viewer} <= seen
        finally:
            close_world(world)
    scenario()
