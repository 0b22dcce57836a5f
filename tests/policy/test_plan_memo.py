"""Remembered query plans are exactly what the PDP would answer now: whatever changes an agent's
authority (grants, clearance, rooms, status) or the policy epoch, a remembered plan never outlives it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.errors import InvalidInput
from engine.policy.cerbos_adapter import CerbosPdp
from engine.policy.enforcement import PdpAuthorizer
from engine.runtime import Runtime
from engine.settings import load_settings
from engine.world import World
from tests.conftest import REPO, add_agent, book_of, close_world, open_pdp_world

KINDS = ("memory", "task", "state", "handoff", "room", "wake", "receipt", "artifact")
CAPS = ["memory.write", "state.write", "task.create", "room.open", "memory.invoke"]
SETTINGS = settings(max_examples=10, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

Change = tuple[str, Any]
changes = st.lists(st.one_of(
    st.tuples(st.just("grant"), st.lists(st.sampled_from(CAPS), unique=True, max_size=3)),
    st.tuples(st.just("clearance"), st.integers(0, 5)),
    st.tuples(st.just("join"), st.integers(0, 1)),
    st.tuples(st.just("leave"), st.integers(0, 1)),
    st.tuples(st.just("offline"), st.none()),
    st.tuples(st.just("online"), st.none()),
), max_size=8)


def apply(world: World, rooms: list[str], change: Change) -> None:
    what, arg = change
    if what == "grant":
        world.grant("gov", "b", capabilities=arg)
    elif what == "clearance":
        world.grant("gov", "b", clearance=arg)
    elif what == "join":
        world.join_room("gov", rooms[arg], agent_id="b")
    elif what == "leave":
        if any(m.agent_id == "b" for m in world.room_members(rooms[arg], actor="gov")):
            world.leave_room("gov", rooms[arg], agent_id="b")
    elif what == "offline":
        if world.get_agent("b", actor="gov").status.value != "offline":
            world.detach_session("term:t-b")
    elif world.get_agent("b", actor="gov").status.value == "offline":
        world.register_agent("b", "B", "worker", "t-b")
        world.activate_session("term:t-b")


def test_a_remembered_plan_always_equals_the_pdps_answer_now(pdp_client: CerbosPdp, tmp_path: Any) -> None:
    @SETTINGS
    @given(steps=changes)
    def scenario(steps: list[Change]) -> None:
        world = open_pdp_world("sqlite://", pdp_client, tmp_path / "art")
        try:
            add_agent(world, "a", ["room.open"])
            add_agent(world, "b", ["memory.write"])
            rooms = [world.create_room("a", f"room {i}").room_id for i in range(2)]
            policy = book_of(world).policy
            assert isinstance(policy, PdpAuthorizer)
            for step in [None, *steps]:
                if step is not None:
                    apply(world, rooms, step)
                remembered = policy.plans("b", [(k, "read") for k in KINDS])
                again = policy.plans("b", [(k, "read") for k in KINDS])          # from the memo
                fresh = pdp_client.plans(policy._principal("b"), [(k, "read") for k in KINDS])
                assert remembered == again == fresh
        finally:
            close_world(world)
    scenario()


def test_the_memo_serves_repeats_and_misses_on_every_authority_or_epoch_change(pworld: World) -> None:
    add_agent(pworld, "b", ["memory.write"])
    policy = book_of(pworld).policy
    assert isinstance(policy, PdpAuthorizer)
    memo = policy.plan_memo
    policy.plan("b", "memory", "read")
    misses = memo.misses
    policy.plan("b", "memory", "read")
    assert (memo.misses, memo.hits >= 1) == (misses, True)        # a repeat is served from the memo
    pworld.grant("gov", "b", clearance=3)                          # authority changed: the principal differs
    policy.plan("b", "memory", "read")
    assert memo.misses == misses + 1
    epoch = pworld.current_policy_epoch()
    assert epoch is not None
    pworld.clock.advance(1)  # type: ignore[attr-defined]
    book_of(pworld).activate_policy_epoch(epoch.epoch + "-again", "tests")  # a new epoch: nothing remembered applies
    policy.plan("b", "memory", "read")
    assert memo.misses == misses + 2


def test_the_memo_size_is_a_setting_the_runtime_applies(tmp_path: Any, policy_deployment: Any) -> None:
    """``PMW_PLAN_MEMO_SIZE``: a world of many agents sizes the memo to hold every agent's plans (a memo
    smaller than what one round of wakes asks forgets each plan just before it is asked again)."""
    with pytest.raises(InvalidInput) as refused:
        load_settings(plan_memo_size=-1)
    assert refused.value.field == "PMW_PLAN_MEMO_SIZE"
    assert load_settings().plan_memo_size == 4096
    runtime = Runtime.open(load_settings(db_url=f"sqlite:///{tmp_path / 'w.db'}", policy_dir=REPO / "policies",
                                         policy_deploy_root=policy_deployment.parent, plan_memo_size=12),
                           supervise=False)
    try:
        memo = runtime.book.policy.plan_memo  # type: ignore[attr-defined]
        assert memo.capacity == 12
        runtime.book.bootstrap_governor("gov", "Governor", "t-gov")
        runtime.world.activate_session("term:t-gov")
        for n in range(8):
            add_agent(runtime.world, f"a{n}", ["state.write"])
            runtime.world.project_world(f"a{n}")
        assert len(memo._plans) == 12  # bounded by the setting
    finally:
        runtime.close()
