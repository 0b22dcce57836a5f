"""Plan/check agreement: for random worlds and every projected kind, the projection (one SQL query
filtered by the PDP's plan) returns exactly the objects that individual checks allow."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.policy.cerbos_adapter import CerbosPdp
from engine.policy.enforcement import Check
from engine.world import World
from store import Insert, WriteRequest
from store.schema import STATE_TABLES, primary_key
from tests.conftest import book_of, close_world, open_pdp_world

AGENTS = ["a0", "a1", "a2", "a3"]
ROOMS = ["r0", "r1"]
TASKS = ["t0", "t1", "t2"]
CAPS = ["state.write", "task.work", "memory.invoke", "memory.review", "artifact.invoke", "wake.enqueue"]
KEY = {t.name: primary_key(t)[0] for t in STATE_TABLES}

who = st.sampled_from(AGENTS)
maybe_who = st.sampled_from([*AGENTS, None])
sens = st.integers(0, 5)


def _memory(i: int, d: st.DrawFn) -> dict[str, Any]:
    scope = d(st.sampled_from(["private", "room", "shared", "archive"]))
    return {"memory_id": f"m{i}", "scope": scope, "owner": d(who), "room_id": d(st.sampled_from(ROOMS))
            if scope == "room" else None, "epistemic_type": "observation", "content": "x", "source_refs": [],
            "confidence": 0.5, "status": d(st.sampled_from(["private", "candidate", "in_review", "shared",
                                                              "archived", "reopened", "revoked"])),
            "reviewer": d(maybe_who), "supersedes": None, "superseded_by": None,
            "permission_scope": {"sensitivity": d(sens)}, "valid_from_us": 1, "valid_to_us": None,
            "expires_at_us": None, "created_at_us": 1, "updated_at_us": i, "version": 1}


def _task(i: int, d: st.DrawFn) -> dict[str, Any]:
    return {"task_id": TASKS[i] if i < len(TASKS) else f"t{i}", "goal": "g", "owner_agent": d(who),
            "assignee": d(maybe_who), "status": d(st.sampled_from(["open", "assigned", "claimed", "completed"])),
            "dependencies": [], "constraints": {"sensitivity": d(sens)}, "artifacts": [], "result": None,
            "deadline_us": None, "created_at_us": 1, "updated_at_us": i, "version": 1}


def _handoff(i: int, d: st.DrawFn) -> dict[str, Any]:
    return {"handoff_id": f"h{i}", "source_agent": d(who), "target_agent": d(who), "task_id": d(st.sampled_from(TASKS)),
            "goal": "g", "current_state_ref": None, "evidence_refs": [], "artifact_refs": [], "constraints": {},
            "authority_scope": {}, "expected_output": None, "return_route": None,
            "status": d(st.sampled_from(["pending", "accepted", "completed", "rejected"])), "result": None,
            "reason": None, "created_at_us": 1, "updated_at_us": i, "version": 1}


def _artifact(i: int, d: st.DrawFn) -> dict[str, Any]:
    return {"artifact_id": f"art{i}", "artifact_type": "doc", "owner": d(who), "created_by": d(who),
            "task_id": d(st.sampled_from([*TASKS, None])), "status": d(st.sampled_from(["active", "retired"])),
            "checksum": "0" * 64, "size": 0, "location": "x", "created_at_us": 1, "updated_at_us": i, "version": 1}


def _wake(i: int, d: st.DrawFn) -> dict[str, Any]:
    return {"wake_id": f"w{i}", "target_agent": d(who), "cause": "c", "cause_event_id": None,
            "status": d(st.sampled_from(["pending", "claimed", "acked"])), "priority": 0, "not_before_us": 0,
            "payload": {"task_id": d(st.sampled_from(TASKS))}, "payload_refs": [], "base_state_version": None,
            "authority_scope": {}, "idempotency_key": f"k{i}", "lease_owner": None, "lease_until_us": None,
            "attempts": 0, "created_at_us": 1, "updated_at_us": i, "version": 1}


def _receipt(i: int, d: st.DrawFn) -> dict[str, Any]:
    return {"receipt_id": f"rc{i}", "wake_id": None, "agent_id": d(who), "task_id": d(st.sampled_from([*TASKS, None])),
            "decision": "act", "outcome": "acted", "reason": None, "observed_state_version": None,
            "topology_version": None, "base_state_version": None, "resulting_state_version": None,
            "action_refs": [], "artifact_refs": [], "next_wake": None, "policy_epoch": None, "payload": {},
            "created_at_us": i}


def _room(i: int, d: st.DrawFn) -> dict[str, Any]:
    return {"room_id": ROOMS[i] if i < len(ROOMS) else f"r{i}", "goal": "g", "opened_by": d(who),
            "status": d(st.sampled_from(["open", "closed"])), "context_scope": {}, "authority_scope": {},
            "stop_condition": None, "created_at_us": 1, "closed_at_us": None, "version": 1}


def _state(i: int, d: st.DrawFn) -> dict[str, Any]:
    return {"key": f"s{i}", "value": i, "updated_by": d(who), "updated_at_us": i, "version": 1}


FACTORIES = {"memory": ("memory", _memory), "task": ("tasks", _task), "handoff": ("handoffs", _handoff),
             "artifact": ("artifacts", _artifact), "wake": ("wakes", _wake), "receipt": ("receipts", _receipt),
             "room": ("rooms", _room), "state": ("state_entries", _state)}
ACTIONS_CHECKED = {"memory": ["read", "invoke"], "artifact": ["read", "invoke"]}


@st.composite
def worlds(draw: st.DrawFn) -> dict[str, Any]:
    agents = {a: {"caps": draw(st.lists(st.sampled_from(CAPS), unique=True, max_size=4)), "clearance": draw(sens),
                  "rooms": draw(st.lists(st.sampled_from(ROOMS), unique=True)),
                  "offline": draw(st.booleans())} for a in AGENTS}
    rows = {kind: [factory(i, draw) for i in range(draw(st.integers(1, 8)))]
            for kind, (_, factory) in FACTORIES.items()}
    return {"agents": agents, "rows": rows}


def _build(world: World, spec: dict[str, Any]) -> None:
    for agent, a in spec["agents"].items():
        world.register_agent(agent, agent, "worker", f"t-{agent}")
        world.grant("gov", agent, capabilities=a["caps"], clearance=a["clearance"])
    changes = [Insert(table, row, kind, str(row[KEY[table]]))
               for kind, (table, _) in FACTORIES.items() for row in spec["rows"][kind]]
    rooms = {x["room_id"] for x in spec["rows"]["room"]}
    changes += [Insert("room_members", {"room_id": r, "agent_id": agent, "active": True, "joined_at_us": 1,
                                        "left_at_us": None, "version": 1}, "room_member", f"{r}/{agent}")
                for agent, a in spec["agents"].items() for r in a["rooms"] if r in rooms]
    # rows of every kind at once, which no World call writes: a raw setup write through the runtime's door
    book_of(world)._door.commit(WriteRequest(op_id="op-seed", command="seed", request_hash="0" * 64,
                                             actor_id="test", event_id="evt_seed", event_type="test.seeded",
                                             subject_kind="world", subject_id="world", created_at_us=1, result={},
                                             changes=changes))
    for agent, a in spec["agents"].items():
        if a["offline"]:
            world.unregister_agent(f"agent:{agent}", actor=agent)


def _agreement(world: World, agent: str, kind: str, action: str) -> tuple[set[str], set[str]]:
    table, _ = FACTORIES[kind]
    key = KEY[table]
    plan = book_of(world).policy.plan(agent, kind, action)
    assert plan is not None
    via_plan = {str(r[key]) for r in book_of(world).store.read.rows_allowed(kind, plan)}
    rows = book_of(world).store.read.rows(table)
    decisions = book_of(world).policy.decide(agent, [Check(kind, str(r[key]), action, r) for r in rows])
    via_checks = {str(r[key]) for r, d in zip(rows, decisions, strict=True) if d.allowed(action)}
    return via_plan, via_checks


@pytest.mark.parametrize("backend", ["sqlite-file", "postgres"], indirect=True)
def test_projection_returns_exactly_what_single_checks_allow(db_url_factory: Any, pdp_client: CerbosPdp,
                                                           tmp_path: Any) -> None:
    seen = {"allowed": 0, "denied": 0}

    @settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                      HealthCheck.function_scoped_fixture])
    @given(spec=worlds())
    def check(spec: dict[str, Any]) -> None:
        world = open_pdp_world(db_url_factory(), pdp_client, tmp_path / "art")
        try:
            _build(world, spec)
            for agent in AGENTS:
                for kind in FACTORIES:
                    for action in ACTIONS_CHECKED.get(kind, ["read"]):
                        via_plan, via_checks = _agreement(world, agent, kind, action)
                        assert via_plan == via_checks, (agent, kind, action)
                        seen["allowed"] += len(via_checks)
                        seen["denied"] += len(spec["rows"][kind]) - len(via_checks)
        finally:
            close_world(world)
    check()
    assert seen["allowed"] > 0 and seen["denied"] > 0  # the worlds exercised both sides of the policies
