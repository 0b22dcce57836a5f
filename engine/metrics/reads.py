"""The records the §31 metrics are computed from, read from a world's store through its reader (no writes).

Contracted attempts live in the operation ledger (``begin_action`` / ``settle_action`` events, each carrying
the attempt as its result: ``engine.world.actions``), capability uses are ``invoke`` events, the attention
broker's interrupting decisions are ``attention.full_alert`` / ``attention.force_human_review`` events, tasks,
handoffs, approvals and receipts are their tables. The counts include the log up to :func:`records_of`'s
``last_seq``; rows of tables are read after it, so a write committed during the read may show in them and not
in the log.
"""

from __future__ import annotations

from typing import Any

from engine.contracts.attempt import ActionAttempt
from engine.contracts.loader import ContractBook, load_contracts
from engine.metrics.fold import Alert, ApprovalRecord, Invocation, WorldRecords
from store import Reader

ATTEMPT_COMMANDS = ("begin_action", "settle_action")
USE_COMMAND = "invoke"
ALERT_EVENTS = ("attention.full_alert", "attention.force_human_review")  # the broker's interrupting decisions


def records_of(read: Reader, contracts: ContractBook | None = None) -> tuple[WorldRecords, int]:
    """The world's records as of the log's last position, and that position. ``contracts``: the action
    contracts in force (default: the repository's ``contracts/``), for the actions that need an approval."""
    last = read.last_seq()
    rows = [r for r in read.rows("events", {"command": [*ATTEMPT_COMMANDS, USE_COMMAND]}, order_by=["seq"])
            if int(r["seq"]) <= last]
    book = contracts if contracts is not None else load_contracts()
    handoffs = read.rows("handoffs")
    return WorldRecords(
        attempts=_attempts(rows), invocations=[_use(r) for r in rows if r["command"] == USE_COMMAND],
        task_statuses=[str(r["status"]) for r in read.rows("tasks")],
        handoff_statuses=[str(r["status"]) for r in handoffs],
        approvals={str(r["approval_id"]): ApprovalRecord(str(r["requested_by"]), str(r["status"]),
                                                         str(r["approver"]) if r["approver"] else None)
                   for r in read.rows("approvals")},
        approval_actions=frozenset(name for name, c in book.items() if c.needs_approval),
        alerts=[Alert(str(r["subject_id"]), str(r["payload"]["notice"]["subject_kind"]),
                      str(r["payload"]["notice"]["subject_id"]))
                for r in read.rows("events", {"event_type": list(ALERT_EVENTS)}, order_by=["seq"])
                if int(r["seq"]) <= last],
        wake_outcomes={str(r["wake_id"]): (str(r["agent_id"]), str(r["outcome"])) for r in read.rows("receipts")
                       if r["wake_id"]},
        handoff_targets={str(r["handoff_id"]): (str(r["target_agent"]), str(r["status"])) for r in handoffs}), last


def _attempts(rows: list[dict[str, Any]]) -> list[ActionAttempt]:
    """Each attempt as last recorded (its settle over its begin), in the order they were begun."""
    latest: dict[str, ActionAttempt] = {}
    for r in rows:
        if r["command"] in ATTEMPT_COMMANDS:
            attempt = ActionAttempt.model_validate(r["result"])
            latest[attempt.idempotency_key] = attempt  # dicts keep first-insertion order: the begin's
    return list(latest.values())


def _use(row: dict[str, Any]) -> Invocation:
    payload = row["payload"] or {}
    approval = payload.get("approval_id")
    return Invocation(actor=str(row["actor_id"]), kind=str(row["subject_kind"]), ident=str(row["subject_id"]),
                      side_effect=str(payload.get("side_effect") or "S0"),
                      approval_id=str(approval) if approval else None,
                      policy_epoch=str(row["policy_epoch"]) if row["policy_epoch"] else None)


__all__ = ["records_of"]
