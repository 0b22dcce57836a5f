"""``pmw agents``: identity and presence, always by an explicit target (``agent:ID``, ``term:KEY``,
``session:ID``; a bare value is an agent id).

The acting agent (``--as``) is optional for the presence commands: the World defaults it to the agent
being registered or the agent that owns the named session. ``list`` and ``show`` read as ``--as``;
``grant`` (capabilities and clearance) is for governors only.
"""

from typing import Annotated

import typer

from engine.cli.options import OpId
from engine.cli.runtime import choices, invocation, json_object, listed
from engine.errors import InvalidInput
from engine.models.enums import Presence

group = typer.Typer(help="Register agents and manage their sessions (presence on terminals).",
                    no_args_is_help=True)

TargetArg = Annotated[str, typer.Argument(metavar="TARGET", help="agent:ID, term:KEY or session:ID")]


@group.command("register")
def register(
    ctx: typer.Context,
    agent_id: Annotated[str, typer.Argument(metavar="AGENT_ID", help="The stable agent id.")],
    name: Annotated[str, typer.Option("--name", help="Display name.")],
    role: Annotated[str, typer.Option("--role", help="Role id.")],
    term: Annotated[str, typer.Option("--term", help="The terminal context (term_key) of the new session.")],
    session_id: Annotated[str | None, typer.Option("--session-id", help="Choose the session id.")] = None,
    model_hint: Annotated[str | None, typer.Option("--model-hint")] = None,
    platform: Annotated[str | None, typer.Option("--platform")] = None,
    capabilities: Annotated[str | None, typer.Option("--capabilities", help="JSON object.")] = None,
    permissions: Annotated[str | None, typer.Option("--permissions", help="JSON object.")] = None,
    op_id: OpId = None,
) -> None:
    """Create the agent (or recover it) and attach a new session on --term."""
    with invocation(ctx) as run:
        caps = json_object("--capabilities", capabilities)
        perms = json_object("--permissions", permissions)
        run.show(run.world.register_agent(
            agent_id, name, role, term, session_id=session_id, model_hint=model_hint, platform=platform,
            capability_profile=caps, permission_profile=perms, actor=run.actor_or_none, op_id=op_id))


@group.command("grant")
def grant(
    ctx: typer.Context,
    agent_id: Annotated[str, typer.Argument(metavar="AGENT_ID", help="The agent to grant authority to.")],
    capabilities: Annotated[list[str] | None, typer.Option(
        "--capability", help="A capability, e.g. task.create or tool:search (repeatable; replaces the agent's "
                             "capabilities; see docs/policy-contract.md).")] = None,
    clearance: Annotated[int | None, typer.Option(
        "--clearance", min=0, max=5, help="The highest sensitivity (0 to 5) the agent may read.")] = None,
    no_capabilities: Annotated[bool, typer.Option(
        "--no-capabilities", help="Take every capability away (instead of --capability).")] = False,
    role: Annotated[str | None, typer.Option(
        "--role", help="Set the agent's workspace role (how an agent becomes a reviewer, moderator or governor: "
                       "no agent may take such a role itself).")] = None,
    op_id: OpId = None,
) -> None:
    """Set AGENT_ID's capabilities, clearance and/or role (the acting agent must be a governor)."""
    with invocation(ctx, acting=True) as run:
        caps = listed(capabilities)
        if no_capabilities:
            if caps:
                raise InvalidInput("--no-capabilities", "cannot be combined with --capability")
            caps = []
        if caps is None and clearance is None and role is None:
            raise InvalidInput("--capability", "give --capability (repeatable), --no-capabilities, --clearance "
                                               "or --role")
        run.show(run.world.grant(run.actor, agent_id, capabilities=caps, clearance=clearance, role_id=role,
                                 op_id=op_id))


@group.command("list")
def list_(
    ctx: typer.Context,
    status: Annotated[str | None, typer.Option("--status", help=choices(Presence))] = None,
    role: Annotated[str | None, typer.Option("--role")] = None,
) -> None:
    """List agents, optionally by presence or role."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.list_agents(status=status, role_id=role, actor=run.actor))


@group.command("show")
def show(ctx: typer.Context, agent_id: Annotated[str, typer.Argument(metavar="AGENT_ID", )]) -> None:
    """Show one agent."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.get_agent(agent_id, actor=run.actor))


@group.command("sessions")
def sessions(ctx: typer.Context, target: TargetArg) -> None:
    """List the sessions a target names (those of agents --as may read)."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.resolve_target(target, actor=run.actor))


@group.command("activate")
def activate(ctx: typer.Context, target: TargetArg, op_id: OpId = None) -> None:
    """Make the target's one session the active owner of its terminal."""
    with invocation(ctx) as run:
        run.show(run.world.activate_session(target, actor=run.actor_or_none, op_id=op_id))


@group.command("relinquish")
def relinquish(ctx: typer.Context, target: TargetArg, op_id: OpId = None) -> None:
    """Give up active ownership of the terminal (the session stays attached)."""
    with invocation(ctx) as run:
        run.show(run.world.relinquish_session(target, actor=run.actor_or_none, op_id=op_id))


@group.command("detach")
def detach(ctx: typer.Context, target: TargetArg, op_id: OpId = None) -> None:
    """Mark the target's one session offline."""
    with invocation(ctx) as run:
        run.show(run.world.detach_session(target, actor=run.actor_or_none, op_id=op_id))


@group.command("unregister")
def unregister(ctx: typer.Context, target: TargetArg, op_id: OpId = None) -> None:
    """Mark every session the target names offline (identity, tasks and memory stay)."""
    with invocation(ctx) as run:
        run.show(run.world.unregister_agent(target, actor=run.actor_or_none, op_id=op_id))
