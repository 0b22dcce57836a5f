"""The record of what an agent decided for a wake, written before any effect: a worker that retries the
wake (after a crash) replays that decision instead of asking the agent again."""

from __future__ import annotations

from typing import Any

from engine.errors import OperationConflict
from engine.models.common import Id, Model, Payload
from engine.validation import build, check_id
from engine.world.core import Plan, WorldCore


class DecisionRecord(Model):
    wake_id: Id
    agent_id: Id
    decision: Payload


class DecisionCalls(WorldCore):
    def record_decision(self, worker: str, wake_id: str, agent_id: str, decision: dict[str, Any]) -> DecisionRecord:
        """Record (once per wake) the decision the agent took; returns the first record if one exists.
        Runtime bookkeeping by the worker holding the wake's lease: not an agent's act, not decided by the
        PDP (the effects that follow are)."""
        check_id("worker", worker)
        req = build(DecisionRecord, wake_id=wake_id, agent_id=agent_id, decision=decision)
        try:  # no ledger read: the write's unique operation id answers a retry (the plan reads nothing)
            return self._write("record_decision", worker, req,
                               lambda now: Plan("agent.decided", "wake", wake_id, req, payload=req.decision),
                               DecisionRecord, op_id=f"{wake_id}:decide", cause=None, decided=False,
                               ledger_first=False)
        except OperationConflict:  # another attempt at this wake (another worker) decided already: that stands
            first = self.recorded_decision(req.wake_id)
            if first is None:
                raise
            return first

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
