"""Whose operation ids a caller of the agent-facing World may use.

Operation ids are one namespace (the ledger's unique key), and some name writes that are not the caller's
to make: an agent that took one first would block that write, or have its own result replayed as it. The
World refuses, before anything is read or written:

- the runtime book's own ids: ``<wake>:decide`` (a recorded decision) and ``revoke-...`` (revocations);
- the controller's ids (``ctl:...``: its steps and follow-ups) unless the caller is the controller's agent;
- a wake's effect and ack ids (``<wake>:<n>``, ``<wake>:ack``) unless the caller is the wake's target agent
  or the worker holding its lease;
- a contracted action's begin and settle ids (``act-<digest>-b`` / ``-s``, ``engine.world.actions``) for any
  command but ``begin_action`` / ``settle_action`` (which derive them from the idempotency key): taken first
  by another write, they would block that key's attempt.
"""

from __future__ import annotations

import re

from store import Reader

CONTROLLER_AGENT = "pmw-controller"  # the controller's own agent (engine.runloop.follower registers it)

_RUNTIME_OPS = re.compile(r":decide$|^revoke-")
_WAKE_OPS = re.compile(r"^(wak_[0-9A-Za-z]+):")
_ACTION_OPS = re.compile(r"^act-")
ACTION_COMMANDS = frozenset({"begin_action", "settle_action"})


class ForeignOperationIds:
    """The World's guard: ``guard(actor, op_id, command)`` is why ``actor`` may not use ``op_id`` for
    ``command`` (``None``: it may)."""

    def __init__(self, read: Reader) -> None:
        self._read = read

    def __call__(self, actor: str, op_id: str, command: str = "") -> str | None:
        if _ACTION_OPS.match(op_id) and command not in ACTION_COMMANDS:
            return f"{op_id!r} is reserved for contracted actions' begin and settle records"
        if _RUNTIME_OPS.search(op_id):
            return f"{op_id!r} is reserved for the runtime's own bookkeeping (recorded decisions, revocations)"
        if op_id.startswith("ctl:") and actor != CONTROLLER_AGENT:
            return f"{op_id!r} is reserved for the controller ({CONTROLLER_AGENT})"
        if (m := _WAKE_OPS.match(op_id)) is not None:
            wake = self._read.get("wakes", wake_id=m[1])
            if wake is not None and actor not in (wake["target_agent"], wake["lease_owner"]):
                return f"{op_id!r} names a write of wake {m[1]!r}: only its target or the worker holding it"
        return None


__all__ = ["ACTION_COMMANDS", "CONTROLLER_AGENT", "ForeignOperationIds"]
