"""The World facade: the seed's API (``register_agent`` ... ``project_world``) and what lifecycles need.

This is the object agents, CLIs and transports hold. Every write goes through :meth:`WorldCore._write`,
is decided by the policy, and reaches the store's gateway through its decided door; reads go through the
store's reader, decided by the policy. The runtime's own bookkeeping is not here: it is on
:class:`engine.world.book.RuntimeBook`, which opens the World (:func:`engine.world.book.open_world`) and
which the runtime never hands out. Time and ids come from the injected clock and id source.
"""

from __future__ import annotations

from engine.world.artifacts import ArtifactCalls
from engine.world.attention import AttentionCalls
from engine.world.channels import ChannelCalls
from engine.world.checkpoints import CheckpointCalls
from engine.world.core import Cause, WorldCore
from engine.world.execute import ExecuteCalls
from engine.world.handoffs import HandoffCalls
from engine.world.memory import MemoryCalls
from engine.world.op_ids import CONTROLLER_AGENT
from engine.world.permissions import AllowedActions, Invoked, PermissionCalls
from engine.world.policy_epochs import PolicyEpochReads
from engine.world.projection import ProjectionCalls, WorldView
from engine.world.retention import RetentionCalls
from engine.world.revocation import RevocationReport
from engine.world.rooms import RoomCalls
from engine.world.snapshots import SnapshotRef
from engine.world.state import EventRef, StateCalls
from engine.world.subscriptions import SubscriptionCalls
from engine.world.tasks import TaskCalls
from engine.world.tokens import TokenCalls
from engine.world.topology import TopologyCalls
from engine.world.wakes import WakeCalls


class World(ExecuteCalls, ChannelCalls, StateCalls, TaskCalls, ArtifactCalls, RetentionCalls, MemoryCalls,
            WakeCalls, HandoffCalls,
            AttentionCalls,
            TopologyCalls, RoomCalls, ProjectionCalls, PolicyEpochReads, PermissionCalls,
            SubscriptionCalls, TokenCalls, CheckpointCalls, WorldCore):
    """One persistent shared world over one store, as agents see it: every call decided by the policy."""


__all__ = ["CONTROLLER_AGENT", "AllowedActions", "Cause", "EventRef", "Invoked", "RevocationReport", "SnapshotRef",
           "World", "WorldView"]
