"""``pmw simulate``: run a scenario file (``simulations/``) and write its report."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from engine.cli.runtime import invocation

if TYPE_CHECKING:
    from simulations.run import Result


def simulate(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="The scenario file (YAML).")],
    out: Annotated[Path, typer.Option("--out", file_okay=False, help="Output folder (default: sim-out/<file>).")]
    = Path(),
    db: Annotated[str | None, typer.Option(
        "--db", metavar="URL", help="An empty database (default: a fresh OUT/world.db; PMW_DB_URL is ignored).")]
    = None,
    seed: Annotated[int | None, typer.Option("--seed", min=0, help="Override the scenario's seed.")] = None,
    sweep_spec: Annotated[str | None, typer.Option(
        "--sweep", metavar="KEY=V1,V2,...", help="Run once per value of a dotted key of the scenario (e.g. "
                                                 "rules.constants.max_depth=2,3,5); writes sweep.md/.csv/.png.")]
    = None,
    other: Annotated[Path | None, typer.Option(
        "--compare", exists=True, dir_okay=False, metavar="OTHER_FILE",
        help="Run a second scenario file and compare the two; writes compare.md/.csv/.png.")] = None,
) -> None:
    """Run FILE on a fresh world (SQLite in OUT by default; --db for PostgreSQL) with the real PDP, the
    controller and a worker, on a virtual clock. Writes metrics.json, events.jsonl, report.md, report.html
    and the plots. Exit 1 if an expectation of the scenario is not met; 3 for an invalid scenario file
    (file:line: field: reason), before anything is written."""
    folder = out if out != Path() else Path("sim-out") / file.stem
    with invocation(ctx):
        from simulations.scenario import load_scenario

        for scenario_file in (file, *([other] if other is not None else [])):
            load_scenario(scenario_file)  # a bad file fails here, before any output
    with invocation(ctx) as run, typer.progressbar(length=1000, label=f"simulating {file.name}",
                                                   file=None) as bar:
        from simulations.run import compare, simulate_file, sweep

        done = 0

        def progress(x: float) -> None:
            nonlocal done
            target = int(min(1.0, max(0.0, x)) * 1000)
            if target > done:
                bar.update(target - done)
                done = target

        db_url = db or run.options.db
        if sweep_spec is not None:
            results = [r for _, r in sweep(file, sweep_spec, folder, db_url=db_url, progress=progress)]
            _summary(results, folder / "sweep.md")
        elif other is not None:
            results = list(compare(file, other, folder, db_url=db_url, progress=progress))
            _summary(results, folder / "compare.md")
        else:
            results = [simulate_file(file, folder, db_url=db_url, seed=seed, progress=progress)]
            _summary(results, folder / "report.html")
    if not all(r.ok for r in results):
        raise typer.Exit(1)


def _summary(results: list[Result], main: Path) -> None:
    typer.echo("")
    for r in results:
        m = r.metrics
        unmet = [k for k, ok in r.expectations.items() if not ok]
        typer.echo(f"{r.scenario.name} (seed {r.scenario.seed}): {m.events} events, {m.counts['wakes']} wakes, "
                   f"{m.counts['suppressed']} suppressed, task quality {m.task_quality}, "
                   f"expectations {'met' if not unmet else 'NOT MET: ' + ', '.join(unmet)} -> {r.out}")
    typer.echo(f"report: {main}")


def register(app: typer.Typer) -> None:
    """Add ``simulate`` to ``app``."""
    app.command("simulate")(simulate)


__all__ = ["register", "simulate"]
