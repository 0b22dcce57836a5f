"""Whose operation ids a caller of the agent-facing World may use.

Operation ids are one namespace (the ledger's unique key), and some name writes that are not the caller's
to make: an agent that took one first would block that write, or have its own result replayed as it. The
World refuses, before anything is read or written:

- the runtime book's own ids: ``<wake>:decide`` (a recorded decision) and ``revoke-...`` (revocations);
- the controller's ids (``ctl:...``: its steps and follow-ups) unless the caller is the controller's agent;
- a wake's effect and ack ids (``<wake>:<n>``, ``<wake>:ack``) unless the caller is the wake's target agent
  or the worker holding its lease.
"""

from __future__ import annotations

import re

from store import Reader

CONTROLLER_AGENT = "pmw-controller"  # the controller's own agent (engine.runloop.follower registers it)

_RUNTIME_OPS = re.compile(r":decide$|^revoke-")
_WAKE_OPS = re.compile(r"^(wak_[0-9A-Za-z]+):")


class ForeignOperationIds:
    """The World's guard: ``guard(actor, op_id)`` is why ``actor`` may not use ``op_id`` (``None``: it may)."""

    def __init__(self, read: Reader) -> None:
        self._read = read

    def __call__(self, actor: str, op_id: str) -> str | None:
        if _RUNTIME_OPS.search(op_id):
            return f"{op_id!r} is reserved for the runtime's own bookkeeping (recorded decisions, revocations)"
        if op_id.startswith("ctl:") and actor != CONTROLLER_AGENT:
            return f"{op_id!r} is reserved for the controller ({CONTROLLER_AGENT})"
        if (m := _WAKE_OPS.match(op_id)) is not None:
            wake = self._read.get("wakes", wake_id=m[1])
            if wake is not None and actor not in (wake["target_agent"], wake["lease_owner"]):
                return f"{op_id!r} names a write of wake {m[1]!r}: only its target or the worker holding it"
        return None


__all__ = ["CONTROLLER_AGENT", "ForeignOperationIds"]
