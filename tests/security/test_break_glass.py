"""Break-glass (issue 9): a governor reads another agent's private memory, or a sealed answer, only through
``break_glass_read``, which is recorded (who, what, why) before the content is returned; no ordinary read
(get, list, projection, the log's row images) shows it."""

from __future__ import annotations

import pytest

from engine.errors import InvalidInput, NotFound, PolicyDenied
from engine.world import World
from tests.conftest import add_agent, book_of

GOV = "gov"
SECRET = "alice's private note c0ffee"


def test_ordinary_reads_do_not_reveal_private_memory_to_a_governor(pworld: World) -> None:
    add_agent(pworld, "alice", ["memory.write"])
    note = pworld.store_memory("alice", SECRET, "inference")
    with pytest.raises(PolicyDenied):
        pworld.get_memory(GOV, note.memory_id)
    assert note.memory_id not in {m.memory_id for m in pworld.list_memory(GOV)}
    assert note.memory_id not in pworld.project_world(GOV).memory_ids()
    assert note.memory_id not in pworld.project_world("alice", actor=GOV).memory_ids()
    assert note.memory_id in pworld.project_world("alice").memory_ids()  # (its owner's own view has it)
    log = pworld.events(0, 10_000, actor=GOV)
    assert all(SECRET not in e.model_dump_json() for e in log)
    (stored,) = [e for e in log if e.event_type == "memory.stored"]  # the governor's audit view keeps the rest
    (insert,) = [c for c in stored.changes if c.table == "memory"]
    assert insert.values["memory_id"] == note.memory_id and insert.values["sealed"] is True
    assert "content" not in insert.values and "content" not in stored.result
    # the author's own view of the log shows its own content
    assert any(SECRET in e.model_dump_json() for e in pworld.events(0, 10_000, actor="alice"))


def test_a_break_glass_read_is_recorded_before_the_content_is_returned(pworld: World) -> None:
    add_agent(pworld, "alice", ["memory.write"])
    note = pworld.store_memory("alice", SECRET, "inference")
    before = book_of(pworld).store.read.last_seq()
    read = pworld.break_glass_read(GOV, "memory", note.memory_id, "incident 42: leaked credentials?")
    assert read.memory.content == SECRET
    (record,) = [e for e in pworld.events(before, 100, actor=GOV) if e.event_type == "memory.break_glass_read"]
    assert record.event_id == read.record.event_id and record.actor_id == GOV
    assert (record.subject_kind, record.subject_id) == ("memory", note.memory_id)
    assert record.payload == {"kind": "memory", "id": note.memory_id, "memory_id": note.memory_id, "owner": "alice",
                              "reason": "incident 42: leaked credentials?"}
    assert record.policy_epoch is not None  # decided by the PDP
    assert SECRET not in record.model_dump_json()  # the record holds no content
    # a retry of the same operation records nothing new
    again = pworld.break_glass_read(GOV, "memory", note.memory_id, "incident 42", op_id="bg-1")
    assert pworld.break_glass_read(GOV, "memory", note.memory_id, "incident 42", op_id="bg-1").record == again.record
    assert len([e for e in pworld.events(before, 100, actor=GOV) if e.event_type == "memory.break_glass_read"]) == 2
    # still sealed from the ordinary reads
    with pytest.raises(PolicyDenied):
        pworld.get_memory(GOV, note.memory_id)


def test_break_glass_opens_a_sealed_answer_and_is_a_governors_only(pworld: World) -> None:
    add_agent(pworld, "ann", ["room.open", "memory.write"])
    add_agent(pworld, "ben", ["memory.write"])
    add_agent(pworld, "mo", ["state.write"])
    pworld.grant(GOV, "mo", role_id="moderator")
    pworld.create_room("ann", "blind", members=["ben"], room_id="r1")
    answer = pworld.commit_answer("ann", "r1", "ann's sealed answer 4e4e")
    for actor in ("ben", "mo", "ann"):
        with pytest.raises(PolicyDenied):
            pworld.break_glass_read(actor, "room_answer", "r1/ann", "curious")
    assert not [e for e in pworld.events(0, 10_000, actor=GOV) if e.event_type == "memory.break_glass_read"]
    read = pworld.break_glass_read(GOV, "room_answer", "r1/ann", "dispute over the round")
    assert (read.memory.memory_id, read.memory.content) == (answer.memory_id, "ann's sealed answer 4e4e")
    assert read.record.owner == "ann" and read.record.kind == "room_answer"
    assert not any(a.revealed for a in pworld.room_answers("r1", actor="ann"))  # reading reveals nothing


@pytest.mark.parametrize(("kind", "ident", "reason", "error"), [
    ("task", "t1", "why", InvalidInput),
    ("memory", "mem_none", "why", NotFound),
    ("room_answer", "r1", "why", InvalidInput),
    ("room_answer", "r1/nobody", "why", NotFound),
    ("memory", "mem_x", "   ", InvalidInput),
    ("memory", "mem_x", "", InvalidInput),
])
def test_bad_break_glass_requests_are_typed_errors_and_record_nothing(pworld: World, kind: str, ident: str,
                                                                        reason: str, error: type[Exception]) -> None:
    before = book_of(pworld).store.read.last_seq()
    with pytest.raises(error):
        pworld.break_glass_read(GOV, kind, ident, reason)
    assert book_of(pworld).store.read.last_seq() == before
