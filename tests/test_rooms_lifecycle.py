"""Rooms through the real PDP: create -> join -> discuss -> commit -> distill -> leave -> close, blind
answers invisible to everyone else until the round completes (MVP test 8), zombie rooms closed by their
stop condition, and refused input that changes nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.errors import (
    AlreadyExists,
    IllegalTransition,
    InvalidInput,
    NotFound,
    NotPermitted,
    PMWError,
    PolicyDenied,
    VersionConflict,
)
from engine.models.memory import MemoryScope, MemoryStatus
from engine.models.rooms import RoomStatus
from engine.policy.cerbos_adapter import CerbosPdp
from engine.sources import ManualClock
from engine.world import World
from tests.conftest import add_agent, book_of, close_world, open_pdp_world

MEMBERS = ("ann", "ben", "cal")


def staff(world: World) -> World:
    """ann opens rooms; ann, ben and cal write memory; rita reviews (a role the governor grants her: no agent
    takes a privileged role itself); oscar is an outsider."""
    add_agent(world, "ann", ["room.open", "memory.write"])
    add_agent(world, "ben", ["memory.write"])
    add_agent(world, "cal", ["memory.write"])
    add_agent(world, "rita", ["memory.review"])
    world.grant("gov", "rita", role_id="reviewer")
    add_agent(world, "oscar", ["memory.write"])
    return world


@pytest.fixture
def team(pworld: World) -> World:
    return staff(pworld)


def folds_to_state(world: World) -> bool:
    book = book_of(world)
    return book.rebuild_state(from_snapshot=False) == book.state_image()


def sees_answer(world: World, reader: str, memory_id: str) -> bool:
    """Whether ``reader`` can see the memory through any read: get, list, projection."""
    try:
        world.get_memory(reader, memory_id)
        got = True
    except NotPermitted:
        got = False
    listed = memory_id in {m.memory_id for m in world.list_memory(reader)}
    projected = memory_id in world.project_world(reader, budget=10_000).memory_ids()
    assert got == listed == projected, (reader, memory_id, got, listed, projected)
    return got


# -- the lifecycle ------------------------------------------------------------------------------------

def test_the_full_lifecycle_create_join_discuss_commit_distill_leave_close(team: World) -> None:
    room = team.create_room("ann", "is the report right?", members=["ben"], stop_condition="answers:all|idle:3600")
    team.invite_to_room("ann", room.room_id, "cal")  # joining needs an invitation
    team.join_room("cal", room.room_id)
    said = team.discuss("ann", room.room_id, "answer blind first", payload={"round": 1})
    assert [(m.sender, m.body, m.payload) for m in team.room_discussion(room.room_id, actor="cal")] == [
        ("ann", "answer blind first", {"round": 1})]
    assert team.room_discussion(room.room_id, actor="ben")[0].event_id == said.event_id

    answers = {who: team.commit_answer(who, room.room_id, f"{who} says yes") for who in MEMBERS}
    assert [answers[w].revealed for w in MEMBERS] == [False, False, True]
    ids = [a.memory_id for a in team.room_answers(room.room_id, actor="ben")]
    assert sorted(ids) == sorted(a.memory_id for a in answers.values())

    candidate = team.distill_room("ann", room.room_id, "all three say yes", source_memory_ids=ids)
    assert (candidate.scope, candidate.status, candidate.owner) == (MemoryScope.SHARED, MemoryStatus.CANDIDATE, "ann")
    team.review_memory("rita", candidate.memory_id)
    assert team.promote_memory("rita", candidate.memory_id).status is MemoryStatus.SHARED

    team.leave_room("cal", room.room_id)
    closed = team.close_room("ann", room.room_id)
    assert closed.status is RoomStatus.CLOSED
    assert team.room_members(room.room_id, actor="ann") == []
    assert folds_to_state(team)


def test_an_outsider_neither_reads_nor_speaks_in_the_discussion(team: World) -> None:
    room = team.create_room("ann", "private talk", members=["ben"])
    team.discuss("ben", room.room_id, "hello")
    with pytest.raises(NotPermitted):
        team.room_discussion(room.room_id, actor="oscar")
    with pytest.raises(NotPermitted):
        team.discuss("oscar", room.room_id, "let me in")
    with pytest.raises(NotPermitted):
        team.commit_answer("oscar", room.room_id, "my two cents")


def test_an_offline_member_is_denied_by_the_policy(team: World) -> None:
    room = team.create_room("ann", "talk", members=["ben"])
    team.detach_session("term:t-ben")
    with pytest.raises(PolicyDenied):  # offline agents only read
        team.discuss("ben", room.room_id, "still here?")
    with pytest.raises(PolicyDenied):
        team.commit_answer("ben", room.room_id, "yes")
    assert team.room_answers(room.room_id, actor="ann") == []


def test_discussing_a_closed_room_is_an_illegal_transition(team: World) -> None:
    room = team.create_room("ann", "short", members=["ben"])
    team.close_room("ann", room.room_id)
    with pytest.raises(IllegalTransition):
        team.discuss("ann", room.room_id, "anyone?")


# -- blind-then-join ---------------------------------------------------------------------------------

def test_answers_are_private_until_the_last_member_commits(team: World) -> None:
    """MVP test 8: each answer is invisible to the others before the round completes; then all see all."""
    room = team.create_room("ann", "review independently", members=["ben", "cal"])
    first = team.commit_answer("ann", room.room_id, "X holds")
    assert sees_answer(team, "ann", first.memory_id)
    assert not any(sees_answer(team, who, first.memory_id) for who in ("ben", "cal", "oscar"))
    assert [a.agent_id for a in team.room_answers(room.room_id, actor="ben")] == []
    team.commit_answer("ben", room.room_id, "X fails")
    last = team.commit_answer("cal", room.room_id, "X holds, mostly")
    assert last.revealed
    for reader in MEMBERS:
        assert {a.agent_id for a in team.room_answers(room.room_id, actor=reader)} == set(MEMBERS)
        assert all(a.revealed for a in team.room_answers(room.room_id, actor=reader))
        assert sees_answer(team, reader, first.memory_id)
    assert not sees_answer(team, "oscar", first.memory_id)
    assert folds_to_state(team)


@pytest.fixture(scope="module")
def fresh_worlds(tmp_path_factory: pytest.TempPathFactory, pdp_client: CerbosPdp
                 ) -> Iterator[Callable[[], World]]:
    opened: list[World] = []

    def make() -> World:
        world = open_pdp_world("sqlite://", pdp_client, tmp_path_factory.mktemp("a"), clock=ManualClock())
        opened.append(world)
        return staff(world)
    yield make
    for world in opened:
        close_world(world)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(order=st.permutations(MEMBERS), talk=st.booleans())
def test_for_any_commit_order_no_member_sees_another_answer_before_the_last(
        fresh_worlds: Callable[[], World], order: list[str], talk: bool) -> None:
    world = fresh_worlds()
    room = world.create_room("ann", "blind round", members=["ben", "cal"])
    committed: dict[str, str] = {}
    for n, who in enumerate(order):
        if talk:
            world.discuss(who, room.room_id, "thinking")
        committed[who] = world.commit_answer(who, room.room_id, f"answer of {who}").memory_id
        done = n == len(order) - 1
        for reader in MEMBERS:
            for author, memory_id in committed.items():
                assert sees_answer(world, reader, memory_id) == (done or reader == author)
            visible = {a.agent_id for a in world.room_answers(room.room_id, actor=reader)}
            assert visible == (set(committed) if done else {reader} & set(committed))
    assert folds_to_state(world)


def test_a_second_answer_is_refused_and_changes_nothing(team: World) -> None:
    room = team.create_room("ann", "one each", members=["ben"])
    team.commit_answer("ann", room.room_id, "first")
    before = book_of(team).state_image()
    with pytest.raises(AlreadyExists):
        team.commit_answer("ann", room.room_id, "second thoughts")
    assert book_of(team).state_image() == before


def test_after_the_reveal_a_late_joiner_cannot_answer_anchored(team: World) -> None:
    room = team.create_room("ann", "closed round", members=["ben"])
    team.commit_answer("ann", room.room_id, "a")
    assert team.commit_answer("ben", room.room_id, "b").revealed
    team.invite_to_room("ben", room.room_id, "cal")  # a member invites
    team.join_room("cal", room.room_id)
    assert len(team.room_answers(room.room_id, actor="cal")) == 2  # a joiner sees the revealed round
    before = book_of(team).state_image()
    with pytest.raises(IllegalTransition):
        team.commit_answer("cal", room.room_id, "c, having read a and b")
    assert book_of(team).state_image() == before


def test_the_last_unanswered_member_leaving_reveals_the_round(team: World) -> None:
    room = team.create_room("ann", "who stays answers", members=["ben", "cal"])
    a = team.commit_answer("ann", room.room_id, "a")
    team.commit_answer("ben", room.room_id, "b")
    assert not sees_answer(team, "ben", a.memory_id)
    team.leave_room("cal", room.room_id)
    assert sees_answer(team, "ben", a.memory_id)
    assert all(x.revealed for x in team.room_answers(room.room_id, actor="ann"))
    assert folds_to_state(team)


def test_racing_last_commits_cannot_both_miss_the_reveal(team: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """Commits compare-and-set the room: a commit planned before another one landed conflicts, and its
    retry (re-read, recompute) is the one that reveals."""
    room = team.create_room("ann", "race", members=["ben", "cal"])
    team.commit_answer("ann", room.room_id, "a")
    door = team._door  # the World's (decided) door to the gateway: ben's commit is held at it
    commit = door.commit

    def cal_lands_first(request: Any) -> Any:
        monkeypatch.setattr(door, "commit", commit)
        assert not team.commit_answer("cal", room.room_id, "c").revealed  # it saw ben unanswered
        return commit(request)
    monkeypatch.setattr(door, "commit", cal_lands_first)
    with pytest.raises(VersionConflict):
        team.commit_answer("ben", room.room_id, "b")  # planned when cal had not answered
    assert team.commit_answer("ben", room.room_id, "b").revealed
    assert all(a.revealed for a in team.room_answers(room.room_id, actor="cal"))


def test_room_answers_hide_an_unrevealed_answer_even_from_a_governor(team: World) -> None:
    room = team.create_room("ann", "blind", members=["ben"])
    team.join_room("gov", room.room_id)
    team.commit_answer("ann", room.room_id, "a")
    assert team.room_answers(room.room_id, actor="gov") == []


# -- distill -----------------------------------------------------------------------------------------

def test_a_distilled_candidate_is_not_shared_before_review_and_carries_provenance(team: World) -> None:
    room = team.create_room("ann", "distill", members=["ben"])
    note = team.store_memory("ben", "room note", "observation", scope="room", room_id=room.room_id)
    candidate = team.distill_room("ann", room.room_id, "the gist", source_memory_ids=[note.memory_id])
    assert candidate.status is MemoryStatus.CANDIDATE and candidate.source_refs == [note.memory_id]
    edges = book_of(team).store.read.rows("provenance_edges", {"dst_id": candidate.memory_id})
    assert [(e["src_id"], e["relation"]) for e in edges] == [(note.memory_id, "derived_from")]
    team.revoke_memory("ben", note.memory_id, "wrong")
    assert team.get_memory("ann", candidate.memory_id).status is MemoryStatus.REVOKED
    assert folds_to_state(team)


def test_only_a_member_with_memory_write_distills(team: World) -> None:
    add_agent(team, "mute", [])
    room = team.create_room("ann", "distill", members=["ben", "mute"])
    note = team.store_memory("ben", "room note", "observation", scope="room", room_id=room.room_id)
    with pytest.raises(NotPermitted):
        team.distill_room("oscar", room.room_id, "gist", source_memory_ids=[note.memory_id])
    with pytest.raises(PolicyDenied):  # creating the candidate needs memory.write
        team.distill_room("mute", room.room_id, "gist", source_memory_ids=[note.memory_id])


# -- zombie rooms ------------------------------------------------------------------------------------

def test_stale_rooms_close_by_their_stop_condition(team: World) -> None:
    clock: Any = team.clock
    idle = team.create_room("ann", "idle", members=["ben"], stop_condition="idle:60")
    busy = team.create_room("ann", "busy", members=["ben"], stop_condition="idle:60")
    empty = team.create_room("ann", "empty", members=["ben"], stop_condition="members:0")
    answered = team.create_room("ann", "answered", members=["ben"], stop_condition="answers:all")
    forever = team.create_room("ann", "no condition", members=["ben"])
    for who in ("ann", "ben"):
        team.leave_room(who, empty.room_id)
        team.commit_answer(who, answered.room_id, f"{who} answers")
    clock.advance(59)
    team.discuss("ben", busy.room_id, "still here")
    clock.advance(2)
    assert team.close_stale_rooms("ben") == []  # the policy lets only the opener (or a governor) close
    closed = team.close_stale_rooms("ann")
    assert sorted(r.room_id for r in closed) == sorted([idle.room_id, empty.room_id, answered.room_id])
    assert all(team.room_members(r.room_id, actor="ann") == [] for r in closed)
    assert team.get_room(busy.room_id, actor="ann").status is RoomStatus.OPEN
    assert team.get_room(forever.room_id, actor="ann").status is RoomStatus.OPEN
    clock.advance(60)
    assert [r.room_id for r in team.close_stale_rooms("gov")] == [busy.room_id]
    assert team.close_stale_rooms("gov") == []
    assert folds_to_state(team)


def test_a_denied_attempt_keeps_no_room_alive(team: World) -> None:
    clock: Any = team.clock
    room = team.create_room("ann", "idle", members=["ben"], stop_condition="idle:10")
    clock.advance(11)
    with pytest.raises(NotPermitted):
        team.close_room("oscar", room.room_id)  # a policy.denied event about the room
    assert [r.room_id for r in team.close_stale_rooms("ann")] == [room.room_id]


# -- bad input ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("condition", [
    "", "idle:0", "idle:-5", "idle:abc", "idle:60s", "idle:315360001", "answers:some", "members:1", "idle:60|",
    "decision recorded", "|".join(["members:0"] * 9),
])
def test_a_stop_condition_outside_the_grammar_is_invalid_input(team: World, condition: str) -> None:
    before = book_of(team).state_image()
    with pytest.raises(InvalidInput) as err:
        team.create_room("ann", "g", members=["ben"], stop_condition=condition)
    assert err.value.field == "stop_condition"
    assert book_of(team).state_image() == before


@pytest.mark.parametrize("condition", ["idle:1", "answers:all", "members:0", " idle:3600 | members:0 "])
def test_a_stop_condition_in_the_grammar_is_accepted(team: World, condition: str) -> None:
    assert team.create_room("ann", "g", stop_condition=condition).stop_condition == condition


BadCall = Callable[[World, str, str], Any]


@pytest.mark.parametrize(("call", "error"), [
    (lambda w, r, m: w.discuss("ann", r, ""), InvalidInput),
    (lambda w, r, m: w.discuss("ann", r, "x", payload={"big": "y" * 70_000}), InvalidInput),
    (lambda w, r, m: w.discuss("ann", "no room!", "x"), InvalidInput),
    (lambda w, r, m: w.discuss("ann", "room_ghost", "x"), NotFound),
    (lambda w, r, m: w.commit_answer("ann", r, ""), InvalidInput),
    (lambda w, r, m: w.commit_answer("ann", r, "x", confidence=2.0), InvalidInput),
    (lambda w, r, m: w.distill_room("ann", r, "x", source_memory_ids=[]), InvalidInput),
    (lambda w, r, m: w.distill_room("ann", r, "x", source_memory_ids=[m, m]), InvalidInput),
    (lambda w, r, m: w.distill_room("ann", r, "x", source_memory_ids=["mem_ghost"]), NotFound),
    (lambda w, r, m: w.distill_room("ann", r, "x", source_memory_ids=[
        book_of(w).store.read.rows("memory", {"scope": "private"})[0]["memory_id"]]), InvalidInput),
    (lambda w, r, m: w.distill_room("ann", r, "", source_memory_ids=[m]), InvalidInput),
    (lambda w, r, m: w.room_discussion(r, actor="ann", limit=0), InvalidInput),
    (lambda w, r, m: w.close_stale_rooms("ann", now_us=-1), InvalidInput),
])
def test_bad_input_is_a_typed_error_and_changes_nothing(team: World, call: BadCall, error: type[PMWError]) -> None:
    room = team.create_room("ann", "g", members=["ben"])
    note = team.store_memory("ben", "room note", "observation", scope="room", room_id=room.room_id)
    team.store_memory("ben", "private note", "observation")
    before = book_of(team).state_image()
    with pytest.raises(error):
        call(team, room.room_id, note.memory_id)
    assert book_of(team).state_image() == before


def test_the_log_folds_to_state_after_a_denied_and_a_refused_call(team: World, tmp_path: Path) -> None:
    room = team.create_room("ann", "g", members=["ben"], stop_condition="idle:5")
    with pytest.raises(NotPermitted):
        team.close_room("ben", room.room_id)
    with pytest.raises(InvalidInput):
        team.commit_answer("ann", room.room_id, "")
    team.commit_answer("ann", room.room_id, "a")
    team.commit_answer("ben", room.room_id, "b")
    assert folds_to_state(team)
