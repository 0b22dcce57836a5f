"""Contention stress of the one write gateway, with Jepsen-style checks of what was acknowledged.

``PROCS`` processes (default 8) hammer a small key set through the World's compare-and-set (the gateway,
no PDP: ``LocalScopeRules``) until ``ATTEMPTS`` commit attempts (default 500,000) were made in total, on a
SQLite file and on PostgreSQL (a durable server of our own, or ``--pg-url``). Half the keys are counters,
half registers:

- a **counter** is created at version 1 with value 0 and only ever incremented by one, so its value is
  always its version minus one: an attempt compare-and-sets ``version`` at ``version`` (the version the
  last conflict reported, never re-read), and an acknowledged increment is counted by its process;
- a **register** gets ``{"w": process, "n": the process's sequence number}`` at the version the process
  believes current; each acknowledged write is recorded as (version, value).

After the run the log is read back and checked (:func:`check_counter`, :func:`check_register`):

- the key's history (its ``state.set`` events in log order) has versions 1, 2, 3, ... each on the one
  before (a legal, total order; no version twice, none skipped), every value well formed (a counter's
  ``version - 1``; a register's a value some process wrote, each process's writes in its program order);
- every acknowledged write is in the history, at the version it was acknowledged with and with its value
  (0 lost updates), and nothing is in the history that no process had acknowledged (0 phantom writes);
- the state is the history's last entry, and the whole log folds to the state (``fold(events) == state``).

``python -m benchmarks.contention_bench [--backend sqlite|postgres|both] [--attempts N] [--procs P]
[--keys K] [--pg-url URL] [--json]``; ``tests/multihost/test_contention.py`` runs a CI-sized variant.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROCS = 8
ATTEMPTS = 500_000
KEYS = 4
PAGE = 50_000


@dataclass
class Violations:
    """What a check found wrong (each list empty: the history is legal)."""

    order: list[str] = field(default_factory=list)  # versions not 1, 2, 3, ... in log order
    corrupted: list[str] = field(default_factory=list)  # a value no legal write produces
    lost: list[str] = field(default_factory=list)  # acknowledged, not in the history as acknowledged
    phantom: list[str] = field(default_factory=list)  # in the history, never acknowledged
    state: list[str] = field(default_factory=list)  # the state is not the history's last entry

    def total(self) -> int:
        return sum(len(v) for v in (self.order, self.corrupted, self.lost, self.phantom, self.state))

    def add(self, other: Violations) -> None:
        for name in ("order", "corrupted", "lost", "phantom", "state"):
            getattr(self, name).extend(getattr(other, name))


History = list[tuple[int, int, Any]]  # (base_version, resulting_version, value) in log order


def _check_order(key: str, history: History, out: Violations) -> None:
    for i, (base, version, _) in enumerate(history):
        if (base, version) != (i, i + 1):
            out.order.append(f"{key}: entry {i} is {base}->{version}, expected {i}->{i + 1}")


def check_counter(key: str, history: History, acknowledged: int, state: tuple[int, Any]) -> Violations:
    """A counter created at 0 (version 1) and incremented ``acknowledged`` times in all."""
    out = Violations()
    _check_order(key, history, out)
    for _, version, value in history:
        if value != version - 1:
            out.corrupted.append(f"{key}: version {version} holds {value!r}, expected {version - 1}")
    increments = len(history) - 1
    if increments < acknowledged:
        out.lost.append(f"{key}: {acknowledged} increments acknowledged, {increments} in the history")
    if increments > acknowledged:
        out.phantom.append(f"{key}: {increments} increments in the history, {acknowledged} acknowledged")
    if history and state != (history[-1][1], history[-1][2]):
        out.state.append(f"{key}: state {state!r}, history ends at {history[-1][1:]!r}")
    return out


def check_register(key: str, history: History, acked: Iterable[tuple[int, Any]], state: tuple[int, Any],
                   procs: int) -> Violations:
    """A register created with ``None`` (version 1); ``acked``: every acknowledged (version, value)."""
    out = Violations()
    _check_order(key, history, out)
    by_version = {version: value for _, version, value in history}
    last_n: dict[int, int] = {}
    for _, version, value in history[1:]:
        ok = isinstance(value, dict) and set(value) == {"w", "n"} and isinstance(value["w"], int) \
            and isinstance(value["n"], int) and 0 <= value["w"] < procs
        if not ok:
            out.corrupted.append(f"{key}: version {version} holds {value!r}")
            continue
        if value["n"] <= last_n.get(value["w"], -1):
            out.order.append(f"{key}: process {value['w']}'s write {value['n']} after its write {last_n[value['w']]}")
        last_n[value["w"]] = value["n"]
    acked_versions: set[int] = set()
    for version, value in acked:
        acked_versions.add(version)
        if by_version.get(version, object()) != value:
            out.lost.append(f"{key}: {value!r} acknowledged at version {version}, history has "
                            f"{by_version.get(version, 'nothing')!r}")
    for _, version, value in history[1:]:
        if version not in acked_versions:
            out.phantom.append(f"{key}: {value!r} at version {version} was never acknowledged")
    if history and state != (history[-1][1], history[-1][2]):
        out.state.append(f"{key}: state {state!r}, history ends at {history[-1][1:]!r}")
    return out


# -- the processes --------------------------------------------------------------------------------------

def _keys(keys: int) -> tuple[list[str], list[str]]:
    counters = [f"counter/{i}" for i in range(max(1, keys // 2))]
    registers = [f"register/{i}" for i in range(max(1, keys - len(counters)))]
    return counters, registers


def _hammer(url: str, index: int, attempts: int, keys: int, start: Any, out: Any) -> None:
    """One process: ``attempts`` compare-and-set attempts on random keys at the version it believes
    current (the last answer or conflict told it), never re-reading. Puts its report on ``out``."""
    from engine.errors import VersionConflict
    from engine.policy.enforcement import LocalScopeRules
    from engine.world.book import open_world

    counters, registers = _keys(keys)
    book = open_world(url, policy=LocalScopeRules(), init=False)
    world, actor, rng = book.world, f"w{index}", random.Random(index)
    known = {k: world.get_state(k).version for k in counters + registers}
    counted = dict.fromkeys(counters, 0)
    acked: dict[str, list[tuple[int, Any]]] = {k: [] for k in registers}
    conflicts = seq = 0
    start.wait()
    began = time.monotonic()
    try:
        for _ in range(attempts):
            key = rng.choice(counters + registers)
            version = known[key]
            value: Any = version if key in counted else {"w": index, "n": seq}
            try:
                entry = world.compare_and_set_state(actor, key, version, value)
            except VersionConflict as exc:
                conflicts += 1
                known[key] = int(exc.current) if exc.current is not None else version
                continue
            known[key] = entry.version
            if key in counted:
                counted[key] += 1
            else:
                acked[key].append((entry.version, value))
                seq += 1
    finally:
        book.close()
    out.put({"index": index, "attempts": attempts, "conflicts": conflicts, "counted": counted, "acked": acked,
             "seconds": time.monotonic() - began})


def _history(world: Any) -> dict[str, History]:
    histories: dict[str, History] = {}
    after = 0
    while True:
        page = world.events(after, limit=PAGE)
        if not page:
            return histories
        for e in page:
            if e.event_type == "state.set":
                histories.setdefault(e.subject_id, []).append(
                    (e.base_version, e.resulting_version, e.result.get("value")))
        after = page[-1].seq


def run(url: str, *, procs: int = PROCS, attempts: int = ATTEMPTS, keys: int = KEYS,
        artifact_dir: Path | None = None) -> dict[str, Any]:
    """Set the keys up on the empty database at ``url``, run ``procs`` processes making ``attempts``
    attempts in all, check the history; a report (``violations`` 0: every check held)."""
    from engine.policy.enforcement import LocalScopeRules
    from engine.world.book import open_world

    counters, registers = _keys(keys)
    book = open_world(url, policy=LocalScopeRules(), artifact_dir=artifact_dir)
    try:
        world = book.world
        for i in range(procs):
            world.register_agent(f"w{i}", f"Writer {i}", "worker", f"term-w{i}")
        for k in counters:
            world.compare_and_set_state("w0", k, 0, 0)
        for k in registers:
            world.compare_and_set_state("w0", k, 0, None)
        # a fork server imports the engine once and forks each writer from it (8 spawned interpreters would
        # import it 8 times; a plain fork would copy this process's connections and threads)
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["engine.world.book", "engine.policy.enforcement"])
        start, out = ctx.Barrier(procs + 1, timeout=600), ctx.Queue()  # every process connected: then go
        share = [attempts // procs + (1 if i < attempts % procs else 0) for i in range(procs)]
        children = [ctx.Process(target=_hammer, args=(url, i, share[i], keys, start, out), daemon=True)
                    for i in range(procs)]
        for c in children:
            c.start()
        start.wait()
        began = time.monotonic()
        reports = [_take(out, children) for _ in children]
        seconds = time.monotonic() - began
        for c in children:
            c.join(30)
        return _verdict(book, reports, counters, registers, procs, seconds)
    finally:
        book.close()


def _take(out: Any, children: Sequence[Any], timeout_s: float = 3600.0) -> dict[str, Any]:
    """The next child report; raises if a child died without one (bounded wait)."""
    import queue

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            report: dict[str, Any] = out.get(timeout=1.0)
            return report
        except queue.Empty:
            dead = [c for c in children if c.exitcode not in (None, 0)]
            if dead:
                raise RuntimeError(f"a writer process exited with {dead[0].exitcode}") from None
    raise TimeoutError("the writers did not finish in time")


def _verdict(book: Any, reports: list[dict[str, Any]], counters: list[str], registers: list[str], procs: int,
             seconds: float) -> dict[str, Any]:
    world = book.world
    histories = _history(world)
    found = Violations()
    for k in counters:
        entry = world.get_state(k)
        found.add(check_counter(k, histories.get(k, []), sum(r["counted"][k] for r in reports),
                                (entry.version, entry.value)))
    for k in registers:
        entry = world.get_state(k)
        acked = [(v, val) for r in reports for v, val in r["acked"][k]]
        found.add(check_register(k, histories.get(k, []), acked, (entry.version, entry.value), procs))
    folds = book.rebuild_state(from_snapshot=False) == book.state_image()
    attempts = sum(r["attempts"] for r in reports)
    conflicts = sum(r["conflicts"] for r in reports)
    return {"processes": procs, "keys": len(counters) + len(registers), "attempts": attempts,
            "conflicts": conflicts, "commits": attempts - conflicts, "seconds": round(seconds, 2),
            "attempts_per_s": round(attempts / seconds, 1) if seconds else None,
            "lost_updates": len(found.lost), "corrupted_values": len(found.corrupted),
            "order_violations": len(found.order), "phantom_writes": len(found.phantom),
            "state_mismatches": len(found.state), "fold_equals_state": folds,
            "violations": found.total() + (0 if folds else 1),
            "examples": (found.order + found.corrupted + found.lost + found.phantom + found.state)[:5]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--attempts", type=int, default=ATTEMPTS)
    parser.add_argument("--procs", type=int, default=PROCS)
    parser.add_argument("--keys", type=int, default=KEYS)
    parser.add_argument("--pg-url", default=None, help="an empty PostgreSQL database (default: a durable "
                                                        "server of our own, started and stopped here)")
    parser.add_argument("--no-fsync", action="store_true", help="our own server without fsync (a durability "
                                                                 "test needs fsync; contention checks do not)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from benchmarks.pg_server import pg_database

    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="pmw-contention-") as tmp:
        if args.backend in ("sqlite", "both"):
            results["sqlite"] = run(f"sqlite:///{Path(tmp) / 'world.db'}", procs=args.procs, attempts=args.attempts,
                                    keys=args.keys, artifact_dir=Path(tmp) / "artifacts")
        if args.backend in ("postgres", "both"):
            with pg_database(args.pg_url, durable=not args.no_fsync) as url:
                results["postgres"] = run(url, procs=args.procs, attempts=args.attempts, keys=args.keys,
                                          artifact_dir=Path(tmp) / "artifacts-pg")
    if args.json:
        print(json.dumps(results, indent=2, sort_keys=True))
    else:
        for name, r in results.items():
            print(f"{name:9} {r['attempts']:>9,} attempts by {r['processes']} processes on {r['keys']} keys in "
                  f"{r['seconds']:.1f} s ({r['attempts_per_s']:,.0f}/s): {r['commits']:,} commits, "
                  f"{r['conflicts']:,} conflicts; lost {r['lost_updates']}, corrupted {r['corrupted_values']}, "
                  f"order {r['order_violations']}, phantom {r['phantom_writes']}, fold==state "
                  f"{r['fold_equals_state']}")
    return 0 if all(r["violations"] == 0 for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
