"""Write-gateway benchmark: PMW's commit rate against a raw SQLite floor and LangGraph's SqliteSaver.

Run from the repository root (``docs/benchmarks.md`` has the figures and their interpretation)::

    .venv/bin/python -m benchmarks.gateway_bench [--commits N] [--rounds R] [--warmup W]
                                                 [--memory-commits M] [--tracemalloc-commits T] [--json FILE]

Every contender writes to its own fresh SQLite file in a temporary directory, in WAL mode with
``synchronous=NORMAL`` and a busy timeout, one transaction per commit, sequentially, in one process:

* ``raw floor``: plain :mod:`sqlite3`; per commit ``BEGIN IMMEDIATE``; ``UPDATE state ... WHERE key = ?
  AND version = ?`` (rowcount checked); one event ``INSERT`` (event_id, type, actor, payload, created_at);
  ``COMMIT``.
* ``Store.commit``: the write gateway called with a ready :class:`~store.WriteRequest` (no World), through the
  store's decided door (the one the World writes through).
* ``World.compare_and_set_state``: the full public call (validation, request hash, policy check with the
  in-process ``LocalScopeRules``, plan, gateway commit, result model); the headline "gateway" figure.
* ``LangGraph SqliteSaver.put`` (``pip install -e '.[bench]'``): small checkpoints, prebuilt outside the
  timed loop, each chained to its parent.

Each contender is warmed up and timed in ``--rounds`` rounds of ``--commits`` commits on a fresh file
(contender order rotates per round); the median rate is reported, per wall-clock second and per CPU
second of this process (steadier on a shared machine), with the bytes each commit adds to the database.
Every round checks that the database holds exactly the commits asked for. Peak memory after
``--memory-commits`` World commits is measured in a fresh subprocess (RSS, and tracemalloc over the last
``--tracemalloc-commits``). This is a benchmark, not a test: it never fails on a missed target.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import platform
import resource
import secrets
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from engine.policy.enforcement import LocalScopeRules
from engine.world.book import RuntimeBook, open_world
from store import DatabaseOptions, Update, WriteRequest

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata

TARGET_OF_FLOOR = 0.55  # the gateway must reach this fraction of the raw floor ...
# ... and at least LangGraph's SqliteSaver.put rate.

BUSY_TIMEOUT_MS = 30_000
KEY = "bench/counter"
ACTOR = "bench-agent"
LANGGRAPH_MISSING = "langgraph: not installed (pip install -e '.[bench]')"


def _value(i: int) -> dict[str, Any]:
    """The small JSON value every contender writes on commit ``i``."""
    return {"counter": i, "note": "gateway benchmark", "tags": ["a", "b"]}


def _connect(path: Path) -> sqlite3.Connection:
    """A plain sqlite3 connection with the gateway's settings: WAL, synchronous=NORMAL, busy timeout,
    autocommit mode (we issue BEGIN ourselves)."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    return conn


def _count_rows(path: Path, table: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    finally:
        conn.close()


def _open_book(directory: Path) -> RuntimeBook:
    """A World on a fresh file, with the in-process policy (``LocalScopeRules``: no PDP round trip, so the
    figure is the World and its gateway, not Cerbos), and the benchmark's agent registered; the runtime's
    book (``book.world`` is the World, ``book.store`` the store)."""
    book = open_world(f"sqlite:///{directory / 'world.sqlite'}", policy=LocalScopeRules(),
                      artifact_dir=directory / "artifacts",
                      options=DatabaseOptions(sqlite_synchronous="NORMAL", busy_timeout_ms=BUSY_TIMEOUT_MS))
    book.world.register_agent(ACTOR, "Benchmark agent", "worker", "bench-term")
    return book


class Contender(Protocol):
    path: Path  # the SQLite file it writes

    def prepare(self, n: int) -> None:
        """Untimed: build whatever the next ``run(n)`` consumes."""

    def run(self, n: int) -> None:
        """Timed: ``n`` sequential commits."""

    def committed(self) -> int:
        """How many commits the database holds (checked against what was asked)."""

    def close(self) -> None: ...


# -- contenders -----------------------------------------------------------------------------------------


class RawFloor:
    """The floor: one CAS ``UPDATE`` plus one event ``INSERT`` per transaction, plain sqlite3."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "raw.sqlite"
        self.conn = _connect(self.path)
        self.conn.executescript("""
            CREATE TABLE state (key TEXT PRIMARY KEY, value TEXT, version INTEGER NOT NULL);
            CREATE TABLE events (
                seq INTEGER PRIMARY KEY,
                event_id TEXT NOT NULL UNIQUE,
                type TEXT NOT NULL,
                actor TEXT NOT NULL,
                payload TEXT NOT NULL,
                created_at INTEGER NOT NULL
            );
        """)
        self.conn.execute("INSERT INTO state (key, value, version) VALUES (?, 'null', 0)", (KEY,))
        self.version = 0

    def prepare(self, n: int) -> None:
        pass

    def run(self, n: int) -> None:
        execute = self.conn.execute
        for _ in range(n):
            v = self.version
            value = json.dumps(_value(v + 1))
            execute("BEGIN IMMEDIATE")
            try:
                cur = execute("UPDATE state SET value = ?, version = version + 1 WHERE key = ? AND version = ?",
                              (value, KEY, v))
                if cur.rowcount != 1:
                    raise RuntimeError(f"raw floor: compare-and-set at version {v} changed {cur.rowcount} rows")
                execute("INSERT INTO events (event_id, type, actor, payload, created_at) VALUES (?, ?, ?, ?, ?)",
                        (f"evt_{secrets.token_hex(13)}", "state.set", ACTOR,
                         json.dumps({"key": KEY, "version": v + 1}), time.time_ns() // 1000))
                execute("COMMIT")
            except BaseException:
                execute("ROLLBACK")
                raise
            self.version = v + 1

    def committed(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM events").fetchone()[0])

    def close(self) -> None:
        self.conn.close()


class _WorldContender:
    """A fresh world on ``directory`` with the benchmark key created at version 1."""

    def __init__(self, directory: Path) -> None:
        self.book = _open_book(directory)
        self.world = self.book.world
        self.path = directory / "world.sqlite"
        self.version = self.world.compare_and_set_state(ACTOR, KEY, 0, _value(0)).version
        self.events0 = self.committed()

    def prepare(self, n: int) -> None:
        pass

    def committed(self) -> int:
        return _count_rows(self.path, "events")

    def close(self) -> None:
        self.book.close()


class StoreCommit(_WorldContender):
    """The write gateway alone: ``Store.commit(WriteRequest)`` with one CAS ``Update`` per request."""

    def run(self, n: int) -> None:
        commit = self.book.store.decided_door().commit
        ids = self.world.ids
        clock = self.world.clock
        for _ in range(n):
            v = self.version
            now = clock.now_us()
            value = _value(v + 1)
            op_id = ids.new("op")
            commit(WriteRequest(
                op_id=op_id, command="compare_and_set_state",
                request_hash=hashlib.sha256(op_id.encode()).hexdigest(), actor_id=ACTOR,
                event_id=ids.new("evt"), event_type="state.set", subject_kind="state", subject_id=KEY,
                created_at_us=now,
                result={"key": KEY, "value": value, "version": v + 1, "updated_by": ACTOR, "updated_at_us": now},
                changes=[Update("state_entries", {"key": KEY}, v,
                                {"value": value, "updated_by": ACTOR, "updated_at_us": now}, "state", KEY)],
                payload={"key": KEY}, base_version=v, resulting_version=v + 1))
            self.version = v + 1


class WorldCas(_WorldContender):
    """The full public call: ``World.compare_and_set_state`` (one gateway commit each)."""

    def run(self, n: int) -> None:
        cas = self.world.compare_and_set_state
        v = self.version
        for _ in range(n):
            v = cas(ACTOR, KEY, v, _value(v + 1)).version
        self.version = v


class LangGraphPut:
    """LangGraph's ``SqliteSaver.put``: one small checkpoint per call, chained to its parent; the
    checkpoints are built in ``prepare`` (untimed), so only ``put`` is measured."""

    def __init__(self, directory: Path) -> None:
        from langgraph.checkpoint.sqlite import SqliteSaver

        self.path = directory / "langgraph.sqlite"
        conn = sqlite3.connect(self.path, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        self.conn = conn
        self.saver = SqliteSaver(conn)
        self.saver.setup()
        self.config: RunnableConfig = {"configurable": {"thread_id": "bench-thread", "checkpoint_ns": ""}}
        self.step = 0
        self.pending: list[tuple[Checkpoint, CheckpointMetadata, ChannelVersions]] = []

    def prepare(self, n: int) -> None:
        from langgraph.checkpoint.base import empty_checkpoint

        self.pending = []
        for _ in range(n):
            self.step += 1
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"counter": _value(self.step)}
            checkpoint["channel_versions"] = {"counter": self.step}
            checkpoint["updated_channels"] = ["counter"]
            metadata_: CheckpointMetadata = {"source": "loop", "step": self.step, "parents": {}}
            self.pending.append((checkpoint, metadata_, {"counter": self.step}))

    def run(self, n: int) -> None:
        put = self.saver.put
        config = self.config
        pending, self.pending = self.pending[:n], self.pending[n:]
        if len(pending) != n:
            raise RuntimeError("langgraph: prepare(n) must precede run(n)")
        for checkpoint, metadata_, new_versions in pending:
            config = put(config, checkpoint, metadata_, new_versions)
        self.config = config

    def committed(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0])

    def close(self) -> None:
        self.conn.close()


def _langgraph_version() -> str | None:
    try:
        import langgraph.checkpoint.sqlite  # noqa: F401
    except ImportError:
        return None
    return metadata.version("langgraph-checkpoint-sqlite")


@dataclass(frozen=True)
class Spec:
    key: str
    label: str
    factory: Callable[[Path], Contender]


SPECS = [
    Spec("raw_floor", "raw floor: UPDATE+INSERT, sqlite3", RawFloor),
    Spec("store_commit", "gateway: Store.commit(WriteRequest)", StoreCommit),
    Spec("world_cas", "gateway: World.compare_and_set_state", WorldCas),
    Spec("langgraph_put", "langgraph: SqliteSaver.put", LangGraphPut),
]


# -- timing ---------------------------------------------------------------------------------------------


@dataclass
class Result:
    key: str
    label: str
    rates: list[float] = field(default_factory=list)  # commits per wall-clock second, one per round
    cpu_rates: list[float] = field(default_factory=list)  # commits per CPU second of this process
    bytes_per_commit: float | None = None  # database size (after a WAL checkpoint) / commits, round 1
    frames_per_commit: float | None = None  # WAL frames (pages) each commit appends, round 1 (FRAME_COMMITS)

    @property
    def median(self) -> float:
        return statistics.median(self.rates)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu_rates)


def _db_bytes(path: Path) -> int:
    """The size of the database once its WAL is checkpointed into the main file."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


FRAME_COMMITS = 100  # commits whose WAL frames are counted (fewer frames than any contender's autocheckpoint)


def _wal_frames(path: Path, *, restart: bool) -> int:
    """The frames in the WAL of ``path`` (``restart``: checkpoint and truncate it first, then 0)."""
    conn = sqlite3.connect(path)
    try:
        row = conn.execute(f"PRAGMA wal_checkpoint({'TRUNCATE' if restart else 'PASSIVE'})").fetchone()
    finally:
        conn.close()
    return 0 if restart else int(row[1])


def _time_round(spec: Spec, commits: int, warmup: int) -> tuple[float, float, float, float]:
    """One round on a fresh database: warm-up, then ``commits`` timed commits, then :data:`FRAME_COMMITS`
    untimed ones whose WAL frames are counted (the pages a commit writes: a deterministic measure of its
    storage cost, what the b-trees it touches decide).

    Returns (commits per wall-clock second, commits per CPU second, database bytes per commit, WAL frames per
    commit)."""
    directory = Path(tempfile.mkdtemp(prefix=f"pmw-bench-{spec.key}-"))
    try:
        contender = spec.factory(directory)
        try:
            base = int(getattr(contender, "events0", 0))  # commits made by the setup
            contender.prepare(warmup)
            contender.run(warmup)
            contender.prepare(commits)
            gc.collect()
            start, cpu_start = time.perf_counter(), time.process_time()
            contender.run(commits)
            elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
            held = contender.committed() - base
            if held != warmup + commits:
                raise RuntimeError(f"{spec.key}: expected {warmup + commits} commits, the database holds {held}")
            contender.prepare(FRAME_COMMITS)
            _wal_frames(contender.path, restart=True)
            contender.run(FRAME_COMMITS)
            frames = _wal_frames(contender.path, restart=False) / FRAME_COMMITS
        finally:
            contender.close()
        size = _db_bytes(contender.path)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return commits / elapsed, commits / max(cpu, 1e-9), size / (warmup + commits + FRAME_COMMITS), frames


def run_rates(commits: int, rounds: int, warmup: int, with_langgraph: bool) -> dict[str, Result]:
    specs = [s for s in SPECS if with_langgraph or s.key != "langgraph_put"]
    results = {s.key: Result(s.key, s.label) for s in specs}
    for r in range(rounds):
        order = specs[r % len(specs):] + specs[:r % len(specs)]  # rotate so no contender always goes first
        for spec in order:
            rate, cpu_rate, per_commit, frames = _time_round(spec, commits, warmup)
            result = results[spec.key]
            result.rates.append(rate)
            result.cpu_rates.append(cpu_rate)
            if result.bytes_per_commit is None:
                result.bytes_per_commit, result.frames_per_commit = per_commit, frames
            print(f"  round {r + 1}/{rounds}  {spec.label:<40} {rate:>10,.0f} commits/s", flush=True)
    return results


# -- memory (child process) -----------------------------------------------------------------------------


def _rss_now_kib() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
    except OSError:
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") // 1024


def _max_rss_kib() -> int:
    """Peak RSS of this process: ``VmHWM`` where /proc has it, else ``ru_maxrss``.

    On Linux ``ru_maxrss`` survives exec: a child spawned (vfork + exec) by a big parent starts with the
    parent's peak, so it can over-state the child's own; ``VmHWM`` belongs to the child's own image."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return _ru_maxrss_kib()


def _ru_maxrss_kib() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak  # bytes on macOS, KiB on Linux


def _cas_loop(cas: Callable[..., Any], v: int, n: int) -> int:
    for _ in range(n):
        v = int(cas(ACTOR, KEY, v, _value(v + 1)).version)
    return v


def memory_child(commits: int, traced: int) -> dict[str, Any]:
    """``commits`` World commits on one fresh file, the last ``traced`` of them under tracemalloc (it slows
    every allocation several times, so it covers a window, not the whole run). Every tenth of the way it
    samples RSS and the rate of the batch just done (untraced batches only), which shows whether memory
    or the commit rate drifts as the log grows."""
    traced = min(traced, commits)
    directory = Path(tempfile.mkdtemp(prefix="pmw-bench-memory-"))
    try:
        book = _open_book(directory)
        try:
            cas = book.world.compare_and_set_state
            v = _cas_loop(cas, cas(ACTOR, KEY, 0, _value(0)).version, 200)  # warm caches: steady state
            gc.collect()
            rss_setup = _rss_now_kib()
            maxrss_setup = _max_rss_kib()
            samples: list[dict[str, Any]] = []
            step = max(1, commits // 10)
            done = 0
            traced_current = traced_peak = None
            untraced_seconds = 0.0
            start = time.perf_counter()
            while done < commits:
                tracing = done >= commits - traced
                if tracing and not tracemalloc.is_tracing():
                    gc.collect()
                    tracemalloc.start()
                # a batch never straddles the switch to tracing
                end = min(done + step, commits if tracing else commits - traced)
                t0, c0 = time.perf_counter(), time.process_time()
                v = _cas_loop(cas, v, end - done)
                dt, dc = time.perf_counter() - t0, time.process_time() - c0
                if not tracing:
                    untraced_seconds += dt
                samples.append({"commits": end, "rss_kib": _rss_now_kib(), "traced": tracing,
                                "rate": None if tracing else (end - done) / dt,
                                "cpu_rate": None if tracing else (end - done) / max(dc, 1e-9)})
                done = end
            if tracemalloc.is_tracing():
                gc.collect()
                traced_current, traced_peak = tracemalloc.get_traced_memory()
                tracemalloc.stop()
            seconds = time.perf_counter() - start
            maxrss_loop = _max_rss_kib()
            if v != commits + 201:
                raise RuntimeError(f"memory run: expected version {commits + 201}, got {v}")
        finally:
            book.close()
        maxrss_closed = _max_rss_kib()
        db_bytes = _db_bytes(directory / "world.sqlite")
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    untraced_commits = commits - traced
    return {"commits": commits, "traced_commits": traced, "seconds": seconds,
            "untraced_rate": untraced_commits / untraced_seconds if untraced_commits else None,
            "peak_rss_kib": _max_rss_kib(), "ru_maxrss_kib": _ru_maxrss_kib(),
            "peak_rss_setup_kib": maxrss_setup, "peak_rss_loop_kib": maxrss_loop,
            "peak_rss_closed_kib": maxrss_closed, "rss_after_setup_kib": rss_setup,
            "rss_end_kib": samples[-1]["rss_kib"] if samples else None, "samples": samples,
            "tracemalloc_peak_bytes": traced_peak, "tracemalloc_retained_bytes": traced_current,
            "db_bytes": db_bytes}


def run_memory(commits: int, traced: int) -> dict[str, Any]:
    """Run :func:`memory_child` in a fresh interpreter, so nothing else inflates its peak RSS."""
    cmd = [sys.executable, "-m", "benchmarks.gateway_bench", "--memory-child", str(commits),
           "--tracemalloc-commits", str(traced)]
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(cmd, cwd=root, capture_output=True, text=True, check=True, timeout=3600)
    figures: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


# -- report ---------------------------------------------------------------------------------------------


def _code_state() -> str:
    """The commit measured, plus a digest of any uncommitted change to engine/ or store/."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                              text=True, check=True, timeout=30).stdout.strip()
        diff = subprocess.run(["git", "diff", "HEAD", "--", "engine", "store"], cwd=root, capture_output=True,
                              check=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown (not a git checkout)"
    return f"{head}+dirty:{hashlib.sha256(diff).hexdigest()[:12]}" if diff else head


def _environment() -> dict[str, Any]:
    return {"code": _code_state(), "python": platform.python_version(), "sqlite": sqlite3.sqlite_version,
            "sqlalchemy": metadata.version("SQLAlchemy"), "pydantic": metadata.version("pydantic"),
            "langgraph_checkpoint_sqlite": _langgraph_version(), "platform": platform.platform(),
            "cpus": os.cpu_count()}


def _ratio(a: Result | None, b: Result | None, *, cpu: bool = False, best: bool = False) -> float | None:
    """``a``'s rate over ``b``'s: medians of wall-clock rates, or of CPU rates, or best rounds (interference
    from other processes only ever slows a round down, so the best round is the least disturbed one)."""
    if a is None or b is None:
        return None
    if best:
        return max(a.rates) / max(b.rates)
    return a.cpu_median / b.cpu_median if cpu else a.median / b.median


def _verdict(results: dict[str, Result], gateway_key: str) -> dict[str, Any]:
    gw, floor, lg = results[gateway_key], results["raw_floor"], results.get("langgraph_put")
    of_floor = _ratio(gw, floor)
    of_lg = _ratio(gw, lg)
    floor_ok = of_floor is not None and of_floor >= TARGET_OF_FLOOR
    lg_ok = None if of_lg is None else of_lg >= 1.0
    return {"of_raw_floor": of_floor, "of_langgraph": of_lg, "meets_floor_target": floor_ok,
            "meets_langgraph_target": lg_ok, "pass": floor_ok and lg_ok is not False,
            "cpu_of_raw_floor": _ratio(gw, floor, cpu=True), "cpu_of_langgraph": _ratio(gw, lg, cpu=True),
            "best_of_raw_floor": _ratio(gw, floor, best=True), "best_of_langgraph": _ratio(gw, lg, best=True)}


def _fmt_ratio(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f} ({x:.1%})"


GATEWAYS = {"world_cas": "World.compare_and_set_state", "store_commit": "Store.commit (gateway only)"}


def print_report(results: dict[str, Result], verdicts: dict[str, dict[str, Any]],
                 memory: dict[str, Any] | None, args: argparse.Namespace, load: tuple[float, float],
                 cpus: int, seconds: float) -> None:
    floor = results["raw_floor"]
    print()
    print(f"Write-gateway benchmark: {args.rounds} rounds x {args.commits:,} commits per contender "
          f"(after {args.warmup} warm-up), fresh SQLite file, WAL, synchronous=NORMAL, one transaction per commit")
    print(f"{'contender':<42}{'median/s':>10}{'min/s':>9}{'max/s':>9}{'us/commit':>11}{'of floor':>10}"
          f"{'CPU-s rate':>12}{'of floor':>10}{'B/commit':>10}{'frames':>8}")
    print("-" * 131)
    for r in results.values():
        per = f"{r.bytes_per_commit:,.0f}" if r.bytes_per_commit is not None else "-"
        frames = f"{r.frames_per_commit:.2f}" if r.frames_per_commit is not None else "-"
        print(f"{r.label:<42}{r.median:>10,.0f}{min(r.rates):>9,.0f}{max(r.rates):>9,.0f}"
              f"{1e6 / r.median:>11.1f}{r.median / floor.median:>10.1%}"
              f"{r.cpu_median:>12,.0f}{r.cpu_median / floor.cpu_median:>10.1%}{per:>10}{frames:>8}")
    if "langgraph_put" not in results:
        print(LANGGRAPH_MISSING)
    print("(median/s: commits per wall-clock second; CPU-s rate: commits per CPU second of the benchmark process,")
    print(" steadier on a busy machine but blind to I/O waits; B/commit: database size after a WAL checkpoint")
    print(" divided by commits, i.e. the space each commit costs; frames: WAL frames (pages) one commit appends,")
    print(f" counted over {FRAME_COMMITS} untimed commits: the b-trees a commit touches)")
    print()
    print(f"ratios{'':<46}{'median wall clock':<20}{'median CPU time':<20}best rounds (wall)")
    lg = results.get("langgraph_put")
    print(f"  {'langgraph / raw floor':<50}{_fmt_ratio(_ratio(lg, floor)):<20}"
          f"{_fmt_ratio(_ratio(lg, floor, cpu=True)):<20}{_fmt_ratio(_ratio(lg, floor, best=True))}")
    for key, v in verdicts.items():
        name = GATEWAYS[key].split(" ")[0]
        print(f"  {f'gateway ({name}) / raw floor':<50}{_fmt_ratio(v['of_raw_floor']):<20}"
              f"{_fmt_ratio(v['cpu_of_raw_floor']):<20}{_fmt_ratio(v['best_of_raw_floor'])}")
        print(f"  {f'gateway ({name}) / langgraph':<50}{_fmt_ratio(v['of_langgraph']):<20}"
              f"{_fmt_ratio(v['cpu_of_langgraph']):<20}{_fmt_ratio(v['best_of_langgraph'])}")
    print()
    print(f"target (medians, wall clock): gateway >= {TARGET_OF_FLOOR:.0%} of the raw floor and >= LangGraph's "
          "put rate")
    for key, v in verdicts.items():
        floor_s = "PASS" if v["meets_floor_target"] else "MISS"
        lg_s = {None: "n/a", True: "PASS", False: "MISS"}[v["meets_langgraph_target"]]
        print(f"  {GATEWAYS[key]:<30} >= {TARGET_OF_FLOOR:.0%} floor: {floor_s}   >= langgraph: {lg_s}   "
              f"overall: {'PASS' if v['pass'] else 'MISS'}")
    if memory is not None:
        mib = 1024.0
        print()
        rate = memory["untraced_rate"]
        print(f"memory: {memory['commits']:,} World commits in a fresh process, {memory['seconds']:.0f} s "
              f"({f'{rate:,.0f}/s untraced, ' if rate else ''}tracemalloc on for the last "
              f"{memory['traced_commits']:,})")
        print(f"  peak RSS of the process (VmHWM)      {memory['peak_rss_kib'] / mib:8.1f} MiB"
              f"   (peak by the end of setup: {memory['peak_rss_setup_kib'] / mib:.1f} MiB)")
        print(f"  ru_maxrss                            {memory['ru_maxrss_kib'] / mib:8.1f} MiB"
              "   (on Linux it keeps the spawning parent's peak across exec)")
        if memory["rss_after_setup_kib"] is not None and memory["rss_end_kib"] is not None:
            print(f"  RSS after setup -> after last commit {memory['rss_after_setup_kib'] / mib:8.1f} -> "
                  f"{memory['rss_end_kib'] / mib:.1f} MiB")
        if memory["tracemalloc_peak_bytes"] is not None:
            retained = memory["tracemalloc_retained_bytes"]
            print(f"  tracemalloc peak (traced window)     {memory['tracemalloc_peak_bytes'] / 2**20:8.2f} MiB"
                  f"   retained at its end: {retained / 1024:.1f} KiB "
                  f"({retained / max(1, memory['traced_commits']):.1f} B/commit)")
        print(f"  database at the end                  {memory['db_bytes'] / 2**20:8.1f} MiB")
        rated = [x for x in memory["samples"] if x["rate"] is not None]
        if len(rated) >= 2:
            first, last = rated[0], rated[-1]
            print(f"  commit rate as the log grows         {first['rate']:8,.0f}/s (CPU-s rate "
                  f"{first['cpu_rate']:,.0f}) over the first {first['commits']:,} -> {last['rate']:,.0f}/s "
                  f"(CPU-s rate {last['cpu_rate']:,.0f}) in the batch ending at {last['commits']:,}")
    print()
    busy = max(load) > cpus / 2
    print(f"load average (1 min) at start / end: {load[0]:.2f} / {load[1]:.2f} on {cpus} CPUs"
          f"{'  -- the machine was busy: rates are noisy, compare ratios within one run' if busy else ''}")
    print(f"total time {seconds:.0f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gateway_bench",
                                     description="PMW write-gateway benchmark (see docs/benchmarks.md)")
    parser.add_argument("--commits", type=int, default=5000, help="timed commits per round (default 5000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per contender; the median is reported")
    parser.add_argument("--warmup", type=int, default=300, help="untimed commits before each timed round")
    parser.add_argument("--memory-commits", type=int, default=100_000,
                        help="World commits in the peak-memory subprocess (default 100000; 0 skips it)")
    parser.add_argument("--tracemalloc-commits", type=int, default=2000,
                        help="how many of the last memory commits run under tracemalloc (default 2000)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the figures to FILE as JSON")
    parser.add_argument("--memory-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.memory_child is not None:
        print(json.dumps(memory_child(args.memory_child, max(0, args.tracemalloc_commits))))
        return 0
    if args.commits < 1 or args.rounds < 1 or min(args.warmup, args.memory_commits, args.tracemalloc_commits) < 0:
        parser.error("--commits and --rounds must be positive; the other counts not negative")

    started = time.perf_counter()
    load_start = os.getloadavg()[0]
    env = _environment()
    cpus = int(env["cpus"] or 1)
    with_langgraph = env["langgraph_checkpoint_sqlite"] is not None
    print(f"python {env['python']}, sqlite {env['sqlite']}, SQLAlchemy {env['sqlalchemy']}, pydantic "
          f"{env['pydantic']}, langgraph-checkpoint-sqlite {env['langgraph_checkpoint_sqlite'] or '-'}, "
          f"{cpus} CPUs, load {load_start:.2f}; code {env['code']}")
    if not with_langgraph:
        print(LANGGRAPH_MISSING)
    results = run_rates(args.commits, args.rounds, args.warmup, with_langgraph)
    verdicts = {k: _verdict(results, k) for k in GATEWAYS}
    memory = None
    if args.memory_commits:
        print(f"  memory: {args.memory_commits:,} World commits in a fresh subprocess ...", flush=True)
        memory = run_memory(args.memory_commits, args.tracemalloc_commits)
    seconds = time.perf_counter() - started
    load = (load_start, os.getloadavg()[0])
    print_report(results, verdicts, memory, args, load, cpus, seconds)

    if args.json is not None:
        lg, floor = results.get("langgraph_put"), results["raw_floor"]
        figures = {
            "settings": {"commits": args.commits, "rounds": args.rounds, "warmup": args.warmup,
                         "journal_mode": "WAL", "synchronous": "NORMAL", "target_of_floor": TARGET_OF_FLOOR},
            "environment": {**env, "loadavg_1min_start": load[0], "loadavg_1min_end": load[1]},
            "rates": {k: {"label": r.label, "median": r.median, "rounds": r.rates,
                          "us_per_commit": 1e6 / r.median, "cpu_median": r.cpu_median,
                          "cpu_rounds": r.cpu_rates, "bytes_per_commit": r.bytes_per_commit,
                          "wal_frames_per_commit": r.frames_per_commit}
                      for k, r in results.items()},
            "ratios": {"langgraph_put/raw_floor": _ratio(lg, floor),
                       "langgraph_put/raw_floor (cpu)": _ratio(lg, floor, cpu=True),
                       "langgraph_put/raw_floor (best)": _ratio(lg, floor, best=True),
                       **{f"{k}/raw_floor": v["of_raw_floor"] for k, v in verdicts.items()},
                       **{f"{k}/langgraph_put": v["of_langgraph"] for k, v in verdicts.items()}},
            "verdicts": verdicts,
            "memory": memory,
            "seconds": seconds,
        }
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
        print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
