"""The runtime: a world whose every call is decided by a Cerbos PDP.

By default it starts its own PDP (``engine.policy.pdp_process``) on free loopback ports serving
``PMW_POLICY_DIR``, waits for health, probes the policy epoch the PDP decides under, records it as the
world's current epoch, and stops the PDP on close. With ``PMW_PDP_ADDRESS`` it uses that external PDP.
"""

from __future__ import annotations

from types import TracebackType

from engine.errors import PolicyUnavailable
from engine.policy.attributes import resource
from engine.policy.cerbos_adapter import CerbosPdp
from engine.policy.enforcement import PdpAuthorizer, provisional_principal
from engine.policy.pdp_process import ManagedPdp, PdpAddress
from engine.settings import Settings, load_settings
from engine.sources import Clock, IdSource
from engine.world import World
from store import Store

PROBE_ACTOR = "pmw-epoch-probe"


def probe_epoch(pdp: CerbosPdp) -> str:
    """The epoch the PDP decides under now (one check of a probe resource); fails closed without one."""
    decision = pdp.check(provisional_principal(PROBE_ACTOR), [(resource("agent", PROBE_ACTOR), ["read"])])[0]
    if decision.epoch is None:
        raise PolicyUnavailable("the PDP's policies carry no epoch marker (is the policy set empty?)")
    return decision.epoch


class Runtime:
    """Owns the PDP (if it started one), the PDP client and the world. Use as a context manager."""

    def __init__(self, world: World, pdp: CerbosPdp, managed: ManagedPdp | None) -> None:
        self.world = world
        self.pdp = pdp
        self.managed = managed

    @classmethod
    def open(cls, settings: Settings | None = None, *, clock: Clock | None = None, ids: IdSource | None = None
             ) -> Runtime:
        settings = settings or load_settings()
        managed: ManagedPdp | None = None
        if settings.pdp_address:
            address = PdpAddress(grpc=settings.pdp_address, http="", admin_user=settings.pdp_admin_user,
                                 admin_password=settings.pdp_admin_password)
        else:
            managed = ManagedPdp(settings.policy_dir)
            address = managed.start()
        pdp = CerbosPdp(address, timeout_s=settings.pdp_timeout_s)
        try:
            settings.ensure_sqlite_parent()
            store = Store(settings.db_url, settings.database_options())
            world = World(store, policy=PdpAuthorizer(pdp, store.read), clock=clock, ids=ids,
                          artifact_dir=settings.resolved_artifact_dir())
            store.init(world.clock.now_us())
            world.activate_policy_epoch(probe_epoch(pdp), str(settings.policy_dir))
        except BaseException:
            pdp.close()
            if managed is not None:
                managed.stop()
            raise
        return cls(world, pdp, managed)

    def close(self) -> None:
        self.world.close()
        self.pdp.close()
        if self.managed is not None:
            self.managed.stop()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


__all__ = ["Runtime", "probe_epoch"]
