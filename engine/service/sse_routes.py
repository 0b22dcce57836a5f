"""Placeholder: this transport is being built (issue 11); it mounts nothing yet."""

from __future__ import annotations

from typing import Any


def mount(app: Any, service: Any) -> None:
    """Mount nothing (yet)."""
