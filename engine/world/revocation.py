"""Revocation: when the policy epoch changes, queued work is decided again under the new policy.

Pending wakes whose target may no longer claim them are cancelled with a ``denied`` receipt; pending
handoffs whose target may no longer accept them are rejected. Both are written by the runtime itself
(the policy, not an agent, took the decision), each with a reason naming the epoch.
"""

from __future__ import annotations

from typing import Any

from engine.models.common import Model
from engine.models.handoffs import HANDOFF_LIFECYCLE, Handoff
from engine.models.receipts import Decision, Outcome, Receipt
from engine.models.wakes import WAKE_LIFECYCLE, Wake
from engine.policy.enforcement import Check
from engine.world.core import Plan, WorldCore
from engine.world.policy_epochs import RUNTIME_ACTOR, check_epoch
from store import Insert

MAX_RECHECK = 100_000


class RevocationReport(Model):
    epoch: str | None
    wakes_checked: int
    handoffs_checked: int
    wakes_revoked: list[str]
    handoffs_revoked: list[str]


class _Revoke(Model):
    kind: str
    id: str
    epoch: str | None


class RevocationCalls(WorldCore):
    def recheck_queued_work(self, epoch: str | None) -> RevocationReport:
        """Decide every pending wake (may its target claim it?) and pending handoff (may its target accept
        it?) under the current policy; revoke what is no longer allowed."""
        if epoch is not None:
            check_epoch(epoch)  # a bad epoch is refused before anything is read
        wakes = self._store.read.rows("wakes", {"status": "pending"}, limit=MAX_RECHECK)
        handoffs = self._store.read.rows("handoffs", {"status": "pending"}, limit=MAX_RECHECK)
        revoked_wakes = [w["wake_id"] for w in wakes if not self._still_allowed(w["target_agent"], "wake",
                                                                                w["wake_id"], "claim", w)]
        revoked_handoffs = [h["handoff_id"] for h in handoffs
                            if not self._still_allowed(h["target_agent"], "handoff", h["handoff_id"], "accept", h)]
        for wid in revoked_wakes:
            self._revoke_wake(wid, epoch)
        for hid in revoked_handoffs:
            self._revoke_handoff(hid, epoch)
        return RevocationReport(epoch=epoch, wakes_checked=len(wakes), handoffs_checked=len(handoffs),
                                wakes_revoked=revoked_wakes, handoffs_revoked=revoked_handoffs)

    def _still_allowed(self, actor: str, kind: str, ident: str, action: str, row: dict[str, Any]) -> bool:
        if self._store.read.get("agents", agent_id=actor) is None:
            return False
        return self._policy.decide(actor, [Check(kind, ident, action, row)])[0].allowed(action)

    def _revoke_wake(self, wake_id: str, epoch: str | None) -> None:
        reason = f"revoked: policy epoch {epoch} no longer lets the target claim this wake"

        def plan(now: int) -> Plan:
            wake = self._load(Wake, "wakes", "wake", wake_id, wake_id=wake_id)
            rec = Receipt(receipt_id=self.ids.new("rcp"), created_at_us=now, agent_id=wake.target_agent,
                          decision=Decision.NO_ACTION, outcome=Outcome.DENIED, wake_id=wake_id, reason=reason,
                          policy_epoch=epoch)
            p, _ = self._transition(Wake, "wakes", "wake", wake_id, WAKE_LIFECYCLE, "cancel", now,
                                    event_type="wake.revoked", payload={"reason": reason},
                                    extra=[Insert("receipts", rec.model_dump(mode="json"), "receipt", rec.receipt_id)])
            return p
        self._write("revoke_wake", RUNTIME_ACTOR, _Revoke(kind="wake", id=wake_id, epoch=epoch), plan, Wake,
                    op_id=f"revoke-{epoch}-{wake_id}"[:128], cause=None, decided=False)

    def _revoke_handoff(self, handoff_id: str, epoch: str | None) -> None:
        reason = f"revoked: policy epoch {epoch} no longer lets the target accept this handoff"

        def plan(now: int) -> Plan:
            p, _ = self._transition(Handoff, "handoffs", "handoff", handoff_id, HANDOFF_LIFECYCLE, "reject", now,
                                    values={"reason": reason}, event_type="handoff.revoked",
                                    payload={"reason": reason})
            return p
        self._write("revoke_handoff", RUNTIME_ACTOR, _Revoke(kind="handoff", id=handoff_id, epoch=epoch), plan,
                    Handoff, op_id=f"revoke-{epoch}-{handoff_id}"[:128], cause=None, decided=False)
