"""Top-level commands on the whole world: ``init``, ``project``, ``snapshot`` and ``demo``."""

from pathlib import Path
from typing import Annotated

import typer

from engine.cli.runtime import invocation
from engine.demo import demo_sources, prepare_demo_db, run_demo
from engine.models.common import Model
from engine.settings import load_settings


class InitResult(Model):
    """What ``pmw init`` did: the migrations applied now (none when current) and the schema version."""

    applied: list[int]
    schema_version: int


def init(ctx: typer.Context) -> None:
    """Create or migrate the database (idempotent: a current database is left as it is)."""
    with invocation(ctx) as run:
        world = run.open(run.settings(), init=False)
        applied = world.store.init(world.clock.now_us())
        run.show(InitResult(applied=applied, schema_version=world.store.schema_version()))


def project(
    ctx: typer.Context,
    agent_id: Annotated[str, typer.Argument(metavar="AGENT_ID", help="The agent whose view to show.")],
    budget: Annotated[int, typer.Option("--budget", min=1, max=10_000, help="Items per section.")] = 200,
) -> None:
    """Show the world as AGENT may see it (its tasks, state, visible memory, handoffs, rooms)."""
    with invocation(ctx) as run:
        run.show(run.world.project_world(agent_id, budget=budget))


def snapshot(ctx: typer.Context) -> None:
    """Record the state image at the current log position (the log is never truncated)."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.take_snapshot(run.actor))


def demo(
    ctx: typer.Context,
    db: Annotated[str | None, typer.Option(
        "--db", help="An empty database to run in (default: a fresh OUT/world.db; PMW_DB_URL is ignored).")]
    = None,
    out: Annotated[Path, typer.Option("--out", file_okay=False, help="Folder of the default demo database.")]
    = Path("pmw-demo"),
) -> None:
    """Run a short end-to-end demo: three agents, a task, a stale write, an idempotent wake, reviewed
    memory, a versioned artifact and a handoff; then check fold(events) == state. Exit 1 if a check fails."""
    with invocation(ctx) as run:
        url = db or run.options.db or prepare_demo_db(out)
        clock, ids = demo_sources()
        world = run.open(load_settings(db_url=url), clock=clock, ids=ids)
        summary = run_demo(world, lambda line: typer.echo(line, err=run.options.json))
        if run.options.json:
            run.show(summary)
        if not summary.ok:
            raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the top-level commands to ``app``."""
    for command in (init, project, snapshot, demo):
        app.command(command.__name__)(command)
