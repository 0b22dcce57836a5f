"""Scale-out benchmark: wakes/s with 1, 2, 4 and 8 worker processes on one PostgreSQL world (fsync on).

One run starts a durable PostgreSQL server of its own (or uses ``--pg-url``), deploys ``policies/``, starts
``--pdps`` Cerbos PDPs (loopback, stopped by their PIDs at the end) and registers ``--agents`` agents, each
holding ``state.write``. For each worker count K it queues ``--wakes`` wakes (untimed), releases K worker
processes at once (each a :class:`~engine.protocol.worker.Worker` deciding through a
:class:`~engine.policy.pdp_replicas.PdpReplicas` pool over every PDP, with an adapter for every agent: a
woken agent writes one state key of its own wake, so the effects never conflict) and times them until no
wake is left. It prints wakes/s and the speed-up against one worker, per K, in one table, then checks that
every wake ended in exactly one receipt and counts the errors a worker met (a lost claim race shows here).

What bounds it is printed beside it: the machine's cores and load average (a 2-core machine shares its CPU
between the workers, PostgreSQL and the PDPs), the PDPs' share (calls per wake), and the CPU each wake
cost in the workers, the PostgreSQL server (when the script started it) and the PDPs
(:mod:`benchmarks.cpu_time`): the cores a round kept busy, and the speed-up the CPU alone allows at that
cost per wake (every core busy, against one worker's rate). Every append takes the
world's log lock held to commit (``store/gateway.py``), so commits of one world are serial: with fsync on,
the commit rate of that one stream is the ceiling (``docs/benchmarks-scale.md``).

``python -m benchmarks.scale_bench [--workers 1,2,4,8] [--wakes 400] [--agents 16] [--pdps 2] [--pg-url URL]
[--json]``. A benchmark, not a test: it never fails on a missed target.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import cpu_time

TARGET_SPEEDUP_AT_4 = 1.8


def _adapters(agents: list[str]) -> dict[str, Any]:
    from engine.protocol.adapters import AgentDecision, RuleAgent, SetState

    def rule(agent: Any, view: Any, wake: Any) -> AgentDecision | None:
        # the wake's own key: it rests on nothing the projection showed (reads=[]), so other workers' writes
        # between its projection and its commit are no conflict
        return AgentDecision(decision="act", reads=[], effects=[SetState(key=f"n/{wake.wake_id}", expected_version=0,
                                                                         value=1)])
    return {a: RuleAgent([rule]) for a in agents}


def _open_book(url: str, addresses: list[Any]) -> Any:
    from engine.policy.enforcement import PdpAuthorizer
    from engine.policy.pdp_replicas import PdpReplicas
    from engine.world.book import RuntimeBook
    from store import Store

    store = Store(url)

    def store_epoch() -> str | None:
        row = store.read.current_policy_epoch()
        return str(row["epoch"]) if row else None

    pdp = PdpReplicas(addresses, timeout_s=10.0, store_epoch=store_epoch, reload_stale=False)
    return RuntimeBook(store, policy=PdpAuthorizer(pdp, store.read)), pdp


def _work(url: str, addresses: list[Any], index: int, agents: list[str], start: Any, out: Any) -> None:
    """One worker process: run due wakes until none is left; report cycles, errors, PDP calls."""
    from engine.errors import PMWError
    from engine.protocol.worker import Worker

    book, pdp = _open_book(url, addresses)
    worker = Worker(book, f"scale-{index}", _adapters(agents), lease_seconds=60.0)
    cycles = errors = idle = 0
    kinds: dict[str, int] = {}
    start.wait()
    began, cpu0 = time.monotonic(), time.process_time()
    try:
        while idle < 2:
            try:
                cycle = worker.run_once()
            except PMWError as exc:
                errors += 1
                kinds[type(exc).__name__] = kinds.get(type(exc).__name__, 0) + 1
                continue
            if cycle is None:
                idle += 1
                time.sleep(0.05)
                continue
            idle = 0
            cycles += 1
        calls = sum(s.calls for s in pdp.statuses())
    finally:
        book.close()
        pdp.close()
    out.put({"index": index, "cycles": cycles, "errors": errors, "kinds": kinds, "pdp_calls": calls,
             "seconds": time.monotonic() - began, "cpu_s": time.process_time() - cpu0})


def _round(url: str, addresses: list[Any], world: Any, agents: list[str], workers: int, wakes: int,
           tag: str, servers: Servers) -> dict[str, Any]:
    for i in range(wakes):
        world.enqueue_wake("gov", agents[i % len(agents)], "scale", f"{tag}-{i}")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["engine.protocol.worker", "engine.policy.pdp_replicas"])
    start, out = ctx.Barrier(workers + 1, timeout=600), ctx.Queue()
    procs = [ctx.Process(target=_work, args=(url, addresses, i, agents, start, out), daemon=True)
             for i in range(workers)]
    for p in procs:
        p.start()
    try:
        start.wait()
        began, cpu0 = time.monotonic(), servers.cpu_s()
        reports = [out.get(timeout=3600) for _ in procs]
        cpu1 = servers.cpu_s()
        # the last worker's idle polls are not work: the round ends when the last wake was done
        seconds = max(r["seconds"] for r in reports) - 0.1
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
    cycles = sum(r["cycles"] for r in reports)
    kinds: dict[str, int] = {}
    for r in reports:
        for k, n in r["kinds"].items():
            kinds[k] = kinds.get(k, 0) + n
    return {"workers": workers, "wakes": wakes, "cycles": cycles, "seconds": round(seconds, 2),
            "wall_s": round(time.monotonic() - began, 2), "wakes_per_s": round(cycles / seconds, 1),
            "errors": sum(r["errors"] for r in reports), "error_kinds": kinds,
            "pdp_calls_per_wake": round(sum(r["pdp_calls"] for r in reports) / max(cycles, 1), 2),
            "cpu_ms_per_wake": _cpu_per_wake({"workers": sum(r["cpu_s"] for r in reports),
                                              **{k: _spent(cpu0[k], cpu1[k]) for k in cpu0}}, cycles)}


def _spent(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else after - before


def _cpu_per_wake(cpu_s: dict[str, float | None], cycles: int) -> dict[str, float | None]:
    return {k: None if v is None else round(1000 * v / max(cycles, 1), 2) for k, v in cpu_s.items()}


class Servers:
    """The processes a round's CPU is counted in besides the workers: the PostgreSQL server (when the
    script started it: its postmaster's tree) and the PDPs."""

    def __init__(self, pg_pid: int | None, pdps: list[Any]) -> None:
        self.pg_pid, self.pdps = pg_pid, pdps

    def cpu_s(self) -> dict[str, float | None]:
        """The CPU seconds so far; the PDPs' PIDs read at each call (a PDP restarted meanwhile is counted
        from its restart)."""
        if not cpu_time.available():
            return {"postgres": None, "pdps": None}
        return {"postgres": None if self.pg_pid is None else cpu_time.tree_cpu_s([self.pg_pid]),
                "pdps": cpu_time.tree_cpu_s([pid for p in self.pdps if (pid := p.pid) is not None])}


def cpu_bound(rows: list[dict[str, Any]], cores: int) -> None:
    """Each row's CPU figures: the cores its round kept busy (CPU seconds per second of the round) and the
    speed-up the CPU alone allows at its CPU cost per wake (every core busy: ``cores`` / CPU per wake,
    against one worker's measured rate). Without the server's CPU (a server of yours) none is given."""
    base = rows[0]["wakes_per_s"]
    for r in rows:
        parts = r["cpu_ms_per_wake"].values()
        if None in parts or not base:
            r["cores_busy"] = r["cpu_speedup_ceiling"] = None
            continue
        per_wake_s = sum(parts) / 1000
        r["cores_busy"] = round(per_wake_s * r["wakes_per_s"], 2)
        r["cpu_speedup_ceiling"] = round(cores / per_wake_s / base, 2) if per_wake_s else None


def _receipts_per_wake(world: Any, agents: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for a in agents:
        for r in world.list_receipts(agent_id=a, limit=100_000, actor="gov"):
            if r.wake_id is not None:
                counts[r.wake_id] = counts.get(r.wake_id, 0) + 1
    return counts


def measure(url: str, args: argparse.Namespace, tmp: Path, pg_pid: int | None = None) -> dict[str, Any]:
    from engine.policy import governance
    from engine.policy.pdp_process import ManagedPdp
    from engine.runtime import probe_epoch

    repo = Path(__file__).resolve().parents[1]
    deployment = governance.deploy(repo / "policies", tmp / "deploys")
    pdps = [ManagedPdp(tmp / "deploys" / "current", run_dir=tmp / "run") for _ in range(args.pdps)]
    try:
        addresses = [p.start(timeout=120.0) for p in pdps]  # a loaded machine starts slowly
        book, pdp = _open_book(url, addresses)
        try:
            book.store.init(book.clock.now_us())
            book.activate_policy_epoch(probe_epoch(pdp), "scale bench")
            book.bootstrap_governor("gov", "Governor", "t-gov")
            world = book.world
            world.activate_session("term:t-gov")
            agents = [f"a{i:02d}" for i in range(args.agents)]
            for a in agents:
                world.register_agent(a, a, "worker", f"t-{a}")
                world.activate_session(f"term:t-{a}")
                world.grant("gov", a, capabilities=["state.write"])
            servers = Servers(pg_pid, pdps)
            rows = [_round(url, addresses, world, agents, k, args.wakes, f"k{k}", servers) for k in args.workers]
            receipts = _receipts_per_wake(world, agents)
            queued = len(args.workers) * args.wakes
        finally:
            book.close()
            pdp.close()
    finally:
        for p in pdps:
            p.stop()
    base = rows[0]["wakes_per_s"]
    for r in rows:
        r["speedup"] = round(r["wakes_per_s"] / base, 2) if base else None
    cores = os.cpu_count() or 1
    cpu_bound(rows, cores)
    return {"epoch": deployment.epoch, "rows": rows, "cores": cores, "load_average": os.getloadavg(),
            "wakes_queued": queued, "wakes_with_one_receipt": sum(1 for n in receipts.values() if n == 1),
            "wakes_with_several_receipts": sum(1 for n in receipts.values() if n > 1)}


def report(r: dict[str, Any]) -> str:
    lines = [f"{'workers':>7} {'wakes/s':>8} {'speed-up':>8} {'errors':>6} {'pdp calls/wake':>14}  error kinds"]
    for row in r["rows"]:
        lines.append(f"{row['workers']:>7} {row['wakes_per_s']:>8.1f} {row['speedup']:>8.2f} {row['errors']:>6} "
                     f"{row['pdp_calls_per_wake']:>14.2f}  {row['error_kinds'] or ''}")
    lines.append("")
    lines.append(f"{'workers':>7} {'CPU ms per wake: workers':>24} {'postgres':>8} {'pdps':>6} {'cores busy':>10} "
                 f"{'CPU allows':>10}")
    for row in r["rows"]:
        cpu = row["cpu_ms_per_wake"]
        lines.append(f"{row['workers']:>7} {_figure(cpu['workers'], 24)} {_figure(cpu['postgres'], 8)} "
                     f"{_figure(cpu['pdps'], 6)} {_figure(row['cores_busy'], 10)} "
                     f"{_figure(row['cpu_speedup_ceiling'], 9)}x")
    at4 = next((row["speedup"] for row in r["rows"] if row["workers"] == 4), None)
    if at4 is not None:
        lines.append(f"speed-up at 4 workers {at4:.2f}x (target {TARGET_SPEEDUP_AT_4}x): "
                     f"{'PASS' if at4 >= TARGET_SPEEDUP_AT_4 else 'MISS'}")
    lines.append(f"{r['wakes_with_one_receipt']}/{r['wakes_queued']} wakes ended in exactly one receipt, "
                 f"{r['wakes_with_several_receipts']} in several; {r['cores']} cores, load average "
                 f"{', '.join(f'{x:.1f}' for x in r['load_average'])}")
    return "\n".join(lines)


def _figure(value: float | None, width: int) -> str:
    return f"{'n/a':>{width}}" if value is None else f"{value:>{width}.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="wakes/s with 1, 2, 4, 8 worker processes on PostgreSQL")
    parser.add_argument("--workers", default="1,2,4,8", type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--wakes", type=int, default=400)
    parser.add_argument("--agents", type=int, default=16)
    parser.add_argument("--pdps", type=int, default=2)
    parser.add_argument("--pg-url", default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from benchmarks.pg_server import pg_served

    with tempfile.TemporaryDirectory(prefix="pmw-scale-") as tmp, pg_served(args.pg_url) as (url, pg_pid):
        result = measure(url, args, Path(tmp), pg_pid)
    print(json.dumps(result, indent=2) if args.json else report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
