"""Where a large simulation's time goes: each phase timed, the play profiled and its self time split by area.

Run from the repository root (the figures are in ``docs/benchmarks-simulation.md``)::

    .venv/bin/python -m benchmarks.simulation_scale [--agents 1000] [--wakes 400] [--seed 7]
                                                    [--no-profile] [--json FILE] [--profile-out FILE]
                                                    [--against FILE]

The scenario is :func:`simulations.generator.workload` (``--agents`` workers, ``--wakes`` scheduled wakes),
played by the real driver on a fresh SQLite world with the runtime's own Cerbos PDP (started and stopped
by the runtime, by its PID). Phases, in wall seconds: **setup** (register, activate and grant every agent;
create and claim its task), **play** (the timeline; under ``cProfile`` unless ``--no-profile``: the
profiler adds its own overhead), **metrics** (one fold of the log) and **report** (``metrics.json``, ``events.jsonl``
and ``timeseries.csv`` in one pass over the log, ``report.md``/``.html``; no PNGs). The play's
self time is split by the code it was spent in (:data:`AREAS`: the projection, model validation, the
PDP client, the store, the run loop, the controller, the simulator's own files ...), so "where the time
goes" is a measured table, not a guess, and the functions with the most self time are listed with their
shares (``--profile-out`` keeps the whole profile for ``pstats``). The target of issue 15 (1,000 agents
and 100k events in under 10 minutes) is printed against the measured cost per event, extrapolated
linearly (the cost per event does not grow much within a run: ``benchmarks.simulation_bench`` measures that growth).

**Baseline in the same run**: 300 decided compare-and-set writes (``World.compare_and_set_state``, through
the same PDP, on a second SQLite world) are timed before the setup and again after the play, and the cost
per event is also printed as a multiple of their mean, so a faster or slower moment of a shared machine
cancels out. ``--against FILE`` (the ``--json`` of an earlier run, e.g. on the code before a change) prints
each figure of this run as a ratio of that one, raw and against each run's own baseline write.

This is a benchmark: it never fails on a missed target. ``tests/simulations/test_scale_bench.py`` runs a
CI-sized variant.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.play_windows import PlayWindows, growth
from benchmarks.simulation_bench import DecidedWrites, baseline_write_s
from engine.settings import Settings
from simulations.driver import ScenarioDriver, open_runtime
from simulations.generator import workload
from simulations.metrics import compute_metrics
from simulations.report import write_report
from simulations.scenario import Scenario

TARGET_EVENTS = 100_000
TARGET_S = 600.0
#: (area, path fragments) in order: the first fragment a function's file contains names its area.
AREAS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("simulator (simulations/)", ("/simulations/",)),
    ("projection (engine/world/projection, store/reads)", ("engine/world/projection", "engine/projection",
                                                           "store/reads")),
    ("model validation (pydantic, engine/models)", ("pydantic", "engine/models/")),
    ("PDP client (engine/policy, grpc, cerbos)", ("engine/policy/", "grpc", "cerbos")),
    ("store and SQL (store/, sqlalchemy, sqlite3: reads and writes)", ("store/", "sqlalchemy", "sqlite3")),
    ("run loop and worker (engine/runloop, engine/protocol)", ("engine/runloop/", "engine/protocol/")),
    ("controller (engine/controller, durable_rules)", ("engine/controller/", "durable")),
    ("world commands (engine/world, engine/commands)", ("engine/world/", "engine/commands/")),
    ("json", ("json/",)),
    ("waiting on locks and threads", ("threading", "_thread", "queue")),
)
OTHER = "other (stdlib, everything else)"


def area_of(filename: str, function: str) -> str:
    """The area a profiled function belongs to (``~`` builtins are named by the function)."""
    where = filename if filename != "~" else function
    for area, fragments in AREAS:
        if any(f in where for f in fragments):
            return area
    return OTHER


def split_by_area(stats: pstats.Stats) -> dict[str, float]:
    """Self (``tottime``) seconds per area, largest first."""
    totals: dict[str, float] = {}
    raw: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    for (filename, _, function), (_, _, tottime, _, _) in raw.items():
        area = area_of(filename, function)
        totals[area] = totals.get(area, 0.0) + tottime
    return dict(sorted(totals.items(), key=lambda kv: -kv[1]))


def top_functions(stats: pstats.Stats, n: int = 15) -> list[tuple[str, float, float]]:
    """The ``n`` functions with the most self time: (``file:line(function)``, self s, cumulative s)."""
    raw: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    rows = sorted(raw.items(), key=lambda kv: -kv[1][2])[:n]
    return [(f"{Path(f).name}:{line}({fn})" if f != "~" else fn, v[2], v[3]) for (f, line, fn), v in rows]


def _baseline(folder: Path, runtime: Any, writes: int) -> float:
    folder.mkdir()
    return baseline_write_s(folder, runtime, writes)


def measure(agents: int, wakes: int, seed: int = 7, *, profile: bool = True, settings: Settings | None = None,
            profile_out: Path | None = None, baseline_writes: int = 300, window_s: float | None = None,
            probe_writes: int = 30) -> dict[str, Any]:
    """Run one generated workload and return its phase times, event count, the decided-write baseline
    (``baseline_writes`` writes before the setup and again after the play; 0: none) and (with ``profile``)
    the play's self time by area and its top functions (``profile_out``: the whole profile, for
    ``pstats``). ``window_s``: also cut the play into windows of that many wall seconds, each with
    ``probe_writes`` decided writes timed at its end on a world of its own (:mod:`benchmarks.play_windows`;
    the probes' time is taken out of ``play_s``). Everything else it writes is in a temporary folder,
    removed at the end. ``settings`` may name a running PDP (the tests' shared one); by default the runtime
    starts its own."""
    tmp = Path(tempfile.mkdtemp(prefix="pmw-sim-scale-"))
    scenario = Scenario.model_validate({**workload(agents, wakes, seed=seed), "base_dir": str(tmp)})
    out: dict[str, Any] = {"agents": agents, "wakes": wakes, "seed": seed}
    runtime = open_runtime(scenario, tmp / "run", settings=settings)
    probe: DecidedWrites | None = None
    try:
        windows: PlayWindows | None = None
        if window_s is not None:
            (tmp / "probe").mkdir()
            probe = DecidedWrites(tmp / "probe", runtime)
            windows = PlayWindows(runtime.store.read.last_seq, probe.write, window_s=window_s,
                                  probe_writes=probe_writes)
        driver = ScenarioDriver(scenario, runtime.book, work_dir=tmp / "run" / "work", progress=windows)
        base = [_baseline(tmp / "base0", runtime, baseline_writes)] if baseline_writes else []
        t0 = time.perf_counter()
        driver.setup()
        t1 = time.perf_counter()
        profiler = cProfile.Profile() if profile else None
        try:
            if profiler is not None:
                profiler.enable()
            if windows is not None:
                windows.start()
            run = driver.play()
            if windows is not None:
                windows.close()
        finally:
            if profiler is not None:
                profiler.disable()
            driver.runner.close()
        t2 = time.perf_counter()
        probed = windows.probe_s if windows is not None else 0.0
        metrics, series = compute_metrics(scenario, runtime.store, run.start_us, run.stop_us)
        t3 = time.perf_counter()
        write_report(tmp / "run", scenario, metrics, series, runtime.store, plots=False)
        t4 = time.perf_counter()
        if baseline_writes:
            base.append(_baseline(tmp / "base1", runtime, baseline_writes))
            out["baseline_write_s"] = sum(base) / len(base)
            out["baseline_writes_s"] = base
        out.update(setup_s=t1 - t0, play_s=t2 - t1 - probed, metrics_s=t3 - t2, report_s=t4 - t3, events=metrics.events,
                   runs=metrics.counts["receipts"], checks_hold=all(metrics.checks.values()),
                   profiled=profile)
        if windows is not None:
            out["windows"] = windows.as_dicts()
            out["probe_s"] = windows.probe_s
            out["probe_writes"] = probe_writes
            out["growth"] = growth(windows.windows)
        if profiler is not None:
            stats = pstats.Stats(profiler)
            out["play_by_area_s"] = split_by_area(stats)
            out["play_top_functions"] = top_functions(stats)
            if profile_out is not None:
                stats.dump_stats(str(profile_out))
    finally:
        if probe is not None:
            probe.close()
        runtime.close()
        shutil.rmtree(tmp, ignore_errors=True)
    total = out["setup_s"] + out["play_s"] + out["metrics_s"] + out["report_s"]
    out["total_s"] = total
    out["per_event_ms"] = 1000 * total / max(1, out["events"])
    out["play_per_event_ms"] = 1000 * out["play_s"] / max(1, out["events"])
    if "baseline_write_s" in out:
        out["per_event_in_writes"] = out["per_event_ms"] / 1000 / out["baseline_write_s"]
    out["target_extrapolated_s"] = out["setup_s"] * 1000 / agents + (total - out["setup_s"]) / max(
        1, out["events"]) * TARGET_EVENTS
    return out


def report(result: dict[str, Any], against: dict[str, Any] | None = None) -> str:
    """The measurement as Markdown tables (``against``: an earlier run's result, printed as ratios)."""
    lines = [f"{result['agents']} agents, {result['wakes']} scheduled wakes, seed {result['seed']}: "
             f"{result['events']} events, {result['runs']} runs (checks hold: {result['checks_hold']})", "",
             "| phase | wall s | share |", "| --- | --- | --- |"]
    for phase in ("setup", "play", "metrics", "report"):
        lines.append(f"| {phase} | {result[phase + '_s']:.1f} | {result[phase + '_s'] / result['total_s']:.0%} |")
    lines += ["", f"{result['per_event_ms']:.2f} ms per event in all ({result['play_per_event_ms']:.2f} ms of play); "
              f"1,000 agents and {TARGET_EVENTS:,} events extrapolate to "
              f"{result['target_extrapolated_s'] / 60:.1f} min (target {TARGET_S / 60:.0f} min"
              f"{', play under cProfile' if result['profiled'] else ''})."]
    if "baseline_write_s" in result:
        writes = ", ".join(f"{b * 1e3:.2f}" for b in result["baseline_writes_s"])
        lines += ["", f"Baseline in this run: one decided write {result['baseline_write_s'] * 1e3:.2f} ms "
                  f"(before the setup, after the play: {writes} ms); one event costs "
                  f"{result['per_event_in_writes']:.2f} decided writes."]
    if result.get("windows"):
        lines += ["", f"The play in windows of wall time (each with {result['probe_writes']} decided writes timed at "
                  "its end, on a world of its own; probes excluded from the play):", "",
                  "| window ends (s) | events | ms per event | decided write ms | per event, in that window's writes |",
                  "| --- | --- | --- | --- | --- |"]
        lines += [f"| {w['end_s']:.0f} | {w['events']} | {w['per_event_ms']:.2f} | {w['write_s'] * 1e3:.2f} | "
                  f"{w['per_event_in_writes']:.2f} |" for w in result["windows"]]
        g = result.get("growth")
        if g is not None:
            lines += ["", f"Growth within the play (median of the last {g['compared']:.0f} windows over the first "
                      f"{g['compared']:.0f}, after one warm-up window): {g['raw']:.2f}x per event raw, "
                      f"{g['in_writes']:.2f}x in each window's decided writes; the decided write itself "
                      f"moved {g['write_drift']:.2f}x."]
    if against is not None:
        lines += ["", "| against the earlier run | earlier | now | now / earlier |", "| --- | --- | --- | --- |"]
        for name, key in (("play s", "play_s"), ("setup s", "setup_s"), ("ms per event", "per_event_ms"),
                          ("ms of play per event", "play_per_event_ms"),
                          ("per event, in decided writes", "per_event_in_writes"),
                          ("decided write ms", "baseline_write_s")):
            if key in against and key in result:
                scale = 1e3 if key == "baseline_write_s" else 1.0
                a, b = against[key] * scale, result[key] * scale
                lines.append(f"| {name} | {a:.2f} | {b:.2f} | {b / a:.2f}x |")
    by_area = result.get("play_by_area_s")
    if by_area:
        play = sum(by_area.values())
        lines += ["", "| where the play's self time goes | s | share |", "| --- | --- | --- |"]
        lines += [f"| {area} | {s:.1f} | {s / play:.0%} |" for area, s in by_area.items()]
        lines += ["", "| function (most self time) | self s | share | cumulative s |", "| --- | --- | --- | --- |"]
        lines += [f"| `{name}` | {own:.2f} | {own / play:.0%} | {cum:.2f} |"
                  for name, own, cum in result.get("play_top_functions", [])]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--wakes", type=int, default=400)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--json", type=Path, help="write every figure as JSON")
    parser.add_argument("--profile-out", type=Path, help="write the play's whole profile (pstats format)")
    parser.add_argument("--against", type=Path, help="an earlier run's --json: print this run's ratios to it")
    parser.add_argument("--baseline-writes", type=int, default=300,
                        help="decided writes timed before the setup and after the play (0: no baseline)")
    parser.add_argument("--window-s", type=float, default=60.0,
                        help="cut the play into windows of this many wall seconds, each probed (0: no windows)")
    parser.add_argument("--probe-writes", type=int, default=30, help="decided writes timed at each window's end")
    args = parser.parse_args(argv)
    against = json.loads(args.against.read_text(encoding="utf-8")) if args.against else None
    result = measure(args.agents, args.wakes, args.seed, profile=not args.no_profile, profile_out=args.profile_out,
                     baseline_writes=args.baseline_writes, window_s=args.window_s or None,
                     probe_writes=args.probe_writes)
    print(report(result, against))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
