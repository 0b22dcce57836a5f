"""Roles are granted, never self-taken (issue 9, "Anyone can become a governor"): the PDP's governor role
comes from the agent row's role_id, so setting a privileged role must be a governor's grant."""

from __future__ import annotations

import pytest

from engine.errors import PolicyDenied
from engine.world import World
from tests.conftest import add_agent, book_of

GOV = "gov"
PRIVILEGED = ("governor", "reviewer", "moderator")


def role_of(world: World, agent_id: str) -> str:
    row = book_of(world).store.read.get("agents", agent_id=agent_id)
    assert row is not None
    return str(row["role_id"])


@pytest.mark.parametrize("role", PRIVILEGED)
def test_self_registration_with_a_privileged_role_is_refused(pworld: World, role: str) -> None:
    with pytest.raises(PolicyDenied) as err:
        pworld.register_agent("mallory", "Mallory", role, "t-mallory")
    assert (err.value.action, err.value.kind, err.value.id) == ("register", "agent", "mallory")
    assert book_of(pworld).store.read.get("agents", agent_id="mallory") is None  # nothing registered
    assert book_of(pworld).store.read.rows("sessions", {"agent_id": "mallory"}) == []
    # control: the same agent registers itself as a plain worker
    assert pworld.register_agent("mallory", "Mallory", "worker", "t-mallory").agent.role_id == "worker"


def test_a_worker_cannot_re_register_itself_as_governor_or_change_its_role(pworld: World) -> None:
    add_agent(pworld, "wendy", ["state.write", "task.create"])
    for role in ("governor", "reviewer", "planner"):  # planner carries no authority, but a change is a grant
        with pytest.raises(PolicyDenied) as err:
            pworld.register_agent("wendy", "Wendy", role, f"t-wendy-{role}")
        assert err.value.action in ("register", "grant")
        assert role_of(pworld, "wendy") == "worker"
    # control: re-registering with its own role (a new terminal) is fine, and keeps its grants
    again = pworld.register_agent("wendy", "Wendy", "worker", "t-wendy-2")
    assert again.agent.capability_profile == {"capabilities": ["state.write", "task.create"]}
    # and it still holds no governor authority: it cannot grant anything
    with pytest.raises(PolicyDenied):
        pworld.grant("wendy", "wendy", capabilities=["room.open"])


def test_a_role_change_by_a_non_governor_is_refused(pworld: World) -> None:
    """Neither the agent itself, nor an agent holding every capability, nor a moderator or a reviewer (roles a
    governor granted them) may set a role."""
    add_agent(pworld, "wendy", ["state.write"])
    add_agent(pworld, "max", ["state.write", "task.create", "task.work", "task.assign", "memory.write",
                              "memory.review", "room.open", "topology.write", "wake.enqueue", "handoff.create"])
    add_agent(pworld, "mo", ["state.write"])
    pworld.grant(GOV, "mo", role_id="moderator")
    add_agent(pworld, "rita", ["memory.review"])
    pworld.grant(GOV, "rita", role_id="reviewer")
    for actor in ("wendy", "max", "mo", "rita"):
        for target in (actor, "wendy"):
            with pytest.raises(PolicyDenied) as err:
                pworld.grant(actor, target, role_id="governor")
            assert err.value.action == "grant"
    assert [role_of(pworld, a) for a in ("wendy", "max", "mo", "rita")] == ["worker", "worker", "moderator",
                                                                             "reviewer"]


def test_a_governor_grants_a_role_and_the_policy_sees_it(pworld: World) -> None:
    add_agent(pworld, "wendy", ["state.write"])
    assert "append" in pworld.allowed_actions("wendy", "event", "review.done").denied
    granted = pworld.grant(GOV, "wendy", role_id="reviewer")
    assert granted.role_id == "reviewer" and role_of(pworld, "wendy") == "reviewer"
    (event,) = [e for e in pworld.events(0, 1000, actor=GOV) if e.event_type == "agent.granted"
                and e.subject_id == "wendy" and "role_id" in e.payload]
    assert (event.actor_id, event.payload["role_id"]) == (GOV, "reviewer")
    assert "append" in pworld.allowed_actions("wendy", "event", "review.done").allowed  # the PDP sees the role
    # the governor role itself comes only from a governor's grant: then wendy may grant
    pworld.grant(GOV, "wendy", role_id="governor")
    add_agent(pworld, "otto", [])
    assert pworld.grant("wendy", "otto", capabilities=["state.write"]).capability_profile == {
        "capabilities": ["state.write"]}


def test_a_governor_registers_an_agent_with_a_privileged_role(pworld: World) -> None:
    reg = pworld.register_agent("rex", "Rex", "reviewer", "t-rex", actor=GOV)
    assert reg.agent.role_id == "reviewer"
    # the reviewer then re-registers itself (a new terminal) with the role it was given
    assert pworld.register_agent("rex", "Rex", "reviewer", "t-rex-2").agent.role_id == "reviewer"
