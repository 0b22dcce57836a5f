"""Option types shared by several commands (``Annotated`` aliases, so defaults stay plain values)."""

from __future__ import annotations

from typing import Annotated

import typer

OpId = Annotated[str | None, typer.Option(
    "--op-id", help="Idempotency key: retrying the same request with the same id applies it at most once.")]
ExpectVersion = Annotated[int | None, typer.Option(
    "--expect-version", help="Compare-and-set: apply only if the object is at this version (else exit 5).")]
Limit = Annotated[int, typer.Option("--limit", min=1, max=100_000, help="At most this many rows.")]
Reason = Annotated[str, typer.Option("--reason", help="Why (recorded with the change).")]

__all__ = ["ExpectVersion", "Limit", "OpId", "Reason"]
