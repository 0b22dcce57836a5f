"""``pmw metrics``: the runtime quality metrics of seed 003 §31 over the whole world (ICR, UAR, DSR, HCS, RSR,
Evidence Completeness), each with its definition, numerator and denominator, ``n/a`` when nothing was
counted. A governance read (``engine.metrics``): ``--as`` must be one the PDP lets read the metrics (live
governors and reviewers). In client mode (``PMW_SERVER`` / ``--server``) the server's world answers."""

from __future__ import annotations

from typing import Annotated

import typer

from engine.cli.runtime import invocation

COLUMNS = ["name", "shown", "numerator", "denominator", "title", "definition"]


def metrics(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Machine output (the same as the global --json).")]
    = False,
) -> None:
    """The §31 metrics of the world as its store records them: value (or n/a), numerator, denominator and the
    seed's definition; with --json also what each counts and the log position the counts include."""
    with invocation(ctx, acting=True, as_json=as_json) as run:
        found = run.governance.metrics(run.actor)
        run.show(found if run.options.json else found.metrics, columns=COLUMNS)


def register(app: typer.Typer) -> None:
    """Add ``pmw metrics`` to ``app``."""
    app.command("metrics")(metrics)
