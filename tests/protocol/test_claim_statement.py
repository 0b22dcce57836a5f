"""The claim is one conditional statement in one write transaction (issue 12, item 1a).

- On a SQLite file with the real PDP, a claim is ONE transaction: the lease (one ``UPDATE wakes ... RETURNING``),
  the reads the decision needs (inside it), the epoch check and the event; no read of candidate wakes before
  it. With nothing due it is one transaction that writes nothing.
- A denied claim (a real policy that denies it) rolls the whole transaction back: the wake is as it was (no
  lease, no attempt counted, same version), no ``wake.claim`` event, and the denial is recorded as every
  denial is.
- Two claimers, one of them still deciding inside its transaction: they lease different wakes. On PostgreSQL
  the second neither waits for the first (``FOR UPDATE SKIP LOCKED``) nor takes its wake; on SQLite it runs
  after the first commits (``BEGIN IMMEDIATE``).
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.errors import PolicyDenied
from engine.models.wakes import WakeStatus
from engine.policy.cerbos_adapter import CerbosPdp
from engine.policy.enforcement import LocalScopeRules, PdpAuthorizer
from engine.runtime import Runtime
from engine.settings import load_settings
from engine.sources import ManualClock, SeededIds
from engine.world import World
from engine.world.book import RuntimeBook
from store import Store, Update, WakeClaim, WriteRequest
from store.gateway import CLAIM_LISTED_TARGETS, _claim_sql
from tests.conftest import REPO, add_agent, book_of, close_world, open_local_world, open_pdp_world

DENY_FORBIDDEN_CLAIMS = '''
    # test only: a claim of a wake for task "forbidden" is denied
    - name: test-forbidden-claim
      actions: ["claim"]
      effect: EFFECT_DENY
      roles: ["*"]
      condition:
        match:
          expr: R.attr.task_id == "forbidden"
'''


def _traced_book(url: str, pdp: CerbosPdp, statements: list[str]) -> RuntimeBook:
    store = Store(url)
    store.trace_statements(statements.append)  # before any connection of this store is opened
    return RuntimeBook(store, policy=PdpAuthorizer(pdp, store.read), clock=ManualClock(), ids=SeededIds(3))


def _shape(statements: list[str]) -> dict[str, int]:
    words = [s.strip().split()[0].upper() for s in statements]
    return {"begin": sum(s.upper().startswith("BEGIN") for s in statements),
            "begin_immediate": sum(s.upper().startswith("BEGIN IMMEDIATE") for s in statements),
            "update": words.count("UPDATE"), "insert": words.count("INSERT"),
            "wake_reads": sum(w == "SELECT" and " wakes" in s for w, s in zip(words, statements, strict=True))}


def test_a_claim_is_one_write_transaction_with_its_decision_inside(tmp_path: Path, pdp_client: CerbosPdp) -> None:
    url = f"sqlite:///{tmp_path / 'world.db'}"
    setup = open_pdp_world(url, pdp_client, tmp_path / "art", seed=5)
    add_agent(setup, "src", ["wake.enqueue"])
    add_agent(setup, "a")
    for n in range(3):
        setup.enqueue_wake("src", "a", "count", f"k-{n}", not_before_us=1, priority=n)
    close_world(setup)

    statements: list[str] = []
    book = _traced_book(url, pdp_client, statements)
    try:
        assert book.world.claim_wake("w", agent_ids=["a"]) is not None  # warm: connections opened
        statements.clear()
        wake = book.world.claim_wake("w", agent_ids=["a"], lease_seconds=5)
        assert wake is not None and wake.status is WakeStatus.CLAIMED and wake.lease_owner == "w"
        assert wake.priority == 1 and wake.attempts == 1 and wake.version == 2
        claim = _shape(statements)
        assert statements[0].upper().startswith("BEGIN IMMEDIATE") and statements[-1].upper() == "COMMIT"
        assert claim == {"begin": 1, "begin_immediate": 1, "update": 1, "insert": 1, "wake_reads": 0}, statements
        assert statements[1].lstrip().upper().startswith("UPDATE WAKES") and "RETURNING" in statements[1].upper()
        stored = book.store.read.get("wakes", wake_id=wake.wake_id)
        assert stored is not None and stored["lease_owner"] == "w" and stored["version"] == 2
        (event,) = [e for e in book.store.read.events() if e["event_type"] == "wake.claim"
                    and e["subject_id"] == wake.wake_id]
        assert event["result"] == wake.model_dump(mode="json") and event["actor_id"] == "a"
        assert event["changes"] == [{"table": "wakes", "op": "update", "key": {"wake_id": wake.wake_id}, "values": {
            "status": "claimed", "lease_owner": "w", "attempts": 1, "lease_until_us": wake.lease_until_us,
            "updated_at_us": wake.updated_at_us, "version": 2}}]
        assert event["base_version"] == 1 and event["resulting_version"] == 2 and event["policy_epoch"]

        assert book.world.claim_wake("w", agent_ids=["a"]) is not None
        statements.clear()
        assert book.world.claim_wake("w", agent_ids=["a"]) is None  # nothing due: one transaction, no write
        assert _shape(statements) == {"begin": 1, "begin_immediate": 1, "update": 1, "insert": 0, "wake_reads": 0}
    finally:
        book.close()


@pytest.fixture
def denying_runtime(tmp_path: Path) -> Iterator[Runtime]:
    """A runtime whose policies (a copy of the repository's) deny claims of wakes for task "forbidden"."""
    source = tmp_path / "policies"
    shutil.copytree(REPO / "policies", source)
    wake_policy = source / "resources" / "wake.yaml"
    wake_policy.write_text(wake_policy.read_text().rstrip("\n") + "\n" + DENY_FORBIDDEN_CLAIMS)
    rt = Runtime.open(load_settings(db_url=f"sqlite:///{tmp_path / 'data' / 'w.db'}", policy_dir=source))
    try:
        rt.book.bootstrap_governor("gov", "Governor", "t-gov")
        rt.world.activate_session("term:t-gov")
        yield rt
    finally:
        rt.close()


def test_a_denied_claim_leaves_no_lease_and_is_recorded(denying_runtime: Runtime) -> None:
    world = denying_runtime.world
    add_agent(world, "src", ["wake.enqueue"])
    add_agent(world, "a")
    allowed = world.enqueue_wake("src", "a", "fine", "k-ok", payload={"task_id": "ok"}).wake
    forbidden = world.enqueue_wake("src", "a", "no", "k-no", payload={"task_id": "forbidden"}, priority=5).wake
    read = denying_runtime.book.store.read
    before = read.counts_and_versions()
    last = read.last_seq()
    with pytest.raises(PolicyDenied) as denied:
        world.claim_wake("w", agent_ids=["a"])
    assert (denied.value.actor, denied.value.action, denied.value.id) == ("a", "claim", forbidden.wake_id)
    row = read.get("wakes", wake_id=forbidden.wake_id)
    assert row is not None
    assert (row["status"], row["lease_owner"], row["attempts"], row["version"]) == ("pending", None, 0, 1)
    after = read.counts_and_versions()
    assert {k: v for k, v in after.items() if k != "events"} == {k: v for k, v in before.items() if k != "events"}
    new = read.events(after_seq=last)
    assert [(e["event_type"], e["actor_id"], e["subject_id"], e["payload"]["command"]) for e in new] == [
        ("policy.denied", "a", forbidden.wake_id, "claim_wake")]
    # the allowed wake is claimed as usual once the denied one is out of the way
    world.cancel_wake("src", forbidden.wake_id, "not to be run")
    claimed = world.claim_wake("w", agent_ids=["a"])
    assert claimed is not None and claimed.wake_id == allowed.wake_id


def _claim(book: RuntimeBook, worker: str, now: int, seed: int, decided: threading.Event | None = None,
           deciding: threading.Event | None = None) -> str | None:
    """One claim through the gateway's door (no policy: a world no epoch governs), its decision held open
    until ``decided`` is set (after signalling ``deciding``); the leased wake's id."""
    ids = SeededIds(seed)

    def decide(row: dict[str, Any], update: Update) -> WriteRequest:
        if deciding is not None and decided is not None:
            deciding.set()
            assert decided.wait(30)
        return WriteRequest(op_id=ids.new("op"), command="claim_wake", request_hash=worker,
                            actor_id=row["target_agent"],
                            event_id=ids.new("evt"), event_type="wake.claim", subject_kind="wake",
                            subject_id=row["wake_id"], created_at_us=now, result=row, changes=[update],
                            base_version=update.expected_version, resulting_version=update.expected_version + 1)

    outcome = book.store.decided_door().claim_wake(WakeClaim(worker, now, now + 60_000_000, ("a",)), decide)
    return None if outcome is None else str(outcome.result["wake_id"])


def _claims_while_one_decides(book: RuntimeBook, other: RuntimeBook, now: int, *, wait_s: float
                              ) -> tuple[list[str | None], list[str | None], bool]:
    """w1 claims through ``book`` and holds its decision open (its transaction too) while w2 claims through
    ``other``, given ``wait_s`` before w1 is let go. Returns what each leased and whether w2's claim returned
    while w1 was still deciding."""
    decided, deciding = threading.Event(), threading.Event()
    first: list[str | None] = []
    second: list[str | None] = []
    holder = threading.Thread(target=lambda: first.append(_claim(book, "w1", now, 101, decided, deciding)))
    runner = threading.Thread(target=lambda: second.append(_claim(other, "w2", now, 202)))
    holder.start()
    try:
        assert deciding.wait(30)  # w1 has leased the most urgent wake and is deciding, its transaction open
        runner.start()
        runner.join(timeout=wait_s)
        early = not runner.is_alive()
    finally:
        decided.set()
        holder.join(timeout=30)
    if runner.ident is not None:
        runner.join(timeout=30)
    return first, second, early


@pytest.mark.parametrize("backend", ["sqlite-file", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_claimer_deciding_holds_its_wake_only(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    url = f"sqlite:///{tmp_path / 'world.db'}" if backend == "sqlite-file" else request.getfixturevalue("pg_url")
    clock = ManualClock()
    world: World = open_local_world(url, tmp_path / "art", clock=clock)
    try:
        world.register_agent("a", "A", "worker", "t-a")
        wakes = [world.enqueue_wake("ctl", "a", "w", f"k-{n}", priority=9 - n, not_before_us=1).wake.wake_id
                 for n in range(3)]
        book = book_of(world)
        now = clock.now_us() + 1
        other = RuntimeBook(Store(url), policy=LocalScopeRules(), clock=clock, ids=SeededIds(2))
        first, second, early = _claims_while_one_decides(book, other, now, wait_s=3)
        if backend == "postgres":  # SKIP LOCKED: w2 did not wait for w1, and took the next wake
            assert early and second == [wakes[1]]
        else:  # BEGIN IMMEDIATE: w2 waits for w1's transaction
            assert not early
        assert first == [wakes[0]] and second == [wakes[1]]
        rows = {w: book.store.read.get("wakes", wake_id=w) for w in wakes}
        assert [(r["status"], r["lease_owner"], r["version"]) for r in rows.values() if r is not None] == [
            ("claimed", "w1", 2), ("claimed", "w2", 2), ("pending", None, 1)]
        other.close()
    finally:
        close_world(world)


@pytest.mark.postgres
def test_a_claimer_deciding_leaves_the_next_due_wake_to_others_of_either_kind(tmp_path: Path, pg_url: str) -> None:
    """PostgreSQL: while w1 decides on the most urgent wake (pending), w2 takes the next due one at once even
    when it is of the other kind (a claimed wake whose lease ran out): a claim locks only the row it leases,
    never a candidate it did not take (which concurrent claimers would skip: a due wake left for nobody)."""
    clock = ManualClock()
    world: World = open_local_world(pg_url, tmp_path / "art", clock=clock)
    try:
        world.register_agent("a", "A", "worker", "t-a")
        book = book_of(world)
        expired = world.enqueue_wake("ctl", "a", "w", "k-expired", priority=1, not_before_us=1).wake.wake_id
        start = clock.now_us() + 1
        assert _claim(book, "dead", start, 303) == expired  # leased for 60 s by a worker that then died
        urgent = world.enqueue_wake("ctl", "a", "w", "k-urgent", priority=9, not_before_us=1).wake.wake_id
        now = start + 61_000_000
        other = RuntimeBook(Store(pg_url), policy=LocalScopeRules(), clock=clock, ids=SeededIds(2))
        first, second, early = _claims_while_one_decides(book, other, now, wait_s=10)
        assert early and second == [expired]
        assert first == [urgent]
        other.close()
    finally:
        close_world(world)


@pytest.mark.parametrize("backend", ["sqlite-memory", "sqlite-file",
                                     pytest.param("postgres", marks=pytest.mark.postgres)])
def test_claims_decided_by_the_pdp_on_every_backend(backend: str, tmp_path: Path, request: pytest.FixtureRequest,
                                                    pdp_client: CerbosPdp) -> None:
    """The decision's reads run inside the claim's transaction on each backend (an in-memory SQLite database
    has one connection: a read of its own there could not begin)."""
    url = {"sqlite-memory": "sqlite://", "sqlite-file": f"sqlite:///{tmp_path / 'world.db'}"}.get(backend) or str(
        request.getfixturevalue("pg_url"))
    world = open_pdp_world(url, pdp_client, tmp_path / "art")
    try:
        add_agent(world, "src", ["wake.enqueue"])
        add_agent(world, "a")
        low = world.enqueue_wake("src", "a", "low", "k-low", not_before_us=1).wake.wake_id
        high = world.enqueue_wake("src", "a", "high", "k-high", not_before_us=1, priority=3).wake.wake_id
        got = [world.claim_wake("w", agent_ids=["a"], op_id=f"claim-{n}") for n in range(3)]
        assert [w.wake_id if w else None for w in got] == [high, low, None]
        again = world.claim_wake("w", agent_ids=["a"], op_id="claim-0")  # a known op id: the original lease
        assert again == got[0]
        assert [e["event_type"] for e in book_of(world).store.read.events() if e["subject_id"] in (low, high)] == [
            "wake.issued", "wake.issued", "wake.claim", "wake.claim"]
    finally:
        close_world(world)


@pytest.mark.parametrize("targets", [None, 3, 40])
def test_the_claim_walks_pending_wakes_in_claim_order_and_sorts_none_of_them(tmp_path: Path,
                                                                           targets: int | None) -> None:
    """On SQLite the pending-and-due candidates are read over the claim's index in claim order (migration 12):
    the claim stops at the first due one of an agent it serves instead of reading and sorting every pending
    wake. Only the expired leases (in-flight wakes) and the two candidates are sorted."""
    store = Store(f"sqlite:///{tmp_path / 'world.db'}")
    try:
        store.init(1)
        params: dict[str, Any] = {"owner": "w", "until": 2, "now": 1}
        if targets is not None and targets > CLAIM_LISTED_TARGETS:
            params["targets"] = "[]"
        elif targets is not None:
            params.update({f"t{n}": "a" for n in range(targets)})
        with store.db.read_cursor() as cur:
            cur.execute(f"EXPLAIN QUERY PLAN {_claim_sql('sqlite', targets)}", params)
            plan = [str(row[3]) for row in cur.fetchall()]
    finally:
        store.close()
    pending = [p for p in plan if "ix_wakes_claimable" in p]
    assert pending and all(p.startswith("SCAN w USING INDEX ix_wakes_claimable") for p in pending), plan
    assert sum("TEMP B-TREE" in p for p in plan) == 2, plan  # the expired leases' branch, the two candidates
