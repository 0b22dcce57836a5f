"""``pmw state``: shared state, versioned keys written only by compare-and-set."""

from typing import Annotated

import typer

from engine.cli.options import Limit, OpId
from engine.cli.runtime import invocation, json_arg

group = typer.Typer(help="Read and compare-and-set shared state keys.", no_args_is_help=True)

Key = Annotated[str, typer.Argument(metavar="KEY", help="The state key.")]


@group.command("get")
def get(ctx: typer.Context, key: Key) -> None:
    """Show the current entry of KEY (exit 4 if it does not exist)."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.get_state(key, actor=run.actor))


@group.command("set")
def set_(
    ctx: typer.Context,
    key: Key,
    value: Annotated[str, typer.Argument(metavar="VALUE_JSON", help="The new value, as JSON.")],
    expect_version: Annotated[int, typer.Option(
        "--expect-version", help="The version you read (0 creates the key); stale: exit 5.")],
    op_id: OpId = None,
) -> None:
    """Write VALUE_JSON to KEY only if KEY is at --expect-version."""
    with invocation(ctx, acting=True) as run:
        parsed = json_arg("VALUE_JSON", value)
        run.show(run.world.compare_and_set_state(run.actor, key, expect_version, parsed, op_id=op_id))


@group.command("list")
def list_(
    ctx: typer.Context,
    prefix: Annotated[str, typer.Option("--prefix", help="Only keys starting with this.")] = "",
    limit: Limit = 1000,
) -> None:
    """List state entries."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.list_state(prefix, limit, actor=run.actor))
