"""An external agent as its own process: ``python -m tests.service.external_agent N KEY`` pulls and decides
the wakes of the agent of ``PMW_TOKEN`` at ``PMW_SERVER`` until N are done (or nothing is due for 30 s):
each decision increments the state KEY once, resting on KEY alone (``reads``). Prints the receipts as one JSON list."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from typing import Any

from engine.client.agent import ExternalAgent
from engine.client.http import ServerClient


def bump(key: str) -> Any:
    def decide(pulled: Mapping[str, Any]) -> dict[str, Any]:
        entry = next((s for s in pulled["view"]["state"] if s["key"] == key), None)
        version, value = (entry["version"], entry["value"]) if entry else (0, 0)
        return {"decision": "act", "reason": f"woken by {pulled['wake']['cause']}",
                "reads": [key] if entry else [],  # what it rests on: another agent's writes do not matter
                "effects": [{"effect": "compare_and_set_state", "key": key, "expected_version": version,
                             "value": value + 1}]}
    return decide


def main() -> None:
    wanted, key = int(sys.argv[1]), sys.argv[2]
    agent = ExternalAgent(ServerClient(os.environ["PMW_SERVER"], os.environ["PMW_TOKEN"]), lease_seconds=10)
    receipts = agent.run(bump(key), max_wakes=wanted, idle_s=30.0, poll_s=0.1)
    json.dump(receipts, sys.stdout)


if __name__ == "__main__":
    main()
