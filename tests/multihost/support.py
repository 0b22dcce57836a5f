"""What the multi-host tests share: the world's worker agents seated the same way, and a controller child's
status report read the same way (``tests/multihost/controller_child.py`` writes it)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from engine.world import World

NO_REPORT: dict[str, Any] = {"leader": "none", "generation": None, "at": 0}


def seat_workers(world: World, agents: Iterable[str], *, feeds: bool = False) -> None:
    """Register each agent as a live ``worker`` holding ``state.write`` (the governor ``gov`` grants it);
    ``feeds``: each also follows its ``feed/<agent>`` key."""
    for a in agents:
        world.register_agent(a, a, "worker", f"t-{a}")
        world.activate_session(f"term:t-{a}")
        world.grant("gov", a, capabilities=["state.write"])
        if feeds:
            world.subscribe("gov", f"feed/{a}", agent_id=a)


def controller_status(path: Path) -> dict[str, Any]:
    """A controller child's newest report (``leader``, ``generation``, ``at``); none yet, or one being
    rewritten: no leader."""
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return dict(NO_REPORT)
