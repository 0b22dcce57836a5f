"""The record of what an agent decided for a wake, written before any effect: a worker that retries the
wake (after a crash) replays that decision instead of asking the agent again."""

from __future__ import annotations

from typing import Any

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
        if (first := self.recorded_decision(req.wake_id)) is not None:
            return first  # another attempt at this wake decided already: its decision stands
        return self._write("record_decision", worker, req,
                           lambda now: Plan("agent.decided", "wake", wake_id, req, payload=req.decision),
                           DecisionRecord, op_id=f"{wake_id}:decide", cause=None, decided=False)

    def recorded_decision(self, wake_id: str) -> DecisionRecord | None:
        stored = self.store.operation(f"{check_id('wake_id', wake_id)}:decide")
        return DecisionRecord.model_validate(stored.result) if stored is not None else None
