"""The deployment fault harness as a benchmark: ``tests/multihost/test_deployment_faults.py`` (PostgreSQL on a
hub, 3 worker hosts with 2 supervised PDPs each, 2 controller hosts; SIGKILL the leader mid-step, SIGSTOP it
past its lease then SIGCONT, cut a worker host's link while it holds leases, SIGKILL a PDP replica) run with
``--reps`` repetitions of every fault, then each fault's takeover times summarised: n, min, median, p90, max
(the issue's goal: under 5 s). The harness's own checks (every wake one receipt, no step twice or by a stale
generation, effects once, ``fold == state``) run after every fault; a failed check fails the run (exit 1).

``python -m benchmarks.fault_harness [--reps 5] [--seed N] [--json FILE]``. The CI-sized variant is the test
itself (2 repetitions, in the suite). Needs the PostgreSQL server binaries and Cerbos (as the test does).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TEST = "tests/multihost/test_deployment_faults.py"
GOAL_S = 5.0


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank: the smallest value with at least ``q`` of them at or
    below it)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def summarise(takeover_s: Mapping[str, Sequence[float]]) -> dict[str, dict[str, float]]:
    """Each fault's takeover times as n, min, median, p90 and max (faults without a takeover left out)."""
    return {fault: {"n": len(v), "min": min(v), "median": quantile(v, 0.5), "p90": quantile(v, 0.9),
                    "max": max(v)} for fault, v in sorted(takeover_s.items()) if v}


def table(report: Mapping[str, Any]) -> str:
    """The summary as the benchmark prints it."""
    rows = [f"fault harness: seed {report['seed']}, {report['reps']} repetitions, {report['wakes']} wakes, "
            f"{report['generations']} lease generations, namespaces: {report['namespaces']}",
            f"{'fault':<12} {'n':>3} {'min s':>7} {'median s':>9} {'p90 s':>7} {'max s':>7}  goal < {GOAL_S:g} s"]
    for fault, s in summarise(report["takeover_s"]).items():
        verdict = "met" if s["max"] < GOAL_S else "MISSED"
        rows.append(f"{fault:<12} {int(s['n']):>3} {s['min']:>7.2f} {s['median']:>9.2f} {s['p90']:>7.2f} "
                    f"{s['max']:>7.2f}  {verdict}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5, help="repetitions of every fault")
    parser.add_argument("--seed", type=int, default=None, help="the harness's seed (default: a fresh one)")
    parser.add_argument("--json", type=Path, default=None, help="also write the report and summary here")
    args = parser.parse_args(argv)
    if not 1 <= args.reps <= 100:
        parser.error("--reps: from 1 to 100")
    with tempfile.TemporaryDirectory(prefix="pmw-faults-") as tmp:
        report_file = Path(tmp) / "report.json"
        env = dict(os.environ, PMW_FAULT_REPS=str(args.reps), PMW_FAULT_REPORT=str(report_file), CI="true")
        if args.seed is not None:
            env["PMW_FAULT_SEED"] = str(args.seed)
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", TEST],
                              cwd=REPO, env=env, timeout=600 + 300 * args.reps, check=False)
        if done.returncode != 0 or not report_file.exists():
            print(f"fault harness: the run failed (pytest exit {done.returncode}); see its output above")
            return 1
        report = json.loads(report_file.read_text())
    print(table(report))
    if args.json is not None:
        args.json.write_text(json.dumps({**report, "summary": summarise(report["takeover_s"])}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
