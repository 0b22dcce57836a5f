"""An agent that runs outside the server: it pulls its own wakes, decides, and sends the decision back.

The server runs the rest exactly as for an in-process agent (``engine.protocol.pull``): the decision is
recorded before any effect, the effects are applied with the wake's operation ids, the ack writes the
receipt and the run's trace. A decision function takes the pulled context (``{"wake", "agent", "view",
"lease_until_us"}``, JSON) and returns a decision envelope (``{"outcome": "execute" | "draft" | "defer" |
...}``, ``engine.runloop.envelope``) or an ``AgentDecision`` (``{"decision": "act" | "no_action", "reason":
..., "effects": [...]}``) as JSON, the same shapes a ``CallableAdapter`` returns in process.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from engine.client.http import ServerClient

Decide = Callable[[Mapping[str, Any]], Mapping[str, Any]]


class ExternalAgent:
    """The token's agent, pulling through ``client``."""

    def __init__(self, client: ServerClient, *, lease_seconds: float | None = None) -> None:
        self.client = client
        self.lease_seconds = lease_seconds

    def pull(self) -> dict[str, Any] | None:
        """The agent's most urgent due wake, leased to it, with its projection (None: nothing is due)."""
        arguments = {} if self.lease_seconds is None else {"lease_seconds": self.lease_seconds}
        found = self.client.request("POST", "/v1/wakes/pull", {"arguments": arguments}).get("result")
        return found if isinstance(found, dict) else None

    def decide(self, wake_id: str, decision: Mapping[str, Any]) -> dict[str, Any]:
        """Send the decision for a pulled wake; the wake's receipt (a retry answers the same receipt)."""
        answer = self.client.request("POST", f"/v1/wakes/{wake_id}/decision",
                                     {"arguments": {"decision": dict(decision)}})
        result = answer.get("result")
        return result if isinstance(result, dict) else {}

    def run(self, decide: Decide, *, max_wakes: int = 100, idle_s: float = 5.0, poll_s: float = 0.2
            ) -> list[dict[str, Any]]:
        """Pull, decide and send until ``max_wakes`` wakes are done or nothing was due for ``idle_s``;
        the receipts, in order. Bounded both ways."""
        receipts: list[dict[str, Any]] = []
        quiet_since = time.monotonic()
        while len(receipts) < max_wakes:
            pulled = self.pull()
            if pulled is None:
                if time.monotonic() - quiet_since > idle_s:
                    break
                time.sleep(poll_s)
                continue
            receipts.append(self.decide(str(pulled["wake"]["wake_id"]), decide(pulled)))
            quiet_since = time.monotonic()
        return receipts


__all__ = ["Decide", "ExternalAgent"]
