"""What one wake -> receipt cycle costs, counted (not timed): SQL statements, transactions (write and read)
and PDP round trips per cycle of an in-process worker whose agent makes one effect, on a SQLite file with
the real PDP. Run with ``-s`` to see the table:

    .venv/bin/python -m pytest tests/protocol/test_cycle_counts.py -q -s -p no:cacheprovider

Asserted: a cycle makes exactly three write transactions (the claim; the decision record; the effects, the
receipt, the trace and the ack, decided inside that transaction) and two read transactions (rehydrate, observe
and the ledger; the plan of the effects and the ack), and the checks of the effects and of the ack go to the
PDP in one request.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.models.agents import Agent
from engine.models.receipts import Outcome
from engine.models.wakes import Wake
from engine.policy.cerbos_adapter import CerbosPdp
from engine.policy.enforcement import PdpAuthorizer
from engine.policy.model import Decision, PlanFilter, PrincipalRef, ResourceRef
from engine.protocol.adapters import AgentDecision, RuleAgent, SetState
from engine.protocol.worker import Worker
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


def test_a_cycle_is_three_write_transactions_and_one_check_for_effects_and_ack(tmp_path: Path,
                                                                                 pdp_client: CerbosPdp) -> None:
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
    worker = Worker(book, "worker-1", {"w": RuleAgent([bump])})
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
    finally:
        book.close()
    mean = {k: sum(c[k] for c in per_cycle) / len(per_cycle) for k in per_cycle[0]}
    print("\nper cycle (one effect, SQLite file, real PDP):",
          ", ".join(f"{k} {v:.1f}" for k, v in mean.items()))
    assert {c["write_tx"] for c in per_cycle} == {3}  # claim; decision record; effects + receipt + trace + ack
    assert {c["read_tx"] for c in per_cycle} == {2}  # rehydrate + observe + ledger; the plan of effects and ack
    assert mean["pdp_check"] >= 1 and mean["statements"] > 0
