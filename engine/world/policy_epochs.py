"""The policy epoch the world's writes are decided under (runtime bookkeeping, not an agent's call)."""

from __future__ import annotations

from engine.models.common import Model, TimeUs
from engine.world.core import WorldCore, request_hash_of
from store import Insert, WriteRequest

RUNTIME_ACTOR = "pmw-runtime"


class PolicyEpoch(Model):
    epoch: str
    activated_at_us: TimeUs
    activated_by: str
    source: str


class PolicyEpochCalls(WorldCore):
    def current_policy_epoch(self) -> PolicyEpoch | None:
        row = self.store.read.current_policy_epoch()
        return PolicyEpoch.model_validate(row) if row is not None else None

    def activate_policy_epoch(self, epoch: str, source: str) -> PolicyEpoch:
        """Make ``epoch`` the current one (the runtime does this once the PDP is seen deciding under it).
        From then on a write decided under any other epoch is refused by the gateway. Idempotent."""
        current = self.current_policy_epoch()
        if current is not None and current.epoch == epoch:
            return current
        now = self.clock.now_us()
        row = {"epoch": epoch[:100], "activated_at_us": now, "activated_by": RUNTIME_ACTOR, "source": source[:500]}
        done = PolicyEpoch.model_validate(row)
        event = self.ids.new("evt")
        self.store.commit(WriteRequest(
            op_id=self.ids.new("op"), command="activate_policy_epoch", request_hash=request_hash_of(row),
            actor_id=RUNTIME_ACTOR, event_id=event, event_type="policy.activated", subject_kind="policy",
            subject_id=done.epoch, created_at_us=now, result=done.model_dump(mode="json"),
            changes=[Insert("policy_epochs", row, "policy_epoch", done.epoch)], payload={"source": done.source}))
        return done
