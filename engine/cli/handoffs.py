"""``pmw handoffs``: hand a task to another agent with pointers and a delta, never the transcript."""

from typing import Annotated

import typer

from engine.cli.options import Limit, OpId, Reason
from engine.cli.runtime import choices, invocation, json_object, listed
from engine.models.enums import HandoffStatus

group = typer.Typer(help="Create, accept, complete and reject handoffs.", no_args_is_help=True)

HandoffId = Annotated[str, typer.Argument(metavar="HANDOFF_ID", help="The handoff id.")]


@group.command("create")
def create(
    ctx: typer.Context,
    target_agent: Annotated[str, typer.Argument(metavar="TARGET_AGENT", help="The agent to hand the task to.")],
    task_id: Annotated[str, typer.Argument(metavar="TASK_ID", help="The task you hold.")],
    goal: Annotated[str, typer.Argument(metavar="GOAL", help="What the target should do.")],
    state_ref: Annotated[str | None, typer.Option("--state-ref", help="Pointer to the current state.")] = None,
    evidence: Annotated[list[str] | None, typer.Option("--evidence", help="Repeatable ref.")] = None,
    artifacts: Annotated[list[str] | None, typer.Option("--artifact", help="Repeatable artifact id.")] = None,
    constraints: Annotated[str | None, typer.Option("--constraints", help="JSON object.")] = None,
    authority_scope: Annotated[str | None, typer.Option("--authority-scope", help="JSON object.")] = None,
    expected_output: Annotated[str | None, typer.Option("--expected-output")] = None,
    return_route: Annotated[str | None, typer.Option("--return-route", help="Agent to report to.")] = None,
    op_id: OpId = None,
) -> None:
    """Offer TASK_ID (which the acting agent holds) to TARGET_AGENT."""
    with invocation(ctx, acting=True) as run:
        cons = json_object("--constraints", constraints) or {}
        scope = json_object("--authority-scope", authority_scope) or {}
        run.show(run.world.create_handoff(
            run.actor, target_agent, task_id, goal, current_state_ref=state_ref,
            evidence_refs=listed(evidence) or [], artifact_refs=listed(artifacts) or [], constraints=cons,
            authority_scope=scope, expected_output=expected_output, return_route=return_route, op_id=op_id))


@group.command("accept")
def accept(ctx: typer.Context, handoff_id: HandoffId, op_id: OpId = None) -> None:
    """Accept a handoff addressed to you: the task is now yours (claimed)."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.accept_handoff(run.actor, handoff_id, op_id=op_id))


@group.command("complete")
def complete(ctx: typer.Context, handoff_id: HandoffId,
             result: Annotated[str | None, typer.Option("--result", help="JSON object.")] = None,
             op_id: OpId = None) -> None:
    """Report an accepted handoff's expected output back."""
    with invocation(ctx, acting=True) as run:
        parsed = json_object("--result", result)
        run.show(run.world.complete_handoff(run.actor, handoff_id, parsed, op_id=op_id))


@group.command("reject")
def reject(ctx: typer.Context, handoff_id: HandoffId, reason: Reason, op_id: OpId = None) -> None:
    """Decline a pending handoff; the task stays with its source."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.reject_handoff(run.actor, handoff_id, reason, op_id=op_id))


@group.command("list")
def list_(
    ctx: typer.Context,
    status: Annotated[str | None, typer.Option("--status", help=choices(HandoffStatus))] = None,
    target_agent: Annotated[str | None, typer.Option("--target")] = None,
    limit: Limit = 1000,
) -> None:
    """List handoffs, optionally by status or target agent."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.list_handoffs(status=status, target_agent=target_agent, limit=limit, actor=run.actor))


@group.command("show")
def show(ctx: typer.Context, handoff_id: HandoffId) -> None:
    """Show one handoff."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.get_handoff(handoff_id, actor=run.actor))
