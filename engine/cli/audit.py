"""``pmw audit``: query the PDP's decision log."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add ``pmw audit`` to ``app``."""
