"""The World facade: the seed's API (``register_agent`` ... ``project_world``) and what lifecycles need.

Every write goes through :meth:`WorldCore._write` and the store's gateway; reads go through the store's
reader. Time and ids come from the injected clock and id source.
"""

from __future__ import annotations

from pathlib import Path

from engine.policy.enforcement import Authorizer
from engine.settings import Settings, ensure_sqlite_parent
from engine.sources import Clock, IdSource
from engine.world.artifacts import ArtifactCalls
from engine.world.channels import ChannelCalls
from engine.world.controller_steps import ControllerStepCalls
from engine.world.core import Cause, WorldCore
from engine.world.decisions import DecisionCalls
from engine.world.handoffs import HandoffCalls
from engine.world.memory import MemoryCalls
from engine.world.permissions import AllowedActions, Invoked, PermissionCalls
from engine.world.policy_epochs import PolicyEpochCalls
from engine.world.projection import ProjectionCalls, WorldView
from engine.world.revocation import RevocationCalls, RevocationReport
from engine.world.rooms import RoomCalls
from engine.world.snapshots import SnapshotCalls, SnapshotRef
from engine.world.state import EventRef, StateCalls
from engine.world.subscriptions import SubscriptionCalls
from engine.world.tasks import TaskCalls
from engine.world.topology import TopologyCalls
from engine.world.wakes import WakeCalls
from store import DatabaseOptions, Store


class World(ChannelCalls, StateCalls, TaskCalls, ArtifactCalls, MemoryCalls, WakeCalls, HandoffCalls,
            TopologyCalls, RoomCalls, ProjectionCalls, SnapshotCalls, PolicyEpochCalls, PermissionCalls,
            RevocationCalls, DecisionCalls, SubscriptionCalls, ControllerStepCalls, WorldCore):
    """One persistent shared world over one store."""

    @classmethod
    def open(cls, url: str, *, policy: Authorizer, artifact_dir: Path | str | None = None,
             clock: Clock | None = None, ids: IdSource | None = None, options: DatabaseOptions | None = None,
             init: bool = True) -> World:
        """Open (and by default migrate) the world at ``url``, deciding every call with ``policy``
        (:class:`~engine.policy.enforcement.PdpAuthorizer` in the runtime; ``LocalScopeRules`` only for
        the store's own tests and single-user embedded use). A SQLite file's directory is created."""
        ensure_sqlite_parent(url)
        store = Store(url, options)
        world = cls(store, policy=policy, clock=clock, ids=ids,
                    artifact_dir=Path(artifact_dir) if artifact_dir else None)
        if init:
            store.init(world.clock.now_us())
        return world

    @classmethod
    def from_settings(cls, settings: Settings, *, policy: Authorizer, clock: Clock | None = None,
                      ids: IdSource | None = None, init: bool = True) -> World:
        """Open the world the settings describe (creating a SQLite file's directory if needed)."""
        settings.ensure_sqlite_parent()
        return cls.open(settings.db_url, policy=policy, artifact_dir=settings.resolved_artifact_dir(), clock=clock,
                        ids=ids, options=settings.database_options(), init=init)

    def close(self) -> None:
        self.store.close()


__all__ = ["AllowedActions", "Cause", "EventRef", "Invoked", "RevocationReport", "SnapshotRef", "World", "WorldView"]
