"""``pmw receipts``: decision receipts (every wake ends in exactly one)."""

from typing import Annotated

import typer

from engine.cli.options import Limit
from engine.cli.runtime import invocation

group = typer.Typer(help="Read decision receipts.", no_args_is_help=True)


@group.command("list")
def list_(ctx: typer.Context,
          agent_id: Annotated[str | None, typer.Option("--agent", help="Only this agent's receipts.")] = None,
          limit: Limit = 1000) -> None:
    """List receipts, oldest first."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.list_receipts(agent_id=agent_id, limit=limit, actor=run.actor))


@group.command("show")
def show(ctx: typer.Context,
         receipt_id: Annotated[str, typer.Argument(metavar="RECEIPT_ID", help="The receipt id.")]) -> None:
    """Show one receipt."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.get_receipt(receipt_id, actor=run.actor))


@group.command("for-wake")
def for_wake(ctx: typer.Context,
             wake_id: Annotated[str, typer.Argument(metavar="WAKE_ID", help="The wake id.")]) -> None:
    """Show the receipt that ended a wake."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.receipt_for_wake(wake_id, actor=run.actor))
