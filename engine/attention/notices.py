"""What the world asks of its humans, as notices for the broker, and the decisions recorded for them.

:func:`notices_for` reads one committed event (a row of the log) and names each human it would wake or
notify, with the notice (pure but for reads through the store's reader):

- ``approval.requested``: every live governor but the requester, about the approval. The side-effect class
  is the contract's when the approval is for a contracted action (kind ``tool``), else the approval's own
  (S3); the risk follows the class (S2 and S3 high, S1 medium, S0 low).
- ``handoff.created`` to a human target: an escalation (urgency high, risk medium).
- a wake for a human target, queued by an agent (``wake.issued``) or by the controller (each wake of a
  ``controller.step``): a review when the wake routes one (cause ``memory_review``: urgency low, risk low),
  else a wake (urgency normal, risk low).

:func:`attend` asks the broker for each (``World.notify_human``, as ``actor``, the controller's agent in the
run loop) under an operation id derived from the event and the human, so replaying the same event after a
crash records nothing twice. The run loop calls it once per committed event it follows.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from engine.attention.model import HUMAN_ROLES, AttentionDecision, Notice, NoticeKind, Risk, Urgency
from engine.contracts.loader import ContractBook, load_contracts

if TYPE_CHECKING:
    from engine.world import World
    from store import Reader

_RISK = {"S0": Risk.LOW, "S1": Risk.MEDIUM, "S2": Risk.HIGH, "S3": Risk.HIGH}
REVIEW_CAUSE = "memory_review"


def _human(read: Reader, agent_id: object) -> bool:
    row = read.get("agents", agent_id=agent_id) if isinstance(agent_id, str) else None
    return row is not None and row["role_id"] in HUMAN_ROLES


def _approval_notices(read: Reader, event: Mapping[str, Any], contracts: ContractBook) -> list[tuple[str, Notice]]:
    approval = read.get("approvals", approval_id=event["subject_id"])
    if approval is None:
        return []
    contract = contracts.get(approval["object_id"]) if approval["kind"] == "tool" else None
    side_effect = contract.side_effect.value if contract is not None else str(approval["side_effect"])
    notice = Notice(kind=NoticeKind.APPROVAL_REQUEST, subject_kind="approval", subject_id=approval["approval_id"],
                    urgency=Urgency.NORMAL, risk=_RISK[side_effect], side_effect=side_effect)
    governors = read.rows("agents", {"role_id": "governor"}, order_by=["agent_id"])
    return [(str(g["agent_id"]), notice) for g in governors
            if g["status"] != "offline" and g["agent_id"] != approval["requested_by"]]


def notices_for(read: Reader, event: Mapping[str, Any], contracts: ContractBook | None = None
                ) -> list[tuple[str, Notice]]:
    """The humans ``event`` (a log row: ``event_type``, ``subject_id``, ``payload``, ``result``) would wake or
    notify, each with its notice; empty for any other event."""
    kind = event["event_type"]
    if kind == "approval.requested":
        return _approval_notices(read, event, contracts if contracts is not None else load_contracts())
    result = event.get("result") or {}
    if kind == "handoff.created" and _human(read, target := result.get("target_agent")):
        return [(str(target), Notice(kind=NoticeKind.ESCALATION, subject_kind="handoff",
                                     subject_id=str(event["subject_id"]), urgency=Urgency.HIGH, risk=Risk.MEDIUM))]
    if kind == "wake.issued":
        return _wake_notices(read, [str((result.get("wake") or {}).get("wake_id"))] if result.get("created") else [])
    if kind == "controller.step":
        return _wake_notices(read, [str(w) for w in (event.get("payload") or {}).get("wake_ids") or []])
    return []


def _wake_notices(read: Reader, wake_ids: list[str]) -> list[tuple[str, Notice]]:
    found: list[tuple[str, Notice]] = []
    for wake_id in wake_ids:
        wake = read.get("wakes", wake_id=wake_id)
        if wake is not None and _human(read, wake["target_agent"]):
            review = wake["cause"] == REVIEW_CAUSE
            found.append((str(wake["target_agent"]), Notice(
                kind=NoticeKind.REVIEW if review else NoticeKind.WAKE, subject_kind="wake", subject_id=wake_id,
                urgency=Urgency.LOW if review else Urgency.NORMAL, risk=Risk.LOW)))
    return found


def attend(world: World, read: Reader, actor: str, event: Mapping[str, Any],
           contracts: ContractBook | None = None) -> list[AttentionDecision]:
    """The broker's decision for each human ``event`` concerns, recorded as ``actor`` (see the module
    docstring); a replayed event answers the decisions recorded the first time."""
    return [world.notify_human(actor, human, notice.kind.value, notice.subject_kind, notice.subject_id,
                               urgency=notice.urgency.value, risk=notice.risk.value, side_effect=notice.side_effect,
                               op_id=_op_id(str(event["event_id"]), human, notice))
            for human, notice in notices_for(read, event, contracts)]


def _op_id(event_id: str, human: str, notice: Notice) -> str:
    """One operation per (event, human, subject): a replay of the event answers the recorded decision."""
    digest = hashlib.sha256(f"{event_id}|{human}|{notice.subject_kind}|{notice.subject_id}".encode()).hexdigest()
    return f"attn-{digest[:32]}"


__all__ = ["REVIEW_CAUSE", "attend", "notices_for"]
