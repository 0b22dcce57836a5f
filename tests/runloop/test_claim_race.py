"""The claim race: 4 threads and 4 processes claim and ack wakes of one queue at once, with a CPU hog
running, on SQLite and on PostgreSQL. A claim that loses a race (another worker claimed, ran and acked the
candidate in between) is skipped, never raised: 0 exceptions, and every wake ends in exactly one receipt.

Bounded and seeded: the queue's size, priorities and agents come from a seeded generator; every child
(claimers and the hog) is stopped by its own PID in a ``finally``.
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from engine.policy.cerbos_adapter import CerbosPdp
from engine.policy.enforcement import PdpAuthorizer
from engine.sources import RandomIds, SystemClock
from engine.world.book import RuntimeBook
from store import Store
from tests.conftest import add_agent, close_world, open_pdp_world
from tests.procs import REPO_ROOT, Child, _child_env, read_lines, stop_all, wait_all, warm_up
from tests.protocol.wake_claimer import claim_and_ack

AGENTS = [f"a{i}" for i in range(4)]
WAKES = 240
SEED = 12
DEADLINE_S = 240.0
HOG_S = 300  # the hog's own bound (it is killed by PID well before)


def _queue(url: str, pdp: CerbosPdp, art: Path) -> list[str]:
    """The world with AGENTS and WAKES pending wakes (seeded priorities and targets); their ids."""
    world = open_pdp_world(url, pdp, art, seed=SEED)
    try:
        add_agent(world, "src", ["wake.enqueue"])
        for a in AGENTS:
            add_agent(world, a, ["state.write"])
        rng = random.Random(SEED)
        return [world.enqueue_wake("src", rng.choice(AGENTS), "race", f"k-{n}", priority=rng.randrange(3),
                                   not_before_us=1).wake.wake_id for n in range(WAKES)]
    finally:
        close_world(world)


def _spawn(args: list[str], name: str, workdir: Path) -> Child:
    out, err = workdir / f"{name}.out", workdir / f"{name}.err"
    with out.open("wb") as fout, err.open("wb") as ferr:
        proc = subprocess.Popen([sys.executable, *args], cwd=REPO_ROOT, stdin=subprocess.DEVNULL,
                                stdout=fout, stderr=ferr, env=_child_env())
    return Child(name, proc, out, err)


def _race(url: str, pdp: CerbosPdp, tmp_path: Path) -> None:
    wake_ids = _queue(url, pdp, tmp_path / "art")
    warm_up()
    start = tmp_path / "start"
    records = tmp_path / "records.jsonl"
    agents = ",".join(AGENTS)
    children: list[Child] = []
    books: list[RuntimeBook] = []
    try:
        children.append(_spawn(["-c", f"import time\nend = time.time() + {HOG_S}\nwhile time.time() < end: pass"],
                               "hog", tmp_path))
        for n in range(4):
            children.append(_spawn(
                ["-m", "tests.protocol.wake_claimer", url, pdp.address.grpc, pdp.address.http, f"proc-{n}",
                 agents, str(records), str(start), str(DEADLINE_S)], f"proc-{n}", tmp_path))
        threads = []
        for n in range(4):
            store = Store(url)
            book = RuntimeBook(store, policy=PdpAuthorizer(pdp, store.read), clock=SystemClock(), ids=RandomIds())
            books.append(book)
            threads.append(threading.Thread(target=claim_and_ack, daemon=True, args=(
                book.world, f"thread-{n}", AGENTS, records, DEADLINE_S)))
        start.touch()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=DEADLINE_S + 30)
        claimers = children[1:]
        wait_all(claimers, timeout=DEADLINE_S + 30)
        for child in claimers:
            assert child.proc.returncode == 0, child.describe()
    finally:
        stop_all(children)
        for book in books:
            book.close()
    lines = read_lines(records)
    errors = [r for r in lines if "error" in r]
    assert errors == []
    assert {r["done"] for r in lines if "done" in r} == {*(f"proc-{n}" for n in range(4)),
                                                         *(f"thread-{n}" for n in range(4))}
    acked = Counter(r["acked"] for r in lines if "acked" in r)
    assert set(acked) == set(wake_ids) and set(acked.values()) == {1}
    store = Store(url)
    try:
        receipts = Counter(r["wake_id"] for r in store.read.rows("receipts", limit=10 * WAKES))
        wakes = store.read.rows("wakes", limit=10 * WAKES)
    finally:
        store.close()
    assert receipts == Counter(dict.fromkeys(wake_ids, 1))
    assert {w["status"] for w in wakes} == {"acked"}
    workers = Counter(r["worker"] for r in lines if "acked" in r)
    assert len(workers) >= 2  # a race: the work was shared


def test_the_claim_race_on_sqlite_raises_nothing(tmp_path: Path, pdp_client: CerbosPdp) -> None:
    _race(f"sqlite:///{tmp_path / 'world.db'}", pdp_client, tmp_path)


@pytest.mark.postgres
def test_the_claim_race_on_postgresql_raises_nothing(tmp_path: Path, pg_url: str, pdp_client: CerbosPdp) -> None:
    _race(pg_url, pdp_client, tmp_path)
