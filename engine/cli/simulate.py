"""``pmw simulate``: run a scenario file (``simulations/``), a sweep, a comparison or a study, and write the
report."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from engine.cli.runtime import invocation
from engine.errors import InvalidInput

if TYPE_CHECKING:
    from simulations.results import Result


def simulate(
    ctx: typer.Context,
    file: Annotated[Path | None, typer.Argument(exists=True, dir_okay=False, help="The scenario file (YAML).")]
    = None,
    out: Annotated[Path, typer.Option("--out", file_okay=False, help="Output folder (default: sim-out/<file>).")]
    = Path(),
    db: Annotated[str | None, typer.Option(
        "--db", metavar="URL", help="An empty database (default: a fresh OUT/world.db; PMW_DB_URL is ignored); "
                                    "one run only.")]
    = None,
    seed: Annotated[int | None, typer.Option("--seed", min=0, help="Override the scenario's seed.")] = None,
    sweep_specs: Annotated[list[str] | None, typer.Option(
        "--sweep", metavar="KEY=V1,V2,...", help="Run once per value of a dotted key of the scenario (e.g. "
                                                 "rules.constants.max_depth=2,3,5); several --sweep make a grid "
                                                 "(every combination); writes sweep.md/.csv/.json/.html/.png.")]
    = None,
    other: Annotated[Path | None, typer.Option(
        "--compare", exists=True, dir_okay=False, metavar="OTHER_FILE",
        help="Run a second scenario file and compare the two; writes compare.md/.csv/.json/.html/.png.")] = None,
    seeds: Annotated[str | None, typer.Option(
        "--seeds", metavar="N|S1,S2,...", help="Replicates: N seeds from the scenario's (or a list); tables give "
                                               "mean ± 95 % interval.")] = None,
    metrics: Annotated[str | None, typer.Option(
        "--metrics", metavar="A,B,...", help="The figures tables and plots show (default: every figure that "
                                             "differs between runs).")] = None,
    jobs: Annotated[int, typer.Option("--jobs", min=1, max=64, help="Worker processes (same results).")] = 1,
    study: Annotated[Path | None, typer.Option(
        "--study", exists=True, metavar="DIR", help="Run a study (a folder with study.yaml: a scenario family, "
                                                    "its sweep and the hypothesis' claims); writes study.*.")]
    = None,
    ci: Annotated[bool, typer.Option("--ci", help="With --study: its CI-sized variant.")] = False,
) -> None:
    """Run FILE on a fresh world (SQLite in OUT by default; --db for PostgreSQL) with the real PDP, the
    controller and a worker, on a virtual clock. Writes metrics.json, events.jsonl, report.md, report.html
    and the plots. Exit 1 if an expectation of the scenario is not met; 3 for an invalid scenario file
    (file:line: field: reason), before anything is written."""
    shown = [m.strip() for m in metrics.split(",") if m.strip()] if metrics else None
    with invocation(ctx):
        if (file is None) == (study is None):
            raise InvalidInput("FILE", "give a scenario FILE or --study DIR (not both)")
        if study is not None and (sweep_specs or other is not None):
            raise InvalidInput("--study", "a study brings its own family and sweep (no --sweep or --compare)")
        if study is not None and (seed is not None or seeds is not None):
            raise InvalidInput("--seed", "a study brings its own seeds (--ci for fewer)")
        if seed is not None and seeds is not None:
            raise InvalidInput("--seed", "give --seed (one seed) or --seeds (replicates), not both")
        if sweep_specs and other is not None:
            raise InvalidInput("--compare", "--sweep and --compare do not combine; a study compares a family")
        _validate(file, other, study, sweep_specs, seeds, ci, shown)
    name = study.name if study is not None else file.stem if file is not None else "run"
    folder = out if out != Path() else Path("sim-out") / name
    with invocation(ctx) as run, typer.progressbar(length=1000, label=f"simulating {name}", file=None) as bar:
        done = 0

        def progress(x: float) -> None:
            nonlocal done
            target = int(min(1.0, max(0.0, x)) * 1000)
            if target > done:
                bar.update(target - done)
                done = target

        ok = _run(file, other, study, sweep_specs, seeds, shown, jobs, ci, seed, folder, db or run.options.db,
                  progress)
    if not ok:
        raise typer.Exit(1)


def _validate(file: Path | None, other: Path | None, study: Path | None, sweep_specs: list[str] | None,
              seeds: str | None, ci: bool, shown: list[str] | None) -> None:
    """Fail on a bad file, sweep, seeds or metric name before any output."""
    from simulations.errors import ScenarioError
    from simulations.figure_names import figure_names, is_figure
    from simulations.grid import parse_axes, parse_seeds
    from simulations.scenario import load_scenario

    for name in shown or ():
        if not is_figure(name):
            raise ScenarioError("--metrics", 0, "metrics", f"unknown figure {name!r}; figures: "
                                f"{', '.join(sorted(figure_names()))}")

    if study is not None:
        from simulations.study import load_study

        load_study(study, ci=ci)
        return
    for scenario_file in (file, other):
        if scenario_file is not None:
            load_scenario(scenario_file)  # a bad file fails here, before any output
    parse_axes(sweep_specs or [])
    parse_seeds(seeds, 0)


def _run(file: Path | None, other: Path | None, study: Path | None, sweep_specs: list[str] | None,
         seeds: str | None, shown: list[str] | None, jobs: int, ci: bool, seed: int | None, folder: Path,
         db_url: str | None, progress: Callable[[float], None]) -> bool:
    from simulations.run import compare, simulate_file, sweep

    if study is not None:
        from simulations.study import run_study

        answer = run_study(study, folder, ci=ci, jobs=jobs, progress=progress)
        typer.echo("")
        for line in answer.lines():
            typer.echo(line)
        typer.echo(f"report: {folder / 'study.html'}")
        return True
    assert file is not None
    replicates: str | list[int] | None = seeds if seeds is not None else [seed] if seed is not None else None
    if sweep_specs or (seeds is not None and other is None):
        batch = sweep(file, sweep_specs or [], folder, seeds=replicates, metrics=shown, jobs=jobs, db_url=db_url,
                      progress=progress)
        _summary([r.result for r in batch.runs], folder / "sweep.html")
        return batch.ok
    if other is not None:
        pair = compare(file, other, folder, seeds=replicates, metrics=shown, jobs=jobs, db_url=db_url,
                       progress=progress)
        _summary([r.result for r in pair.runs], folder / "compare.html")
        return pair.ok
    result = simulate_file(file, folder, db_url=db_url, seed=seed, progress=progress)
    _summary([result], folder / "report.html")
    return result.ok


def _summary(results: list[Result], main: Path) -> None:
    typer.echo("")
    for r in results:
        m = r.metrics
        status = r.status
        unmet = [k for k, s in status.items() if s == "not met"]
        na = [k for k, s in status.items() if s == "n/a"]
        typer.echo(f"{r.scenario.name} (seed {r.scenario.seed}): {m.events} events, {m.counts['wakes']} wakes, "
                   f"{m.counts['suppressed']} suppressed, task quality {m.task_quality}, "
                   f"expectations {'met' if not unmet else 'NOT MET: ' + ', '.join(unmet)}"
                   f"{' (n/a: ' + ', '.join(na) + ')' if na else ''} -> {r.out}")
    typer.echo(f"report: {main}")


def register(app: typer.Typer) -> None:
    """Add ``simulate`` to ``app``."""
    app.command("simulate")(simulate)


__all__ = ["register", "simulate"]
