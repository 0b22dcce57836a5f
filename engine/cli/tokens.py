"""``pmw tokens``: agent tokens (issue, revoke, list).

A token is ``pmw_<token_id>_<secret>``; ``issue`` shows it once (the store keeps only a hash of its secret).
A live governor issues tokens for any agent; an agent lists and revokes its own (``docs/security.md``).
"""

from __future__ import annotations

import re
from typing import Annotated

import typer

from engine.cli.options import OpId
from engine.cli.runtime import invocation

group = typer.Typer(help="Agent tokens: issue (shown once), revoke, list.", no_args_is_help=True)

#: Seconds per unit of an ``--expires`` duration.
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
NEVER = "never"
SHOWN_ONCE = "the token is shown only this once (it is stored only as a hash): keep it now"
#: The columns of ``pmw tokens list``.
COLUMNS = ("token_id", "agent_id", "scope", "expires_at_us", "revoked_at_us", "label")
_DURATION = re.compile(r"([1-9][0-9]{0,9})([smhdw])")


def expires_in_s(text: str | None) -> int | None:
    """An ``--expires`` value as seconds: ``<n><unit>`` (units s, m, h, d, w: ``30d``, ``12h``) or
    ``never`` (``None``); not given: the default lifetime (90 days). Anything else is ``InvalidInput``."""
    from engine.errors import InvalidInput
    from engine.models.tokens import DEFAULT_EXPIRES_IN_S

    if text is None:
        return DEFAULT_EXPIRES_IN_S
    if text == NEVER:
        return None
    found = _DURATION.fullmatch(text)
    if found is None:
        raise InvalidInput("--expires", f"{text[:100]!r} is not a duration like 30d, 12h, 90m or 'never'")
    return int(found.group(1)) * UNITS[found.group(2)]


@group.command("issue")
def issue(
    ctx: typer.Context,
    agent_id: Annotated[str, typer.Argument(metavar="AGENT", help="The agent the token authenticates as.")],
    expires: Annotated[str | None, typer.Option(
        "--expires", metavar="DURATION", help="Lifetime: 30d, 12h, 90m, 2w, ... or 'never' (default 90d).")] = None,
    scope: Annotated[str, typer.Option(
        "--scope", metavar="SCOPE", help="read (reads only) or act (everything the agent may do).")] = "act",
    label: Annotated[str | None, typer.Option("--label", help="A note shown in lists and audit.")] = None,
    op_id: OpId = None,
) -> None:
    """Issue a token for AGENT and show it once (a live governor's act; --as is the governor)."""
    with invocation(ctx, acting=True) as run:
        lifetime = expires_in_s(expires)
        run.show(run.world.issue_token(actor=run.actor, agent_id=agent_id, scope=scope, expires_in_s=lifetime,
                                       label=label, op_id=op_id))
        if not run.options.json:
            typer.echo(f"note: {SHOWN_ONCE}", err=True)


@group.command("revoke")
def revoke(
    ctx: typer.Context,
    token_id: Annotated[str, typer.Argument(metavar="TOKEN_ID", help="The token's id (tok_...), not the token.")],
    op_id: OpId = None,
) -> None:
    """Revoke TOKEN_ID: refused from the next call on (a governor's, or the token's own agent's act)."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.revoke_token(actor=run.actor, token_id=token_id, op_id=op_id))


@group.command("list")
def list_(
    ctx: typer.Context,
    agent: Annotated[str | None, typer.Option("--agent", metavar="AGENT", help="Only this agent's tokens.")]
    = None,
) -> None:
    """List the tokens --as may see (a governor: every agent's; an agent: its own), without secrets."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.list_tokens(actor=run.actor, agent_id=agent), columns=COLUMNS)
