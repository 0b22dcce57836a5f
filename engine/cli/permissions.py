"""What an agent may do: ``pmw allowed`` (every action on an object, allowed or denied), ``pmw invoke`` (use a
capability or tool, decided by the PDP and recorded) and ``pmw approvals`` (a governor's consent to one
S3 action, spent by the one invocation it names)."""

from typing import TYPE_CHECKING, Annotated

import typer

from engine.cli.options import OpId
from engine.cli.runtime import Run, invocation, json_object
from engine.errors import InvalidInput
from engine.policy.vocabulary import ACTIONS, KINDS

if TYPE_CHECKING:
    from engine.world import AllowedActions

INVOKABLE = tuple(kind for kind, actions in ACTIONS.items() if "invoke" in actions)

Kind = Annotated[str, typer.Argument(metavar="KIND", help=f"One of: {', '.join(KINDS)}.")]
ObjectId = Annotated[str, typer.Argument(metavar="ID", help="The object id (the tool name for tool, world for "
                                                             "topology).")]
Payload = Annotated[str | None, typer.Option("--payload", help="JSON object (bound into an approval's hash).")]


def check_kind(option: str, kind: str, kinds: tuple[str, ...] = KINDS) -> str:
    """``kind`` if it is one of ``kinds``; else ``InvalidInput`` naming ``option`` (before anything opens)."""
    if kind not in kinds:
        raise InvalidInput(option, f"{kind!r} is not one of: {', '.join(kinds)}")
    return kind


def objects_of(kind: str | None, ident: str | None, each: list[str] | None) -> list[tuple[str, str]]:
    """The (kind, id) pairs asked about: ``KIND ID`` or every ``--each KIND:ID``, not both."""
    if each:
        if kind is not None:
            raise InvalidInput("--each", "give either KIND ID or --each KIND:ID (repeatable), not both")
        pairs = []
        for item in each:
            k, sep, i = item.partition(":")
            if not sep or not i:
                raise InvalidInput("--each", f"{item!r} is not KIND:ID")
            pairs.append((check_kind("--each", k), i))
        return pairs
    if kind is None or ident is None:
        raise InvalidInput("KIND", "give KIND ID, or --each KIND:ID (repeatable)")
    return [(check_kind("KIND", kind), ident)]


def allowed_lines(decision: "AllowedActions") -> list[str]:
    """One object's decisions for humans: a header, then every action of its kind with allow, or deny and
    why (``illegal_transition``, ``not_assignee`` or ``policy``, and the error the call would raise)."""
    allowed = set(decision.allowed)
    roles = ", ".join(decision.derived_roles) or "-"
    lines = [f"{decision.kind} {decision.id}  (policy epoch {decision.policy_epoch}; derived roles: {roles})"]
    width = max((len(a) for a in ACTIONS[decision.kind]), default=6)
    for action in ACTIONS[decision.kind]:
        if action in allowed:
            lines.append(f"  {action:<{width}}  allow")
        else:
            reason = decision.refused.get(action)
            why = f"  {reason.value}: {decision.why.get(action, '')}" if reason is not None else ""
            lines.append(f"  {action:<{width}}  deny{why}")
    return lines


def show_allowed(run: Run, decisions: "list[AllowedActions]", *, batch: bool) -> None:
    if run.options.json:
        run.show(decisions if batch else decisions[0])
    else:
        typer.echo("\n".join("\n".join(allowed_lines(d)) for d in decisions))


def allowed(
    ctx: typer.Context,
    kind: Annotated[str | None, typer.Argument(metavar="KIND", help=f"One of: {', '.join(KINDS)}.",
                                               show_default=False)] = None,
    ident: Annotated[str | None, typer.Argument(metavar="ID", help="The object id.", show_default=False)]
    = None,
    each: Annotated[list[str] | None, typer.Option(
        "--each", metavar="KIND:ID", help="An object to ask about, instead of KIND ID (repeatable; one call for "
                                          "all).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="The decisions as JSON (as the global --json).")] = False,
) -> None:
    """Every action of KIND on ID that the acting agent may or may not take (or, with --each, of many
    objects at once), under the current policy epoch; each denied action says why: illegal_transition
    (the object's status forbids it), not_assignee (another party must take it) or policy (the PDP
    denies it)."""
    with invocation(ctx, acting=True, as_json=as_json) as run:
        objects = objects_of(kind, ident, each)
        if each:
            show_allowed(run, run.world.allowed_actions_batch(run.actor, objects), batch=True)
        else:
            show_allowed(run, [run.world.allowed_actions(run.actor, *objects[0])], batch=False)


def invoke(
    ctx: typer.Context,
    kind: Annotated[str, typer.Argument(metavar="KIND", help=f"One of: {', '.join(INVOKABLE)}.")],
    ident: ObjectId,
    side_effect: Annotated[str, typer.Option(
        "--side-effect", help="S0 (none) to S3 (irreversible, external: needs --approval).")] = "S0",
    payload: Payload = None,
    approval_id: Annotated[str | None, typer.Option(
        "--approval", metavar="APPROVAL_ID", help="A governor's approval of exactly this S3 invocation.")] = None,
    op_id: OpId = None,
) -> None:
    """Ask the policy before using a capability or tool, and record the use (exit 6 if denied; an S3
    invocation without a valid, unspent approval for this payload is refused too)."""
    with invocation(ctx, acting=True) as run:
        from engine.world.permissions import SIDE_EFFECTS

        check_kind("KIND", kind, INVOKABLE)
        if side_effect not in SIDE_EFFECTS:
            raise InvalidInput("--side-effect", f"{side_effect!r} is not one of: {', '.join(SIDE_EFFECTS)}")
        body = json_object("--payload", payload)
        run.show(run.world.invoke(run.actor, kind, ident, side_effect=side_effect, payload=body,
                                  approval_id=approval_id, op_id=op_id))


approvals = typer.Typer(help="Request, approve and show approvals of S3 (irreversible) invocations.",
                        no_args_is_help=True)
ApprovalId = Annotated[str, typer.Argument(metavar="APPROVAL_ID", help="The approval id.")]


@approvals.command("request")
def request(ctx: typer.Context, kind: Kind, ident: ObjectId, payload: Payload = None, op_id: OpId = None) -> None:
    """Ask a governor to approve invoking KIND ID with exactly --payload (an S3 side effect)."""
    with invocation(ctx, acting=True) as run:
        check_kind("KIND", kind)
        body = json_object("--payload", payload)
        run.show(run.world.request_approval(run.actor, kind, ident, payload=body, op_id=op_id))


@approvals.command("approve")
def approve(
    ctx: typer.Context,
    approval_id: ApprovalId,
    ttl: Annotated[float, typer.Option("--ttl", metavar="SECONDS", help="Valid for this long (at most 7 days).")]
    = 3600.0,
    op_id: OpId = None,
) -> None:
    """Approve a pending request (a governor, never the requester): bound to the current policy epoch."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.approve(run.actor, approval_id, ttl_seconds=ttl, op_id=op_id))


@approvals.command("show")
def show(ctx: typer.Context, approval_id: ApprovalId) -> None:
    """Show one approval."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.get_approval(approval_id, actor=run.actor))


def register(app: typer.Typer) -> None:
    """Add ``allowed``, ``invoke`` and the ``approvals`` group to ``app``."""
    app.command("allowed")(allowed)
    app.command("invoke")(invoke)
    app.add_typer(approvals, name="approvals")
