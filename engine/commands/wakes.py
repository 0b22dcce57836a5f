"""The wake queue and decision receipts: what a worker (and whoever queues work) does.

None of these is an agent effect: an agent's decision is carried out by the worker that woke it, and
the worker's claim and ack are the protocol around that decision.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from engine.commands.base import Command
from engine.commands.fields import INT64_MAX, Id, Int64, Payload, Reason, Refs, TimeUs
from engine.models.common import Priority
from engine.models.receipts import Decision, Outcome
from engine.models.traces import TraceBody

MAX_WAKE_CAUSE_CHARS = 200
MAX_IDEMPOTENCY_KEY_CHARS = 256
MAX_LEASE_SECONDS = 86400.0
MAX_EPOCH_CHARS = 100
MAX_CLAIM_AGENTS = 1000


class EnqueueWake(Command):
    """Queue a wake for ``target_agent`` unless one with this ``idempotency_key`` exists (then that one is
    returned with ``created`` false and nothing is written). The wake is due at ``not_before_us`` (default:
    now); the most urgent due wake (``priority``) is claimed first."""

    name = "enqueue_wake"
    events = ("wake.issued",)
    cause_param = "causation"
    ref_field = "wake.wake_id"

    target_agent: Id
    cause: str = Field(min_length=1, max_length=MAX_WAKE_CAUSE_CHARS, description="Why the agent is woken.")
    idempotency_key: str = Field(min_length=1, max_length=MAX_IDEMPOTENCY_KEY_CHARS, description=(
        "Delivering the same key again creates no second wake."))
    not_before_us: TimeUs | None = None
    priority: Priority = 0
    payload: Payload | None = None
    payload_refs: Refs | None = None
    base_state_version: int | None = Field(default=None, ge=0, le=INT64_MAX)
    authority_scope: Payload | None = None
    cause_event_id: Id | None = Field(default=None, description="The event that caused the wake.")


class ClaimWake(Command):
    """Lease the most urgent due wake (only ``agent_id``'s, or only those of the agents in ``agent_ids``, if
    given; at most one of the two) for ``lease_seconds``, or return nothing if none is due (an empty
    ``agent_ids`` claims nothing). Expired leases are reclaimed; concurrent claimers never get the same
    wake. The caller is the worker; what is decided is the wake's target agent's authority."""

    name = "claim_wake"
    events = ("wake.claim",)
    actor_param = "worker"
    ref_field = "wake_id"

    agent_id: Id | None = None
    agent_ids: list[Id] | None = Field(default=None, max_length=MAX_CLAIM_AGENTS, description=(
        "Claim only wakes of these agents (a worker: the agents it runs)."))
    lease_seconds: float = Field(default=30.0, gt=0, le=MAX_LEASE_SECONDS)

    @field_validator("agent_ids")
    @classmethod
    def _one_filter(cls, value: list[str] | None, info: ValidationInfo) -> list[str] | None:
        if value is not None and info.data.get("agent_id") is not None:
            raise ValueError("give agent_id or agent_ids, not both")
        return value

    def targets(self) -> list[str] | None:
        """The agents whose wakes may be claimed, sorted and without repeats (``None``: any agent's)."""
        if self.agent_id is not None:
            return [self.agent_id]
        return sorted(set(self.agent_ids)) if self.agent_ids is not None else None


class _ReceiptFields(Command):
    """What a receipt says besides its agent, decision and outcome."""

    task_id: Id | None = None
    reason: Reason | None = None
    observed_state_version: Int64 | None = None
    topology_version: Int64 | None = None
    base_state_version: Int64 | None = None
    resulting_state_version: Int64 | None = None
    action_refs: Refs = Field(default_factory=list)
    artifact_refs: Refs = Field(default_factory=list)
    next_wake: Id | None = None
    policy_epoch: str | None = Field(default=None, max_length=MAX_EPOCH_CHARS)
    payload: Payload = Field(default_factory=dict)


class AckWake(_ReceiptFields):
    """Finish a claimed wake: mark it acked and write its one receipt (the agent's ``decision`` and the
    typed ``outcome``; default: acted, or no_action for that decision) and the run's ``trace``, in one
    transaction. Only the lease owner (the caller, a worker) may ack (else ``lease_held``)."""

    name = "ack_wake"
    events = ("wake.ack",)
    actor_param = "worker"
    ref_field = "receipt_id"

    wake_id: Id
    decision: Decision = Decision.NO_ACTION
    outcome: Outcome | None = None
    trace: TraceBody | None = None


class CancelWake(Command):
    """End a pending or claimed wake without running it; its one receipt says why (``outcome`` suppressed,
    cancelled or denied)."""

    name = "cancel_wake"
    events = ("wake.cancel",)
    ref_field = "receipt_id"

    wake_id: Id
    reason: Reason
    outcome: Literal["suppressed", "cancelled", "denied"] = "suppressed"


class WriteReceipt(_ReceiptFields):
    """A receipt for work not started by a wake (a wake's receipt comes from ``ack_wake`` or
    ``cancel_wake``)."""

    name = "write_receipt"
    events = ("receipt.written",)
    ref_field = "receipt_id"

    agent_id: Id
    decision: Decision
    outcome: Outcome


__all__ = ["AckWake", "CancelWake", "ClaimWake", "EnqueueWake", "WriteReceipt"]
