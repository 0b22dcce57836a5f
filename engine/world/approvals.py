"""Approvals for S3 side effects (seed 003): a governor approves one exact action, under one policy
epoch, until an expiry; the approval is spent by the one invocation it names.

The action hash covers (kind, object id, action, payload): a changed payload is a different action and
the approval does not apply. A new policy epoch or the expiry invalidates it too. A denied approval
(``deny_approval``) is rejected for good: it can be neither approved nor spent.
"""

from __future__ import annotations

from typing import Any

from engine.commands.approvals import Approve, DenyApproval, RequestApproval
from engine.errors import ApprovalInvalid
from engine.models.approvals import APPROVAL_LIFECYCLE, Approval, ApprovalStatus
from engine.policy.enforcement import Check
from engine.validation import build
from engine.world.core import Cause, Plan, WorldCore, request_hash_of
from store import Insert, Update


def action_hash(kind: str, object_id: str, action: str, payload: dict[str, Any]) -> str:
    return request_hash_of({"kind": kind, "object_id": object_id, "action": action, "payload": payload})


class ApprovalCalls(WorldCore):
    def request_approval(self, actor: str, kind: str, object_id: str, *, action: str = "invoke",
                         payload: dict[str, Any] | None = None, op_id: str | None = None,
                         cause: Cause | None = None) -> Approval:
        """Ask a governor to approve exactly this S3 action (kind, object, action, payload). The payload is
        kept in the request's event (bounded as every payload is): approvals are governance-visible, so the
        approvals view shows what is asked, and checks it against the hash."""
        req = build(RequestApproval, kind=kind, object_id=object_id, action=action, payload=payload or {})

        def plan(now: int) -> Plan:
            aid = self.ids.new("apr")
            approval = Approval(approval_id=aid, requested_by=actor, kind=req.kind, object_id=req.object_id,
                                action=req.action, side_effect="S3", status=ApprovalStatus.PENDING,
                                action_hash=action_hash(req.kind, req.object_id, req.action, req.payload or {}),
                                created_at_us=now, updated_at_us=now, version=1)
            row = approval.model_dump(mode="json")
            return Plan("approval.requested", "approval", aid, approval, [Insert("approvals", row, "approval", aid)],
                        payload={"kind": req.kind, "object_id": req.object_id, "action": req.action,
                                 "payload": req.payload or {}},
                        checks=[Check("approval", aid, "request", {**row, "status": ""}, "S3")])
        return self._write("request_approval", actor, req, plan, Approval, op_id=op_id, cause=cause)

    def approve(self, actor: str, approval_id: str, *, ttl_seconds: float = 3600, op_id: str | None = None,
                cause: Cause | None = None) -> Approval:
        """A governor approves: the approval binds the approver, the current policy epoch and an expiry."""
        req = build(Approve, approval_id=approval_id, ttl_seconds=ttl_seconds)

        def plan(now: int) -> Plan:
            epoch = self._current_epoch_name()
            p, _ = self._transition(Approval, "approvals", "approval", req.approval_id, APPROVAL_LIFECYCLE, "approve",
                                    now, values={"approver": actor, "policy_epoch": epoch,
                                                 "expires_at_us": now + round(req.ttl_seconds * 1_000_000)},
                                    side_effect="S3")
            return p
        return self._write("approve", actor, req, plan, Approval, op_id=op_id, cause=cause)

    def deny_approval(self, actor: str, approval_id: str, *, op_id: str | None = None,
                      cause: Cause | None = None) -> Approval:
        """A governor denies a pending approval: rejected for good (``approve`` and the invocation it named
        then fail with ``ApprovalInvalid``), binding the governor who decided and the current policy epoch.
        The PDP decides it as the approval's ``approve`` action (the right to decide a request), so the same
        guardrails hold: only a governor, never its own request, never an offline principal."""
        req = build(DenyApproval, approval_id=approval_id)

        def plan(now: int) -> Plan:
            p, _ = self._transition(Approval, "approvals", "approval", req.approval_id, APPROVAL_LIFECYCLE, "reject",
                                    now, values={"approver": actor, "policy_epoch": self._current_epoch_name()},
                                    policy_action="approve", side_effect="S3")
            return p
        return self._write("deny_approval", actor, req, plan, Approval, op_id=op_id, cause=cause)

    def get_approval(self, approval_id: str, *, actor: str | None = None) -> Approval:
        return self._get(Approval, "approvals", "approval", approval_id, actor, approval_id=approval_id)

    def _current_epoch_name(self) -> str | None:
        row = self._store.read.current_policy_epoch()
        return str(row["epoch"]) if row is not None else None

    def _spend_approval(self, actor: str, approval_id: str | None, kind: str, object_id: str,
                        payload: dict[str, Any], now: int) -> Update:
        """The compare-and-set that spends a valid approval for this exact action (or ``ApprovalInvalid``)."""
        if approval_id is None:
            raise ApprovalInvalid(actor, None, "an S3 action needs an approval")
        row = self._store.read.get("approvals", approval_id=approval_id)
        if row is None:
            raise ApprovalInvalid(actor, approval_id, "no such approval")
        a = Approval.model_validate(row)
        problems = [
            (a.status is not ApprovalStatus.APPROVED, f"approval is {a.status.value}"),
            (a.requested_by != actor, f"approval was requested by {a.requested_by}"),
            (a.action_hash != action_hash(kind, object_id, "invoke", payload), "approval is for another action "
             "or payload"),
            (a.expires_at_us is None or a.expires_at_us <= now, "approval expired"),
            (a.policy_epoch != self._current_epoch_name(), f"approval was given under policy epoch "
             f"{a.policy_epoch}, now {self._current_epoch_name()}"),
        ]
        for failed, reason in problems:
            if failed:
                raise ApprovalInvalid(actor, approval_id, reason)
        return Update("approvals", {"approval_id": approval_id}, a.version,
                      {"status": ApprovalStatus.CONSUMED.value, "updated_at_us": now}, "approval", approval_id)
