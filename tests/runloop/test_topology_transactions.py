"""Topology changes are transactions: proposed, validated against invariants, committed as one new version
(or not at all); the controller's share/isolate proposals go through them."""

from __future__ import annotations

import pytest

from engine.errors import InvalidInput, NotFound, PolicyDenied, VersionConflict
from engine.models.agents import Agent
from engine.models.wakes import Wake
from engine.protocol.adapters import AgentDecision, RuleAgent
from engine.runloop import InProcessRunner
from engine.world import World
from engine.world.projection import WorldView
from tests.conftest import add_agent, book_of


@pytest.fixture
def team(pworld: World) -> World:
    for name in ("a", "b", "c"):
        add_agent(pworld, name, ["topology.write", "state.write"])
    add_agent(pworld, "nobody", [])
    return pworld


def edges(world: World) -> set[tuple[str, str, bool]]:
    return {(e.source_agent, e.target_agent, e.active) for e in world.get_topology(actor="gov",
                                                                                    include_inactive=True).edges}


def test_several_edges_become_one_version(team: World) -> None:
    before = team.get_topology(actor="gov").version
    done = team.change_topology("a", [{"source_agent": "a", "target_agent": "b", "edge_type": "info"},
                                      {"source_agent": "b", "target_agent": "c", "edge_type": "info"}],
                                expected_topology_version=before, reason="share")
    assert done.version == before + 1 and len(done.edges) == 2
    assert team.get_topology(actor="gov").version == before + 1
    assert edges(team) == {("a", "b", True), ("b", "c", True)}


@pytest.mark.parametrize(("changes", "error"), [
    ([{"source_agent": "a", "target_agent": "a", "edge_type": "info"}], InvalidInput),
    ([{"source_agent": "a", "target_agent": "b", "edge_type": "info"},
      {"source_agent": "a", "target_agent": "b", "edge_type": "info", "active": False}], InvalidInput),
    ([{"source_agent": "a", "target_agent": "c", "edge_type": "info", "active": False}], InvalidInput),
    ([{"source_agent": "a", "target_agent": "b", "edge_type": "info"},
      {"source_agent": "a", "target_agent": "ghost", "edge_type": "info"}], NotFound),
    ([{"source_agent": "a", "target_agent": "b", "edge_type": "telepathy"}], InvalidInput),
    ([], InvalidInput),
])
def test_a_transaction_that_breaks_an_invariant_changes_nothing(team: World, changes: list[dict[str, object]],
                                                               error: type[Exception]) -> None:
    before = book_of(team).store.read.state_image()
    with pytest.raises(error):
        team.change_topology("a", changes)
    assert book_of(team).store.read.state_image() == before


def test_a_stale_version_or_a_denied_actor_changes_nothing(team: World) -> None:
    version = team.get_topology(actor="gov").version
    team.change_topology("a", [{"source_agent": "a", "target_agent": "b", "edge_type": "info"}])
    _, before = book_of(team).store.read.state_image()
    with pytest.raises(VersionConflict) as conflict:
        team.change_topology("b", [{"source_agent": "b", "target_agent": "c", "edge_type": "info"}],
                             expected_topology_version=version)
    assert conflict.value.current == version + 1
    with pytest.raises(PolicyDenied):
        team.change_topology("nobody", [{"source_agent": "b", "target_agent": "c", "edge_type": "info"}])
    _, after = book_of(team).store.read.state_image()
    assert after == before  # the denial is recorded in the log only


def test_the_controller_shares_a_useful_delta_and_isolates_an_independent_reviewer(team: World) -> None:
    team.subscribe("b", "doc")

    def author(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        return None

    runner = InProcessRunner(book_of(team), adapters={n: RuleAgent([author]) for n in ("a", "b", "c")})
    runner.start()
    team.append_event("a", "doc.delta", {"relevance": 0.9}, subject_kind="doc", subject_id="doc")
    runner.run_until_quiet(max_rounds=20)
    assert ("a", "b", True) in edges(team)                  # shared: a -> b
    shared = team.get_topology(actor="gov").version
    team.grant("gov", "c", role_id="reviewer")  # an independent review is requested by a reviewer (or governor)
    team.append_event("c", "review.requested", {"independent": True, "reviewer": "b"}, subject_kind="doc",
                      subject_id="doc")
    runner.run_until_quiet(max_rounds=20)
    assert ("a", "b", False) in edges(team)                 # isolated: b's info edges are cut ...
    assert team.get_topology(actor="gov").version == shared + 1   # ... in one topology transaction
    steps = [d for e in team.events(limit=1000, actor="gov") if e.event_type == "controller.step"
             for d in e.payload["decisions"] if d["kind"] == "topology"]
    assert [(d["op"], d.get("error")) for d in steps] == [("share", None), ("isolate", None)]
    runner.close()


