"""The runtime: a world whose every call is decided by a Cerbos PDP.

By default it serves the world's own policy deployment (``<data dir>/policy-deploys/current``; only a
world's first start deploys ``PMW_POLICY_DIR``, and only ``reload_policies`` deploys after that), starts
its own PDP (``engine.policy.pdp_process``) on free loopback ports serving it, waits for health, probes the
epoch the PDP decides under, records it as the world's current epoch if it is not yet, and stops the PDP
on close. With ``PMW_PDP_ADDRESS`` it uses that external PDP
(whose policies governance deploys; reloads then need its admin credentials).
"""

from __future__ import annotations

import time
from pathlib import Path
from types import TracebackType

from pydantic import Field

from engine.errors import InvalidInput, PolicyUnavailable
from engine.models.common import Model
from engine.policy import governance
from engine.policy.attributes import resource
from engine.policy.cerbos_adapter import CerbosPdp
from engine.policy.decision_inputs import decision_inputs
from engine.policy.deployment import CURRENT, serving_deployment
from engine.policy.enforcement import PdpAuthorizer, provisional_principal
from engine.policy.model import ACTIONS
from engine.policy.pdp_process import ManagedPdp, PdpAddress
from engine.policy.supervisor import PdpHealth, PdpSupervisor
from engine.settings import Settings, load_settings
from engine.sources import Clock, IdSource, SystemClock
from engine.world import RevocationReport, World
from engine.world.book import RuntimeBook
from engine.world.policy_epochs import RUNTIME_ACTOR
from store import Store

PROBE_ACTOR = "pmw-epoch-probe"


def probe_epoch(pdp: CerbosPdp) -> str:
    """The epoch the PDP decides under now (one check of a probe resource); fails closed without one."""
    decision = pdp.check(provisional_principal(PROBE_ACTOR), [(resource("agent", PROBE_ACTOR), ["read"])])[0]
    if decision.epoch is None:
        raise PolicyUnavailable("the PDP's policies carry no epoch marker (is the policy set empty?)")
    return decision.epoch


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

    def __init__(self, book: RuntimeBook, pdp: CerbosPdp, managed: ManagedPdp | None, settings: Settings, *,
                 address: PdpAddress, supervisor: PdpSupervisor | None = None) -> None:
        self.book = book
        self.pdp = pdp
        self.managed = managed
        self.settings = settings
        self.address = address
        self.supervisor = supervisor

    def pdp_health(self) -> PdpHealth | None:
        """The runtime's own PDP as its supervisor sees it (None: an external PDP, or not supervised)."""
        return self.supervisor.status() if self.supervisor is not None else None

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
        managed: ManagedPdp | None = None
        supervisor: PdpSupervisor | None = None
        pdp: CerbosPdp | None = None
        settings.ensure_sqlite_parent()
        store = Store(settings.db_url, settings.database_options())
        try:
            store.init(clock.now_us())
            source = str(settings.pdp_address or settings.policy_dir)
            if settings.pdp_address:
                address = PdpAddress(grpc=settings.pdp_address, http="", admin_user=settings.pdp_admin_user,
                                     admin_password=settings.pdp_admin_password)
            else:
                deploy_root = cls.deploy_root(settings)
                recorded = store.read.current_policy_epoch()
                deployment, first = serving_deployment(deploy_root, settings.policy_dir,
                                                       str(recorded["epoch"]) if recorded else None)
                source = str(settings.policy_dir) if first else f"deployment {deployment.epoch} (at start)"
                managed = ManagedPdp(deploy_root / CURRENT, run_dir=settings.resolved_data_dir() / "run",
                                     audit_path=settings.resolved_data_dir() / "audit" / "decisions.log")
                address = managed.start()
                if supervise:
                    # back within seconds: a kill is noticed within 0.1 s, a quick death backs off 0.5 s at most
                    supervisor = PdpSupervisor(managed, interval_s=0.1, max_backoff_s=0.5)
                    supervisor.start()
            pdp = CerbosPdp(address, timeout_s=settings.pdp_timeout_s)
            policy = PdpAuthorizer(pdp, store.read, deploy_root=cls.deploy_root(settings),
                                   decision_memo_size=settings.decision_memo_size)
            book = RuntimeBook(store, policy=policy, clock=clock, ids=ids,
                               artifact_dir=settings.resolved_artifact_dir())
            book.activate_policy_epoch(probe_epoch(pdp), source)  # idempotent: recorded once per activation
        except BaseException:
            store.close()
            if pdp is not None:
                pdp.close()
            if supervisor is not None:
                supervisor.stop()
            if managed is not None:
                managed.stop()
            raise
        return cls(book, pdp, managed, settings, address=address, supervisor=supervisor)

    def reload_policies(self, source: Path | None = None, *, observe_timeout_s: float = 10.0,
                        by: str = RUNTIME_ACTOR) -> ReloadReport:
        """Validate and deploy ``source`` (default ``PMW_POLICY_DIR``), reload the PDP, wait until it decides
        under the new epoch, record the epoch, then re-decide queued work. A broken set raises
        ``PolicyRejected`` and changes nothing; a PDP that keeps the old epoch raises ``PolicyUnavailable``."""
        started = time.monotonic()
        previous = self.book.current_policy_epoch()
        deployment = governance.deploy(source or self.settings.policy_dir, self.deploy_root(self.settings))
        self._reload_pdp_until(deployment.epoch, observe_timeout_s)
        self.book.activate_policy_epoch(deployment.epoch, str(source or self.settings.policy_dir), by=by)
        observed = time.monotonic()
        revoked = self.book.recheck_queued_work(deployment.epoch)
        return ReloadReport(previous_epoch=previous.epoch if previous else None, epoch=deployment.epoch,
                            reload_seconds=observed - started, revocation_seconds=time.monotonic() - observed,
                            revoked=revoked)

    def follow_policy(self, *, observe_timeout_s: float = 10.0) -> str:
        """Bring this runtime's PDP to the world's current epoch, after another process reloaded the policy
        (a worker's write then fails with ``PolicyEpochChanged``): reload the PDP from the deployment (the
        runtime's own; an external PDP is governance's) and wait until it decides under the store's epoch.
        Returns that epoch; ``PolicyUnavailable`` if the PDP does not get there in time (fail closed)."""
        current = self.book.current_policy_epoch()
        if current is None:
            raise PolicyUnavailable("the world has no policy epoch to follow")
        if probe_epoch(self.pdp) == current.epoch:
            return current.epoch
        if self.managed is None:  # an external PDP is governance's to reload: wait for it
            self._observe(current.epoch, observe_timeout_s)
        else:
            self._reload_pdp_until(current.epoch, observe_timeout_s)
        return current.epoch

    def _reload_pdp_until(self, epoch: str, timeout_s: float) -> None:
        """Reload the PDP from its policy store and wait until it decides under ``epoch``."""
        self.pdp.reload()
        self._observe(epoch, timeout_s)

    def _observe(self, epoch: str, timeout_s: float) -> None:
        """Wait (bounded) until the PDP decides under ``epoch``; ``PolicyUnavailable`` if it does not in time.
        Remembered plans are forgotten (they are keyed by epoch; the old set's are of no further use)."""
        if isinstance(self.book.policy, PdpAuthorizer):
            self.book.policy.forget()
        deadline = time.monotonic() + timeout_s
        while (seen := probe_epoch(self.pdp)) != epoch:
            if time.monotonic() > deadline:
                raise PolicyUnavailable(f"the PDP decides under {seen!r}, not {epoch!r}")
            time.sleep(0.05)

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
        if self.supervisor is not None:
            self.supervisor.stop()  # stops watching first, then the PDP
        if self.managed is not None:
            self.managed.stop()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


__all__ = ["Explanation", "ReloadReport", "Runtime", "probe_epoch"]
