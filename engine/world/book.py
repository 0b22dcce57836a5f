"""The runtime's book: what only the runtime may write, on an object the runtime keeps and never hands out.

The agent-facing :class:`~engine.world.World` decides every write with the PDP and writes through the
store's decided door. Some writes are no agent's act and no agent's authority covers them; they are the
runtime's own bookkeeping and live here, writing through the store's runtime door (handed out once per
store, to this object):

- :meth:`bootstrap_governor`: the world's first human principal, while none exists;
- :meth:`activate_policy_epoch`: the epoch the PDP was seen deciding under (``PolicyEpochCalls``);
- :meth:`record_decision`: what an agent's adapter decided for a wake, written before any effect
  (``DecisionCalls``);
- :meth:`commit_controller_step`: the controller's position, facts and wakes (``ControllerStepCalls``);
- :meth:`recheck_queued_work`: revocations after an epoch change (``RevocationCalls``);
- :meth:`record_denial`: the audit record of a PDP denial;
- :meth:`take_snapshot` / :meth:`state_image` / :meth:`rebuild_state`: the whole state, undecided
  (``ImageCalls``; ``pmw snapshot`` decides its governor first).

Workers, controller loops and runners take the book (``book.world`` is the World they act through);
agents, CLIs and transports are given the World only. See ``docs/security.md``.
"""

from __future__ import annotations

from pathlib import Path

from engine.errors import NotPermitted, PolicyDenied
from engine.models.agents import Registration
from engine.models.common import Model
from engine.policy.attributes import GOVERNOR_ROLE
from engine.policy.enforcement import Authorizer
from engine.settings import Settings, ensure_sqlite_parent
from engine.sources import Clock, IdSource, RandomIds, SystemClock
from engine.validation import build
from engine.world import World
from engine.world.agents import RegisterAgent
from engine.world.controller_steps import ControllerStepCalls
from engine.world.core import Plan
from engine.world.decisions import DecisionCalls
from engine.world.op_ids import ForeignOperationIds
from engine.world.policy_epochs import RUNTIME_ACTOR, PolicyEpochCalls
from engine.world.revocation import RevocationCalls
from engine.world.snapshots import ImageCalls
from store import DatabaseOptions, Store
from store.migrations import require_supported


class _Denial(Model):
    kind: str
    id: str
    action: str
    command: str
    policy_epoch: str | None


class RuntimeBook(DecisionCalls, ControllerStepCalls, PolicyEpochCalls, RevocationCalls, ImageCalls):
    """The runtime's own writes over one store, and the agent-facing :attr:`world` over the same store."""

    def __init__(self, store: Store, *, policy: Authorizer, clock: Clock | None = None, ids: IdSource | None = None,
                 artifact_dir: Path | None = None) -> None:
        clock = clock or SystemClock()
        ids = ids or RandomIds()
        super().__init__(store, door=store.runtime_door(), policy=policy, clock=clock, ids=ids,
                         artifact_dir=artifact_dir)
        self._store: Store = store
        #: The full store: the runtime's reads (log followers, signals, metrics) and its migrations.
        self.store = store
        #: How the world's calls are decided (the runtime clears its plan memo on a reload).
        self.policy = policy
        #: The agent-facing World: decided writes only, reads through the PDP, no path back to this book's door.
        self.world = World(store.read_only(), door=store.decided_door(), policy=policy, clock=clock, ids=ids,
                           artifact_dir=artifact_dir, denials=self.record_denial,
                           op_ids=ForeignOperationIds(store.read))

    def bootstrap_governor(self, agent_id: str, display_name: str, term_key: str, *,
                           op_id: str | None = None) -> Registration:
        """Register the world's first governor (the human principal who grants authority to agents).
        Allowed only while no governor exists; recorded like any registration. Not decided by the PDP:
        there is nobody yet whose authority could allow it."""
        req = build(RegisterAgent, agent_id=agent_id, display_name=display_name, role_id=GOVERNOR_ROLE,
                    term_key=term_key)

        def plan(now: int) -> Plan:
            if self._store.read.rows("agents", {"role_id": GOVERNOR_ROLE}, limit=1):
                raise NotPermitted(agent_id, "bootstrap", "agent", agent_id, "a governor already exists")
            p = self.world._plan_register(req, now)
            p.event_type = "governor.bootstrapped"
            return p
        return self._write("bootstrap_governor", agent_id, req, plan, Registration, op_id=op_id, cause=None,
                           decided=False)

    def record_denial(self, actor: str, command: str, denied: PolicyDenied) -> None:
        """The audit record of a denial: an event that changes nothing else (the deny was the decision)."""
        ref = _Denial(kind=denied.kind, id=denied.id[:300], action=denied.action, command=command,
                      policy_epoch=denied.policy_epoch)
        self._write("policy.denied", actor, ref, lambda now: Plan(
            "policy.denied", ref.kind, ref.id, ref, payload=ref.model_dump(mode="json")), _Denial,
            op_id=None, cause=None, decided=False)

    def close(self) -> None:
        self._store.close()


def open_world(url: str, *, policy: Authorizer, artifact_dir: Path | str | None = None, clock: Clock | None = None,
               ids: IdSource | None = None, options: DatabaseOptions | None = None, init: bool = True) -> RuntimeBook:
    """Open (and by default migrate) the world at ``url``, deciding every call with ``policy``
    (:class:`~engine.policy.enforcement.PdpAuthorizer` in the runtime; ``LocalScopeRules`` only for the
    store's own tests and single-user embedded use). Returns the runtime's book; ``book.world`` is the
    agent-facing World. A SQLite file's directory is created. A database whose schema is newer than this
    code is refused (``SchemaTooNew``) and nothing is left open."""
    ensure_sqlite_parent(url)
    store = Store(url, options)
    try:
        book = RuntimeBook(store, policy=policy, clock=clock, ids=ids,
                           artifact_dir=Path(artifact_dir) if artifact_dir else None)
        if init:
            store.init(book.clock.now_us())
        else:
            require_supported(store.db)  # a database a newer PMW migrated is refused either way
    except BaseException:
        store.close()
        raise
    return book


def open_world_from_settings(settings: Settings, *, policy: Authorizer, clock: Clock | None = None,
                             ids: IdSource | None = None, init: bool = True) -> RuntimeBook:
    """Open the world the settings describe (creating a SQLite file's directory if needed)."""
    settings.ensure_sqlite_parent()
    return open_world(settings.db_url, policy=policy, artifact_dir=settings.resolved_artifact_dir(), clock=clock,
                      ids=ids, options=settings.database_options(), init=init)


__all__ = ["RUNTIME_ACTOR", "RuntimeBook", "open_world", "open_world_from_settings"]
