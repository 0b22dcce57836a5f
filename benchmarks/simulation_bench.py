"""Simulation scale benchmark: time and peak memory per event for generated scenarios on SQLite.

Run from the repository root (``docs/benchmarks-simulation.md`` has the figures)::

    .venv/bin/python -m benchmarks.simulation_bench [--agents 1000] [--sizes 10000,100000]
                                                    [--deadline-min 25] [--json FILE]

Each size runs in its own child process (so its peak RSS is its own): the scenario is
:func:`simulations.generator.workload` (``--agents`` agents, one long task each, ``size`` scheduled
wakes over a virtual timeline, every 10th agent following its predecessor's progress), played by the
real driver on a fresh SQLite world with the runtime's own Cerbos PDP (started by the child, stopped by
its PID on exit). Measured in the same child:

1. **baseline**: one decided compare-and-set write (``World.compare_and_set_state`` through the PDP and
   the gateway) on a separate SQLite world of the same PDP: the floor an event cannot beat;
2. **setup**: registering, activating, granting every agent and creating and claiming its task;
3. **play**: the timeline, checkpointed every 5 % of virtual time (wall time, log position, RSS). Cost
   per event is wall time / log events (every row the run loop wrote: wakes, claims, decisions, effects,
   receipts, controller steps); *growth* is the cost per event of the last fifth of the run over the
   first fifth, so a cost that grows with history shows within one run, whatever its size;
4. **metrics**: :func:`simulations.metrics.compute_metrics` over the whole log (one pass).

Peak memory is the child's peak RSS (``ru_maxrss``; the PDP is another process). A child that passes
``--deadline-min`` stops at its next checkpoint and reports how far it got (its cost per event is then
that of the part it played). Targets (issues 5 and 12): cost per event grows by at most 1.2x from the
smallest size to the largest (10k to 100k events at 1,000 agents); peak memory under 300 MB. This is a
benchmark, not a test: it never fails on a missed target.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.runloop_bench import open_book
from simulations.driver import ScenarioDriver, open_runtime
from simulations.generator import workload
from simulations.metrics import compute_metrics
from simulations.scenario import Scenario

TARGET_GROWTH = 1.2
TARGET_PEAK_MB = 300.0
CHECKPOINTS = 20


class Deadline(Exception):
    """The child ran out of its wall-time budget."""


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@dataclass
class Recorder:
    """Checkpoints of a run: (virtual fraction, wall seconds since play began, log position, peak RSS MB)."""

    started: float
    seq0: int
    read_seq: Any
    deadline: float
    points: list[tuple[float, float, int, float]] = field(default_factory=list)
    next_mark: float = 1 / CHECKPOINTS

    def __call__(self, fraction: float) -> None:
        now = time.perf_counter()
        late = now > self.deadline and fraction < 1.0
        if fraction < self.next_mark and fraction < 1.0 and not late:
            return
        self.points.append((fraction, now - self.started, int(self.read_seq()) - self.seq0, rss_mb()))
        while self.next_mark <= fraction:
            self.next_mark += 1 / CHECKPOINTS
        if late:
            raise Deadline  # checked on every call: the last point is where the budget ran out


class DecidedWrites:
    """The baseline's unit of work: one compare-and-set decided by the run's own PDP, on a world of its own
    in ``tmp`` (never the measured one), kept open so that it can be timed again and again."""

    def __init__(self, tmp: Path, runtime: Any) -> None:
        self.book = open_book(tmp, runtime.pdp, "baseline", 1)
        self.n = 0

    def write(self) -> None:
        self.book.world.compare_and_set_state("a000", "bench", self.n, self.n + 1)
        self.n += 1

    def close(self) -> None:
        self.book.close()


def baseline_write_s(tmp: Path, runtime: Any, writes: int = 300) -> float:
    """Seconds per decided write, over ``writes`` of them on a fresh world in ``tmp``."""
    baseline = DecidedWrites(tmp, runtime)
    try:
        t0 = time.perf_counter()
        for _ in range(writes):
            baseline.write()
        return (time.perf_counter() - t0) / writes
    finally:
        baseline.close()


def segment_costs(points: list[tuple[float, float, int, float]]) -> list[float]:
    """Seconds per log event between consecutive checkpoints (segments without events are skipped)."""
    out, prev = [], (0.0, 0.0, 0, 0.0)
    for p in points:
        if p[2] > prev[2]:
            out.append((p[1] - prev[1]) / (p[2] - prev[2]))
        prev = p
    return out


def child(agents: int, size: int, seed: int, deadline_min: float) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="pmw-sim-bench-"))
    scenario = Scenario.model_validate({**workload(agents, size, seed=seed), "base_dir": str(tmp)})
    runtime = open_runtime(scenario, tmp / "run")
    out: dict[str, Any] = {"agents": agents, "size": size, "seed": seed, "load_start": os.getloadavg()[0]}
    try:
        out["baseline_write_s"] = baseline_write_s(tmp, runtime)
        driver = ScenarioDriver(scenario, runtime.book, work_dir=tmp / "run" / "work")
        t0 = time.perf_counter()
        driver.setup()
        out["setup_s"] = time.perf_counter() - t0
        read = runtime.store.read
        rec = Recorder(time.perf_counter(), int(read.last_seq()), read.last_seq,
                       time.perf_counter() + deadline_min * 60 - out["setup_s"])
        driver.progress = rec
        try:
            run = driver.play()
            out["finished"] = True
        except Deadline:
            out["finished"] = False
            run = None
        finally:
            driver.runner.close()
        played = rec.points[-1] if rec.points else (0.0, 0.0, 0, rss_mb())
        out.update(play_s=played[1], log_events=played[2], virtual_fraction=played[0],
                   rounds=driver.totals.rounds, wakes=driver.totals.wakes, cycles=driver.totals.cycles,
                   checkpoints=[list(p) for p in rec.points])
        costs = segment_costs(rec.points)
        fifth = max(1, len(costs) // 5)
        out["cost_per_event_s"] = played[1] / played[2] if played[2] else None
        out["first_fifth_s"] = sum(costs[:fifth]) / fifth if costs else None
        out["last_fifth_s"] = sum(costs[-fifth:]) / fifth if costs else None
        out["growth_within_run"] = (out["last_fifth_s"] / out["first_fifth_s"]) if costs else None
        if run is not None:
            t0 = time.perf_counter()
            metrics, _ = compute_metrics(scenario, runtime.store, run.start_us, run.stop_us)
            out["metrics_s"] = time.perf_counter() - t0
            out["metrics_events"] = metrics.events
            out["figures"] = {"task_quality": metrics.task_quality, "wake_efficiency": metrics.wake_efficiency,
                              "state_conflict_rate": metrics.state_conflict_rate, **{
                                  k: metrics.counts[k] for k in ("wakes", "receipts", "acted", "no_action",
                                                                 "conflict_receipts", "suppressed",
                                                                 "wakes_with_two_receipts")},
                              "checks_hold": all(metrics.checks.values())}
        out["peak_rss_mb"] = rss_mb()
        out["db_mb"] = (tmp / "run" / "world.db").stat().st_size / 2**20
    finally:
        runtime.close()
        shutil.rmtree(tmp, ignore_errors=True)
    out["load_end"] = os.getloadavg()[0]
    return out


def run_child(agents: int, size: int, seed: int, deadline_min: float) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks.simulation_bench", "--child", str(size), "--agents", str(agents),
           "--seed", str(seed), "--deadline-min", str(deadline_min)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        stdout, _ = proc.communicate(timeout=deadline_min * 60 + 600)
    except subprocess.TimeoutExpired:
        proc.kill()  # by its PID (Popen.kill)
        proc.communicate()
        raise
    if proc.returncode != 0:
        raise RuntimeError(f"the child for size {size} failed with exit code {proc.returncode}")
    result: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    return result


def _f(x: float | None, spec: str = ".2f") -> str:
    return "n/a" if x is None else format(x, spec)


def report(results: list[dict[str, Any]]) -> None:
    for r in results:
        done = "finished" if r.get("finished") else f"STOPPED at {r['virtual_fraction']:.0%} of virtual time"
        base = r["baseline_write_s"]
        per = r["cost_per_event_s"]
        print(f"size {r['size']:>7} scheduled wakes, {r['agents']} agents ({done}):")
        print(f"  baseline decided write {base * 1e3:7.2f} ms   setup {r['setup_s']:6.1f} s   "
              f"play {r['play_s']:7.1f} s for {r['log_events']} log events ({r['wakes']} wakes, {r['cycles']} runs)")
        print(f"  cost per log event     {_f(per and per * 1e3)} ms = {_f(per and per / base)}x a decided write;  "
              f"first fifth {_f(r['first_fifth_s'] and r['first_fifth_s'] * 1e3)} ms, last fifth "
              f"{_f(r['last_fifth_s'] and r['last_fifth_s'] * 1e3)} ms: growth within the run "
              f"{_f(r['growth_within_run'])}x")
        if "metrics_s" in r:
            print(f"  metrics fold           {r['metrics_s']:.1f} s for {r['metrics_events']} events "
                  f"({r['metrics_s'] / max(1, r['metrics_events']) * 1e6:.0f} us/event); figures {r['figures']}")
        print(f"  peak RSS {r['peak_rss_mb']:.0f} MB (target < {TARGET_PEAK_MB:.0f}: "
              f"{'PASS' if r['peak_rss_mb'] < TARGET_PEAK_MB else 'MISS'});  world.db {r['db_mb']:.0f} MB;  "
              f"load {r['load_start']:.2f} -> {r['load_end']:.2f}")
    if len(results) >= 2 and all(r["cost_per_event_s"] for r in results):
        a, b = results[0], results[-1]
        # relative to each run's own baseline write, so a slower or faster machine moment cancels out
        ra, rb = a["cost_per_event_s"] / a["baseline_write_s"], b["cost_per_event_s"] / b["baseline_write_s"]
        growth = rb / ra
        print(f"cost per event, size {b['size']} vs {a['size']}: {b['cost_per_event_s'] / a['cost_per_event_s']:.2f}x "
              f"raw, {growth:.2f}x against each run's baseline write (target <= {TARGET_GROWTH}: "
              f"{'PASS' if growth <= TARGET_GROWTH else 'MISS'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--deadline-min", type=float, default=25.0, help="wall-time budget of each size")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.agents, args.child, args.seed, args.deadline_min)))
        return
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        results.append(run_child(args.agents, size, args.seed, args.deadline_min))
        report(results[-1:])
    print()
    report(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
