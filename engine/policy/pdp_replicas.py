"""Several stateless Cerbos PDPs behind one client: spread calls, fail over, fail closed, one epoch.

:class:`PdpReplicas` holds one :class:`~engine.policy.cerbos_adapter.CerbosPdp` per replica address and
satisfies :class:`~engine.policy.decision_point.DecisionPoint`. Its contract:

- **Spread**: each call goes to the in-sync replica with the fewest calls in flight (ties: round robin).
- **Fail over**: a call that gets no answer from its replica (connection refused, deadline exceeded, an
  error status) marks that replica down and is retried once on another in-sync replica. Only decisions
  are retried (``check``, ``plan(s)``: pure questions that change nothing); a ``reload`` is never
  retried elsewhere. Nothing the pool does writes anything: a write is decided first, then committed once
  by the gateway, so a retried decision can never apply anything twice.
- **Fail closed**: when no in-sync replica answers, the call raises ``PolicyUnavailable``.
- **One epoch**: the pool accepts decisions under the epochs it was told (:meth:`expect`; both the old and
  the new one while a deployment is under way, :meth:`admit`). A replica whose answer carries another
  epoch is marked stale and the call is retried on another replica. If every answering replica is on an
  epoch the pool does not accept, the pool asks the store which epoch is current (``store_epoch``: another
  process may have activated one) and accepts it if that is the replicas' epoch; otherwise it fails closed.
  A stale replica (one that missed a deployment) is not used until it serves an accepted epoch.
- **Recovery**: with more than one replica a prober thread re-examines down and stale replicas every
  ``probe_interval_s``: a replica that answers again on an accepted epoch is back in rotation; one that
  answers on another epoch is asked to reload (if ``reload_stale``) and is used only once it caught up.
  With a single replica there is no prober and the replica is always tried (a supervised PDP restarting
  on the same ports is waited for up to each call's deadline, as with a plain client).

A query plan carries no epoch: a plan is only asked of replicas the pool knows to be in sync.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from engine.errors import Closed, PolicyUnavailable
from engine.models.common import Model
from engine.policy.attributes import resource
from engine.policy.cerbos_adapter import CerbosPdp
from engine.policy.enforcement import provisional_principal
from engine.policy.model import Decision, PlanFilter, PrincipalRef, ResourceRef
from engine.policy.pdp_process import PdpAddress

log = logging.getLogger("pmw.pdp")
PROBE_ACTOR = "pmw-epoch-probe"
_T = TypeVar("_T")
ReplicaState = Literal["up", "down", "stale"]
_CLOSED = "PDP replica pool"


def probe_epoch(pdp: CerbosPdp | PdpReplicas) -> str:
    """The epoch ``pdp`` decides under now (one check of a probe resource); ``PolicyUnavailable`` without
    an epoch marker (an empty policy set) or without an answer."""
    decision = pdp.check(provisional_principal(PROBE_ACTOR), [(resource("agent", PROBE_ACTOR), ["read"])])[0]
    if decision.epoch is None:
        raise PolicyUnavailable("the PDP's policies carry no epoch marker (is the policy set empty?)")
    return decision.epoch


class ReplicaStatus(Model):
    """One replica as the pool sees it: ``up`` (in rotation), ``down`` (did not answer; re-probed),
    ``stale`` (answers on an epoch the pool does not accept; not used until it catches up)."""

    address: str
    state: ReplicaState
    epoch: str | None
    in_flight: int
    calls: int
    failures: int


@dataclass
class _Replica:
    client: CerbosPdp
    state: ReplicaState = "up"
    epoch: str | None = None
    in_flight: int = 0
    calls: int = 0
    failures: int = 0
    last_error: str = field(default="")

    def status(self) -> ReplicaStatus:
        return ReplicaStatus(address=self.client.address.grpc, state=self.state, epoch=self.epoch,
                             in_flight=self.in_flight, calls=self.calls, failures=self.failures)


class PdpReplicas:
    """A pool of PDP replicas (see the module docstring). Thread-safe; :meth:`close` stops the prober
    (bounded join) and closes every client.

    ``addresses``: at least one. ``store_epoch``: the store's current epoch (asked only when every
    answering replica is on an epoch the pool does not accept). ``reload_stale``: the prober may ask a
    stale replica to reload (its admin credentials must be in its address)."""

    def __init__(self, addresses: Sequence[PdpAddress], *, timeout_s: float = 2.0,
                 store_epoch: Callable[[], str | None] | None = None, reload_stale: bool = True,
                 probe_interval_s: float = 0.25) -> None:
        if not addresses:
            raise PolicyUnavailable("no PDP address to decide with")
        single = len(addresses) == 1
        self.timeout_s = timeout_s
        self._replicas = [_Replica(CerbosPdp(a, timeout_s=timeout_s, wait_for_ready=single)) for a in addresses]
        self._store_epoch = store_epoch
        self._reload_stale = reload_stale
        self._probe_interval_s = probe_interval_s
        self._accepted: frozenset[str] = frozenset()  # empty: nothing expected yet (any one epoch goes)
        self._lock = threading.Lock()
        self._turn = 0
        self._closed = threading.Event()
        self._prober: threading.Thread | None = None
        if not single:
            self._prober = threading.Thread(target=self._probe_loop, name="pmw-pdp-replicas", daemon=True)
            self._prober.start()

    # -- the DecisionPoint surface ---------------------------------------------------------------------

    @property
    def address(self) -> PdpAddress:
        """The first replica's address (what a single-PDP caller expects)."""
        return self._replicas[0].client.address

    @property
    def addresses(self) -> list[PdpAddress]:
        return [r.client.address for r in self._replicas]

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def check(self, principal: PrincipalRef, resources: Sequence[tuple[ResourceRef, Sequence[str]]]
              ) -> list[Decision]:
        """:meth:`CerbosPdp.check` on one in-sync replica; every decision carries one accepted epoch."""
        return self._decide(lambda pdp: pdp.check(principal, resources), _epoch_of)

    def plan(self, principal: PrincipalRef, kind: str, action: str) -> PlanFilter:
        return self.plans(principal, [(kind, action)])[0]

    def plans(self, principal: PrincipalRef, asked: Sequence[tuple[str, str]]) -> list[PlanFilter]:
        """:meth:`CerbosPdp.plans` on one in-sync replica."""
        return self._decide(lambda pdp: pdp.plans(principal, asked), lambda _: None)

    def reload(self) -> None:
        """Ask every replica to reload its policy store; raises ``PolicyUnavailable`` if none did. A replica
        that could not be reached is marked down (it is brought up to date when it answers again)."""
        done = [r for r in self._replicas if self._reload_one(r)]
        if not done:
            raise PolicyUnavailable("no PDP replica accepted the reload")

    def close(self) -> None:
        self._closed.set()
        prober = self._prober
        if prober is not None and prober is not threading.current_thread():
            prober.join(5.0)
        for r in self._replicas:
            r.client.close()

    # -- epochs and deployments ------------------------------------------------------------------------

    def statuses(self) -> list[ReplicaStatus]:
        with self._lock:
            return [r.status() for r in self._replicas]

    @property
    def accepted(self) -> frozenset[str]:
        return self._accepted

    def expect(self, epoch: str) -> None:
        """Accept decisions under ``epoch`` only (it was activated): replicas seen on another are stale."""
        with self._lock:
            self._accepted = frozenset({epoch})
            for r in self._replicas:
                if r.state == "up" and r.epoch is not None and r.epoch != epoch:
                    r.state = "stale"

    def admit(self, epoch: str) -> None:
        """Accept ``epoch`` beside the ones accepted now (a deployment under way: replicas switch one by one;
        the gateway still refuses a write decided under an epoch that is not the store's)."""
        with self._lock:
            self._accepted = self._accepted | {epoch}

    def converge(self, epoch: str, *, timeout_s: float, reload: bool) -> list[str]:
        """Bring every replica to ``epoch`` (``reload``: ask each that is not on it to reload) and wait,
        bounded by ``timeout_s``, until each that answers decides under it. Returns the gRPC addresses of
        the replicas that do. A replica that does not answer (a probe or its reload timed out: a loaded
        machine, a recompile) is asked again until the deadline while no replica serves ``epoch`` yet; once
        one does, a replica that did not answer its last probe is not waited for (marked down, brought up to
        date by the prober when it answers). One on another epoch is stale after :meth:`expect`; neither is
        used until it catches up. Raises ``PolicyUnavailable`` if none serves ``epoch`` in time."""
        serving: list[_Replica] = []
        deadline = time.monotonic() + timeout_s
        answers = {id(r): self._serves(r, epoch, serving) for r in self._replicas}
        pending = [r for r in self._replicas if answers[id(r)] is not True]
        unreloaded = {id(r) for r in pending} if reload else set()  # a reload costs the PDP a recompile
        while pending:
            for r in pending:
                if id(r) in unreloaded and self._reload_one(r):
                    unreloaded.discard(id(r))
            answers = {id(r): self._serves(r, epoch, serving) for r in pending}
            pending = [r for r in pending if answers[id(r)] is not True]
            silent = all(answers[id(r)] is None for r in pending)
            if not pending or time.monotonic() > deadline or (serving and silent):
                break
            time.sleep(0.05)
        if not serving:
            seen = sorted({str(r.epoch) for r in self._replicas})
            raise PolicyUnavailable(f"no PDP replica decides under {epoch!r} (seen: {', '.join(seen)})")
        return [r.client.address.grpc for r in serving]

    def _serves(self, replica: _Replica, epoch: str, serving: list[_Replica]) -> bool | None:
        """True: ``replica`` decides under ``epoch`` (appended to ``serving``); False: under another;
        None: no answer (marked down)."""
        try:
            seen = probe_epoch(replica.client)
        except PolicyUnavailable as exc:
            self._mark(replica, "down", error=exc)
            return None
        with self._lock:
            replica.epoch = seen
            if seen == epoch:
                replica.state = "up"
        if seen == epoch:
            serving.append(replica)
            return True
        return False

    def _reload_one(self, replica: _Replica) -> bool:
        try:
            replica.client.reload()
        except PolicyUnavailable as exc:
            self._mark(replica, "down", error=exc)
            return False
        return True

    # -- routing -------------------------------------------------------------------------------------

    def _decide(self, ask: Callable[[CerbosPdp], _T], epoch_of: Callable[[_T], str | None]) -> _T:
        """Ask one replica; on no answer or an answer under an epoch not accepted, ask one other once."""
        tried: list[_Replica] = []
        last: PolicyUnavailable | None = None
        for _ in range(2):
            replica = self._pick(tried)
            if replica is None:
                break
            tried.append(replica)
            try:
                answer = ask(replica.client)
            except PolicyUnavailable as exc:
                self._mark(replica, "down", error=exc)
                last = exc
                continue
            finally:
                with self._lock:
                    replica.in_flight -= 1
            epoch = epoch_of(answer)
            if epoch is None or self._accepts(replica, epoch):
                return answer
            last = PolicyUnavailable(f"PDP replica {replica.client.address.grpc} decides under {epoch!r}, "
                                     f"not {'/'.join(sorted(self._accepted))}")
        if self._closed.is_set():
            raise Closed(_CLOSED)
        if last is not None:
            raise PolicyUnavailable(f"no PDP replica answered: {last.reason}") from last
        raise PolicyUnavailable("no PDP replica is up and in sync with the world's policy epoch")

    def _pick(self, tried: Sequence[_Replica]) -> _Replica | None:
        """The in-sync replica with the fewest calls in flight (round robin among equals); counted in flight.
        A pool of one always tries its replica (there is no other to fail over to, nor a prober)."""
        with self._lock:
            if self._closed.is_set():
                raise Closed(_CLOSED)
            single = len(self._replicas) == 1
            candidates = [r for r in self._replicas if r not in tried and (single or r.state == "up")]
            if not candidates:
                return None
            self._turn += 1
            n = len(candidates)
            chosen = min(range(n), key=lambda i: (candidates[i].in_flight, (i - self._turn) % n))
            replica = candidates[chosen]
            replica.in_flight += 1
            replica.calls += 1
            return replica

    def _accepts(self, replica: _Replica, epoch: str) -> bool:
        """Is a decision under ``epoch`` from ``replica`` one the pool may hand out? Records the replica's
        epoch; an epoch the pool does not accept is checked against the store's current one once."""
        with self._lock:
            replica.epoch = epoch
            if not self._accepted or epoch in self._accepted:
                if not self._accepted:
                    self._accepted = frozenset({epoch})
                return True
        current = self._store_epoch() if self._store_epoch is not None else None
        with self._lock:
            if current == epoch:
                self._accepted = frozenset({epoch})  # activated by another process: the pool follows
                for r in self._replicas:
                    if r.state == "up" and r.epoch is not None and r.epoch != epoch:
                        r.state = "stale"
                return True
            replica.state = "stale"
            return False

    def _mark(self, replica: _Replica, state: ReplicaState, *, error: PolicyUnavailable | None = None) -> None:
        with self._lock:
            if replica.state != state:
                log.warning("pdp replica %s is %s (%s)", replica.client.address.grpc, state,
                            error.reason if error else "")
            replica.state = state
            replica.failures += 1 if error is not None else 0
            replica.last_error = error.reason[:300] if error is not None else ""

    # -- the prober ----------------------------------------------------------------------------------

    def _probe_loop(self) -> None:
        while not self._closed.wait(self._probe_interval_s):
            with self._lock:
                waiting = [r for r in self._replicas if r.state != "up"]
            for replica in waiting:
                if self._closed.is_set():
                    return
                self._reexamine(replica)

    def _reexamine(self, replica: _Replica) -> None:
        """Bring a down or stale replica back into rotation if it answers on an accepted epoch; ask a
        stale one to reload first (when allowed)."""
        try:
            seen = probe_epoch(replica.client)
            if self._reload_stale and seen not in self._accepted and self._accepted:
                replica.client.reload()
                seen = probe_epoch(replica.client)
        except PolicyUnavailable as exc:
            self._mark(replica, "down", error=exc)
            return
        except Closed:
            return
        with self._lock:
            replica.epoch = seen
            state: ReplicaState = "up" if not self._accepted or seen in self._accepted else "stale"
            if state != replica.state:
                log.warning("pdp replica %s is %s on epoch %s", replica.client.address.grpc, state, seen)
            replica.state = state


def _epoch_of(decisions: list[Decision]) -> str | None:
    """The one epoch of a check's decisions; a check whose decisions disagree is treated as no answer."""
    epochs = {d.epoch for d in decisions}
    if len(epochs) > 1:
        raise PolicyUnavailable(f"one PDP answered under several epochs ({sorted(map(str, epochs))})")
    return next(iter(epochs), None)


__all__ = ["PROBE_ACTOR", "PdpReplicas", "ReplicaState", "ReplicaStatus", "probe_epoch"]
