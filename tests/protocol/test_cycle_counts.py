"""What one wake -> receipt cycle costs, counted (not timed): SQL statements, transactions (write and read)
and PDP round trips per cycle of an in-process worker whose agent makes one effect, on a SQLite file with
the real PDP. Run with ``-s`` to see the table:

    .venv/bin/python -m pytest tests/protocol/test_cycle_counts.py -q -s -p no:cacheprovider

Asserted, for a rule agent (``record_first=False``, the default): a cycle makes exactly two write transactions
(the claim; the decision record, the effects, the receipt, the trace and the ack, decided inside that
transaction) and one read transaction (rehydrate, observe, the ledger, and the plan of the effects and the
ack): three in all. For an adapter that records first (``record_first=True``, as an LLM's or a human's): three
write transactions (the decision record on its own) and two read transactions (the plan after the record).
The checks of the effects and of the ack go to the PDP in one request either way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from engine.models.agents import Agent
from engine.models.receipts import Outcome
from engine.models.wakes import Wake
from engine.policy.cerbos_adapter import CerbosPdp
from engine.policy.enforcement import PdpAuthorizer
from engine.policy.model import Decision, PlanFilter, PrincipalRef, ResourceRef
from engine.protocol.adapters import AgentDecision, RuleAgent, SetState
from engine.protocol.worker import Worker
from engine.runloop.worker import EnvelopeWorker
from engine.sources import ManualClock, SeededIds
from engine.world.book import RuntimeBook
from engine.world.projection import WorldView
from store import Store
from tests.conftest import add_agent, close_world, open_pdp_world

CYCLES = 20


class CountedPdp:
    """The real PDP client, counting its round trips by kind (``check``: CheckResources, ``plans``)."""

    def __init__(self, pdp: CerbosPdp) -> None:
        self.pdp = pdp
        self.calls: Counter[str] = Counter()

    def check(self, principal: PrincipalRef, resources: Sequence[tuple[ResourceRef, Sequence[str]]]
              ) -> list[Decision]:
        self.calls["check"] += 1
        return self.pdp.check(principal, resources)

    def plans(self, principal: PrincipalRef, asked: Sequence[tuple[str, str]]) -> list[PlanFilter]:
        self.calls["plans"] += 1
        return self.pdp.plans(principal, asked)


def bump(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
    entry = next((s for s in view.state if s.key == f"n-{agent.agent_id}"), None)
    version, value = (entry.version, entry.value) if entry else (0, 0)
    return AgentDecision(decision="act", effects=[SetState(key=f"n-{agent.agent_id}", expected_version=version,
                                                           value=value + 1)])


@pytest.mark.parametrize("worker_type", [Worker, EnvelopeWorker], ids=["protocol", "run-loop"])
@pytest.mark.parametrize(("record_first", "writes", "reads"), [(False, 2, 1), (True, 3, 2)],
                         ids=["at-once", "record-first"])
def test_a_cycle_is_three_transactions_and_one_check_for_effects_and_ack(
        tmp_path: Path, pdp_client: CerbosPdp, record_first: bool, writes: int, reads: int,
        worker_type: type[Worker]) -> None:
    url = f"sqlite:///{tmp_path / 'world.db'}"
    setup = open_pdp_world(url, pdp_client, tmp_path / "art", seed=5)
    add_agent(setup, "src", ["wake.enqueue"])
    add_agent(setup, "w", ["state.write"])
    for n in range(CYCLES):
        setup.enqueue_wake("src", "w", "count", f"k-{n}", not_before_us=1)
    close_world(setup)

    statements: list[str] = []
    store = Store(url)
    store.trace_statements(statements.append)
    counted = CountedPdp(pdp_client)
    policy = PdpAuthorizer(counted, store.read)  # type: ignore[arg-type]  # the real client, counted
    book = RuntimeBook(store, policy=policy, clock=ManualClock(), ids=SeededIds(9))
    worker = worker_type(book, "worker-1", {"w": RuleAgent([bump], record_first=record_first)})
    try:
        worker.run_once()  # warm: connections opened, plans remembered
        statements.clear()
        counted.calls.clear()
        per_cycle: list[dict[str, Any]] = []
        for _ in range(CYCLES - 1):
            before, checks_before = len(statements), counted.calls.copy()
            cycle = worker.run_once()
            assert cycle is not None and cycle.receipt.outcome is Outcome.ACTED
            mine = statements[before:]
            calls = counted.calls - checks_before
            per_cycle.append({
                "statements": sum(1 for s in mine if not s.startswith(("BEGIN", "COMMIT", "ROLLBACK"))),
                "write_tx": sum(1 for s in mine if s.startswith("BEGIN IMMEDIATE")),
                "read_tx": sum(1 for s in mine if s.strip() == "BEGIN"),
                "pdp_check": calls["check"], "pdp_plans": calls["plans"]})
        ours = [e for e in store.read.events(0) if ":" in str(e["op_id"] or "")]
    finally:
        book.close()
    mean = {k: sum(c[k] for c in per_cycle) / len(per_cycle) for k in per_cycle[0]}
    print(f"\nper cycle (one effect, SQLite file, real PDP, record_first={record_first}):",
          ", ".join(f"{k} {v:.1f}" for k, v in mean.items()))
    # claim; [decision record]; (decision record +) effects + receipt + trace + ack
    assert {c["write_tx"] for c in per_cycle} == {writes}
    # rehydrate + observe + ledger (+ decide + the plan of effects and ack); [the plan of effects and ack]
    assert {c["read_tx"] for c in per_cycle} == {reads}
    assert mean["pdp_check"] >= 1 and mean["statements"] > 0
    by_wake: dict[str, list[tuple[str, int]]] = {}
    for e in ours:
        wake, _, step = str(e["op_id"]).rpartition(":")
        by_wake.setdefault(wake, []).append((step, int(e["seq"])))
    assert len(by_wake) == CYCLES
    for steps in by_wake.values():  # the record comes first, then the effect and the ack
        assert [step for step, _ in steps] == ["decide", "0", "ack"]
