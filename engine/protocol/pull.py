"""Pull for external agents: an agent that runs outside the runtime claims its own wakes, reads its
projection, decides, and sends the decision back; the runtime records and carries it out.

This is the transport-free half: the server exposes it (the principal is the token's agent, given here as
``agent_id``, never a field of the request). :class:`ExternalAgents` holds the runtime's book (it records
decisions) and runs each agent's wakes under a lease owned by that agent's *pull worker*
(:func:`pull_worker_id`), so

- :meth:`ExternalAgents.pull` claims only ``agent_id``'s most urgent due wake (never another agent's),
  rehydrates and projects exactly as :class:`~engine.protocol.worker.Worker` does, and returns
  :class:`Pulled`;
- :meth:`ExternalAgents.decide` takes the agent's decision envelope
  (:class:`~engine.runloop.envelope.DecisionEnvelope`: an outcome ``execute | draft | defer | refuse |
  escalate | idle | cancel`` with its actions, approval, deferral or escalation; or today's
  :class:`~engine.protocol.adapters.AgentDecision`, an envelope without an outcome) for a wake its pull
  worker holds (``WakeNotLeased`` otherwise). It checks the envelope first as the run loop's worker would
  carry it out (:meth:`~engine.runloop.worker.EnvelopeProtocol.lower`: a declared approval state the
  actions contradict, a deferral not in the future, an escalation to a role nobody holds, reads naming a
  key not shown): refused, it is ``InvalidInput`` with nothing recorded or written, and the agent may
  decide again. Then it records the envelope (``envelope.recorded()``: today's spelling for today's
  decision) with the book before any effect and carries it out with the same code as the in-process
  worker (:class:`~engine.runloop.worker.EnvelopeProtocol`, which :class:`~engine.runloop.EnvelopeWorker`
  uses): the same writes (as the agent, through the PDP; operation ids ``<wake_id>:<n>``), receipts with
  the same outcome and ``payload.envelope``, traces of the same shape;
- a retried decide (a lost response, a crash of the server mid-decide) replays: the recorded decision
  stands, the effects' operation ids return their stored results, and a finished wake answers its one
  receipt. A different decision for a wake already decided is ``OperationConflict`` and changes nothing;
- a wake whose decision was recorded and whose lease ran out before its ack is finished, as decided, by
  the next pull of its agent (the agent is never asked twice).

Storm and depth rules apply unchanged: the controller decides which wakes exist, and the effects carry the
wake's chain as their correlation id exactly as an in-process agent's do.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from engine.errors import InvalidInput, OperationConflict, PolicyDenied, WakeNotLeased
from engine.models.agents import Agent
from engine.models.common import Model
from engine.models.receipts import Receipt
from engine.models.trusted import trusted
from engine.models.wakes import Wake, WakeStatus
from engine.protocol.adapters import AgentDecision
from engine.protocol.worker import DEFAULT_LEASE_S, Shown, observe
from engine.runloop.envelope import DecisionEnvelope, parse
from engine.runloop.worker import EnvelopeProtocol
from engine.validation import check_id
from engine.world.book import RuntimeBook
from engine.world.projection import WorldView

PULL_WORKER_PREFIX = "pull:"
MAX_PULL_SKIPS = 16  # wakes a pull may finish on its own (denied on rehydrate, already decided) before answering
MAX_SHOWN = 4096     # pulled-and-undecided wakes whose projection summary is kept for their trace
_MAX_ID = 128


class Pulled(Model):
    """A wake leased to its agent's pull: the wake, the agent's row and projection (read as the agent, as
    a worker shows them to an adapter), and when the lease ends (decide before it)."""

    wake: Wake
    agent: Agent
    view: WorldView
    lease_until_us: int


def pull_worker_id(agent_id: str) -> str:
    """The worker id that owns the leases of ``agent_id``'s pulls: ``pull:<agent_id>``, or ``pull:`` and a
    digest of the agent id when that would exceed an id's 128 characters."""
    worker = f"{PULL_WORKER_PREFIX}{agent_id}"
    if len(worker) <= _MAX_ID:
        return worker
    return PULL_WORKER_PREFIX + hashlib.sha256(agent_id.encode()).hexdigest()


Decided = DecisionEnvelope | AgentDecision | Mapping[str, Any]


def _same(recorded: Mapping[str, Any], decided: DecisionEnvelope) -> bool:
    """Whether a recorded decision is ``decided`` (both read as the current vocabulary, in their recorded
    form)."""
    return parse(recorded).recorded() == decided.recorded()


class ExternalAgents:
    """The pull protocol over the runtime's ``book``. Thread-safe for concurrent calls (calls for one agent
    are serialised); several processes may serve the same world (leases and operation ids decide)."""

    def __init__(self, book: RuntimeBook) -> None:
        self.book = book
        self.world = book.world
        self._lock = threading.Lock()
        self._agent_locks: dict[str, threading.Lock] = {}
        self._protocols: dict[str, EnvelopeProtocol] = {}
        self._shown: OrderedDict[str, Shown] = OrderedDict()

    def pull(self, agent_id: str, *, lease_seconds: float = DEFAULT_LEASE_S) -> Pulled | None:
        """Lease ``agent_id``'s most urgent due wake to its pull worker for ``lease_seconds`` and show it, or
        ``None`` if none of its wakes is due. A wake whose agent may no longer be rehydrated or observed is
        answered ``denied`` (as a worker does) and the next is claimed; so is a wake decided before whose
        lease ran out before its ack: it is finished as decided, and the next is claimed. Bad input
        (``agent_id``, ``lease_seconds``) is ``InvalidInput`` with nothing claimed; ``PolicyUnavailable`` and
        ``PolicyEpochChanged`` leave what was claimed leased (claimable again when the lease ends)."""
        check_id("agent_id", agent_id)
        protocol = self.protocol(agent_id)
        with self._agent_lock(agent_id):
            for _ in range(MAX_PULL_SKIPS):
                wake = self.world.claim_wake(protocol.worker_id, agent_id=agent_id, lease_seconds=lease_seconds)
                if wake is None:
                    return None
                started = wake.updated_at_us  # the claim
                try:
                    agent, view = observe(self.world, wake)
                except PolicyDenied as exc:
                    protocol.deny(wake, exc.message, started)
                    continue
                shown = Shown.of(view)
                recorded = self.book.recorded_decision(wake.wake_id)
                if recorded is not None:  # decided by an earlier pull: carried out, never asked again
                    protocol.carry(wake, agent_id, parse(recorded.decision), started, shown)
                    continue
                self._keep(wake.wake_id, shown)
                assert wake.lease_until_us is not None  # a claimed wake has a lease
                return Pulled(wake=wake, agent=agent, view=view, lease_until_us=wake.lease_until_us)
        return None

    def decide(self, agent_id: str, wake_id: str, decision: Decided) -> Receipt:
        """Carry out ``agent_id``'s ``decision`` (a decision envelope, today's decision, or their JSON) for
        ``wake_id`` as the run loop's worker carries it out, and return the wake's receipt.

        Refused with nothing recorded or written: bad input (``InvalidInput``; not a valid envelope, an
        envelope the runtime refuses, ``decision.reads`` naming a key the pull did not show included); a
        wake that is not ``agent_id``'s or
        whose lease its pull worker does not hold unexpired (``WakeNotLeased``); a decision other than the
        one recorded for the wake (``OperationConflict``). A retry of the same decision replays: a finished
        wake answers its receipt, an unfinished one (still leased) completes without repeating an effect.
        ``PolicyUnavailable`` and ``PolicyEpochChanged`` leave the wake leased with its decision recorded:
        retry (after the runtime follows the new epoch)."""
        check_id("agent_id", agent_id)
        check_id("wake_id", wake_id)
        if not isinstance(decision, DecisionEnvelope | AgentDecision | Mapping):
            raise InvalidInput("decision", f"must be an object, not {type(decision).__name__}")
        decided = parse(decision)  # a decision envelope (today's decision is one without an outcome)
        protocol = self.protocol(agent_id)
        with self._agent_lock(agent_id):
            wake = self._wake_of(agent_id, wake_id)
            recorded = self.book.recorded_decision(wake_id)
            if recorded is not None and not _same(recorded.decision, decided):
                raise OperationConflict(f"{wake_id}:decide", "record_decision")
            if wake.status is WakeStatus.ACKED and recorded is not None:
                return self._receipt_of(wake_id)  # a retry after the ack: the one receipt
            self._require_lease(agent_id, protocol.worker_id, wake)
            try:
                shown = self._shown_for(wake)
            except PolicyDenied as exc:  # the agent may no longer observe: answered as a worker would
                return protocol.deny(wake, exc.message, wake.updated_at_us).receipt
            # Checked before anything is recorded (refused: InvalidInput, the agent may decide again): the
            # envelope as the worker lowers it (today's decision is carried out as ever, not lowered), and its
            # reads. A replay (recorded before) is carried out as recorded, as the run loop's worker does.
            lowered = protocol.lower(wake, agent_id, decided) if recorded is None and not decided.legacy else None
            if (decided.actions if lowered is None else lowered.writes):  # reads naming a key not shown
                shown.fence_for(decided.reads)
            first = self.book.record_decision(protocol.worker_id, wake_id, agent_id, decided.recorded())
            if not _same(first.decision, decided):  # another attempt recorded a different one in between
                raise OperationConflict(f"{wake_id}:decide", "record_decision")
            cycle = protocol.carry(wake, agent_id, decided, wake.updated_at_us, shown)
            with self._lock:
                self._shown.pop(wake_id, None)
            return cycle.receipt

    def protocol(self, agent_id: str) -> EnvelopeProtocol:
        """The act-and-ack protocol of ``agent_id``'s pull worker (its ``crash_before_ack`` is how
        simulations and crash tests stop a decide after its effects, before the ack)."""
        check_id("agent_id", agent_id)
        with self._lock:
            return self._protocols.setdefault(agent_id, EnvelopeProtocol(self.book, pull_worker_id(agent_id)))

    # -- helpers ------------------------------------------------------------------------------------------------

    def _agent_lock(self, agent_id: str) -> threading.Lock:
        with self._lock:
            return self._agent_locks.setdefault(agent_id, threading.Lock())

    def _keep(self, wake_id: str, shown: Shown) -> None:
        with self._lock:
            self._shown[wake_id] = shown
            self._shown.move_to_end(wake_id)
            while len(self._shown) > MAX_SHOWN:
                self._shown.popitem(last=False)

    def _shown_for(self, wake: Wake) -> Shown:
        """What the pull showed for ``wake`` (its trace's retrieved refs); after a restart of this process
        (nothing kept), the agent's projection now (``PolicyDenied`` if it may no longer observe)."""
        with self._lock:
            kept = self._shown.get(wake.wake_id)
        return kept if kept is not None else Shown.of(self.world.project_world(wake.target_agent))

    def _wake_of(self, agent_id: str, wake_id: str) -> Wake:
        """``agent_id``'s wake ``wake_id``; a missing wake and another agent's are refused alike."""
        row = self.book.store.read.get("wakes", wake_id=wake_id)
        if row is None or row["target_agent"] != agent_id:
            raise WakeNotLeased(wake_id, agent_id, f"not a wake of {agent_id}")
        return trusted(Wake)(row)

    def _require_lease(self, agent_id: str, worker_id: str, wake: Wake) -> None:
        if wake.status is not WakeStatus.CLAIMED:
            raise WakeNotLeased(wake.wake_id, agent_id, f"the wake is {wake.status.value}")
        if wake.lease_owner != worker_id:
            raise WakeNotLeased(wake.wake_id, agent_id, "the wake is leased to another worker")
        if (wake.lease_until_us or 0) < self.world.clock.now_us():
            raise WakeNotLeased(wake.wake_id, agent_id, "the lease expired")

    def _receipt_of(self, wake_id: str) -> Receipt:
        rows = self.book.store.read.rows("receipts", {"wake_id": wake_id}, limit=1)
        return Receipt.model_validate(rows[0])


__all__ = ["MAX_PULL_SKIPS", "PULL_WORKER_PREFIX", "ExternalAgents", "Pulled", "pull_worker_id"]
