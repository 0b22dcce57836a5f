"""Conformance: identity, sessions and presence with explicit target resolution."""

from __future__ import annotations

import pytest

from engine.errors import InvalidInput, TargetUnresolved, TerminalOwned
from engine.models.agents import Presence
from engine.world import World


def test_register_attaches_a_session_and_agent_id_is_not_the_session(world: World) -> None:
    reg = world.register_agent("alice", "Alice", "worker", "term-1", model_hint="m1")
    assert reg.agent.status is Presence.ATTACHED
    assert reg.session.session_id != reg.agent.agent_id
    assert reg.session.term_key == "term-1"


def test_display_names_may_collide(world: World) -> None:
    world.register_agent("a1", "Same", "worker", "t1")
    world.register_agent("a2", "Same", "worker", "t2")
    assert {a.agent_id for a in world.list_agents()} == {"a1", "a2"}


def test_at_most_one_active_agent_per_terminal(world: World) -> None:
    a = world.register_agent("alice", "Alice", "worker", "shared-term").session
    b = world.register_agent("bob", "Bob", "worker", "shared-term").session
    world.activate_session(f"session:{a.session_id}")
    with pytest.raises(TerminalOwned) as err:
        world.activate_session(f"session:{b.session_id}")
    assert err.value.owner_agent == "alice"
    world.relinquish_session(f"session:{a.session_id}")
    assert world.activate_session(f"session:{b.session_id}").status is Presence.ACTIVE
    assert world.get_agent("bob").status is Presence.ACTIVE
    assert world.get_agent("alice").status is Presence.ATTACHED


def test_a_terminal_target_naming_two_sessions_is_refused_for_activation(world: World) -> None:
    world.register_agent("alice", "Alice", "worker", "shared-term")
    world.register_agent("bob", "Bob", "worker", "shared-term")
    with pytest.raises(TargetUnresolved):
        world.activate_session("term:shared-term")


def test_unregister_by_terminal_marks_offline_and_keeps_everything(world: World) -> None:
    world.register_agent("alice", "Alice", "worker", "t1")
    task = world.create_task("alice", "keep me")
    world.unregister_agent("term:t1")
    assert world.get_agent("alice").status is Presence.OFFLINE
    assert world.get_task(task.task_id).goal == "keep me"
    again = world.register_agent("alice", "Alice", "worker", "t2")
    assert again.agent.version > 1 and again.agent.status is Presence.ATTACHED


def test_unregister_by_session_leaves_the_agents_other_sessions(world: World) -> None:
    s1 = world.register_agent("alice", "Alice", "worker", "t1").session
    world.register_agent("alice", "Alice", "worker", "t2")
    world.unregister_agent(f"session:{s1.session_id}")
    assert world.get_agent("alice").status is Presence.ATTACHED


def test_targets_are_explicit(world: World) -> None:
    with pytest.raises(InvalidInput):
        world.unregister_agent("nonsense:x")
    with pytest.raises(TargetUnresolved):
        world.unregister_agent("agent:ghost")
    with pytest.raises(TargetUnresolved):
        world.detach_session("term:nobody-here")
