"""One call per use: run a scenario file, sweep it over a grid with replicates, compare two files.

Every path argument is ``str | Path``; every result is typed (:mod:`simulations.results`).

* :func:`simulate_file` loads (and validates) the file before anything is written, runs it on a fresh
  runtime (:func:`simulations.driver.simulate`), computes the metrics from the store and writes the report.
* :func:`sweep` runs the file once per point of a grid (one or more ``key=v1,v2`` specs: their cartesian
  product) and per seed (``seeds``: a count from the scenario's seed, or a list), each into
  ``out/<key>=<value>[,<key>=<value>...]/[seed=<s>/]``; writes ``sweep.md``/``.csv``/``.json``/``.html``/``.png``
  and ``sweep_runs.csv`` (:mod:`simulations.sweep_report`).
* :func:`compare` runs two files (with the same seeds) into ``out/a`` and ``out/b`` and writes ``compare.*``
  with a delta column.

``metrics`` picks the figures the tables and plots show (default: every figure that differs between two
runs); ``jobs`` runs that many worker processes (the same files are written whatever it is); ``plots``
draws the batch's plot and, unless ``run_plots`` says otherwise, each run's. Every variant and seed is
validated before the first run (``ScenarioError``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from engine.settings import Settings
from simulations.batch import Cell, load_cells, run_cells
from simulations.driver import simulate
from simulations.errors import ScenarioError
from simulations.figure_names import figure_names, is_figure
from simulations.grid import Axis, Variant, format_value, grid, parse_axes, parse_seeds
from simulations.metrics import compute_metrics
from simulations.plugins import AdapterSource
from simulations.report import write_report
from simulations.results import CompareResult, Replicate, Result, SweepResult, VariantSummary
from simulations.scenario import Scenario, load_scenario
from simulations.stats import summarize
from simulations.sweep_report import choose_shown, write_batch

Progress = Callable[[float], None]
PathLike = str | Path
SeedSpec = str | int | Sequence[int] | None


def run_scenario_file(scenario: Scenario, out: PathLike, *, db_url: str | None = None,
                      settings: Settings | None = None, progress: Progress | None = None,
                      plots: bool = True, behaviours: Mapping[str, AdapterSource] | None = None) -> Result:
    """Run a loaded scenario into ``out`` (metrics.json, events.jsonl, report.md/.html, PNGs). ``behaviours``
    gives agents (by id) a behaviour of one's own from Python (:mod:`simulations.plugins`)."""
    folder = Path(out)
    run, runtime = simulate(scenario, folder, db_url=db_url, settings=settings, progress=progress,
                            behaviours=behaviours)
    try:
        metrics, series = compute_metrics(scenario, runtime.store, run.start_us, run.stop_us)
        expectations = write_report(folder, scenario, metrics, series, runtime.store, plots=plots)
    finally:
        runtime.close()
    return Result(scenario, metrics, expectations, folder)


def simulate_file(path: PathLike, out: PathLike, *, db_url: str | None = None, seed: int | None = None,
                  settings: Settings | None = None, progress: Progress | None = None, plots: bool = True,
                  behaviours: Mapping[str, AdapterSource] | None = None) -> Result:
    """Load ``path`` (``ScenarioError`` before anything is written), then run it into ``out``."""
    scenario = load_scenario(path, {"seed": seed} if seed is not None else None)
    return run_scenario_file(scenario, out, db_url=db_url, settings=settings, progress=progress, plots=plots,
                             behaviours=behaviours)


def parse_sweep(spec: str) -> tuple[str, list[object]]:
    """``key=v1,v2,...`` -> (key, values); values are read as YAML scalars (``3`` is an int)."""
    axis = parse_axes([spec])[0]
    return axis.key, list(axis.values)


def sweep(path: PathLike, specs: str | Sequence[str], out: PathLike, *, seeds: SeedSpec = None,
          metrics: Sequence[str] | None = None, jobs: int = 1, db_url: str | None = None,
          settings: Settings | None = None, progress: Progress | None = None, plots: bool = True,
          run_plots: bool | None = None) -> SweepResult:
    """Run ``path`` at every point of the grid of ``specs`` (one spec or several) x ``seeds``."""
    file, folder = Path(path), Path(out)
    axes = parse_axes([specs] if isinstance(specs, str) else list(specs))
    seed_list = parse_seeds(seeds, load_scenario(file).seed)
    variants = grid(axes)

    def where(v: Variant, seed: int) -> Path:
        return _folder(folder, [v.label if axes else ""], seed, len(seed_list))

    cells = load_cells([(v, file) for v in variants], seed_list, where)
    batch = run_batch(cells, axes, seed_list, folder, metrics=metrics, jobs=jobs, db_url=db_url,
                      settings=settings, progress=progress, plots=plots if run_plots is None else run_plots)
    names = ", ".join(a.key for a in axes) or "seeds"
    write_batch(batch, folder / "sweep", title=f"Sweep of {names}: {cells[0].scenario.name}", plots=plots)
    return batch


def compare(a: PathLike, b: PathLike, out: PathLike, *, seeds: SeedSpec = None,
            metrics: Sequence[str] | None = None, jobs: int = 1, db_url: str | None = None,
            settings: Settings | None = None, progress: Progress | None = None, plots: bool = True,
            run_plots: bool | None = None) -> CompareResult:
    """Run two scenario files (both validated first), each with the same seeds, and write the comparison."""
    first, second = Path(a), Path(b)
    sa, sb = load_scenario(first), load_scenario(second)
    names = (sa.name, sb.name) if sa.name != sb.name else (f"a: {first.name}", f"b: {second.name}")
    seed_list = parse_seeds(seeds, sa.seed) if seeds is not None else None
    folder = Path(out)
    members = [(Variant(names[0], file_label=names[0]), first), (Variant(names[1], file_label=names[1]), second)]
    cells: list[Cell] = []
    for side, (variant, file) in zip(("a", "b"), members, strict=True):
        own = seed_list or [load_scenario(file).seed]
        for seed in own:
            scenario = load_scenario(file, {"seed": seed})
            cells.append(Cell(len(cells), variant, file, seed, _folder(folder, [side], seed, len(own)), scenario))
    batch = run_batch(cells, (), seed_list or sorted({sa.seed, sb.seed}), folder, metrics=metrics, jobs=jobs,
                      db_url=db_url, settings=settings, progress=progress,
                      plots=plots if run_plots is None else run_plots)
    result = CompareResult(**{f: getattr(batch, f) for f in SweepResult.__dataclass_fields__})
    write_batch(result, folder / "compare", title=f"Comparison: {names[0]} vs {names[1]}", plots=plots)
    return result


def _folder(base: Path, parts: Sequence[str], seed: int, seeds: int) -> Path:
    path = base.joinpath(*[p for p in parts if p]) if any(parts) else base / "run"
    return path / f"seed={seed}" if seeds > 1 else path


def run_batch(cells: Sequence[Cell], axes: Sequence[Axis], seeds: Sequence[int], out: Path, *,
              metrics: Sequence[str] | None = None, jobs: int = 1, db_url: str | None = None,
              settings: Settings | None = None, progress: Progress | None = None,
              plots: bool = True) -> SweepResult:
    """Run validated cells (``jobs`` processes) and summarize each figure per variant over its seeds.
    ``metrics`` names the figures to show; an unknown name is a ``ScenarioError`` raised before any run."""
    if db_url is not None and len(cells) > 1:
        from engine.errors import InvalidInput

        raise InvalidInput("--db", f"a batch of {len(cells)} runs needs a fresh world for each; --db names one")
    for name in metrics or ():
        if not is_figure(name):
            raise ScenarioError("--metrics", 0, "metrics", f"unknown figure {name!r}; figures: "
                                f"{', '.join(sorted(figure_names()))}")
    results = run_cells(cells, settings=settings, jobs=jobs, plots=plots, db_url=db_url, progress=progress)
    runs = tuple(Replicate(c.variant, c.seed, r) for c, r in zip(cells, results, strict=True))
    names = _names([r.result.figures for r in runs])
    by_variant: dict[Variant, list[Replicate]] = {}
    for r in runs:
        by_variant.setdefault(r.variant, []).append(r)
    summaries = tuple(VariantSummary(v, tuple(r.seed for r in rs),
                                     {n: summarize([r.result.figures.get(n, 0.0) for r in rs]) for n in names})
                      for v, rs in by_variant.items())
    values = {n: [r.result.figures.get(n, 0.0) for r in runs] for n in names}
    shown, constant = choose_shown(names, values, metrics)
    return SweepResult(tuple(axes), tuple(seeds), runs, summaries, shown, constant, out)


def _names(rows: Sequence[dict[str, float | None]]) -> list[str]:
    """Every figure any run has, in first-seen order. Metrics are in every run (``None`` where n/a); a count
    only some runs have (``suppressed_<reason>``) is 0 in the others."""
    names: list[str] = []
    for row in rows:
        names += [n for n in row if n not in names]
    return names


__all__ = ["CompareResult", "Result", "SweepResult", "compare", "format_value", "parse_sweep", "run_batch",
           "run_scenario_file", "simulate_file", "sweep"]
