"""What a run leaves in its output folder: ``metrics.json``, ``events.jsonl``, ``report.md``, ``report.html``
and the plots (matplotlib PNG, drawn with matplotlib alone):

* ``topology.png``: the collaboration topology at key moments (agents on a circle; info edges as
  arrows; each room as a square joined to its members);
* ``wakes.png``: wakes issued, runs that acted, and suppressions (by reason) per time bucket;
* ``conflicts.png``: conflicts opened and resolved, cumulative;
* ``duplicates.png``: duplicate work per time bucket.

Everything written is a function of the run's log, so two runs of the same file and seed write the same
``metrics.json`` and ``events.jsonl`` (the PNGs carry no timestamps either: matplotlib's metadata is cleared).
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.ticker import MaxNLocator

from simulations.metrics import Metrics, Series, TopologyFrame
from simulations.scenario import Bounds, Scenario
from store import Store

PNG_META: dict[str, Any] = {"Software": None}
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


def write_events(store: Store, path: Path) -> int:
    """The event log as JSON lines, in log order; returns the number of events."""
    after, n = 0, 0
    with path.open("w", encoding="utf-8") as out:
        while rows := store.read.events(after, 2000):
            for r in rows:
                out.write(json.dumps({k: r[k] for k in sorted(r)}, sort_keys=True, separators=(",", ":")) + "\n")
            after, n = int(rows[-1]["seq"]), n + len(rows)
    return n


def check_expectations(scenario: Scenario, metrics: Metrics) -> dict[str, bool]:
    """Each ``expect`` of the scenario against the run's figures (a metric, a count or a check)."""
    figures: dict[str, Any] = {**metrics.model_dump(), **metrics.counts, **metrics.checks}
    results: dict[str, bool] = {}
    for name, want in scenario.expect.items():
        got = figures.get(name)
        if not isinstance(got, int | float) or got is None:
            results[name] = False
        elif isinstance(want, Bounds):
            results[name] = (want.min is None or got >= want.min) and (want.max is None or got <= want.max)
        else:
            results[name] = math.isclose(float(got), float(want), rel_tol=1e-9, abs_tol=1e-9)
    return results


def write_report(out: Path, scenario: Scenario, metrics: Metrics, series: Series, store: Store, *,
                 plots: bool = True) -> dict[str, bool]:
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
    write_events(store, out / "events.jsonl")
    if plots:
        plot_topology(series.frames, out / "topology.png")
        plot_wakes(series, out / "wakes.png")
        plot_conflicts(series, out / "conflicts.png")
        plot_duplicates(series, out / "duplicates.png")
    (out / "report.md").write_text(_markdown(scenario, metrics, series, expectations), encoding="utf-8")
    (out / "report.html").write_text(_html(scenario, metrics, series, expectations), encoding="utf-8")
    return expectations


# -- plots -------------------------------------------------------------------------------------------

def _save(fig: Any, path: Path) -> None:
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata=PNG_META)
    plt.close(fig)


def _times(series: Series) -> list[float]:
    return [i * series.bucket_s for i in range(series.buckets)]


def plot_topology(frames: Sequence[TopologyFrame], path: Path) -> None:
    cols = min(3, max(1, len(frames)))
    rows = -(-len(frames) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 4.0 * rows), squeeze=False)
    for ax in axes.flat:
        ax.set_axis_off()
    for ax, frame in zip(axes.flat, frames, strict=False):
        _draw_frame(ax, frame)
    fig.suptitle("Collaboration topology at key moments (arrows: info edges; squares: rooms)")
    _save(fig, path)


def _draw_frame(ax: Axes, frame: TopologyFrame) -> None:
    n = max(1, len(frame.agents))
    big = n > 40
    pos = {a: (math.cos(2 * math.pi * i / n + math.pi / 2), math.sin(2 * math.pi * i / n + math.pi / 2))
           for i, a in enumerate(frame.agents)}
    for src, dst, _ in frame.edges:
        if src in pos and dst in pos:
            # from node edge to node edge (the node markers are 30 pt wide), so the head is visible
            shrink = 1 if big else 17
            ax.annotate("", xy=pos[dst], xytext=pos[src], zorder=6,
                        arrowprops={"arrowstyle": "-|>", "color": "#1f77b4", "lw": 1.4, "mutation_scale": 14,
                                    "shrinkA": shrink, "shrinkB": shrink})
    for j, (room, members) in enumerate(sorted(frame.rooms.items())):
        pts = [pos[m] for m in members if m in pos]
        if not pts:
            continue
        cx, cy = sum(p[0] for p in pts) / len(pts) * 0.45, sum(p[1] for p in pts) / len(pts) * 0.45 - 0.1 * j
        for px, py in pts:
            ax.plot([cx, px], [cy, py], color="#d62728", lw=1.0, ls="--")
        ax.scatter([cx], [cy], marker="s", s=160, color="#d62728", zorder=3)
        ax.text(cx, cy - 0.14, room, ha="center", va="top", fontsize=7, color="#d62728")
    xs, ys = [p[0] for p in pos.values()], [p[1] for p in pos.values()]
    ax.scatter(xs, ys, s=12 if big else 900, color="#2ca02c", zorder=4)
    if not big:
        for a, (x, y) in pos.items():
            ax.text(x, y, a, ha="center", va="center", fontsize=7, zorder=5)
    ax.set_xlim(-1.35, 1.35)
    ax.set_ylim(-1.35, 1.35)
    ax.set_aspect("equal")
    ax.set_title(f"t = {frame.at_s:g} s\n{frame.label}", fontsize=8)


def plot_wakes(series: Series, path: Path) -> None:
    t = _times(series)
    width = series.bucket_s * 0.4
    fig, ax = plt.subplots(figsize=(8, 3.6))
    # each bucket [t, t + bucket): wakes in its first half, suppressions in its second, acted runs at its middle
    ax.bar([x + series.bucket_s * 0.1 for x in t], series.wakes, width=width, label="wakes issued",
           color="#1f77b4", align="edge")
    ax.bar([x + series.bucket_s * 0.5 for x in t], series.suppressed, width=width,
           label="wake candidates suppressed", color="#ff7f0e", align="edge")
    acted = [(x + series.bucket_s * 0.5, n) for x, n in zip(t, series.acted, strict=True) if n]
    ax.plot([x for x, _ in acted], [n for _, n in acted], color="#2ca02c", marker="o", ls="none", markersize=6,
            label="runs that acted")
    reasons = ", ".join(f"{k}: {v}" for k, v in series.suppress_reasons.items()) or "none"
    ax.set_title(f"Wake rate and suppressions per {series.bucket_s:g} s (suppressed by reason: {reasons})",
                 fontsize=9)
    ax.set_xlabel("virtual time (s)")
    ax.set_ylabel("count")
    _counts_axis(ax, max([*series.wakes, *series.suppressed, *series.acted], default=0))
    ax.set_xlim(0, series.buckets * series.bucket_s)
    ax.legend(fontsize=8)
    _save(fig, path)


def _cumulative(values: Sequence[int]) -> list[int]:
    total, out = 0, []
    for v in values:
        total += v
        out.append(total)
    return out


def _counts_axis(ax: Axes, top: int) -> None:
    """Whole-number ticks from 0, with headroom (a count axis never shows -0.04 or 0.2 conflicts)."""
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, max(1, top) * 1.15)


def _empty_note(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=10, color="#666")


def plot_conflicts(series: Series, path: Path) -> None:
    t = _times(series)
    opened, resolved = _cumulative(series.conflicts_opened), _cumulative(series.conflicts_resolved)
    fig, ax = plt.subplots(figsize=(8, 3.2))
    # opened drawn wide and resolved on top of it: when a conflict is resolved within its bucket the two
    # lines coincide, and both stay visible
    ax.step(t, opened, where="post", label="conflicts opened", color="#d62728", lw=4, alpha=0.45)
    ax.step(t, resolved, where="post", label="conflicts resolved", color="#2ca02c", lw=1.6, ls="--")
    total_open = opened[-1] if opened else 0
    total_resolved = resolved[-1] if resolved else 0
    ax.set_title(f"Conflicts opened and resolved (cumulative, per {series.bucket_s:g} s): {total_open} opened, "
                 f"{total_resolved} resolved", fontsize=9)
    ax.set_xlabel("virtual time (s)")
    ax.set_ylabel("conflicts")
    _counts_axis(ax, max([*opened, *resolved], default=0))
    if total_open == 0:
        _empty_note(ax, "no conflict in this run")
    ax.legend(fontsize=8, loc="upper left")
    _save(fig, path)


def plot_duplicates(series: Series, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.bar(_times(series), series.duplicate_work, width=series.bucket_s * 0.8, color="#9467bd", align="edge")
    total = sum(series.duplicate_work)
    ax.set_title(f"Duplicate work per {series.bucket_s:g} s (a step, claim or answer done again): "
                 f"{total} in all", fontsize=9)
    ax.set_xlabel("virtual time (s)")
    ax.set_ylabel("work units redone")
    _counts_axis(ax, max(series.duplicate_work, default=0))
    ax.set_xlim(0, series.buckets * series.bucket_s)
    if total == 0:
        _empty_note(ax, "no work was done twice")
    _save(fig, path)


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


def _markdown(s: Scenario, m: Metrics, series: Series, expectations: dict[str, bool]) -> str:
    lines = [f"# Simulation report: {s.name}", "", s.description.strip(), "",
             f"Seed {s.seed}; {m.duration_s:g} s of virtual time; {m.events} events; {len(s.agents)} agents.", "",
             "| metric | value | definition |", "| --- | --- | --- |"]
    lines += [f"| {n} | {v} | {d} |" for n, v, d in _rows(m)]
    lines += ["", "## Counts", "", "| count | value |", "| --- | --- |"]
    lines += [f"| {k} | {v} |" for k, v in m.counts.items()]
    lines += ["", "## Checks", ""] + [f"- {k}: {'yes' if v else 'NO'}" for k, v in m.checks.items()]
    if expectations:
        lines += ["", "## Expectations of the scenario", ""]
        lines += [f"- {k}: {'met' if v else 'NOT MET'}" for k, v in expectations.items()]
    lines += ["", "## Plots", "", "![topology](topology.png)", "", "![wakes](wakes.png)", "",
              "![conflicts](conflicts.png)", "", "![duplicates](duplicates.png)", "",
              "The event log is `events.jsonl`; the figures are in `metrics.json`.", ""]
    return "\n".join(lines)


def _html(s: Scenario, m: Metrics, series: Series, expectations: dict[str, bool]) -> str:
    e = html.escape
    metric_rows = "".join(f"<tr><td>{e(n)}</td><td class=num>{e(v)}</td><td>{e(d)}</td></tr>" for n, v, d in _rows(m))
    count_rows = "".join(f"<tr><td>{e(k)}</td><td class=num>{v}</td></tr>" for k, v in m.counts.items())
    checks = "".join(f"<li class={'ok' if v else 'bad'}>{e(k)}: {'yes' if v else 'NO'}</li>"
                     for k, v in m.checks.items())
    expects = "".join(f"<li class={'ok' if v else 'bad'}>{e(k)}: {'met' if v else 'NOT MET'}</li>"
                      for k, v in expectations.items())
    plots = "".join(f"<figure><img src='{name}.png' alt='{name}'><figcaption>{e(cap)}</figcaption></figure>"
                    for name, cap in (("topology", "The topology at key moments"),
                                      ("wakes", "Wakes issued, runs that acted, suppressions"),
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


__all__ = ["DEFINITIONS", "check_expectations", "plot_conflicts", "plot_duplicates", "plot_topology", "plot_wakes",
           "write_events", "write_report"]
