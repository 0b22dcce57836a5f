"""The runtime: a world whose every call is decided by a Cerbos PDP.

By default it serves the world's own policy deployment (``<data dir>/policy-deploys/current``; only a
world's first start deploys ``PMW_POLICY_DIR``, and only ``reload_policies`` deploys after that), starts
its own PDP (``engine.policy.pdp_process``) on free loopback ports serving it, waits for health, probes the
epoch the PDP decides under, records it as the world's current epoch if it is not yet, and stops the PDP
on close. With ``PMW_PDP_ADDRESS`` it uses that external PDP
(whose policies governance deploys; reloads then need its admin credentials).

PDP replicas: ``PMW_PDP_ADDRESSES`` names several external PDPs, ``PMW_PDP_REPLICAS`` (``pmw serve
--pdp-replicas N``) makes the runtime start N of its own (each supervised, all serving the same deployment).
Every decision goes through one :class:`~engine.policy.pdp_replicas.PdpReplicas` pool (spread, fail over,
fail closed). A policy change is activated once every replica that answers decides under the new epoch;
a replica that did not answer is out of rotation until it serves the activated epoch (the documented
choice: activation on the reachable set, never a mixed decision; ``docs/operations.md``).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from types import TracebackType

from pydantic import Field

from engine.errors import InvalidInput, PolicyUnavailable
from engine.models.common import Model
from engine.policy import governance
from engine.policy.decision_inputs import decision_inputs
from engine.policy.deployment import CURRENT, point_current, serving_deployment
from engine.policy.enforcement import PdpAuthorizer
from engine.policy.model import ACTIONS
from engine.policy.pdp_process import ManagedPdp, PdpAddress
from engine.policy.pdp_replicas import PROBE_ACTOR, PdpReplicas, ReplicaStatus, probe_epoch
from engine.policy.plan_memo import PlanMemo
from engine.policy.supervisor import PdpHealth, PdpSupervisor
from engine.settings import Settings, load_settings
from engine.sources import Clock, IdSource, SystemClock
from engine.world import RevocationReport, World
from engine.world.book import RuntimeBook
from engine.world.policy_epochs import RUNTIME_ACTOR
from store import Store

log = logging.getLogger(__name__)


class ReloadReport(Model):
    """A completed policy change: the epoch before and after, and what the new epoch revoked."""

    previous_epoch: str | None
    epoch: str
    reload_seconds: float = Field(description="validate + deploy + PDP reload + epoch observed")
    revocation_seconds: float = Field(description="from the new epoch observed to queued work re-decided")
    revoked: RevocationReport


class Explanation(Model):
    """One decision with what it was decided on."""

    principal: str
    kind: str
    id: str
    action: str
    allowed: bool
    policy_epoch: str | None
    derived_roles: list[str]
    principal_attr: dict[str, object]
    resource_attr: dict[str, object]


class Runtime:
    """Owns the PDP (if it started one), the PDP client, the store and the runtime's book. Use as a context
    manager. :attr:`world` is the agent-facing World (hand it to agents); :attr:`book` is the runtime's own
    bookkeeping (workers, controllers and the governance path use it; never hand it to an agent)."""

    def __init__(self, book: RuntimeBook, pdp: PdpReplicas, managed: ManagedPdp | None, settings: Settings, *,
                 address: PdpAddress, supervisor: PdpSupervisor | None = None,
                 replicas: _OwnPdps | None = None) -> None:
        self.book = book
        self.pdp = pdp
        self.managed = managed
        self.settings = settings
        self.address = address
        self.supervisor = supervisor
        self._own = replicas or _OwnPdps([], [])

    @property
    def managed_replicas(self) -> list[ManagedPdp]:
        """Every PDP this runtime started (``managed`` is the first); empty with external PDPs."""
        return list(self._own.managed)

    @property
    def supervisors(self) -> list[PdpSupervisor]:
        """The supervisors of the PDPs this runtime started, in the order of :attr:`managed_replicas`."""
        return list(self._own.supervisors)

    def pdp_health(self) -> PdpHealth | None:
        """The runtime's own (first) PDP as its supervisor sees it (None: an external PDP, or not supervised)."""
        return self.supervisor.status() if self.supervisor is not None else None

    def pdp_replicas(self) -> list[ReplicaStatus]:
        """Every PDP replica as the decision pool sees it (up, down or stale; the epoch it serves)."""
        return self.pdp.statuses()

    @property
    def world(self) -> World:
        return self.book.world

    @property
    def store(self) -> Store:
        return self.book.store

    @staticmethod
    def deploy_root(settings: Settings) -> Path:
        return settings.policy_deploy_root or settings.resolved_data_dir() / "policy-deploys"

    @classmethod
    def open(cls, settings: Settings | None = None, *, clock: Clock | None = None, ids: IdSource | None = None,
             supervise: bool = True) -> Runtime:
        """Open the world ``settings`` describe: migrate the store, start the runtime's own PDP on the world's
        deployment (``engine.policy.deployment``: never the working tree, except for a world's first
        deployment) or connect to ``PMW_PDP_ADDRESS``, and record the epoch the PDP decides under if the
        store does not have it yet. Anything that fails on the way closes what was opened."""
        settings = settings or load_settings()
        clock = clock or SystemClock()
        own = _OwnPdps([], [])
        pdp: PdpReplicas | None = None
        settings.ensure_sqlite_parent()
        store = Store(settings.db_url, settings.database_options())
        try:
            store.init(clock.now_us())
            external = settings.pdp_address_list()
            source = ",".join(external) or str(settings.policy_dir)
            if external:
                addresses = [PdpAddress(grpc=a, http="", admin_user=settings.pdp_admin_user,
                                        admin_password=settings.pdp_admin_password) for a in external]
            else:
                recorded = store.read.current_policy_epoch()
                deployment, first = serving_deployment(cls.deploy_root(settings), settings.policy_dir,
                                                       str(recorded["epoch"]) if recorded else None)
                source = str(settings.policy_dir) if first else f"deployment {deployment.epoch} (at start)"
                addresses = own.start(settings, cls.deploy_root(settings), supervise=supervise)

            def store_epoch() -> str | None:
                row = store.read.current_policy_epoch()
                return str(row["epoch"]) if row else None

            pdp = PdpReplicas(addresses, timeout_s=settings.pdp_timeout_s, store_epoch=store_epoch,
                              reload_stale=not external or bool(settings.pdp_admin_password))
            policy = PdpAuthorizer(pdp, store.read, deploy_root=cls.deploy_root(settings),
                                   decision_memo_size=settings.decision_memo_size,
                                   plan_memo=PlanMemo(settings.plan_memo_size))
            book = RuntimeBook(store, policy=policy, clock=clock, ids=ids,
                               artifact_dir=settings.resolved_artifact_dir())
            epoch = probe_epoch(pdp)
            if len(addresses) > 1:  # every replica is checked to serve it (a replica that does not waits)
                pdp.converge(epoch, timeout_s=10.0, reload=False)
            book.activate_policy_epoch(epoch, source)  # idempotent: recorded once per activation
            pdp.expect(epoch)
        except BaseException:
            store.close()
            if pdp is not None:
                pdp.close()
            own.stop()
            raise
        first_managed = own.managed[0] if own.managed else None
        first_supervisor = own.supervisors[0] if own.supervisors else None
        return cls(book, pdp, first_managed, settings, address=addresses[0], supervisor=first_supervisor,
                   replicas=own)

    def reload_policies(self, source: Path | None = None, *, observe_timeout_s: float = 10.0,
                        by: str = RUNTIME_ACTOR) -> ReloadReport:
        """Validate and deploy ``source`` (default ``PMW_POLICY_DIR``), reload the PDP, wait until it decides
        under the new epoch, record the epoch, then re-decide queued work. A broken set raises
        ``PolicyRejected`` and changes nothing; a PDP that keeps the old epoch raises ``PolicyUnavailable``."""
        started = time.monotonic()
        previous = self.book.current_policy_epoch()
        deployment = governance.deploy(source or self.settings.policy_dir, self.deploy_root(self.settings))
        self.pdp.admit(deployment.epoch)
        try:
            self._reload_pdp_until(deployment.epoch, observe_timeout_s)
            self.book.activate_policy_epoch(deployment.epoch, str(source or self.settings.policy_dir), by=by)
        except BaseException:
            if previous is not None:
                self._restore_deployment(previous.epoch)
            raise
        self.pdp.expect(deployment.epoch)
        observed = time.monotonic()
        revoked = self.book.recheck_queued_work(deployment.epoch)
        return ReloadReport(previous_epoch=previous.epoch if previous else None, epoch=deployment.epoch,
                            reload_seconds=observed - started, revocation_seconds=time.monotonic() - observed,
                            revoked=revoked)

    def _restore_deployment(self, epoch: str) -> None:
        """A reload that was not activated: the PDPs' store points at ``epoch``'s deployment again and
        they are asked to reload it (best effort; one that does not answer now is brought back by its
        prober), and only ``epoch``'s answers are accepted. Without this, replicas that had loaded the new
        set would stay stale (their store holding it) and every decision would be refused."""
        self.pdp.expect(epoch)  # not activated: only the old epoch's answers go
        if self.managed is None:
            return  # an external PDP is governance's
        try:
            point_current(self.deploy_root(self.settings), epoch)
        except FileNotFoundError:
            log.warning("after a reload that was not activated: no deployment of %s to restore", epoch)
            return
        try:
            self.pdp.reload()
        except PolicyUnavailable as exc:
            log.warning("after a reload that was not activated, the PDP did not take %s back: %s", epoch, exc)

    def follow_policy(self, *, observe_timeout_s: float = 10.0) -> str:
        """Bring this runtime's PDP to the world's current epoch, after another process reloaded the policy
        (a worker's write then fails with ``PolicyEpochChanged``): reload the PDP from the deployment (the
        runtime's own; an external PDP is governance's) and wait until it decides under the store's epoch.
        Returns that epoch; ``PolicyUnavailable`` if the PDP does not get there in time (fail closed)."""
        current = self.book.current_policy_epoch()
        if current is None:
            raise PolicyUnavailable("the world has no policy epoch to follow")
        self.pdp.admit(current.epoch)
        if self.managed is None:  # an external PDP is governance's to reload: wait for it
            self._observe(current.epoch, observe_timeout_s, reload=False)
        else:
            self._reload_pdp_until(current.epoch, observe_timeout_s)
        self.pdp.expect(current.epoch)
        return current.epoch

    def _reload_pdp_until(self, epoch: str, timeout_s: float) -> None:
        """Reload every PDP replica from its policy store and wait until each that answers decides under
        ``epoch`` (at least one must, else ``PolicyUnavailable``)."""
        self._observe(epoch, timeout_s, reload=True)

    def _observe(self, epoch: str, timeout_s: float, *, reload: bool) -> None:
        """Wait (bounded) until the replicas decide under ``epoch``; ``PolicyUnavailable`` if none does in
        time. Remembered plans are forgotten (they are keyed by epoch; the old set's are of no further use)."""
        if isinstance(self.book.policy, PdpAuthorizer):
            self.book.policy.forget()
        try:
            self.pdp.converge(epoch, timeout_s=timeout_s, reload=reload)
        except PolicyUnavailable as exc:
            raise PolicyUnavailable(f"the PDP does not decide under {epoch!r}: {exc.reason}") from exc

    def explain(self, principal_id: str, kind: str, ident: str, action: str) -> Explanation:
        """The decision for (principal, object, action), with the derived roles that applied and the
        attributes it was decided on."""
        if action not in ACTIONS.get(kind, {}):
            raise InvalidInput("action", f"{kind!r} has no action {action!r}; kinds and actions: "
                               "docs/policy-contract.md")
        p, res = decision_inputs(self.store.read, principal_id, kind, ident)
        decision = self.pdp.check(p, [(res, [action])])[0]
        return Explanation(principal=principal_id, kind=kind, id=ident, action=action,
                           allowed=decision.allowed(action), policy_epoch=decision.epoch,
                           derived_roles=decision.derived_roles, principal_attr=p.attr, resource_attr=res.attr)

    def close(self) -> None:
        self.book.close()
        self.pdp.close()
        self._own.stop()  # each supervisor stops watching first, then its PDP

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class _OwnPdps:
    """The PDPs a runtime starts itself (``PMW_PDP_REPLICAS`` of them), all serving the world's deployment,
    each on its own loopback ports and supervised; stopped by their PIDs."""

    def __init__(self, managed: list[ManagedPdp], supervisors: list[PdpSupervisor]) -> None:
        self.managed = managed
        self.supervisors = supervisors

    def start(self, settings: Settings, deploy_root: Path, *, supervise: bool) -> list[PdpAddress]:
        """Start ``settings.pdp_replicas`` PDPs on ``deploy_root/current``; their addresses. The first
        keeps the world's decision log (``audit/decisions.log``), replica i its own ``decisions-r<i>.log``."""
        data = settings.resolved_data_dir()
        addresses: list[PdpAddress] = []
        for i in range(settings.pdp_replicas):
            audit = data / "audit" / ("decisions.log" if i == 0 else f"decisions-r{i}.log")
            managed = ManagedPdp(deploy_root / CURRENT, run_dir=data / "run", audit_path=audit)
            self.managed.append(managed)
            addresses.append(managed.start())
            if supervise:
                # back within seconds: a kill is noticed within 0.1 s, a quick death backs off 0.5 s at most
                supervisor = PdpSupervisor(managed, interval_s=0.1, max_backoff_s=0.5)
                self.supervisors.append(supervisor)
                supervisor.start()
        return addresses

    def stop(self) -> None:
        for supervisor in self.supervisors:
            supervisor.stop()
        for managed in self.managed:
            managed.stop()


__all__ = ["PROBE_ACTOR", "Explanation", "ReloadReport", "Runtime", "probe_epoch"]
