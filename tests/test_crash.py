"""Crash recovery against real databases (a SQLite file in WAL mode and a real PostgreSQL).

A child process commits a stream of ``compare_and_set_state`` increments with ``op_id = f"inc-{i}"``,
announcing each request (op id, key, expected version, value) in a side file before sending it. The
parent SIGKILLs it at a random point once it has made some progress, then reopens the store and checks:

* the log folds to the state (``rebuild_state(from_snapshot=False) == state_image()``);
* the key's versions are contiguous (version == number of ``state.set`` events for it, creation
  included, with resulting versions 1..version in log order) and nothing committed was lost (every
  operation the child finished is there; on SQLite with the default ``synchronous=NORMAL`` in WAL
  mode, since only the process died, not the OS);
* retrying the in-flight operation id with the same request applies it at most once: if it had
  committed, the retry returns the original result and writes nothing; if not, it applies exactly once;
  retrying it with a different value is ``OperationConflict``.
"""

from __future__ import annotations

import random
import signal
import subprocess
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from engine.errors import OperationConflict
from engine.policy.enforcement import LocalScopeRules
from engine.world import World
from engine.world.book import open_world
from tests.conftest import DbUrlFactory
from tests.pg_cluster import PgCluster
from tests.procs import Child, kill, read_lines, spawn, wait_until

pytestmark = pytest.mark.slow

REAL_BACKENDS = [
    pytest.param("sqlite-file", id="sqlite-file"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]
TRIALS = 5
ACTOR = "crasher"
KEY = "crash/counter"
MAX_OPS = 100_000  # the child stops by itself only if it is never killed
PROGRESS_TIMEOUT = 60.0


def _state_set_events(world: World, key: str) -> list[dict[str, object]]:
    return [e.model_dump() for e in world.events(0, limit=100_000)
            if e.event_type == "state.set" and e.subject_id == key]


def _wait_for_pg_backends_to_exit(cluster: PgCluster, url: str, timeout: float = 30.0) -> None:
    """After a client is SIGKILLed, its server backend finishes (commits or rolls back) whatever it was
    doing and exits once it sees the closed socket. Wait for that, so "had it committed?" is settled
    before we look (the retry itself must be correct either way; this only makes the branch exact)."""
    parts = urlsplit(url)
    dbname = parts.path.lstrip("/")
    host = parse_qs(parts.query)["host"][0]
    sql = f"SELECT count(*) FROM pg_stat_activity WHERE datname = '{dbname}' AND pid <> pg_backend_pid()"
    assert host == str(cluster.dir)

    def gone() -> bool:
        out = subprocess.run(["psql", "-h", host, "-U", "postgres", "-d", "postgres", "-Atq",
                              "-c", sql], check=True, capture_output=True, text=True, timeout=30)
        return int(out.stdout.strip()) == 0
    wait_until(gone, timeout, "the killed client's PostgreSQL backend to exit", interval=0.05)


def _run_and_kill(url: str, log: Path, workdir: Path, rng: random.Random) -> Child:
    """Start the committer, let it finish a random number of operations, wait a random moment, SIGKILL."""
    progress = rng.randint(5, 60)
    child = spawn("committer", url, ACTOR, KEY, str(log), str(MAX_OPS), name="committer", workdir=workdir)
    try:
        def enough() -> bool:
            if child.proc.poll() is not None:
                raise AssertionError("the committer exited before it was killed:\n" + child.describe())
            return sum(1 for r in read_lines(log) if "done" in r) >= progress
        wait_until(enough, PROGRESS_TIMEOUT, f"{progress} committed operations")
        time.sleep(rng.uniform(0, 0.02))  # land anywhere: between calls, mid-transaction, mid-commit
    finally:
        kill(child)
    return child


@pytest.mark.parametrize("seed", range(TRIALS))
@pytest.mark.parametrize("backend", REAL_BACKENDS)
def test_sigkill_loses_nothing_committed_and_retry_applies_once(
        backend: str, seed: int, db_url_factory: DbUrlFactory, tmp_path: Path,
        request: pytest.FixtureRequest) -> None:
    rng = random.Random(f"{backend}/{seed}")
    url = db_url_factory()
    # create and migrate the schema once, in the parent
    book = open_world(url, policy=LocalScopeRules(), artifact_dir=tmp_path / "artifacts")
    world = book.world
    try:
        world.register_agent(ACTOR, "Crasher", "worker", "term-crash")
        world.compare_and_set_state(ACTOR, KEY, 0, 0)
    finally:
        book.close()

    log = tmp_path / "ops.jsonl"
    child = _run_and_kill(url, log, tmp_path, rng)
    assert child.proc.returncode == -signal.SIGKILL, child.describe()
    if backend == "postgres":
        _wait_for_pg_backends_to_exit(request.getfixturevalue("pg_cluster"), url)

    records = read_lines(log)
    hello = records[0]
    assert hello.get("hello") is True, records[:3]
    if backend == "sqlite-file":  # the store's defaults, not a test override
        assert (hello["journal_mode"], hello["synchronous"]) == ("wal", 1)  # 1 == NORMAL
    announced = [r for r in records if "announce" in r]
    done = [r["done"] for r in records if "done" in r]
    ops = len(announced)
    # the child announces op i only after op i-1 returned: all but the last announced op had committed
    assert [r["announce"] for r in announced] == [f"inc-{i}" for i in range(ops)]
    assert done == [f"inc-{i}" for i in range(len(done))]
    assert len(done) in (ops - 1, ops)
    assert [(r["expected_version"], r["value"]) for r in announced] == [(i + 1, i + 1) for i in range(ops)]
    last = announced[-1]
    op_id, expected_version, value = last["announce"], last["expected_version"], last["value"]

    # reopen (recovery) in the parent
    book = open_world(url, policy=LocalScopeRules(), artifact_dir=tmp_path / "artifacts")
    world = book.world
    try:
        assert book.rebuild_state(from_snapshot=False) == book.state_image()
        entry = world.get_state(KEY)
        events = _state_set_events(world, KEY)
        assert entry.version == len(events)  # 1 (creation) + one per committed increment
        assert [e["resulting_version"] for e in events] == list(range(1, entry.version + 1))
        assert entry.value == entry.version - 1
        for r in announced[:-1]:  # nothing committed was lost
            assert book.store.operation(r["announce"]) is not None, r
        stored = book.store.operation(op_id)
        had_committed = stored is not None
        assert entry.version == (ops + 1 if had_committed else ops)
        if len(done) == ops:  # the child saw the last call return: it must be committed
            assert had_committed

        # retry the in-flight operation with the same request
        retried = world.compare_and_set_state(ACTOR, KEY, expected_version, value, op_id=op_id)
        after = _state_set_events(world, KEY)
        if had_committed:
            assert stored is not None
            assert retried.model_dump(mode="json") == stored.result  # the original result
            assert len(after) == len(events)  # nothing applied again
        else:
            assert len(after) == len(events) + 1  # applied now, exactly once
        assert [e["op_id"] for e in after].count(op_id) == 1
        assert (retried.version, retried.value) == (expected_version + 1, value)
        assert world.get_state(KEY).model_dump(exclude={"read_token"}) == retried.model_dump()

        # a second retry is answered from the ledger; a different request under that id is a conflict
        assert world.compare_and_set_state(ACTOR, KEY, expected_version, value, op_id=op_id) == retried
        with pytest.raises(OperationConflict):
            world.compare_and_set_state(ACTOR, KEY, expected_version, value + 1000, op_id=op_id)
        assert len(_state_set_events(world, KEY)) == len(after)
        assert book.rebuild_state(from_snapshot=False) == book.state_image()
    finally:
        book.close()
