"""The World facade: the seed's API (``register_agent`` ... ``project_world``) and what lifecycles need.

This is the object agents, CLIs and transports hold. Every write goes through :meth:`WorldCore._write`,
is decided by the policy, and reaches the store's gateway through its decided door; reads go through the
store's reader, decided by the policy. The runtime's own bookkeeping is not here: it is on
:class:`engine.world.book.RuntimeBook`, which opens the World (:func:`engine.world.book.open_world`) and
which the runtime never hands out. Time and ids come from the injected clock and id source.
"""

from __future__ import annotations

import re

from engine.world.artifacts import ArtifactCalls
from engine.world.channels import ChannelCalls
from engine.world.core import Cause, WorldCore
from engine.world.execute import ExecuteCalls
from engine.world.handoffs import HandoffCalls
from engine.world.memory import MemoryCalls
from engine.world.permissions import AllowedActions, Invoked, PermissionCalls
from engine.world.policy_epochs import PolicyEpochReads
from engine.world.projection import ProjectionCalls, WorldView
from engine.world.revocation import RevocationReport
from engine.world.rooms import RoomCalls
from engine.world.snapshots import SnapshotCalls, SnapshotRef
from engine.world.state import EventRef, StateCalls
from engine.world.subscriptions import SubscriptionCalls
from engine.world.tasks import TaskCalls
from engine.world.topology import TopologyCalls
from engine.world.wakes import WakeCalls


class World(ExecuteCalls, ChannelCalls, StateCalls, TaskCalls, ArtifactCalls, MemoryCalls, WakeCalls, HandoffCalls,
            TopologyCalls, RoomCalls, ProjectionCalls, SnapshotCalls, PolicyEpochReads, PermissionCalls,
            SubscriptionCalls, WorldCore):
    """One persistent shared world over one store, as agents see it: every call decided by the policy."""

    def _op_id_refusal(self, actor: str, op_id: str) -> str | None:
        """Operation ids are one namespace, and some name writes that are not the caller's to make: taking one
        first would block that write or have the caller's result replayed as its. Refused: the runtime book's
        own (``<wake>:decide``, ``revoke-...``); the controller's (``ctl:...``) unless the caller is the
        controller's agent; a wake's effects and ack (``<wake>:<n>``, ``<wake>:ack``) unless the caller is
        the wake's target agent or the worker holding its lease."""
        if _RUNTIME_OPS.search(op_id):
            return f"{op_id!r} is reserved for the runtime's own bookkeeping (recorded decisions, revocations)"
        if op_id.startswith("ctl:") and actor != CONTROLLER_AGENT:
            return f"{op_id!r} is reserved for the controller ({CONTROLLER_AGENT})"
        if (m := _WAKE_OPS.match(op_id)) is not None:
            wake = self._store.read.get("wakes", wake_id=m[1])
            if wake is not None and actor not in (wake["target_agent"], wake["lease_owner"]):
                return f"{op_id!r} names a write of wake {m[1]!r}: only its target or the worker holding it"
        return None


CONTROLLER_AGENT = "pmw-controller"  # the controller's own agent (engine.runloop.follower registers it)
_RUNTIME_OPS = re.compile(r":decide$|^revoke-")
_WAKE_OPS = re.compile(r"^(wak_[0-9A-Za-z]+):")


__all__ = ["CONTROLLER_AGENT", "AllowedActions", "Cause", "EventRef", "Invoked", "RevocationReport", "SnapshotRef",
           "World", "WorldView"]
