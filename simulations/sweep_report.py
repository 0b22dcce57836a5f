"""What a batch (sweep, grid, replicates, comparison) writes: ``<stem>.md``/``.csv``/``.json``/``.html``,
``<stem>.png`` and ``<stem>_runs.csv``.

* The table has one row per shown figure and one column per variant: the mean over the variant's seeds,
  with ``± half-width`` of the 95 % interval when there are two seeds or more, ``n/a`` where the figure does
  not apply to any run (a run where it does not apply is left out of the mean, never read as 0), and a
  delta column (last variant minus first, with Welch's interval). Figures equal in every run are listed
  once below it.
* The plot has one panel per shown figure: against a numeric axis, drawn to scale, one line per
  combination of the other axes, the mean with its interval as a band; otherwise one bar per variant with
  the interval as an error bar. An n/a mean is a gap (and says ``n/a``), never a point at 0.
* ``<stem>.csv`` is tidy (variant, axis values, figure, n, missing, mean, std, ci_low, ci_high);
  ``<stem>_runs.csv`` has one row per run with every figure (the data frame of
  :meth:`~simulations.results.SweepResult.to_frame`); ``<stem>.json`` holds the same summaries, the deltas
  and ``plotted``, the figures the plot has a panel for.

Everything written is a function of the runs' metrics, in the batch's order, so it is the same whatever
``--jobs`` was.
"""

from __future__ import annotations

import csv
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

from simulations.grid import Axis, format_value
from simulations.report import PNG_META
from simulations.results import SweepResult
from simulations.stats import Delta, Summary

MAX_PANELS = 24


def fmt(x: float | None) -> str:
    if x is None:
        return "n/a"
    return f"{x:.4g}"


def cell_text(s: Summary) -> str:
    """``mean`` or ``mean ± half`` (``n/a`` with nothing present; ``(k n/a)`` when some runs lacked it)."""
    if s.mean is None:
        return "n/a"
    text = fmt(s.mean) if s.half_width is None else f"{fmt(s.mean)} ± {fmt(s.half_width)}"
    return text + (f" ({s.missing} n/a)" if s.missing else "")


def delta_text(d: Delta) -> str:
    if d.value is None:
        return "n/a"
    if d.ci_low is None or d.ci_high is None:
        return f"{d.value:+.4g}"
    return f"{d.value:+.4g} [{d.ci_low:+.4g}, {d.ci_high:+.4g}]"


def write_batch(batch: SweepResult, stem: Path, *, title: str, plots: bool = True, preface: Sequence[str] = ()) -> None:
    """Every file of the batch's report at ``stem`` (``stem.md``, ``.csv``, ``.json``, ``.html``, ``.png``)."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    png = stem.with_suffix(".png").name if plots else None
    stem.with_suffix(".md").write_text(markdown(batch, title, preface, png), encoding="utf-8")
    _write_csv(batch, stem)
    plotted = plot(batch, stem.with_suffix(".png"), title) if plots else []
    body = {**as_json(batch), "plotted": plotted}
    stem.with_suffix(".json").write_text(json.dumps(body, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    stem.with_suffix(".html").write_text(page(batch, title, png, preface), encoding="utf-8")


def labels(batch: SweepResult) -> list[str]:
    return [v.variant.label for v in batch.variants]


def markdown(batch: SweepResult, title: str, preface: Sequence[str] = (), png: str | None = None) -> str:
    names = labels(batch)
    head = ["figure", *names] + (["delta (last - first)"] if len(names) > 1 else [])
    lines = [f"# {title}", "", *[x for p in preface for x in (p, "")], _describe(batch), "",
             "| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for name in batch.shown:
        cells = [cell_text(v.summaries[name]) for v in batch.variants]
        if len(names) > 1:
            cells.append(delta_text(batch.delta(name)))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if batch.constant:
        lines += ["", "Same in every run: " + ", ".join(f"{k} = {fmt(v)}" for k, v in batch.constant.items())]
    if png:
        lines += ["", f"![the shown figures against the variants]({png})"]
    return "\n".join(lines).rstrip() + "\n"


def _describe(batch: SweepResult) -> str:
    axes = "; ".join(f"{a.key} in {', '.join(map(format_value, a.values))}" for a in batch.axes) or "no axis"
    n = len(batch.seeds)
    return (f"{len(batch.variants)} variants ({axes}) x {n} seed{'s' if n > 1 else ''} "
            f"({', '.join(map(str, batch.seeds))}) = {len(batch.runs)} runs. Cells: mean"
            f"{' ± half-width of the 95 % t interval' if n > 1 else ''}; n/a: the figure does not apply.")


def _write_csv(batch: SweepResult, stem: Path) -> None:
    keys = [a.key for a in batch.axes]
    with stem.with_suffix(".csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["variant", *keys, "figure", "n", "missing", "mean", "std", "ci_low", "ci_high"])
        for v in batch.variants:
            point = [format_value(v.variant.value(k)) if k in v.variant.overrides else "" for k in keys]
            for name, s in v.summaries.items():
                writer.writerow([v.variant.label, *point, name, s.n, s.missing,
                                 *("" if x is None else x for x in (s.mean, s.std, s.ci_low, s.ci_high))])
    rows = batch.rows()
    columns = list(rows[0]) if rows else []
    with stem.with_name(stem.name + "_runs.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        for row in rows:
            writer.writerow(["" if row.get(c) is None else row.get(c) for c in columns])


def as_json(batch: SweepResult) -> dict[str, Any]:
    return {
        "axes": [{"key": a.key, "values": list(a.values)} for a in batch.axes],
        "seeds": list(batch.seeds), "shown": list(batch.shown), "constant": dict(batch.constant),
        "variants": [{"label": v.variant.label, "scenario": v.variant.file_label, "point": dict(v.variant.point),
                      "seeds": list(v.seeds), "figures": {k: s.as_dict() for k, s in v.summaries.items()}}
                     for v in batch.variants],
        "delta": {k: vars(batch.delta(k)) for k in batch.shown} if len(batch.variants) > 1 else {},
        "runs": [{"variant": r.variant.label, "seed": r.seed, "out": _relative(r.result.out, batch.out),
                  "ok": r.result.ok} for r in batch.runs],
    }


def _relative(path: Path, base: Path) -> str:
    try:
        return str(path.resolve().relative_to(base.resolve()))
    except ValueError:
        return str(path)


# -- the plot ------------------------------------------------------------------------------------------

def x_axis(batch: SweepResult) -> Axis | None:
    """The first numeric axis with two values or more: drawn to scale."""
    return next((a for a in batch.axes if a.numeric and len(a.values) > 1), None)


def plot(batch: SweepResult, path: Path, title: str) -> list[str]:
    """Draw one panel per shown figure (at most ``MAX_PANELS``); returns the figures drawn, in order."""
    shown = list(batch.shown[:MAX_PANELS])
    if not shown:
        fig, ax = plt.subplots(figsize=(6, 1.5))
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no figure differs between the runs (see the table's list)", ha="center", va="center")
        fig.savefig(path, dpi=100, bbox_inches="tight", metadata=PNG_META)
        plt.close(fig)
        return []
    cols = min(4, len(shown))
    rows = -(-len(shown) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.9 * rows), squeeze=False)
    for ax in axes.flat[len(shown):]:
        ax.set_axis_off()
    x = x_axis(batch)
    for ax, name in zip(axes.flat, shown, strict=False):
        if x is not None:
            _lines(ax, batch, x, name)
        else:
            _bars(ax, batch, name)
        ax.set_title(name, fontsize=8)
        ax.tick_params(labelsize=7)
    handles, names = axes.flat[0].get_legend_handles_labels()
    if handles and len(handles) > 1:
        fig.legend(handles, names, loc="lower center", ncol=min(4, len(handles)), fontsize=7,
                   bbox_to_anchor=(0.5, -0.02 - 0.03 * (len(handles) // 4)))
    more = f" (first {MAX_PANELS} of {len(batch.shown)} figures)" if len(batch.shown) > MAX_PANELS else ""
    band = f"; {'band' if x is not None else 'error bar'}: 95 % interval" if len(batch.seeds) > 1 else ""
    fig.suptitle(f"{title}{more}: mean over {len(batch.seeds)} seed(s){band}; gaps are n/a", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100, bbox_inches="tight", metadata=PNG_META)
    plt.close(fig)
    return shown


def _nan(x: float | None) -> float:
    return math.nan if x is None else x


def _lines(ax: Axes, batch: SweepResult, x: Axis, name: str) -> None:
    groups: dict[str, list[tuple[float, Summary]]] = {}
    for v in batch.variants:
        rest = [(k, val) for k, val in v.variant.point if k != x.key]
        key = ",".join(f"{k}={format_value(val)}" for k, val in rest)
        if v.variant.file_label and len(batch.variants) > len(x.values):
            key = f"{v.variant.file_label}{',' + key if key else ''}" if v.variant.file_label not in key else key
        xv = v.variant.value(x.key)
        groups.setdefault(key or "mean", []).append((float(xv), v.summaries[name]))  # type: ignore[arg-type]
    for label, points in groups.items():
        points.sort(key=lambda p: p[0])
        xs = [p[0] for p in points]
        means = [_nan(p[1].mean) for p in points]
        line = ax.plot(xs, means, marker="o", markersize=4, label=label)[0]
        low = [_nan(p[1].ci_low if p[1].ci_low is not None else p[1].mean) for p in points]
        high = [_nan(p[1].ci_high if p[1].ci_high is not None else p[1].mean) for p in points]
        ax.fill_between(xs, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
        for px, m in zip(xs, means, strict=True):
            if math.isnan(m):
                ax.annotate("n/a", (px, 0), xycoords=("data", "axes fraction"), xytext=(0, 3),
                            textcoords="offset points", ha="center", fontsize=6, color="#888")
    ax.set_xlabel(x.key, fontsize=7)
    ax.set_xticks(sorted({float(v) for v in x.values}))  # type: ignore[arg-type]


def _bars(ax: Axes, batch: SweepResult, name: str) -> None:
    names = labels(batch)
    for i, v in enumerate(batch.variants):
        s = v.summaries[name]
        if s.mean is None:
            ax.text(i, 0, "n/a", ha="center", va="bottom", fontsize=7, color="#888")
            continue
        err = [[s.mean - s.ci_low], [s.ci_high - s.mean]] if s.ci_low is not None and s.ci_high is not None \
            else None
        ax.bar(i, s.mean, yerr=err, capsize=3, color=f"C{i % 10}", label=names[i])
    ax.set_xticks(range(len(names)), [_short(n) for n in names], rotation=30, ha="right", fontsize=6)


def _short(label: str, limit: int = 28) -> str:
    return label if len(label) <= limit else "…" + label[-(limit - 1):]


# -- the page ------------------------------------------------------------------------------------------

def page(batch: SweepResult, title: str, png: str | None, preface: Sequence[str] = ()) -> str:
    e = html.escape
    names = labels(batch)
    head = "".join(f"<th>{e(n)}</th>" for n in names) + ("<th>delta (last - first)</th>" if len(names) > 1 else "")
    body = []
    for name in batch.shown:
        cells = "".join(f"<td class=num>{e(cell_text(v.summaries[name]))}</td>" for v in batch.variants)
        if len(names) > 1:
            d = batch.delta(name)
            cells += f"<td class='num{' sep' if d.separated else ''}'>{e(delta_text(d))}</td>"
        body.append(f"<tr><td>{e(name)}</td>{cells}</tr>")
    constant = ", ".join(f"{e(k)} = {e(fmt(v))}" for k, v in batch.constant.items())
    runs = "".join(f"<li><a href='{e(_relative(r.result.out, batch.out))}/report.html'>{e(r.variant.label)}, "
                   f"seed {r.seed}</a>{'' if r.result.ok else ' (expectation not met)'}</li>" for r in batch.runs)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 1200px; margin: 2em auto; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }} td, th {{ border: 1px solid #ccc; padding: 4px 8px; }}
th {{ background: #f3f3f3; text-align: left; }} td.num {{ text-align: right; font-variant-numeric: tabular-nums; }}
td.sep {{ font-weight: bold; }} img {{ max-width: 100%; border: 1px solid #eee; }}
</style></head><body>
<h1>{e(title)}</h1>
{"".join(f"<p>{e(p)}</p>" for p in preface)}
<p>{e(_describe(batch))} Delta: last variant minus first, with Welch's 95 % interval (bold: the interval
excludes 0).</p>
<table><tr><th>figure</th>{head}</tr>{"".join(body)}</table>
{f"<p>Same in every run: {constant}</p>" if constant else ""}
{f"<figure><img src='{e(png)}' alt='the shown figures against the variants'></figure>" if png else ""}
<h2>Runs</h2><ul>{runs}</ul>
</body></html>
"""


def choose_shown(names: Sequence[str], values: dict[str, list[float | None]], metrics: Sequence[str] | None
                 ) -> tuple[tuple[str, ...], dict[str, float | None]]:
    """The figures to show (``metrics`` if given, in that order; else every figure that differs between any two
    runs) and the ones equal in every run (name -> the value)."""
    constant = {n: values[n][0] for n in names if len(set(values[n])) == 1}
    if metrics:
        return tuple(metrics), {k: v for k, v in constant.items() if k not in metrics}
    return tuple(n for n in names if n not in constant), constant


__all__ = ["cell_text", "choose_shown", "delta_text", "markdown", "page", "plot", "write_batch"]
