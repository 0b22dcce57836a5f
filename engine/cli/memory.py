"""``pmw memory``: scoped memory and its reviewed path to shared (shared is not true).

Every command acts as ``--as``: reads show only what the policy lets that agent see.
"""

from typing import Annotated

import typer

from engine.cli.options import ExpectVersion, Limit, OpId, Reason
from engine.cli.runtime import choices, invocation, json_object, listed
from engine.models.enums import EpistemicType

group = typer.Typer(help="Store, review, promote and retire memory.", no_args_is_help=True)

MemoryId = Annotated[str, typer.Argument(metavar="MEMORY_ID", help="The memory id.")]


@group.command("store")
def store(
    ctx: typer.Context,
    content: Annotated[str, typer.Argument(metavar="CONTENT", help="The memory text.")],
    epistemic_type: Annotated[str, typer.Option("--type", help=choices(EpistemicType))],
    scope: Annotated[str, typer.Option("--scope", help="private or room (shared comes only from review).")]
    = "private",
    room_id: Annotated[str | None, typer.Option("--room", help="The room of room memory.")] = None,
    confidence: Annotated[float, typer.Option("--confidence", help="0.0 to 1.0.")] = 0.5,
    sources: Annotated[list[str] | None, typer.Option("--source", help="A source ref (repeatable).")] = None,
    permission_scope: Annotated[str | None, typer.Option("--permission-scope", help="JSON object.")] = None,
    valid_to_us: Annotated[int | None, typer.Option("--valid-to-us")] = None,
    ttl_seconds: Annotated[int | None, typer.Option("--ttl-seconds")] = None,
    memory_id: Annotated[str | None, typer.Option("--id", help="Choose the memory id.")] = None,
    op_id: OpId = None,
) -> None:
    """Write private (or room) memory owned by the acting agent."""
    with invocation(ctx, acting=True) as run:
        perms = json_object("--permission-scope", permission_scope)
        run.show(run.world.store_memory(
            run.actor, content, epistemic_type, scope=scope, room_id=room_id, confidence=confidence,
            source_refs=listed(sources), permission_scope=perms, valid_to_us=valid_to_us,
            ttl_seconds=ttl_seconds, memory_id=memory_id, op_id=op_id))


@group.command("list")
def list_(ctx: typer.Context, limit: Limit = 500) -> None:
    """List the memory the acting agent may see, newest first."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.list_memory(run.actor, limit=limit))


@group.command("show")
def show(ctx: typer.Context, memory_id: MemoryId) -> None:
    """Show one memory, if the acting agent may see it (exit 6 otherwise)."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.get_memory(run.actor, memory_id))


@group.command("propose")
def propose(ctx: typer.Context, memory_id: MemoryId, expect_version: ExpectVersion = None,
            op_id: OpId = None) -> None:
    """Offer your private (or reopened) memory for review: it becomes a candidate."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.propose_memory(run.actor, memory_id, expected_version=expect_version, op_id=op_id))


@group.command("review")
def review(ctx: typer.Context, memory_id: MemoryId, expect_version: ExpectVersion = None,
           op_id: OpId = None) -> None:
    """Take a candidate into review (not its owner)."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.review_memory(run.actor, memory_id, expected_version=expect_version, op_id=op_id))


@group.command("promote")
def promote(ctx: typer.Context, memory_id: MemoryId, expect_version: ExpectVersion = None,
            op_id: OpId = None) -> None:
    """Promote a candidate to shared memory (a reviewer other than its owner)."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.promote_memory(run.actor, memory_id, expected_version=expect_version, op_id=op_id))


@group.command("reject")
def reject(ctx: typer.Context, memory_id: MemoryId, reason: Reason, expect_version: ExpectVersion = None,
           op_id: OpId = None) -> None:
    """Reject a candidate (a reviewer other than its owner)."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.reject_memory(run.actor, memory_id, reason, expected_version=expect_version,
                                         op_id=op_id))


@group.command("archive")
def archive(ctx: typer.Context, memory_id: MemoryId, expect_version: ExpectVersion = None,
            op_id: OpId = None) -> None:
    """Move shared memory out of the working set (it stays readable)."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.archive_memory(run.actor, memory_id, expected_version=expect_version, op_id=op_id))


@group.command("reopen")
def reopen(ctx: typer.Context, memory_id: MemoryId, reason: Reason, expect_version: ExpectVersion = None,
           op_id: OpId = None) -> None:
    """Question shared or archived memory again."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.reopen_memory(run.actor, memory_id, reason, expected_version=expect_version,
                                         op_id=op_id))


@group.command("supersede")
def supersede(ctx: typer.Context, memory_id: MemoryId,
              replacement_id: Annotated[str, typer.Argument(
                  metavar="REPLACEMENT_ID", help="Other, shared memory that replaces it.")],
              expect_version: ExpectVersion = None, op_id: OpId = None) -> None:
    """Replace MEMORY_ID by REPLACEMENT_ID (already shared)."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.supersede_memory(run.actor, memory_id, replacement_id,
                                            expected_version=expect_version, op_id=op_id))


@group.command("revoke")
def revoke(ctx: typer.Context, memory_id: MemoryId, reason: Reason, expect_version: ExpectVersion = None,
           op_id: OpId = None) -> None:
    """Withdraw memory and everything derived from it."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.revoke_memory(run.actor, memory_id, reason, expected_version=expect_version,
                                         op_id=op_id))
