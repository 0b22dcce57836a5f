"""One call per use: run a scenario file into an output folder, sweep a key over values, compare two files.

:func:`simulate_file` loads (and validates) the file before anything is written, runs it on a fresh
runtime (:func:`simulations.driver.simulate`), computes the metrics from the store and writes the report.
:func:`sweep` runs the file once per value of a dotted key (``rules.constants.max_depth=2,3,5``), each into
``out/<key>=<value>/``, and writes ``sweep.md``/``sweep.csv`` and ``sweep.png`` (each metric against the
value). :func:`compare` runs two files into ``out/a`` and ``out/b`` and writes ``compare.md`` and
``compare.png`` (the metrics side by side).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from engine.settings import Settings
from simulations.driver import simulate
from simulations.errors import ScenarioError
from simulations.metrics import Metrics, compute_metrics
from simulations.report import PNG_META, write_report
from simulations.scenario import Scenario, load_scenario

Progress = Callable[[float], None]
TABLE_METRICS = ("task_quality", "continuation_fidelity", "coordination_latency_s", "duplicate_work_ratio",
                 "state_conflict_rate", "failure_propagation", "context_bytes_per_wake", "wake_efficiency",
                 "topology_mutation_rate", "recovery_success", "unauthorized_action_rate",
                 "duplicate_side_effect_rate")
TABLE_COUNTS = ("wakes", "acted", "suppressed", "conflicts_opened", "conflicts_resolved", "tasks_completed")


@dataclass(frozen=True)
class Result:
    """One finished run: its scenario, metrics, expectation results and output folder."""

    scenario: Scenario
    metrics: Metrics
    expectations: dict[str, bool]
    out: Path

    @property
    def ok(self) -> bool:
        return all(self.expectations.values())


def run_scenario_file(scenario: Scenario, out: Path, *, db_url: str | None = None,
                      settings: Settings | None = None, progress: Progress | None = None,
                      plots: bool = True) -> Result:
    """Run a loaded scenario into ``out`` (metrics.json, events.jsonl, report.md/.html, PNGs)."""
    run, runtime = simulate(scenario, out, db_url=db_url, settings=settings, progress=progress)
    try:
        metrics, series = compute_metrics(scenario, runtime.store, run.start_us, run.stop_us)
        expectations = write_report(out, scenario, metrics, series, runtime.store, plots=plots)
    finally:
        runtime.close()
    return Result(scenario, metrics, expectations, out)


def simulate_file(path: Path, out: Path, *, db_url: str | None = None, seed: int | None = None,
                  settings: Settings | None = None, progress: Progress | None = None, plots: bool = True) -> Result:
    """Load ``path`` (``ScenarioError`` before anything is written), then run it into ``out``."""
    scenario = load_scenario(path, {"seed": seed} if seed is not None else None)
    return run_scenario_file(scenario, out, db_url=db_url, settings=settings, progress=progress, plots=plots)


def parse_sweep(spec: str) -> tuple[str, list[Any]]:
    """``key=v1,v2,...`` -> (key, values); values are read as YAML scalars (``3`` is an int)."""
    from engine.yaml_input import parse_yaml_data

    key, sep, raw = spec.partition("=")
    if not sep or not key.strip() or not raw.strip():
        raise ScenarioError("--sweep", 0, "sweep", f"expected key=v1,v2,... (got {spec!r})")
    return key.strip(), [parse_yaml_data(v, "--sweep") for v in raw.split(",") if v.strip()]


def sweep(path: Path, spec: str, out: Path, *, db_url: str | None = None, settings: Settings | None = None,
          progress: Progress | None = None) -> list[tuple[Any, Result]]:
    """Run ``path`` once per value of ``spec``'s key; every variant is validated before any runs."""
    key, values = parse_sweep(spec)
    variants = [(v, load_scenario(path, {key: v})) for v in values]
    results = []
    for i, (value, scenario) in enumerate(variants):
        def part(x: float, i: int = i) -> None:
            if progress is not None:
                progress((i + x) / len(variants))
        results.append((value, run_scenario_file(scenario, out / f"{key}={value}", db_url=db_url,
                                                 settings=settings, progress=part)))
    _write_table(out / "sweep", [f"{key}={v}" for v, _ in results], [r.metrics for _, r in results])
    _plot_sweep(out / "sweep.png", key, [v for v, _ in results], [r.metrics for _, r in results])
    return results


def compare(a: Path, b: Path, out: Path, *, db_url: str | None = None, settings: Settings | None = None,
            progress: Progress | None = None) -> tuple[Result, Result]:
    """Run two scenario files (both validated first) and write the comparison."""
    first, second = load_scenario(a), load_scenario(b)
    ra = run_scenario_file(first, out / "a", db_url=db_url, settings=settings,
                           progress=(lambda x: progress(x / 2)) if progress else None)
    rb = run_scenario_file(second, out / "b", db_url=db_url, settings=settings,
                           progress=(lambda x: progress(0.5 + x / 2)) if progress else None)
    names = [first.name, second.name] if first.name != second.name else [f"a: {a.name}", f"b: {b.name}"]
    _write_table(out / "compare", names, [ra.metrics, rb.metrics])
    _plot_compare(out / "compare.png", names, [ra.metrics, rb.metrics])
    return ra, rb


def _figures(m: Metrics) -> dict[str, Any]:
    data = m.model_dump()
    return {**{k: data[k] for k in TABLE_METRICS}, **{k: m.counts.get(k, 0) for k in TABLE_COUNTS}}


def _write_table(stem: Path, names: Sequence[str], metrics: Sequence[Metrics]) -> None:
    stem.parent.mkdir(parents=True, exist_ok=True)
    rows = [_figures(m) for m in metrics]
    keys = list(rows[0]) if rows else []
    lines = ["| figure | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for k in keys:
        lines.append(f"| {k} | " + " | ".join("n/a" if r[k] is None else f"{r[k]:.4g}" if isinstance(r[k], float)
                                             else str(r[k]) for r in rows) + " |")
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with stem.with_suffix(".csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["figure", *names])
        for k in keys:
            writer.writerow([k, *("" if r[k] is None else r[k] for r in rows)])
    stem.with_suffix(".json").write_text(json.dumps(dict(zip(names, rows, strict=True)), indent=2, sort_keys=True)
                                         + "\n", encoding="utf-8")


def _plot_sweep(path: Path, key: str, values: Sequence[Any], metrics: Sequence[Metrics]) -> None:
    shown = ("wakes", "suppressed", "acted", "conflicts_opened")
    rates = ("task_quality", "wake_efficiency", "duplicate_work_ratio", "state_conflict_rate")
    labels = [str(v) for v in values]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    for name in shown:
        left.plot(labels, [m.counts.get(name, 0) for m in metrics], marker="o", label=name)
    left.set_title("counts", fontsize=9)
    for name in rates:
        right.plot(labels, [getattr(m, name) or 0.0 for m in metrics], marker="o", label=name)
    right.set_title("rates", fontsize=9)
    right.set_ylim(-0.05, 1.05)
    for ax in (left, right):
        ax.set_xlabel(key)
        ax.legend(fontsize=7)
    fig.suptitle(f"Sweep of {key}")
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata=PNG_META)
    plt.close(fig)


def _plot_compare(path: Path, names: Sequence[str], metrics: Sequence[Metrics]) -> None:
    rates = [k for k in TABLE_METRICS if k not in ("coordination_latency_s", "context_bytes_per_wake",
                                                   "topology_mutation_rate")]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2), gridspec_kw={"width_ratios": [3, 2]})
    width = 0.8 / max(1, len(metrics))
    for i, (name, m) in enumerate(zip(names, metrics, strict=True)):
        xs = [j + i * width for j in range(len(rates))]
        left.bar(xs, [getattr(m, r) or 0.0 for r in rates], width=width, label=name)
        right.bar([j + i * width for j in range(len(TABLE_COUNTS))], [m.counts.get(c, 0) for c in TABLE_COUNTS],
                  width=width, label=name)
    left.set_xticks([j + width / 2 for j in range(len(rates))], rates, rotation=35, ha="right", fontsize=7)
    right.set_xticks([j + width / 2 for j in range(len(TABLE_COUNTS))], TABLE_COUNTS, rotation=35, ha="right",
                     fontsize=7)
    left.set_title("rates", fontsize=9)
    right.set_title("counts", fontsize=9)
    left.legend(fontsize=7)
    fig.suptitle("Comparison")
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata=PNG_META)
    plt.close(fig)


__all__ = ["Result", "compare", "parse_sweep", "run_scenario_file", "simulate_file", "sweep"]
