"""``benchmarks/runloop_bench.py`` in its CI-sized variant, and the counters it reports (``benchmarks/counters.py``).

- ``python -m benchmarks.runloop_bench --quick --json FILE`` exits 0, prints the table with the issue's targets
  (PASS/MISS), and its JSON holds ``baseline_writes_per_s``, ``worker_cycles_per_s``, ``statements_per_cycle``,
  ``transactions_per_cycle`` and ``pdp_round_trips_per_cycle`` as finite numbers (a cycle writes, so it runs
  at least one statement in at least one transaction). No timing is asserted: the figures belong to the
  benchmark.
- :class:`SqlCounter` on a real SQLite file counts each path into the database exactly: the gateway's driver
  cursors (which no SQLAlchemy event sees), the SQLAlchemy engine, read and write transactions, autocommit
  statements; nothing while paused; and refuses to attach once the database has a connection it cannot see.
- :class:`CountingPdp` against the real PDP: a check is one RPC and one round trip, a batch of plans in flight
  together is one round trip of several RPCs; a call after close is counted by nothing and raises ``Closed``.
  If the adapter's channel or stubs changed so that calls escaped the interceptor, these fail.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.counters import CountingPdp, PdpCounter, SqlCounter, SqlCounts, normalized
from engine.errors import Closed, PolicyUnavailable
from engine.policy.enforcement import provisional_principal
from engine.policy.pdp_process import ManagedPdp, cerbos_binary
from engine.runtime import probe_epoch
from engine.sources import SystemClock
from store import Store

REPO = Path(__file__).resolve().parents[1]
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
KEYS = ("baseline_writes_per_s", "worker_cycles_per_s", "statements_per_cycle", "transactions_per_cycle",
        "pdp_round_trips_per_cycle")


def _needs_cerbos() -> None:
    try:
        cerbos_binary()
    except PolicyUnavailable as exc:
        if IN_CI:
            raise
        pytest.skip(str(exc))


def test_quick_run_reports_every_key_as_a_number(tmp_path: Path) -> None:
    _needs_cerbos()
    out = tmp_path / "runloop.json"
    done = subprocess.run([sys.executable, "-m", "benchmarks.runloop_bench", "--quick", "--json", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(out.read_text())
    for key in KEYS:
        value = figures[key]
        assert isinstance(value, int | float) and not isinstance(value, bool), (key, value)
        assert math.isfinite(value) and value >= 0, (key, value)
    assert figures["baseline_writes_per_s"] > 0 and figures["worker_cycles_per_s"] > 0
    assert figures["statements_per_cycle"] >= 1 and figures["transactions_per_cycle"] >= 1
    assert figures["per_cycle"]["write_transactions"] >= 1
    assert {t["target"] for t in figures["targets"]} >= {"transactions per cycle", "PDP round trips per cycle",
                                                        "cycle cost vs one decided write", "worker cycles/s"}
    assert "targets (issue 12):" in done.stdout
    verdict_lines = [line for line in done.stdout.splitlines() if line.rstrip().endswith(("PASS", "MISS"))]
    assert len(verdict_lines) == len(figures["targets"])


def _store(tmp_path: Path) -> tuple[Store, SqlCounter]:
    store = Store(f"sqlite:///{tmp_path / 'counted.db'}")
    counter = SqlCounter(store.db)
    store.init(SystemClock().now_us())
    return store, counter


def test_sql_counter_counts_the_driver_cursors_and_the_engine(tmp_path: Path) -> None:
    store, counter = _store(tmp_path)
    try:
        assert counter.snapshot() == SqlCounts()  # the migrations ran uncounted: counting was paused
        db = store.db
        with db.write_cursor() as cur:  # the gateway's path: no SQLAlchemy event sees it
            cur.execute("CREATE TABLE bench_t (a INTEGER)")
        before = counter.snapshot()
        with counter.counting():
            with db.write_cursor() as cur:
                cur.execute("INSERT INTO bench_t (a) VALUES (1)")
                cur.execute("INSERT INTO bench_t (a) VALUES (2)")
            with db.read_cursor() as cur:  # ends in ROLLBACK
                cur.execute("SELECT a FROM bench_t WHERE a = 1").fetchall()
            with db.read() as conn:  # SQLAlchemy: BEGIN issued by the engine's begin event, ends in COMMIT
                conn.exec_driver_sql("SELECT count(*) FROM bench_t").fetchall()
        got = counter.snapshot() - before
        assert got == SqlCounts(statements=4, sqlalchemy_statements=1, reads=2, writes=2, transactions=3,
                                write_transactions=1, autocommit_statements=0, commits=2, rollbacks=1)
        with db.write_cursor() as cur:  # paused again: nothing counted
            cur.execute("INSERT INTO bench_t (a) VALUES (3)")
        assert counter.snapshot() - before == got
    finally:
        store.close()


def test_sql_counter_counts_an_autocommit_statement_as_a_transaction(tmp_path: Path) -> None:
    store, counter = _store(tmp_path)
    try:
        raw = store.db.engine.raw_connection()
        try:
            with counter.counting(shapes=True):
                raw.cursor().execute("SELECT 1 WHERE 'x' = 'x'")
        finally:
            raw.close()
        got = counter.snapshot()
        assert (got.statements, got.transactions, got.autocommit_statements, got.reads) == (1, 1, 1, 1)
        assert dict(counter.shapes) == {"SELECT ? WHERE ? = ?": 1}
    finally:
        store.close()


def test_sql_counter_refuses_a_database_that_already_has_a_connection(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'early.db'}")
    try:
        store.init(SystemClock().now_us())
        with pytest.raises(ValueError, match="before the database opens its first connection"):
            SqlCounter(store.db)
    finally:
        store.close()


def test_normalized_folds_literals_and_in_lists() -> None:
    assert normalized("SELECT a FROM t WHERE k = 'it''s' AND n IN (1, 2, 3) LIMIT 5") == \
        "SELECT a FROM t WHERE k = ? AND n IN (?...) LIMIT ?"


def test_counting_pdp_counts_rpcs_and_round_trips(managed_pdp: ManagedPdp) -> None:
    assert managed_pdp.address is not None
    counter = PdpCounter()
    pdp = CountingPdp(managed_pdp.address, counter)
    try:
        probe_epoch(pdp)  # one check of one resource
        one = counter.snapshot()
        assert (one.rpcs, one.round_trips, one.checked_resources) == (1, 1, 1)
        assert one.by_method == {"CheckResources": 1} and one.in_flight_s > 0
        pdp.plans(provisional_principal("someone"), [("task", "read"), ("state", "read"), ("memory", "read")])
        plans = counter.snapshot() - one
        assert (plans.rpcs, plans.round_trips, plans.by_method) == (3, 1, {"PlanResources": 3})
        pdp.plan(provisional_principal("someone"), "task", "read")
        single = counter.snapshot() - one - plans
        assert (single.rpcs, single.round_trips) == (1, 1)
    finally:
        pdp.close()
    closed = counter.snapshot()
    with pytest.raises(Closed):
        probe_epoch(pdp)
    assert counter.snapshot().rpcs == closed.rpcs
