"""``pmw pull`` and ``pmw decide``: an external agent's side of the protocol, as a client of ``pmw serve``."""

from typing import Annotated

import typer

from engine.cli.runtime import invocation, json_object
from engine.errors import InvalidInput


def pull(
    ctx: typer.Context,
    lease: Annotated[float | None, typer.Option("--lease-seconds", min=1.0, max=3600.0,
                                                help="How long the wake stays leased to you.")] = None,
) -> None:
    """Lease the token's agent's most urgent due wake and print it with the agent's projection (what an
    in-process adapter is shown); `(nothing)` when none is due. Decide before the lease ends: `pmw decide`.
    Needs --server (PMW_SERVER) and a token."""
    with invocation(ctx) as run:
        from engine.client.agent import ExternalAgent

        if not run.remote:
            raise InvalidInput("--server", "pmw pull is a client of pmw serve: give --server URL (or PMW_SERVER)")
        run.show(ExternalAgent(run.client, lease_seconds=lease).pull())


def decide(
    ctx: typer.Context,
    wake_id: Annotated[str, typer.Argument(metavar="WAKE_ID", help="A wake you pulled.")],
    decision: Annotated[str, typer.Option("--decision", metavar="JSON", help=(
        'The decision: {"decision": "act"|"no_action", "reason": "...", "effects": [...], "reads": [...]}, '
        'or a decision envelope: {"outcome": "execute|draft|defer|refuse|escalate|idle|cancel", ...} '
        '(docs/decisions.md).'))],
) -> None:
    """Send the decision for a wake you pulled; prints its receipt. The runtime records the decision, applies
    its effects (each decided by the policy) and acks the wake; a retry answers the same receipt."""
    with invocation(ctx) as run:
        from engine.client.agent import ExternalAgent

        body = json_object("--decision", decision) or {}
        if not run.remote:
            raise InvalidInput("--server", "pmw decide is a client of pmw serve: give --server URL (or PMW_SERVER)")
        run.show(ExternalAgent(run.client).decide(wake_id, body))


def register(app: typer.Typer) -> None:
    app.command("pull")(pull)
    app.command("decide")(decide)
