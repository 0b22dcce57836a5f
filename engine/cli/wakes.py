"""``pmw wakes``: the wake queue. Enqueue is idempotent by key; every wake ends in one receipt."""

from typing import Annotated

import typer

from engine.cli.options import Limit, OpId, Reason
from engine.cli.runtime import choices, invocation, json_object, listed
from engine.models.enums import Decision, Outcome, WakeStatus

group = typer.Typer(help="Enqueue, claim, ack and cancel wakes.", no_args_is_help=True)

WakeId = Annotated[str, typer.Argument(metavar="WAKE_ID", help="The wake id.")]


@group.command("enqueue")
def enqueue(
    ctx: typer.Context,
    target_agent: Annotated[str, typer.Argument(metavar="TARGET_AGENT", help="The agent to wake.")],
    cause: Annotated[str, typer.Option("--cause", help="Why the agent is woken.")],
    key: Annotated[str, typer.Option("--key", help="Idempotency key: the same key makes one wake.")],
    not_before_us: Annotated[int | None, typer.Option("--not-before-us")] = None,
    priority: Annotated[int, typer.Option("--priority", help="-1000 to 1000; higher first.")] = 0,
    payload: Annotated[str | None, typer.Option("--payload", help="JSON object.")] = None,
    refs: Annotated[list[str] | None, typer.Option("--ref", help="A payload ref (repeatable).")] = None,
    base_state_version: Annotated[int | None, typer.Option("--base-state-version")] = None,
    authority_scope: Annotated[str | None, typer.Option("--authority-scope", help="JSON object.")] = None,
    cause_event_id: Annotated[str | None, typer.Option("--cause-event")] = None,
    op_id: OpId = None,
) -> None:
    """Queue a wake for TARGET_AGENT unless one with --key exists (created: false)."""
    with invocation(ctx, acting=True) as run:
        body = json_object("--payload", payload)
        scope = json_object("--authority-scope", authority_scope)
        run.show(run.world.enqueue_wake(
            run.actor, target_agent, cause, key, not_before_us=not_before_us, priority=priority, payload=body,
            payload_refs=listed(refs), base_state_version=base_state_version, authority_scope=scope,
            cause_event_id=cause_event_id, op_id=op_id))


@group.command("claim")
def claim(
    ctx: typer.Context,
    agent_id: Annotated[str | None, typer.Option("--agent", help="Only this agent's wakes.")] = None,
    lease_seconds: Annotated[float, typer.Option("--lease-seconds")] = 30.0,
) -> None:
    """Lease the most urgent due wake to the acting agent; prints nothing (null) when none is due.

    (The World's claim_wake takes no operation id, so there is no --op-id here.)
    """
    with invocation(ctx, acting=True) as run:
        run.show(run.world.claim_wake(run.actor, agent_id=agent_id, lease_seconds=lease_seconds))


@group.command("ack")
def ack(
    ctx: typer.Context,
    wake_id: WakeId,
    decision: Annotated[str, typer.Option("--decision", help=choices(Decision))] = "no_action",
    outcome: Annotated[str | None, typer.Option("--outcome", help=choices(Outcome))] = None,
    reason: Annotated[str | None, typer.Option("--reason")] = None,
    task_id: Annotated[str | None, typer.Option("--task")] = None,
    action_refs: Annotated[list[str] | None, typer.Option("--action-ref", help="Repeatable.")] = None,
    artifact_refs: Annotated[list[str] | None, typer.Option("--artifact-ref", help="Repeatable.")] = None,
    observed_state_version: Annotated[int | None, typer.Option("--observed-state-version")] = None,
    base_state_version: Annotated[int | None, typer.Option("--base-state-version")] = None,
    resulting_state_version: Annotated[int | None, typer.Option("--resulting-state-version")] = None,
    topology_version: Annotated[int | None, typer.Option("--topology-version")] = None,
    next_wake: Annotated[str | None, typer.Option("--next-wake")] = None,
    payload: Annotated[str | None, typer.Option("--payload", help="JSON object.")] = None,
    op_id: OpId = None,
) -> None:
    """Finish a wake you hold the lease of: it is acked and its receipt written."""
    with invocation(ctx, acting=True) as run:
        body = json_object("--payload", payload) or {}
        run.show(run.world.ack_wake(
            run.actor, wake_id, decision, outcome=outcome, op_id=op_id, reason=reason, task_id=task_id,
            action_refs=listed(action_refs) or [], artifact_refs=listed(artifact_refs) or [],
            observed_state_version=observed_state_version, base_state_version=base_state_version,
            resulting_state_version=resulting_state_version, topology_version=topology_version,
            next_wake=next_wake, payload=body))


@group.command("cancel")
def cancel(
    ctx: typer.Context,
    wake_id: WakeId,
    reason: Reason,
    outcome: Annotated[str, typer.Option("--outcome", help="suppressed, cancelled or denied")] = "suppressed",
    op_id: OpId = None,
) -> None:
    """End a pending or claimed wake without running it; its receipt says why."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.cancel_wake(run.actor, wake_id, reason, outcome=outcome, op_id=op_id))


@group.command("list")
def list_(
    ctx: typer.Context,
    status: Annotated[str | None, typer.Option("--status", help=choices(WakeStatus))] = None,
    target_agent: Annotated[str | None, typer.Option("--agent")] = None,
    limit: Limit = 1000,
) -> None:
    """List wakes, oldest first."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.list_wakes(status=status, target_agent=target_agent, limit=limit, actor=run.actor))


@group.command("show")
def show(ctx: typer.Context, wake_id: WakeId) -> None:
    """Show one wake."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.get_wake(wake_id, actor=run.actor))
