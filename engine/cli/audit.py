"""``pmw audit``: query the PDP's decision log (``<data dir>/audit/decisions.log`` and its rotated files)
by agent, kind, action, effect and time, instead of reading raw JSONL. A governance call
(``run.governance.audit``): ``--as`` must be a live governor."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from engine.cli.runtime import invocation

COLUMNS = ["time_us", "principal", "kind", "id", "action", "effect", "policy", "policy_epoch", "call_id"]


def time_us(option: str, text: str | None) -> int | None:
    """A time option: µs since the Unix epoch, or an ISO-8601 time (UTC unless it names its zone).
    Anything else is ``InvalidInput`` naming ``option``."""
    from engine.errors import InvalidInput

    if text is None:
        return None
    if text.isdigit():
        return int(text)
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(option, f"{text!r} is neither µs since the Unix epoch nor an ISO-8601 time") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1_000_000)


def audit(
    ctx: typer.Context,
    agent: Annotated[str | None, typer.Option("--agent", metavar="AGENT_ID", help="Decisions for this agent.")]
    = None,
    kind: Annotated[str | None, typer.Option("--kind", metavar="KIND", help="Decisions on objects of KIND.")]
    = None,
    action: Annotated[str | None, typer.Option("--action", metavar="ACTION", help="Decisions of ACTION.")] = None,
    effect: Annotated[str | None, typer.Option("--effect", metavar="ALLOW|DENY", help="Only allows or denies.")]
    = None,
    since: Annotated[str | None, typer.Option(
        "--since", metavar="TIME", help="At or after TIME (µs since the Unix epoch, or ISO-8601, UTC).")] = None,
    until: Annotated[str | None, typer.Option(
        "--until", metavar="TIME", help="At or before TIME (µs since the Unix epoch, or ISO-8601, UTC).")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=100_000,
                                       help="The newest LIMIT matching decisions.")] = 100,
) -> None:
    """The newest decisions of the PDP's decision log matching every filter, oldest first: when, who, on
    what, which action, the effect, the policy and epoch that decided, the PDP's call id."""
    with invocation(ctx, acting=True) as run:
        since_us, until_us = time_us("--since", since), time_us("--until", until)
        run.show(run.governance.audit(actor=run.actor, agent=agent, kind=kind, action=action,
                                      effect=effect.upper() if effect else None, since_us=since_us,
                                      until_us=until_us, limit=limit), columns=COLUMNS)


def register(app: typer.Typer) -> None:
    """Add ``pmw audit`` to ``app``."""
    app.command("audit")(audit)
