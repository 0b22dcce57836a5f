"""The record of what an agent decided for a wake: a worker that retries the wake (after a crash) replays that
decision instead of asking the agent again.

Two ways to write it: :meth:`DecisionCalls.record_decision` commits it on its own, before any effect (an
adapter that must not be asked twice: an LLM, a human); :meth:`DecisionCalls.plan_decision` builds it as the
first write of the transaction that commits the decision's effects and ack (:meth:`DecisionCalls.commit_decided`),
for an adapter that may be asked again (a rule agent: a crash before that commit left nothing of the decision,
and deciding again on the world as it then is is what a first attempt would have done)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.errors import OperationConflict
from engine.models.common import Id, Model, Payload
from engine.validation import build, check_id
from engine.world.core import Plan, PlannedBatch, WorldCore, request_hash
from store import CommitOutcome, WriteRequest

if TYPE_CHECKING:
    from engine.world import World


class DecisionRecord(Model):
    wake_id: Id
    agent_id: Id
    decision: Payload


def _decision_plan(req: DecisionRecord) -> Plan:
    return Plan("agent.decided", "wake", req.wake_id, req, payload=req.decision)


class DecisionCalls(WorldCore):
    world: World  # the agent-facing World over the same store (RuntimeBook)

    def record_decision(self, worker: str, wake_id: str, agent_id: str, decision: dict[str, Any]) -> DecisionRecord:
        """Record (once per wake) the decision the agent took; returns the first record if one exists.
        Runtime bookkeeping by the worker holding the wake's lease: not an agent's act, not decided by the
        PDP (the effects that follow are)."""
        check_id("worker", worker)
        req = build(DecisionRecord, wake_id=wake_id, agent_id=agent_id, decision=decision)
        try:  # no ledger read: the write's unique operation id answers a retry (the plan reads nothing)
            return self._write("record_decision", worker, req, lambda now: _decision_plan(req),
                               DecisionRecord, op_id=f"{wake_id}:decide", cause=None, decided=False,
                               ledger_first=False)
        except OperationConflict:  # another attempt at this wake (another worker) decided already: that stands
            first = self.recorded_decision(req.wake_id)
            if first is None:
                raise
            return first

    def plan_decision(self, worker: str, wake_id: str, agent_id: str, decision: dict[str, Any]) -> WriteRequest:
        """The record of ``decision`` as :meth:`record_decision` would write it (same operation id, event and
        result), planned only: :meth:`commit_decided` commits it with the decision's effects. Validated now
        (``InvalidInput``); reads nothing."""
        check_id("worker", worker)
        req = build(DecisionRecord, wake_id=wake_id, agent_id=agent_id, decision=decision)
        command = "record_decision"
        return self._request(command, worker, request_hash(command, worker, req), _decision_plan(req),
                             self.clock.now_us(), op_id=f"{wake_id}:decide", cause=self._checked_cause(None),
                             epoch=None)

    def commit_decided(self, record: WriteRequest, batch: PlannedBatch) -> list[CommitOutcome]:
        """Commit ``record`` (:meth:`plan_decision`) and ``batch`` (planned by :attr:`world`: the decision's
        effects and ack) in ONE transaction through the runtime's door, the batch decided by the PDP inside it
        exactly as ``world.commit_planned`` decides it; the record is the first write (its event comes first).
        Returns the record's outcome, then the batch's. A record refused because this wake's decision is
        recorded already as another (another worker's) raises ``OperationConflict``; a refused write of the
        batch ``BatchRefused`` with its index in the batch; ``PlannedDenied``; nothing is written either way."""
        if record.command != "record_decision":
            raise RuntimeError("commit_decided commits a decision record first")  # a programming error
        return self.world._commit_batch(batch, self._door, [record])

    def recorded_decision(self, wake_id: str) -> DecisionRecord | None:
        """The decision recorded for ``wake_id`` (``None`` if none was). Only a ``record_decision`` entry of
        the ledger counts (the World refuses these operation ids from agents)."""
        op_id = f"{check_id('wake_id', wake_id)}:decide"
        stored = self._store.operation(op_id)
        if stored is None:
            return None
        if stored.command != "record_decision":
            raise OperationConflict(op_id, stored.command)
        return DecisionRecord.model_validate(stored.result)
