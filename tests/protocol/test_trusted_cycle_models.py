"""The cycle's models built without a second validation (``engine.models.trusted``) equal validated ones, field
for field and type for type, on a SQLite file with the real PDP:

- rows of the store in every state a cycle leaves them (wakes pending, claimed, acked, cancelled; receipts;
  traces) built by ``trusted`` equal ``model_validate`` of the same rows;
- what the cycle hands back (the claimed wake, the receipt, the decision) equals what the store then holds;
- the PDP principal and resources built from the store's rows equal their validated models; a resource named
  by anything but a plain id (a state key, a caller's string) is still validated, so a NUL in it is refused
  as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from engine.models.agents import Agent
from engine.models.receipts import Receipt
from engine.models.traces import Trace
from engine.models.trusted import trusted
from engine.models.wakes import Wake
from engine.policy.attributes import principal, resource
from engine.policy.cerbos_adapter import CerbosPdp
from engine.policy.model import PrincipalRef, ResourceRef
from engine.protocol.adapters import AgentDecision, RuleAgent, SetState
from engine.protocol.worker import Worker
from engine.world import World
from engine.world.projection import WorldView
from tests.conftest import add_agent, book_of, close_world, open_pdp_world
from tests.projection_speed.test_projection_reads import _same

CYCLE_KINDS: dict[str, type[BaseModel]] = {"wakes": Wake, "receipts": Receipt, "traces": Trace}


def bump(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
    if wake.cause == "idle":
        return AgentDecision(decision="no_action", reason="nothing to do")
    entry = next((s for s in view.state if s.key == "n"), None)
    version, value = (entry.version, entry.value) if entry else (0, 0)
    return AgentDecision(decision="act", reason="count", effects=[SetState(key="n", expected_version=version,
                                                                           value=value + 1)])


@pytest.fixture
def cycled(tmp_path: Path, pdp_client: CerbosPdp) -> World:
    w = open_pdp_world(f"sqlite:///{tmp_path / 'w.db'}", pdp_client, tmp_path / "art")
    add_agent(w, "src", ["wake.enqueue"])
    add_agent(w, "w", ["state.write"])
    add_agent(w, "v", ["state.write"])
    yield w
    close_world(w)


def test_rows_a_cycle_leaves_built_trusted_equal_validated_ones(cycled: World) -> None:
    w = cycled
    for n, cause in enumerate(["count", "idle", "count"]):
        w.enqueue_wake("src", "w", cause, f"k-{n}", payload={"chain": f"c-{n}", "nested": {"a": [1, 2.5, None]}})
    w.enqueue_wake("src", "v", "count", "k-v", priority=5)
    w.enqueue_wake("src", "v", "count", "k-cancel")
    worker = Worker(book_of(w), "worker-1", {"w": RuleAgent([bump])})
    cycles = worker.run_until_idle(max_cycles=10)
    assert sorted(c.receipt.outcome.value for c in cycles) == ["acted", "acted", "no_action"]
    leased = w.claim_wake("worker-2", agent_id="v")  # left claimed
    assert leased is not None
    pending = w.list_wakes(target_agent="v", status="pending", actor="v")
    w.cancel_wake("v", pending[0].wake_id, "not needed")

    statuses = {r["status"] for r in book_of(w).store.read.rows("wakes")}
    assert statuses == {"acked", "claimed", "cancelled"}
    seen = 0
    for table, model in CYCLE_KINDS.items():
        build = trusted(model)
        assert build is not model.model_validate, f"{model.__name__} should be built, not validated"
        for row in book_of(w).store.read.rows(table):
            _same(build(dict(row)), model.model_validate(row), f"{table}:{row}")
            seen += 1
    assert seen >= 5 + 4 + 3

    # what the cycle handed back is what the store holds
    _same(leased, Wake.model_validate(book_of(w).store.read.get("wakes", wake_id=leased.wake_id)), "claimed")
    for c in cycles:
        stored = book_of(w).store.read.get("receipts", receipt_id=c.receipt.receipt_id)
        _same(c.receipt, Receipt.model_validate(stored), f"receipt of {c.wake.wake_id}")
        recorded = book_of(w).recorded_decision(c.wake.wake_id)
        assert recorded is not None and c.decision is not None
        again = AgentDecision.model_validate(recorded.decision)  # the agent's own (its unset defaults unset)
        assert c.decision == again and c.decision.model_dump(mode="json") == recorded.decision


def test_a_row_that_does_not_fit_the_cycle_model_fails_as_validation_does(cycled: World) -> None:
    w = cycled
    w.enqueue_wake("src", "w", "count", "k-0")
    row = book_of(w).store.read.rows("wakes")[0]
    for bad in ({**row, "status": "teleported"}, {**row, "extra": 1}, {**row, "attempts": "three"},
                {k: v for k, v in row.items() if k != "wake_id"}, {**row, "payload": None}):
        with pytest.raises(ValidationError):
            Wake.model_validate(bad)
        with pytest.raises(ValidationError):
            trusted(Wake)(bad)
    for odd in ({**row, "attempts": "3"}, {k: v for k, v in row.items() if k != "payload"}):  # validation's lax ways
        _same(trusted(Wake)(odd), Wake.model_validate(odd), f"{odd}")


def test_the_principal_and_resources_from_rows_equal_validated_ones(cycled: World) -> None:
    w = cycled
    read = book_of(w).store.read
    w.enqueue_wake("src", "w", "count", "k-0", payload={"task_id": "t-1"})
    w.compare_and_set_state("w", "n", 0, 1)
    agent, accepted, rooms = read.principal_inputs("w")
    assert agent is not None
    p = principal(read, agent, accepted=accepted, rooms=rooms)
    _same(p, PrincipalRef.model_validate(p.model_dump()), "principal")
    for kind, table, key in (("wake", "wakes", "wake_id"), ("agent", "agents", "agent_id")):
        for row in read.rows(table):
            r = resource(kind, str(row[key]), row, side_effect="S1")
            _same(r, ResourceRef.model_validate(r.model_dump()), f"{kind}:{row[key]}")
    keyed = resource("state", "a/b", None)  # not a plain id: validated (a state key may hold "/")
    assert keyed == ResourceRef(kind="state", id="a/b", attr=keyed.attr)
    with pytest.raises(ValidationError):
        resource("state", "bad\x00key", None)
    with pytest.raises(ValidationError):
        resource("state", "", None)
