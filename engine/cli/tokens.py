"""``pmw tokens``: agent tokens (issue, revoke, list)."""

from __future__ import annotations

import typer

group = typer.Typer(help="Agent tokens: issue (shown once), revoke, list.", no_args_is_help=True)
