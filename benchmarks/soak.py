"""Soak: a steady stream of wakes across 3 worker processes and a controller leader on PostgreSQL, with the
RSS of every process sampled each minute (documented, not in CI: ``docs/benchmarks-scale.md``).

One run starts a durable PostgreSQL server of its own (or uses ``--pg-url``), deploys ``policies/``, starts
``--pdps`` PDPs, a ``--role controller`` service process (the leader: ``tests/multihost/controller_child.py``)
and ``--workers`` worker processes (``benchmarks/scale_bench.py``'s worker, running until told to stop), and
queues ``--rate`` wakes a second for ``--minutes`` minutes. Each minute it prints the RSS (``VmRSS``) of every
process (workers, leader, PDPs, PostgreSQL's postmaster) and the queue's progress. At the end it waits for the
queue to drain, then checks: every wake ended in exactly one receipt, and each process's RSS grew by at most
``--max-growth`` (10 %) from the first sample after the warm-up (``--warmup`` minutes) to the last.

``python -m benchmarks.soak [--minutes 30] [--rate 2] [--workers 3] [--pdps 2] [--warmup 5] [--pg-url URL]``;
exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.scale_bench import _adapters, _open_book, _receipts_per_wake

REPO = Path(__file__).resolve().parents[1]


def rss_kib(pid: int) -> int | None:
    """The resident set size of ``pid`` in KiB (None: gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _worker(url: str, addresses: list[Any], index: int, agents: list[str], stop: Any) -> None:
    """Run due wakes until ``stop`` is set (errors are counted by the receipts check, not here)."""
    from engine.errors import PMWError
    from engine.protocol.worker import Worker

    book, pdp = _open_book(url, addresses)
    worker = Worker(book, f"soak-{index}", _adapters(agents), lease_seconds=30.0)
    try:
        while not stop.is_set():
            try:
                if worker.run_once() is None:
                    stop.wait(0.05)
            except PMWError:
                stop.wait(0.1)
    finally:
        book.close()
        pdp.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="30-minute soak: RSS per process each minute")
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=2.0, help="wakes queued per second")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--pdps", type=int, default=2)
    parser.add_argument("--warmup", type=float, default=5.0, help="minutes before the RSS baseline")
    parser.add_argument("--max-growth", type=float, default=0.10)
    parser.add_argument("--pg-url", default=None)
    args = parser.parse_args(argv)
    from benchmarks.pg_server import pg_database
    from engine.policy import governance
    from engine.policy.pdp_process import ManagedPdp
    from engine.runtime import probe_epoch

    with tempfile.TemporaryDirectory(prefix="pmw-soak-") as tmp_name, pg_database(args.pg_url) as url:
        tmp = Path(tmp_name)
        governance.deploy(REPO / "policies", tmp / "deploys")
        pdps = [ManagedPdp(tmp / "deploys" / "current", run_dir=tmp / "run") for _ in range(args.pdps)]
        ctx = mp.get_context("forkserver")
        stop = ctx.Event()
        procs: list[Any] = []
        leader: subprocess.Popen[bytes] | None = None
        try:
            addresses = [p.start(timeout=120.0) for p in pdps]
            book, pdp = _open_book(url, addresses)
            book.store.init(book.clock.now_us())
            book.activate_policy_epoch(probe_epoch(pdp), "soak")
            book.bootstrap_governor("gov", "Governor", "t-gov")
            world = book.world
            world.activate_session("term:t-gov")
            agents = [f"a{i}" for i in range(6)]
            for a in agents:
                world.register_agent(a, a, "worker", f"t-{a}")
                world.activate_session(f"term:t-{a}")
                world.grant("gov", a, capabilities=["state.write"])
            leader = subprocess.Popen(
                [sys.executable, "-m", "tests.multihost.controller_child", url, addresses[0].grpc, "5",
                 str(tmp / "leader.json"), str(tmp / "stop")], cwd=tmp, env={**os.environ, "PYTHONPATH": str(REPO)},
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs = [ctx.Process(target=_worker, args=(url, addresses, i, agents, stop), daemon=True)
                     for i in range(args.workers)]
            for p in procs:
                p.start()
            watched = {**{f"worker-{i}": p.pid for i, p in enumerate(procs)}, "leader": leader.pid,
                       **{f"pdp-{i}": p.pid for i, p in enumerate(pdps) if p.pid is not None}}
            samples: dict[str, list[int | None]] = {name: [] for name in watched}
            queued, began = 0, time.monotonic()
            next_sample = began
            while (elapsed := time.monotonic() - began) < args.minutes * 60:
                while queued < elapsed * args.rate:
                    world.enqueue_wake("gov", agents[queued % len(agents)], "soak", f"s-{queued}")
                    queued += 1
                if time.monotonic() >= next_sample:
                    for name, pid in watched.items():
                        samples[name].append(rss_kib(pid))
                    pending = len(world.list_wakes(status="pending", actor="gov", limit=100_000))
                    print(f"{elapsed / 60:5.1f} min  queued {queued:6}  pending {pending:5}  RSS MiB: " + "  ".join(
                        f"{n} {(s[-1] or 0) / 1024:.0f}" for n, s in samples.items()), flush=True)
                    next_sample += 60
                time.sleep(0.05)
            drain_deadline = time.monotonic() + 600
            while world.list_wakes(status="pending", actor="gov", limit=10) and time.monotonic() < drain_deadline:
                time.sleep(0.5)
            time.sleep(2.0)
            receipts = _receipts_per_wake(world, agents)
            book.close()
            pdp.close()
        finally:
            stop.set()
            (tmp / "stop").touch()
            for p in procs:
                p.join(30)
                if p.is_alive():
                    p.kill()
            if leader is not None:
                try:
                    leader.wait(30)
                except subprocess.TimeoutExpired:
                    leader.kill()
                    leader.wait(10)
            for m in pdps:
                m.stop()
    one = sum(1 for n in receipts.values() if n == 1)
    ok = one == queued and all(n == 1 for n in receipts.values())
    several = sum(1 for n in receipts.values() if n > 1)
    print(f"{one}/{queued} wakes ended in exactly one receipt ({several} in several)")
    base_index = min(int(args.warmup), max(len(s) for s in samples.values()) - 1)
    for name, s in samples.items():
        values = [v for v in s[base_index:] if v is not None]
        if len(values) >= 2:
            growth = values[-1] / values[0] - 1
            verdict = "ok" if growth <= args.max_growth else "GROWS"
            ok = ok and growth <= args.max_growth
            print(f"{name:10} RSS {values[0] / 1024:.0f} -> {values[-1] / 1024:.0f} MiB ({growth:+.1%}) {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
