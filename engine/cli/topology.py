"""``pmw topology``: the versioned collaboration topology."""

from typing import Annotated

import typer

from engine.cli.options import OpId
from engine.cli.runtime import choices, invocation
from engine.models.enums import EdgeType

group = typer.Typer(help="Change and show the collaboration topology.", no_args_is_help=True)


@group.command("set")
def set_(
    ctx: typer.Context,
    source_agent: Annotated[str, typer.Argument(metavar="SOURCE_AGENT", help="The edge's source agent.")],
    target_agent: Annotated[str, typer.Argument(metavar="TARGET_AGENT", help="The edge's target agent.")],
    edge_type: Annotated[str, typer.Argument(metavar="EDGE_TYPE", help=choices(EdgeType))],
    scope: Annotated[str, typer.Option("--scope")] = "",
    weight: Annotated[float, typer.Option("--weight")] = 1.0,
    inactive: Annotated[bool, typer.Option("--inactive", help="Deactivate the edge.")] = False,
    expect_version: Annotated[int | None, typer.Option(
        "--expect-version", help="Apply only on this topology version (else exit 5).")] = None,
    reason: Annotated[str, typer.Option("--reason")] = "",
    op_id: OpId = None,
) -> None:
    """Add, change or deactivate one edge (a new topology version)."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.set_topology_edge(
            run.actor, source_agent, target_agent, edge_type, scope=scope, weight=weight, active=not inactive,
            expected_topology_version=expect_version, reason=reason, op_id=op_id))


@group.command("show")
def show(ctx: typer.Context,
         include_inactive: Annotated[bool, typer.Option("--all", help="Include inactive edges.")] = False) -> None:
    """Show the current topology version and its edges."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.get_topology(include_inactive=include_inactive, actor=run.actor))
