"""``pmw rooms``: create -> join -> discuss -> commit -> distill -> leave -> close (``docs/rooms.md``).

Every command acts as ``--as``: a blind answer stays its author's until every active member has answered.
"""

from typing import Annotated

import typer

from engine.cli.options import OpId
from engine.cli.runtime import choices, invocation, json_object, listed
from engine.models.enums import EpistemicType

group = typer.Typer(help="Open rooms, talk, answer blind, distill, and close stale rooms.", no_args_is_help=True)

RoomId = Annotated[str, typer.Argument(metavar="ROOM_ID", help="The room id.")]
EpistemicTypeOption = Annotated[str, typer.Option("--type", help=choices(EpistemicType))]
ConfidenceOption = Annotated[float, typer.Option("--confidence", help="0.0 to 1.0.")]


@group.command("create")
def create(
    ctx: typer.Context,
    goal: Annotated[str, typer.Argument(metavar="GOAL", help="What the room is for.")],
    members: Annotated[list[str] | None, typer.Option("--member", help="An agent joined at once (repeatable).")]
    = None,
    room_id: Annotated[str | None, typer.Option("--id", help="Choose the room id.")] = None,
    stop_condition: Annotated[str | None, typer.Option(
        "--stop", help="When the room is stale: idle:<seconds>, answers:all, members:0, joined by '|'.")] = None,
    context_scope: Annotated[str | None, typer.Option("--context-scope", help="JSON object.")] = None,
    authority_scope: Annotated[str | None, typer.Option("--authority-scope", help="JSON object.")] = None,
    op_id: OpId = None,
) -> None:
    """Open a room with the acting agent (and --member agents) in it."""
    with invocation(ctx, acting=True) as run:
        context = json_object("--context-scope", context_scope)
        authority = json_object("--authority-scope", authority_scope)
        run.show(run.world.create_room(run.actor, goal, members=listed(members), room_id=room_id,
                                       stop_condition=stop_condition, context_scope=context,
                                       authority_scope=authority, op_id=op_id))


@group.command("show")
def show(ctx: typer.Context, room_id: RoomId) -> None:
    """Show one room."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.get_room(room_id, actor=run.actor))


@group.command("members")
def members_(ctx: typer.Context, room_id: RoomId,
             everyone: Annotated[bool, typer.Option("--all", help="Include members who left.")] = False) -> None:
    """List the room's (active) members."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.room_members(room_id, active_only=not everyone, actor=run.actor))


@group.command("join")
def join(ctx: typer.Context, room_id: RoomId, op_id: OpId = None) -> None:
    """Join an open room (it shares the room's memory, never permissions)."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.join_room(run.actor, room_id, op_id=op_id))


@group.command("invite")
def invite(ctx: typer.Context, room_id: RoomId,
           agent_id: Annotated[str, typer.Argument(metavar="AGENT_ID", help="The agent invited.")],
           op_id: OpId = None) -> None:
    """Invite AGENT_ID to the open room (a member, the opener, a moderator or a governor invites); the invitee
    then joins itself."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.invite_to_room(run.actor, room_id, agent_id, op_id=op_id))


@group.command("leave")
def leave(ctx: typer.Context, room_id: RoomId,
          member: Annotated[str | None, typer.Option(
              "--member", help="Remove this member instead of leaving (a moderator's or governor's act; "
                               "recorded as room.member_removed).")] = None,
          op_id: OpId = None) -> None:
    """Leave the room (or, with --member, remove another member)."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.leave_room(run.actor, room_id, agent_id=member, op_id=op_id))


@group.command("say")
def say(
    ctx: typer.Context,
    room_id: RoomId,
    body: Annotated[str, typer.Argument(metavar="BODY", help="What to say.")],
    payload: Annotated[str | None, typer.Option("--payload", help="JSON object.")] = None,
    op_id: OpId = None,
) -> None:
    """Say something in a room the acting agent is a member of."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.discuss(run.actor, room_id, body, payload=json_object("--payload", payload),
                                   op_id=op_id))


@group.command("discussion")
def discussion(ctx: typer.Context, room_id: RoomId,
               limit: Annotated[int, typer.Option("--limit", min=1, max=1000, help="The last this many.")] = 100
               ) -> None:
    """The room's last messages, oldest first (members only)."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.room_discussion(room_id, actor=run.actor, limit=limit))


@group.command("answer")
def answer(
    ctx: typer.Context,
    room_id: RoomId,
    content: Annotated[str, typer.Argument(metavar="CONTENT", help="The blind answer.")],
    epistemic_type: EpistemicTypeOption = "inference",
    confidence: ConfidenceOption = 0.5,
    op_id: OpId = None,
) -> None:
    """Commit the acting agent's blind answer (revealed to the room once every active member answered)."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.commit_answer(run.actor, room_id, content, epistemic_type=epistemic_type,
                                         confidence=confidence, op_id=op_id))


@group.command("answers")
def answers(ctx: typer.Context, room_id: RoomId) -> None:
    """The room's answers the acting agent may see: its own, and revealed ones."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.room_answers(room_id, actor=run.actor))


@group.command("distill")
def distill(
    ctx: typer.Context,
    room_id: RoomId,
    content: Annotated[str, typer.Argument(metavar="CONTENT", help="The distilled statement.")],
    sources: Annotated[list[str], typer.Option("--source", help="A room memory id it derives from (repeatable).")],
    epistemic_type: EpistemicTypeOption = "inference",
    confidence: ConfidenceOption = 0.5,
    op_id: OpId = None,
) -> None:
    """Distill room memory into a shared candidate (review and promotion make it shared)."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.distill_room(run.actor, room_id, content, source_memory_ids=list(sources),
                                        epistemic_type=epistemic_type, confidence=confidence, op_id=op_id))


@group.command("close")
def close(ctx: typer.Context, room_id: RoomId, op_id: OpId = None) -> None:
    """Close the room; every member leaves with it."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.close_room(run.actor, room_id, op_id=op_id))


@group.command("close-stale")
def close_stale(ctx: typer.Context) -> None:
    """Close every open room whose stop condition holds now and that the acting agent may close."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.close_stale_rooms(run.actor))
