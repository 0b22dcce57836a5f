"""MVP tests 7, 8, 9 and 10 (seed 000 §103-117) end to end: workers, the controller on ``rules/`` and the
real PDP. Contradicting claims are contested, rooms answer blind, joining shares no permission, and a
conflict changes the topology (a room is opened and closed) without anyone asking."""

from __future__ import annotations

from typing import Any

import pytest

from engine.errors import PolicyDenied
from engine.models.agents import Agent
from engine.models.wakes import Wake
from engine.protocol.adapters import AgentDecision, CommitAnswer, Discuss, JoinRoom, RuleAgent, StoreMemory
from engine.runloop import CONTROLLER_AGENT
from engine.world import World
from engine.world.projection import WorldView
from tests.conftest import add_agent, book_of
from tests.mvp.support import (
    GOV,
    act,
    assert_every_wake_has_one_receipt,
    claim,
    clock,
    controller_decisions,
    events_of,
    once,
    outcomes,
    runner_for,
    wakes_as_ended,
    wakes_of,
)

TERM = "launch-date"
ROOM = f"conflict-{TERM}"


def facts(world: World, kind: str) -> list[dict[str, Any]]:
    return [f for f in book_of(world).controller_facts("main") if f["kind"] == kind]


def contradicting_claims(world: World, resolver: Any = None) -> Any:
    """A says the launch is on the 3rd, B on the 10th; both are woken by hand (the governor asks)."""
    add_agent(world, "a", ["state.write"])
    add_agent(world, "b", ["state.write"])
    runner = runner_for(world, {"a": RuleAgent([claim(TERM, "2026-03-03"), *([resolver] if resolver else [])]),
                                "b": RuleAgent([claim(TERM, "2026-03-10")])})
    world.enqueue_wake(GOV, "a", "when is the launch?", "ask-a")
    world.enqueue_wake(GOV, "b", "when is the launch?", "ask-b")
    return runner


# -- MVP 7 ------------------------------------------------------------------------------------------------

def test_mvp07_contradicting_claims_are_contested_and_neither_is_overwritten(pworld: World) -> None:
    """MVP test 7 (conflict preserved as contested): A and B assert contradicting values for one term. The
    controller's conflicts rule records a ``claim.contested`` event naming both claims and both agents, and
    keeps an open contest; both claims stay, with their own values (neither overwrote the other)."""
    runner = contradicting_claims(pworld)
    runner.run_until_quiet(max_rounds=20)

    asserted = {e.actor_id: e.payload for e in events_of(pworld, "claim.asserted")}
    assert asserted == {"a": {"term": TERM, "claim": "a-says", "value": "2026-03-03"},
                        "b": {"term": TERM, "claim": "b-says", "value": "2026-03-10"}}
    (contested,) = events_of(pworld, "claim.contested")
    assert (contested.actor_id, contested.subject_kind, contested.subject_id) == (CONTROLLER_AGENT, "claim", TERM)
    assert sorted(contested.payload["claims"]) == ["a-says", "b-says"]
    assert sorted(contested.payload["agents"]) == ["a", "b"]
    (decision,) = controller_decisions(pworld, "contest")
    assert (decision["term"], decision["rule"]) == (TERM, "conflicts/contradicting_claim")
    claims = {f["agent"]: (f["value"], f["claim"]) for f in facts(pworld, "claim") if f["key"] == TERM}
    assert claims == {"a": ("2026-03-03", "a-says"), "b": ("2026-03-10", "b-says")}
    (contest,) = facts(pworld, "contest")
    assert (contest["key"], contest["status"], sorted([contest["a"], contest["b"]])) == (TERM, "open", ["a", "b"])
    assert "acted" in outcomes(pworld, "a") and "acted" in outcomes(pworld, "b")
    assert_every_wake_has_one_receipt(pworld)
    runner.close()


# -- MVP 10 -----------------------------------------------------------------------------------------------

def argue(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
    """In the conflict room, A says why the term should be settled (the governor settles it)."""
    if wake.cause != "room_member" or not any(r.room_id == ROOM and r.status.value == "open" for r in view.rooms):
        return None
    return act(Discuss(room_id=ROOM, body="the board moved it to the 10th"))


def test_mvp10_a_conflict_opens_a_room_joins_both_agents_and_closes_it_when_resolved(pworld: World) -> None:
    """MVP test 10 (topology change: conflict -> join -> leave): the open contest that needs a decision makes
    the controller open a room for it with both agents (the controller convenes and leaves); the room's
    opening wakes them as members; A argues in the room; the human governor resolves the term
    (``conflict.resolved``: a party to the conflict may not, ``tests/security/``); the controller then closes
    the room, every member leaving in the same transaction, and forgets the contest and the claims. The
    room's events, versions and memberships say so."""
    runner = contradicting_claims(pworld, resolver=argue)
    runner.run_until_quiet(max_rounds=30)
    assert pworld.get_room(ROOM, actor=GOV).status.value == "open"  # nobody has decided yet
    pworld.append_event(GOV, "conflict.resolved", {"term": TERM, "value": "2026-03-10"})
    runner.run_until_quiet(max_rounds=30)

    topology = controller_decisions(pworld, "topology")
    assert [(d["op"], sorted(d["agents"]), d["room"], d["rule"]) for d in topology] == [
        ("join", ["a", "b"], ROOM, "topology/join_unresolved_conflict"),
        ("leave", ["a", "b"], ROOM, "topology/leave_resolved_conflict")]
    assert topology[1]["close"] is True
    room_events = [(e.event_type, e.actor_id, e.payload.get("agent_id")) for e in pworld.events(0, 10_000, actor=GOV)
                   if e.subject_kind == "room" and e.subject_id == ROOM]
    assert room_events == [("room.opened", CONTROLLER_AGENT, None), ("room.left", CONTROLLER_AGENT, CONTROLLER_AGENT),
                           ("room.discussed", "a", None), ("room.closed", CONTROLLER_AGENT, None)]
    opened = events_of(pworld, "room.opened")[0]
    assert sorted(opened.payload["members"]) == sorted([CONTROLLER_AGENT, "a", "b"])
    room = pworld.get_room(ROOM, actor=GOV)
    assert (room.status.value, room.opened_by, room.version) == ("closed", CONTROLLER_AGENT, 2)
    members = {m.agent_id: (m.active, m.version) for m in pworld.room_members(ROOM, active_only=False, actor=GOV)}
    assert members == {CONTROLLER_AGENT: (False, 2), "a": (False, 2), "b": (False, 2)}
    room_wakes = sorted(w.target_agent for w in wakes_of(pworld) if w.cause == "room_member")
    assert room_wakes == ["a", "b"]
    (resolved,) = events_of(pworld, "conflict.resolved")
    assert resolved.actor_id == GOV
    closed = events_of(pworld, "room.closed")[0]
    assert closed.seq > resolved.seq and closed.causation_id == resolved.event_id
    assert facts(pworld, "contest") == [] and facts(pworld, "conflict_room") == []
    assert [f for f in facts(pworld, "claim") if f["key"] == TERM] == []
    assert facts(pworld, "member") == []
    assert (sorted(outcomes(pworld, "a")), sorted(outcomes(pworld, "b"))) == (["acted", "acted"],
                                                                               ["acted", "no_action"])
    assert_every_wake_has_one_receipt(pworld)
    runner.close()


# -- MVP 8 ------------------------------------------------------------------------------------------------

def test_mvp08_answers_are_committed_blind_and_revealed_only_when_everyone_has_committed(pworld: World) -> None:
    """MVP test 8 (blind-then-join): the governor convenes A, B and C in a room; the controller wakes them as
    members; each commits its answer (``CommitAnswer``) without seeing anyone else's, even when others have
    already committed; the last commit reveals all three, which each member then sees."""
    council = ["a", "b", "c"]
    for name in council:
        add_agent(pworld, name, ["state.write"])
    seen: list[dict[str, Any]] = []

    def answer(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        me = agent.agent_id
        in_room = [m for m in (*view.shared_facts, *view.working_memory) if m.room_id == "council"]
        # the test peeks; the agent can't
        committed = book_of(pworld).store.read.rows("room_answers", {"room_id": "council"})
        seen.append({"agent": me, "cause": wake.cause, "others": sorted(m.owner for m in in_room if m.owner != me),
                     "committed": len(committed),
                     "answers_it_may_read": len(pworld.room_answers("council", actor=me))})
        if any(m.owner == me for m in in_room):
            return AgentDecision(decision="no_action", reason="already answered")
        return act(CommitAnswer(room_id="council", content=f"{me} estimates {len(me) * 7} weeks"))
    runner = runner_for(pworld, {n: RuleAgent([answer]) for n in council})
    pworld.create_room(GOV, "estimate the migration", members=council, room_id="council")
    pworld.leave_room(GOV, "council")                                      # the convener does not answer
    runner.run_until_quiet(max_rounds=20)

    blind = [s for s in seen if s["cause"] == "room_member"]
    assert sorted(s["agent"] for s in blind) == council
    assert [s["committed"] for s in blind] == [0, 1, 2]                   # others had committed ...
    assert [(s["others"], s["answers_it_may_read"]) for s in blind] == [([], 0)] * 3  # ... unseen
    answers = pworld.room_answers("council", actor=GOV)
    assert [a.revealed for a in answers] == [True] * 3
    last = events_of(pworld, "room.answered")[-1]
    assert sorted(last.payload["revealed"]) == council

    clock(pworld).advance(5)
    for name in council:
        pworld.enqueue_wake(GOV, name, "compare", f"compare-{name}")
    runner.run_until_quiet(max_rounds=20)
    compared = [s for s in seen if s["cause"] == "compare"]
    assert [(s["agent"], s["others"]) for s in sorted(compared, key=lambda s: s["agent"])] == [
        ("a", ["b", "c"]), ("b", ["a", "c"]), ("c", ["a", "b"])]
    for name in council:  # answered once; woken again (the comparison, and a room wake the cooldown deferred
        # to its end instead of dropping it: rules/wake_storm.yaml), each time with nothing left to answer
        woken = wakes_as_ended(pworld, name)
        assert outcomes(pworld, name) == ["acted"] + ["no_action"] * (len(woken) - 1)
        assert {w.cause for w in woken[1:]} <= {"compare", "room_member"}
        assert all(w.payload.get("deferred", {}).get("reason") == "cooldown"
                   for w in woken if w.cause == "room_member" and w is not woken[0])
    assert_every_wake_has_one_receipt(pworld)
    runner.close()


# -- MVP 9 ------------------------------------------------------------------------------------------------

def test_mvp09_joining_a_room_shares_its_memory_but_never_a_secret_or_a_permission(pworld: World) -> None:
    """MVP test 9 (permission-preserving join): Lo (clearance 0, no memory.write), invited by Hi, joins Hi's room
    through its worker. The join wakes Hi, who welcomes Lo; that wakes Lo as a member. Lo now sees the room's ordinary
    memory, but not the room note marked sensitivity 3 (above its clearance) nor Hi's private memory; its
    authority is unchanged (it still may not write memory: ``denied`` receipt), and reading the secret is
    denied by the PDP."""
    add_agent(pworld, "hi", ["state.write", "memory.write"], clearance=3)
    add_agent(pworld, "lo", ["state.write"])
    pworld.create_room(GOV, "operations", members=["hi"], room_id="ops")
    pworld.leave_room(GOV, "ops")
    pworld.invite_to_room("hi", "ops", "lo")                                # joining needs an invitation
    plain = pworld.store_memory("hi", "deploys happen at 17:00", "observation", scope="room", room_id="ops")
    secret = pworld.store_memory("hi", "the HSM recovery code is in safe 2", "observation", scope="room",
                                 room_id="ops", permission_scope={"sensitivity": 3})
    private = pworld.store_memory("hi", "I think lo is new", "inference")
    before = pworld.get_agent("lo", actor=GOV)
    views: dict[str, list[WorldView]] = {"hi": [], "lo": []}

    def lo_rule(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        views["lo"].append(view)
        if wake.cause == "join ops":
            return act(JoinRoom(room_id="ops"))
        return act(StoreMemory(content="copy of what I saw", epistemic_type="observation"))

    def hi_rule(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        views["hi"].append(view)
        # welcomes lo once lo is a member: hi's wake from the room's opening may run before lo's join or after
        # it (wakes of one instant of the manual clock are claimed in the order of their random ids)
        if "lo" not in {m.agent_id for m in pworld.room_members("ops", actor="hi")}:
            return None
        return act(Discuss(room_id="ops", body="welcome, lo"))
    runner = runner_for(pworld, {"hi": RuleAgent([once(hi_rule)]), "lo": RuleAgent([lo_rule])})
    pworld.enqueue_wake(GOV, "lo", "join ops", "lo-join")
    runner.run_until_quiet(max_rounds=20, advance_clock=True)  # to the end of a cooldown a wake was deferred to

    assert sorted(w.cause for w in wakes_of(pworld, "lo")) == ["join ops", "room_member"]
    hi_woken = wakes_of(pworld, "hi")  # by Lo's join; Lo's next room event falls in Hi's cooldown: deferred
    assert [w.cause for w in hi_woken] == ["room_member"] * len(hi_woken) and 1 <= len(hi_woken) <= 2
    assert len([w for w in hi_woken if "deferred" not in w.payload]) == 1
    assert {plain.memory_id, secret.memory_id, private.memory_id} <= views["hi"][0].memory_ids()
    joined = views["lo"][-1]
    assert [r.room_id for r in joined.rooms] == ["ops"]
    assert plain.memory_id in joined.memory_ids()                           # the room's memory is shared ...
    assert secret.memory_id not in joined.memory_ids()                      # ... never above the clearance
    assert private.memory_id not in joined.memory_ids()                     # ... nor anyone's private memory
    for memory_id in (secret.memory_id, private.memory_id):
        with pytest.raises(PolicyDenied):
            pworld.get_memory("lo", memory_id)
    after = pworld.get_agent("lo", actor=GOV)
    assert (after.capability_profile, after.permission_profile) == (before.capability_profile,
                                                                    before.permission_profile)
    by_cause = {w.cause: pworld.receipt_for_wake(w.wake_id, actor=GOV) for w in wakes_of(pworld, "lo")}
    assert by_cause["join ops"].outcome.value == "acted"
    denied = by_cause["room_member"]                                        # joining granted no memory.write
    assert denied.outcome.value == "denied" and "may not create memory" in (denied.reason or "")
    # Hi welcomed Lo once; the room wake the cooldown deferred ran at its end with nothing left to do
    assert sorted(outcomes(pworld, "hi")) == ["acted"] + ["no_action"] * (len(hi_woken) - 1)
    for w in wakes_of(pworld, "lo"):
        refs = pworld.get_trace(w.wake_id, actor=GOV).retrieved_refs
        assert f"memory:{secret.memory_id}" not in refs and f"memory:{private.memory_id}" not in refs
    assert_every_wake_has_one_receipt(pworld)
    runner.close()
