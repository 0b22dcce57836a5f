"""Conformance: bad input on every World call is a typed error and changes nothing.

Each case calls one World method with one thing wrong (a wrong type, an oversize payload, an unknown
enum, a malformed id, a missing row). The store's row counts and version sums must be unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.commands import parse
from engine.errors import (
    InvalidInput,
    NotFound,
    PayloadTooLarge,
    PMWError,
    StoreUnavailable,
    TargetUnresolved,
)
from engine.policy.enforcement import LocalScopeRules
from engine.world import World
from engine.world.book import open_world
from tests.conftest import book_of

BIG = {"blob": "x" * (65 * 1024)}
BAD_ID = "bad id!"

Case = tuple[str, Callable[[World, dict[str, str]], Any], type[PMWError]]

CASES: list[Case] = [
    ("register: malformed agent id", lambda w, ids: w.register_agent(BAD_ID, "X", "worker", "t"), InvalidInput),
    ("register: empty display name", lambda w, ids: w.register_agent("x", "", "worker", "t"), InvalidInput),
    ("register: oversize profile", lambda w, ids: w.register_agent("x", "X", "worker", "t",
                                                                     capability_profile=BIG), PayloadTooLarge),
    ("register: wrong type", lambda w, ids: w.register_agent("x", "X", 42, "t"), InvalidInput),  # type: ignore[arg-type]
    ("activate: unknown session", lambda w, ids: w.activate_session("session:ses_nope"), TargetUnresolved),
    ("activate: bad target kind", lambda w, ids: w.activate_session("planet:x"), InvalidInput),
    ("unregister: unknown agent", lambda w, ids: w.unregister_agent("agent:ghost"), TargetUnresolved),
    ("cas: oversize value", lambda w, ids: w.compare_and_set_state("a", "k", 0, BIG), PayloadTooLarge),
    ("cas: malformed key", lambda w, ids: w.compare_and_set_state("a", "bad key", 0, 1), InvalidInput),
    ("cas: negative version", lambda w, ids: w.compare_and_set_state("a", "k", -1, 1), InvalidInput),
    ("cas: non-json value", lambda w, ids: w.compare_and_set_state("a", "k", 0, object()), InvalidInput),
    ("cas: NaN is not JSON", lambda w, ids: w.compare_and_set_state("a", "k", 0, {"x": float("nan")}), InvalidInput),
    ("list_state: bad limit", lambda w, ids: w.list_state(limit=-1), InvalidInput),
    ("claim_wake: zero lease on any queue", lambda w, ids: w.claim_wake("w", lease_seconds=0), InvalidInput),
    ("cas: malformed actor", lambda w, ids: w.compare_and_set_state(BAD_ID, "k", 0, 1), InvalidInput),
    ("cas: malformed op id", lambda w, ids: w.compare_and_set_state("a", "k", 0, 1, op_id=BAD_ID), InvalidInput),
    ("get_state: missing", lambda w, ids: w.get_state("missing"), NotFound),
    ("append_event: bad type", lambda w, ids: w.append_event("a", "Not A Type"), InvalidInput),
    ("append_event: oversize", lambda w, ids: w.append_event("a", "x.y", BIG), PayloadTooLarge),
    ("create_task: empty goal", lambda w, ids: w.create_task("a", ""), InvalidInput),
    ("create_task: bad deadline", lambda w, ids: w.create_task("a", "g", deadline_us=-5), InvalidInput),
    ("create_task: oversize constraints", lambda w, ids: w.create_task("a", "g", constraints=BIG), PayloadTooLarge),
    ("assign_task: missing task", lambda w, ids: w.assign_task("a", "tsk_none", "b"), NotFound),
    ("assign_task: missing agent", lambda w, ids: w.assign_task("a", ids["task"], "ghost"), NotFound),
    ("claim_task: malformed id", lambda w, ids: w.claim_task("a", BAD_ID), InvalidInput),
    ("complete_task: oversize result", lambda w, ids: w.complete_task("a", ids["task"], BIG), PayloadTooLarge),
    ("store_memory: unknown epistemic type", lambda w, ids: w.store_memory("a", "x", "gossip"), InvalidInput),
    ("store_memory: unknown scope", lambda w, ids: w.store_memory("a", "x", "inference", scope="public"),
     InvalidInput),
    ("store_memory: confidence > 1", lambda w, ids: w.store_memory("a", "x", "inference", confidence=2.0),
     InvalidInput),
    ("store_memory: oversize content", lambda w, ids: w.store_memory("a", "x" * 70_000, "inference"),
     PayloadTooLarge),
    ("promote_memory: missing", lambda w, ids: w.promote_memory("b", "mem_none"), NotFound),
    ("enqueue_wake: empty key", lambda w, ids: w.enqueue_wake("a", "b", "c", ""), InvalidInput),
    ("enqueue_wake: priority out of range", lambda w, ids: w.enqueue_wake("a", "b", "c", "k", priority=10**6),
     InvalidInput),
    ("enqueue_wake: unknown agent", lambda w, ids: w.enqueue_wake("a", "ghost", "c", "k"), NotFound),
    ("claim_wake: bad lease", lambda w, ids: w.claim_wake("w", lease_seconds=-1), InvalidInput),
    ("ack_wake: unknown decision", lambda w, ids: w.ack_wake("w", ids["wake"], "dance"), InvalidInput),
    ("ack_wake: missing wake", lambda w, ids: w.ack_wake("w", "wak_none", "act"), NotFound),
    ("cancel_wake: outcome not a cancellation", lambda w, ids: w.cancel_wake("a", ids["wake"], "r", outcome="acted"),
     InvalidInput),
    ("write_receipt: unknown outcome", lambda w, ids: w.write_receipt("a", "a", "act", "maybe"), InvalidInput),
    ("create_handoff: missing task", lambda w, ids: w.create_handoff("a", "b", "tsk_none", "g"), NotFound),
    ("create_handoff: unknown packet field", lambda w, ids: w.execute("a", parse("create_handoff", {
        "target_agent": "b", "task_id": ids["task"], "goal": "g", "transcript": "..."})), InvalidInput),
    ("accept_handoff: missing", lambda w, ids: w.accept_handoff("b", "hnd_none"), NotFound),
    ("register_artifact: not bytes", lambda w, ids: w.register_artifact("a", "doc", "text"), InvalidInput),  # type: ignore[arg-type]
    ("register_artifact: missing task", lambda w, ids: w.register_artifact("a", "doc", b"x", task_id="tsk_none"),
     NotFound),
    ("read_artifact: missing", lambda w, ids: w.read_artifact("art_none"), NotFound),
    ("set_topology_edge: unknown edge type", lambda w, ids: w.set_topology_edge("a", "a", "b", "telepathy"),
     InvalidInput),
    ("set_topology_edge: unknown agent", lambda w, ids: w.set_topology_edge("a", "a", "ghost", "info"), NotFound),
    ("create_room: unknown member", lambda w, ids: w.create_room("a", "g", members=["ghost"]), NotFound),
    ("join_room: missing room", lambda w, ids: w.join_room("a", "room_none"), NotFound),
    ("send_message: agent kind without recipient", lambda w, ids: w.send_message("a", "c", "agent", "hi"),
     InvalidInput),
    ("send_message: unknown kind", lambda w, ids: w.send_message("a", "c", "everyone", "hi"), InvalidInput),
    ("claim_message: missing", lambda w, ids: w.claim_message("a", "dlv_none"), NotFound),
    ("project_world: unknown agent", lambda w, ids: w.project_world("ghost"), NotFound),
]


@pytest.fixture
def seeded(world: World) -> tuple[World, dict[str, str]]:
    world.register_agent("a", "A", "worker", "t-a")
    world.register_agent("b", "B", "worker", "t-b")
    task = world.create_task("a", "existing task")
    world.claim_task("a", task.task_id)
    wake = world.enqueue_wake("a", "b", "c", "k-existing").wake
    return world, {"task": task.task_id, "wake": wake.wake_id}


@pytest.mark.parametrize(("name", "call", "error"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_a_typed_error_and_changes_nothing(
        seeded: tuple[World, dict[str, str]], name: str, call: Callable[[World, dict[str, str]], Any],
        error: type[PMWError]) -> None:
    world, ids = seeded
    before = book_of(world).store.read.counts_and_versions()
    with pytest.raises(error) as raised:
        call(world, ids)
    assert raised.value.code and raised.value.to_dict()["message"]
    assert book_of(world).store.read.counts_and_versions() == before


def test_a_file_that_is_not_a_database_is_store_unavailable(tmp_path: Path) -> None:
    bad = tmp_path / "not-a-db.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreUnavailable):
        open_world(f"sqlite:///{bad}", policy=LocalScopeRules())
    assert bad.read_bytes() == b"this is not a database" * 100
