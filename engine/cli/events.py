"""``pmw events``: the append-only event log."""

from typing import Annotated

import typer

from engine.cli.options import Limit, OpId
from engine.cli.runtime import invocation, json_object

group = typer.Typer(help="Read (and append to) the event log.", no_args_is_help=True)


@group.command("tail")
def tail(
    ctx: typer.Context,
    after: Annotated[int | None, typer.Option("--after", min=0, help="Events after this seq, in order.")]
    = None,
    limit: Limit = 20,
) -> None:
    """Show the last --limit events (or, with --after SEQ, the first --limit events after SEQ)."""
    with invocation(ctx, acting=True) as run:
        if after is None:
            run.show(run.world.events(0, limit, newest=True, actor=run.actor))
        else:
            run.show(run.world.events(after, limit, actor=run.actor))


@group.command("append")
def append(
    ctx: typer.Context,
    event_type: Annotated[str, typer.Argument(metavar="EVENT_TYPE", help="e.g. note.posted (lower case, dots).")],
    payload: Annotated[str | None, typer.Option("--payload", help="JSON object.")] = None,
    subject_kind: Annotated[str, typer.Option("--subject-kind")] = "world",
    subject_id: Annotated[str, typer.Option("--subject-id")] = "world",
    op_id: OpId = None,
) -> None:
    """Append an event that changes no state."""
    with invocation(ctx, acting=True) as run:
        body = json_object("--payload", payload)
        run.show(run.world.append_event(run.actor, event_type, body, subject_kind=subject_kind,
                                        subject_id=subject_id, op_id=op_id))
