"""Operation identity holds for every command, wakes included (SQLite in memory, SQLite file, PostgreSQL).

The ledger comes first: a known op id with the same request returns the original result exactly (a wake
enqueue's ``created=True`` included, however the world changed since); with a different request it raises
``OperationConflict``; only then is a wake's idempotency key looked at. And a claim reads its wake once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from engine.errors import OperationConflict, PolicyDenied
from engine.models.wakes import WakeStatus
from engine.sources import ManualClock
from engine.world import World
from tests.conftest import add_agent, book_of


@pytest.fixture
def team(world: World) -> World:
    for name in ("a", "b"):
        world.register_agent(name, name.upper(), "worker", f"t-{name}")
    return world


def _events(world: World) -> int:
    return len(world.events(limit=100_000))


def test_enqueue_wake_answers_from_the_ledger_before_the_idempotency_key(team: World) -> None:
    first = team.enqueue_wake("ctl", "a", "task.created", "evt-1:a", op_id="op-wake-1")
    assert first.created
    claimed = team.claim_wake("worker-1", agent_id="a")  # the wake changes; the original answer does not
    assert claimed is not None and claimed.status is WakeStatus.CLAIMED
    written = _events(team)
    assert team.enqueue_wake("ctl", "a", "task.created", "evt-1:a", op_id="op-wake-1") == first  # created=True
    for changed in ({"priority": 5}, {"cause": "other"}, {"idempotency_key": "evt-2:a"}, {"target_agent": "b"}):
        args: dict[str, Any] = {"target_agent": "a", "cause": "task.created", "idempotency_key": "evt-1:a", **changed}
        with pytest.raises(OperationConflict):
            team.enqueue_wake("ctl", op_id="op-wake-1", **args)
    with pytest.raises(OperationConflict):
        team.enqueue_wake("someone-else", "a", "task.created", "evt-1:a", op_id="op-wake-1")
    assert _events(team) == written  # retries and conflicts write nothing
    # Another op id with the same key finds the wake by its key (and writes nothing), as before.
    again = team.enqueue_wake("ctl", "a", "task.created", "evt-1:a", op_id="op-wake-2")
    assert (again.created, again.wake.wake_id) == (False, first.wake.wake_id)
    assert team.enqueue_wake("ctl", "a", "task.created", "evt-1:a", op_id="op-wake-2") == again
    assert _events(team) == written and len(team.list_wakes()) == 1


def test_claim_wake_with_an_op_id_returns_its_original_lease(team: World, clock: ManualClock) -> None:
    team.enqueue_wake("ctl", "a", "ping", "k-1")
    team.enqueue_wake("ctl", "b", "ping", "k-2")
    first = team.claim_wake("worker-1", agent_id="a", op_id="op-claim-1")
    assert first is not None and first.lease_owner == "worker-1"
    team.ack_wake("worker-1", first.wake_id)
    clock.advance(60)
    assert team.claim_wake("worker-1", agent_id="a", op_id="op-claim-1") == first  # not the acked wake now
    for other in ({"worker": "worker-2"}, {"agent_id": "b"}, {"lease_seconds": 5.0}):
        call: dict[str, Any] = {"worker": "worker-1", "agent_id": "a", "lease_seconds": 30.0, **other}
        with pytest.raises(OperationConflict):
            team.claim_wake(call.pop("worker"), op_id="op-claim-1", **call)
    team.enqueue_wake("ctl", "a", "ping", "k-3", op_id="op-enqueue-3")
    with pytest.raises(OperationConflict):  # an op id of another command
        team.claim_wake("worker-1", agent_id="a", op_id="op-enqueue-3")
    assert team.get_wake(team.list_wakes(target_agent="b")[0].wake_id).status is WakeStatus.PENDING


def test_a_claim_reads_its_wake_once(team: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """The due query reads the candidate; planning the claim reads it no more (it read it twice)."""
    team.enqueue_wake("ctl", "a", "ping", "k-1")
    reads: list[str] = []
    real_get = book_of(team).store.read.get

    def counted(table: str, **key: Any) -> Any:
        reads.append(table)
        return real_get(table, **key)
    monkeypatch.setattr(book_of(team).store.read, "get", counted)
    wake = team.claim_wake("worker-1", agent_id="a")
    assert wake is not None and reads.count("wakes") == 0
    team.ack_wake("worker-1", wake.wake_id)
    assert reads.count("wakes") == 1  # ack: one read (it needs the target), the plan reuses it


Call = Callable[[World, str, bool], object]  # (world, op id, changed request?)


def _calls(w: World) -> list[tuple[str, Call]]:
    """Every write of the wake, task, handoff, message, approval and artifact calls, with a changed request."""
    t1 = w.create_task("a", "one").task_id
    t2 = w.create_task("a", "two").task_id
    t3 = w.create_task("a", "three").task_id
    h = w.create_handoff("a", "b", t3, "take it").handoff_id
    d = w.send_message("a", "general", "agent", "hello", recipient="b").deliveries[0].delivery_id
    wk = w.enqueue_wake("ctl", "a", "ping", "k-x").wake.wake_id
    wc = w.enqueue_wake("ctl", "b", "ping", "k-y").wake.wake_id
    art = w.register_artifact("a", "note", b"v1").artifact_id
    return [
        ("create_task", lambda w, op, ch: w.create_task("a", "new goal" + "!" * ch, op_id=op)),
        ("assign_task", lambda w, op, ch: w.assign_task("a", t1, "b" if not ch else "a", op_id=op)),
        ("claim_task", lambda w, op, ch: w.claim_task("b", t1, op_id=op, expected_version=2 if not ch else 1)),
        ("complete_task", lambda w, op, ch: w.complete_task("b", t1, {"ok": not ch}, op_id=op)),
        ("abort_task", lambda w, op, ch: w.abort_task("a", t2, "stop" if not ch else "halt", op_id=op)),
        ("accept_handoff", lambda w, op, ch: w.accept_handoff("b" if not ch else "a", h, op_id=op)),
        ("claim_message", lambda w, op, ch: w.claim_message("b" if not ch else "a", d, op_id=op)),
        ("ack_message", lambda w, op, ch: w.ack_message("b" if not ch else "a", d, op_id=op)),
        ("send_message", lambda w, op, ch: w.send_message("a", "general", "any", "hi" + "!" * ch, op_id=op)),
        ("cancel_wake", lambda w, op, ch: w.cancel_wake("ctl", wc, "not needed" if not ch else "no", op_id=op)),
        ("claim_wake", lambda w, op, ch: w.claim_wake("worker-1", agent_id="a" if not ch else "b", op_id=op)),
        ("ack_wake", lambda w, op, ch: w.ack_wake("worker-1", wk, "no_action" if not ch else "act", op_id=op)),
        ("request_approval", lambda w, op, ch: w.request_approval("a", "tool", "deploy", payload={"v": ch}, op_id=op)),
        ("register_artifact", lambda w, op, ch: w.register_artifact("a", "note", b"first" + b"!" * ch, op_id=op)),
        ("new_artifact_version", lambda w, op, ch: w.new_artifact_version("a", art, b"v2" + b"!" * ch, op_id=op)),
    ]


def test_every_call_returns_its_original_result_and_refuses_a_changed_request(team: World) -> None:
    for name, call in _calls(team):
        op = f"op-{name}"
        first = call(team, op, False)
        written = _events(team)
        assert call(team, op, False) == first, name
        with pytest.raises(OperationConflict):
            call(team, op, True)
        assert _events(team) == written, f"{name}: a retry or a conflict wrote something"


def test_a_known_key_is_told_only_to_whoever_may_enqueue_the_wake(pworld: World) -> None:
    """With the PDP: the answer "this key exists" is decided like the enqueue it stands for, so an agent
    that may not enqueue learns nothing about another's wake (it was told before the decision)."""
    add_agent(pworld, "alice", ["wake.enqueue"])
    add_agent(pworld, "mallory")
    first = pworld.enqueue_wake("alice", "alice", "ping", "alice:secret-key")
    assert pworld.enqueue_wake("alice", "alice", "ping", "alice:secret-key").created is False
    with pytest.raises(PolicyDenied):
        pworld.enqueue_wake("mallory", "alice", "ping", "alice:secret-key")
    assert [w.wake_id for w in pworld.list_wakes(actor="gov")] == [first.wake.wake_id]
