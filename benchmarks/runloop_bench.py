"""Run-loop benchmark: full protocol cycles per second (wake -> receipt) with rule agents on SQLite.

Run from the repository root (``docs/benchmarks-runloop.md`` has the figures)::

    .venv/bin/python -m benchmarks.runloop_bench [--wakes 2000] [--agents 20] [--json FILE]

One run deploys ``policies/``, starts one ``cerbos server`` (loopback, stopped by its PID at the end) and
opens a World on a SQLite file, decided by that PDP. ``--agents`` rule agents each hold ``state.write``; an
agent, when woken, bumps its own state key (one compare-and-set effect). Measured in the same run:

1. **baseline**: the effect alone, ``World.compare_and_set_state`` through the PDP and the gateway, once per
   wake: the floor a cycle cannot beat (one decided write);
2. **worker cycles**: ``--wakes`` wakes queued up front, then ``Worker.run_until_idle``: claim (lease) ->
   rehydrate (agent read, decided) -> observe (``project_world``: PDP plan + queries) -> decide (rule) ->
   record the decision -> act (the effect) -> ack (receipt + trace). Cycles/s; target >= 500/s;
3. **controller in the loop**: ``--wakes`` events (a governor-less agent ``src`` writes a key that every
   agent follows in turn), ``InProcessRunner.run_until_quiet``: the controller observes each event, commits
   its step (the wake) and the worker runs it. Cycles/s including the controller's share.

Each measure prints its rate and its cost relative to the baseline (cycle time / baseline write time).
This is a benchmark, not a test: it never fails on a missed target.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from engine.models.agents import Agent
from engine.models.wakes import Wake
from engine.policy import governance
from engine.policy.cerbos_adapter import CerbosPdp
from engine.policy.enforcement import PdpAuthorizer
from engine.policy.pdp_process import ManagedPdp
from engine.protocol.adapters import AgentDecision, RuleAgent, SetState
from engine.protocol.worker import Worker
from engine.runloop import InProcessRunner
from engine.runtime import probe_epoch
from engine.sources import Clock, ManualClock, SeededIds, SystemClock
from engine.world.book import RuntimeBook
from engine.world.projection import WorldView
from store import Store

REPO = Path(__file__).resolve().parents[1]
TARGET_CYCLES = 500.0


def bumper(key: str) -> RuleAgent:
    def rule(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        entry = next((s for s in view.state if s.key == key), None)
        version, value = (entry.version, entry.value) if entry else (0, 0)
        return AgentDecision(decision="act", effects=[SetState(key=key, expected_version=version,
                                                               value=int(value) + 1)])
    return RuleAgent([rule])


def open_book(tmp: Path, pdp: CerbosPdp, name: str, agents: int, clock: Clock | None = None) -> RuntimeBook:
    """A world on a SQLite file decided by ``pdp``, its governor and ``agents`` granted agents; the runtime's
    book (``book.world`` is the World)."""
    store = Store(f"sqlite:///{tmp / name}.db")
    book = RuntimeBook(store, policy=PdpAuthorizer(pdp, store.read), clock=clock or SystemClock(), ids=SeededIds(1))
    store.init(book.clock.now_us())
    book.activate_policy_epoch(probe_epoch(pdp), "bench")
    book.bootstrap_governor("gov", "Governor", "t-gov")
    world = book.world
    world.activate_session("term:t-gov")
    for i in range(agents):
        a = f"a{i:03d}"
        world.register_agent(a, a, "worker", f"t-{a}")
        world.activate_session(f"term:t-{a}")
        world.grant("gov", a, capabilities=["state.write", "wake.enqueue"])
    return book


def measure(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="pmw-runloop-bench-"))
    governance.deploy(REPO / "policies", tmp / "deploys")
    pdp_process = ManagedPdp(tmp / "deploys" / "current")
    pdp_process.start()
    assert pdp_process.address is not None
    pdp = CerbosPdp(pdp_process.address)
    agents = [f"a{i:03d}" for i in range(args.agents)]
    out: dict[str, Any] = {"wakes": args.wakes, "agents": args.agents, "load_start": os.getloadavg()[0]}
    try:
        # 1. baseline: the effect alone
        book = open_book(tmp, pdp, "baseline", args.agents)
        world = book.world
        versions = dict.fromkeys(agents, 0)
        t0 = time.perf_counter()
        for n in range(args.wakes):
            a = agents[n % len(agents)]
            world.compare_and_set_state(a, f"{a}-n", versions[a], versions[a] + 1)
            versions[a] += 1
        base = (time.perf_counter() - t0) / args.wakes
        book.close()
        out["baseline_writes_per_s"] = 1 / base

        # 2. worker cycles, wakes queued up front
        book = open_book(tmp, pdp, "worker", args.agents)
        world = book.world
        for n in range(args.wakes):
            world.enqueue_wake("gov", agents[n % len(agents)], "bench", f"k{n}")
        worker = Worker(book, "bench-worker", {a: bumper(f"{a}-n") for a in agents})
        t0 = time.perf_counter()
        cycles = worker.run_until_idle(max_cycles=args.wakes + 1)
        spent = time.perf_counter() - t0
        assert len(cycles) == args.wakes and all(c.receipt.outcome.value == "acted" for c in cycles)
        out["worker_cycles_per_s"] = len(cycles) / spent
        out["worker_cycle_vs_baseline"] = (spent / len(cycles)) / base
        book.close()

        # 3. controller in the loop: each event wakes one subscriber
        clock = ManualClock()  # world time: the storm rules' 2 s cooldown is waited out between rounds
        book = open_book(tmp, pdp, "controller", args.agents, clock)
        world = book.world
        world.register_agent("src", "src", "worker", "t-src")
        world.activate_session("term:t-src")
        world.grant("gov", "src", capabilities=["state.write"])
        for n, a in enumerate(agents):
            world.subscribe(a, f"src-{n}")
        runner = InProcessRunner(book, adapters={a: bumper(f"{a}-n") for a in agents})
        runner.start()
        runner.run_until_quiet()  # the set-up's own events (subscriptions, grants) are observed first
        src_versions = dict.fromkeys(range(len(agents)), 0)
        total = 0.0
        done = 0
        rounds = max(1, args.wakes // len(agents))
        for _ in range(rounds):
            for n in range(len(agents)):  # one event per subscriber, outside the measured loop
                world.compare_and_set_state("src", f"src-{n}", src_versions[n], src_versions[n] + 1)
                src_versions[n] += 1
            clock.advance(3)
            t0 = time.perf_counter()
            stats = runner.run_until_quiet()
            total += time.perf_counter() - t0
            done += stats.cycles
        runner.close()
        out["controller_cycles"] = done
        out["controller_cycles_per_s"] = done / total if total else 0.0
        out["controller_cycle_vs_baseline"] = (total / done) / base if done else None
        book.close()
    finally:
        pdp.close()
        pdp_process.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    out["load_end"] = os.getloadavg()[0]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wakes", type=int, default=2000)
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    r = measure(args)
    print(f"baseline (one decided CAS write):      {r['baseline_writes_per_s']:8.0f} writes/s")
    print(f"worker cycles (wake -> receipt):       {r['worker_cycles_per_s']:8.0f} cycles/s   "
          f"{r['worker_cycle_vs_baseline']:.2f}x a write   target >= {TARGET_CYCLES:.0f}/s: "
          f"{'PASS' if r['worker_cycles_per_s'] >= TARGET_CYCLES else 'MISS'}")
    print(f"controller in the loop ({r['controller_cycles']} cycles):  {r['controller_cycles_per_s']:8.0f} cycles/s   "
          f"{r['controller_cycle_vs_baseline'] or 0:.2f}x a write   target >= {TARGET_CYCLES:.0f}/s: "
          f"{'PASS' if r['controller_cycles_per_s'] >= TARGET_CYCLES else 'MISS'}")
    print(f"load average: {r['load_start']:.2f} -> {r['load_end']:.2f} (2 shared cores)")
    if args.json:
        args.json.write_text(json.dumps(r, indent=2))


if __name__ == "__main__":
    main()
