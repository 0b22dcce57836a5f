"""What a run leaves in its output folder: ``metrics.json``, ``events.jsonl``, ``timeseries.csv`` (one tidy
row per event: :mod:`simulations.timeseries`), ``report.md``, ``report.html`` and the plots
(:mod:`simulations.plots`: ``topology.png``, ``wakes.png``, ``conflicts.png``, ``duplicates.png``, faults
marked on every time axis).

Everything written is a function of the run's log, so two runs of the same file and seed write the same
``metrics.json``, ``events.jsonl`` and ``timeseries.csv`` (the PNGs carry no timestamps either: matplotlib's
metadata is cleared). The log is read once for ``events.jsonl`` and ``timeseries.csv`` together.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from simulations.metrics import Metrics, Series
from simulations.plots import PNG_META, plot_conflicts, plot_duplicates, plot_topology, plot_wakes
from simulations.scenario import Scenario
from simulations.timeseries import FILE_NAME as TIMESERIES_FILE
from simulations.timeseries import TimeseriesWriter
from store import Store

DEFINITIONS = {
    "task_quality": "declared tasks completed with every step committed once, in order / declared tasks",
    "continuation_fidelity": "interruptions after which the agent's next run acted / interruptions",
    "coordination_latency_s": "mean virtual seconds from a contest to its resolution",
    "duplicate_work_ratio": "work units done again / work units",
    "state_conflict_rate": "refused writes (conflict receipts, stale writes) / write attempts",
    "failure_propagation": "failed runs followed in their chain by another agent's failed run / failed runs",
    "context_cost_bytes": "bytes of the projections agents were shown (traces)",
    "context_bytes_per_wake": "context_cost_bytes / runs",
    "wake_efficiency": "runs that acted / runs",
    "topology_mutation_rate": "room and edge changes per virtual minute",
    "recovery_success": "faults recovered from / faults injected",
    "unauthorized_action_rate": "agent actions outside the actor's capabilities / agent actions",
    "duplicate_side_effect_rate": "side effects applied again for the same wake key and effect / side effects",
}


def write_events(store: Store, path: Path, timeseries: TimeseriesWriter | None = None) -> int:
    """The event log as JSON lines, in log order (and, with ``timeseries``, its tidy row per event in the
    same pass); returns the number of events."""
    after, n = 0, 0
    with path.open("w", encoding="utf-8") as out:
        while rows := store.read.events(after, 2000):
            for r in rows:
                out.write(json.dumps({k: r[k] for k in sorted(r)}, sort_keys=True, separators=(",", ":")) + "\n")
                if timeseries is not None:
                    timeseries.write(r)
            after, n = int(rows[-1]["seq"]), n + len(rows)
    return n


def check_expectations(scenario: Scenario, metrics: Metrics) -> dict[str, bool | None]:
    """Each ``expect`` of the scenario against the run's figures (a metric, a count or a check): True met,
    False not met, None n/a (the figure does not apply to this run: ``recovery_success`` with nothing
    injected), as :func:`simulations.results.expectation_status` reads them."""
    from simulations.results import expectation_status

    return {name: None if status == "n/a" else status == "met"
            for name, status in expectation_status(scenario, metrics).items()}


def _verdict(value: bool | None) -> str:
    return "n/a" if value is None else "met" if value else "NOT MET"


def write_report(out: Path, scenario: Scenario, metrics: Metrics, series: Series, store: Store, *,
                 plots: bool = True) -> dict[str, bool | None]:
    """Write every output file into ``out`` (``plots=False``: all but the PNGs, for quick test runs);
    returns the expectation results."""
    out.mkdir(parents=True, exist_ok=True)
    expectations = check_expectations(scenario, metrics)
    body = {"metrics": metrics.model_dump(), "expectations": expectations,
            "series": {"bucket_s": series.bucket_s, "wakes": series.wakes, "acted": series.acted,
                       "suppressed": series.suppressed, "conflicts_opened": series.conflicts_opened,
                       "conflicts_resolved": series.conflicts_resolved, "duplicate_work": series.duplicate_work,
                       "suppress_reasons": series.suppress_reasons}}
    (out / "metrics.json").write_text(json.dumps(body, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    with TimeseriesWriter(out / TIMESERIES_FILE, series.start_us, series.roles) as timeseries:
        write_events(store, out / "events.jsonl", timeseries)
    if plots:
        plot_topology(series.frames, out / "topology.png", series.roles)
        plot_wakes(series, out / "wakes.png")
        plot_conflicts(series, out / "conflicts.png")
        plot_duplicates(series, out / "duplicates.png")
    (out / "report.md").write_text(_markdown(scenario, metrics, series, expectations), encoding="utf-8")
    (out / "report.html").write_text(_html(scenario, metrics, series, expectations), encoding="utf-8")
    return expectations


# -- text --------------------------------------------------------------------------------------------

def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


WHY_NOT_APPLICABLE = {"task_quality": "no declared task", "continuation_fidelity": "no interruption",
                      "coordination_latency_s": "no conflict resolved", "wake_efficiency": "no run",
                      "recovery_success": "no fault injected"}


def _rows(metrics: Metrics) -> list[tuple[str, str, str]]:
    data = metrics.model_dump()
    return [(name, _fmt(data[name]) if data[name] is not None or name not in WHY_NOT_APPLICABLE
             else f"n/a ({WHY_NOT_APPLICABLE[name]})", meaning) for name, meaning in DEFINITIONS.items()]


def _markdown(s: Scenario, m: Metrics, series: Series, expectations: dict[str, bool | None]) -> str:
    lines = [f"# Simulation report: {s.name}", "", s.description.strip(), "",
             f"Seed {s.seed}; {m.duration_s:g} s of virtual time; {m.events} events; {len(s.agents)} agents.", "",
             "| metric | value | definition |", "| --- | --- | --- |"]
    lines += [f"| {n} | {v} | {d} |" for n, v, d in _rows(m)]
    lines += ["", "## Counts", "", "| count | value |", "| --- | --- |"]
    lines += [f"| {k} | {v} |" for k, v in m.counts.items()]
    lines += ["", "## Checks", ""] + [f"- {k}: {'yes' if v else 'NO'}" for k, v in m.checks.items()]
    if expectations:
        lines += ["", "## Expectations of the scenario", ""]
        lines += [f"- {k}: {_verdict(v)}" for k, v in expectations.items()]
    lines += ["", "## Plots", "", "![topology](topology.png)", "", "![wakes](wakes.png)", "",
              "![conflicts](conflicts.png)", "", "![duplicates](duplicates.png)", "",
              "The event log is `events.jsonl`, one tidy row per event is `timeseries.csv` "
              "(`simulations.timeseries.load`); the figures are in `metrics.json`.", ""]
    return "\n".join(lines)


def _html(s: Scenario, m: Metrics, series: Series, expectations: dict[str, bool | None]) -> str:
    e = html.escape
    metric_rows = "".join(f"<tr><td>{e(n)}</td><td class=num>{e(v)}</td><td>{e(d)}</td></tr>" for n, v, d in _rows(m))
    count_rows = "".join(f"<tr><td>{e(k)}</td><td class=num>{v}</td></tr>" for k, v in m.counts.items())
    checks = "".join(f"<li class={'ok' if v else 'bad'}>{e(k)}: {'yes' if v else 'NO'}</li>"
                     for k, v in m.checks.items())
    expects = "".join(f"<li class={'ok' if v or v is None else 'bad'}>{e(k)}: {_verdict(v)}</li>"
                      for k, v in expectations.items())
    plots = "".join(f"<figure><img src='{name}.png' alt='{name}'><figcaption>{e(cap)}</figcaption></figure>"
                    for name, cap in (("topology", "The topology at key moments"),
                                      ("wakes", "Wakes issued, runs that acted, suppressions by reason; "
                                                "per agent below (faults marked)"),
                                      ("conflicts", "Conflicts opened and resolved"),
                                      ("duplicates", "Duplicate work")))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>PMW simulation: {e(s.name)}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 1000px; margin: 2em auto; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }} td, th {{ border: 1px solid #ccc; padding: 4px 8px; }}
th {{ background: #f3f3f3; text-align: left; }} td.num {{ text-align: right; font-variant-numeric: tabular-nums; }}
li.ok {{ color: #1a7f37; }} li.bad {{ color: #b42318; font-weight: bold; }}
figure {{ margin: 1.5em 0; }} img {{ max-width: 100%; border: 1px solid #eee; }}
.cols {{ display: flex; gap: 2em; flex-wrap: wrap; }}
</style></head><body>
<h1>Simulation: {e(s.name)}</h1>
<p>{e(s.description.strip())}</p>
<p>Seed {s.seed}; {m.duration_s:g} s of virtual time; {m.events} events; {len(s.agents)} agents.</p>
<h2>Metrics</h2>
<table><tr><th>metric</th><th>value</th><th>definition</th></tr>{metric_rows}</table>
<div class=cols><div><h2>Checks</h2><ul>{checks}</ul>
{"<h2>Expectations</h2><ul>" + expects + "</ul>" if expects else ""}</div>
<div><h2>Counts</h2><table>{count_rows}</table></div></div>
<h2>Plots</h2>{plots}
<p>The event log is <code>events.jsonl</code>; the figures are in <code>metrics.json</code>.</p>
</body></html>
"""


__all__ = ["DEFINITIONS", "PNG_META", "check_expectations", "plot_conflicts", "plot_duplicates", "plot_topology",
           "plot_wakes", "write_events", "write_report"]
