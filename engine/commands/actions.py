"""Contracted actions (seed 003 §3.3, §12): begin one under an idempotency key, then settle its outcome.

An action with an external effect is recorded ``pending`` before the effect is attempted and ``done`` or
``failed`` after; the key makes a retry find that record instead of repeating the effect. The contract of
the action (``contracts/actions/<action>.yaml``) decides its side-effect class, schemas and approval need.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from engine.commands.base import Command
from engine.commands.fields import Id, Payload, Reason

ACTION_NAME_PATTERN = r"^[a-z][a-z0-9_]{0,62}$"


class BeginAction(Command):
    """Record a contracted action as pending under `idempotency_key` before its external effect is tried.
    The input is checked against the action's contract; the side-effect class the policy decides is the
    contract's; an S3 action (or one whose contract asks for confirmation) spends an approval bound to exactly
    this action and input. A key already recorded returns that record (its status: pending, done or failed)
    and writes nothing: a done effect is never begun again."""

    name = "begin_action"
    events = ("action.pending",)
    agent_effect = True
    takes_op_id = False  # the idempotency key is the operation's identity
    ref_field = "idempotency_key"

    action: str = Field(pattern=ACTION_NAME_PATTERN, description="The contracted action's name.")
    input: Payload | None = None
    idempotency_key: Id = Field(description="Names this one effect: a retry uses the same key.")
    approval_id: Id | None = None
    task_id: Id | None = Field(default=None, description="The task the action is a step of (checkpoints).")
    step: Id | None = Field(default=None, description="The step of the task's plan it performs.")


class SettleAction(Command):
    """Record the outcome of a pending action: `done` (with its output, checked against the contract, and the
    external effect's reference) or `failed` (the effect certainly did not happen). Settling twice the same
    way returns the record; otherwise `action_settled`."""

    name = "settle_action"
    events = ("action.done", "action.failed")
    agent_effect = True
    takes_op_id = False
    ref_field = "idempotency_key"

    idempotency_key: Id
    status: Literal["done", "failed"]
    output: Payload | None = None
    external_ref: str | None = Field(default=None, max_length=300)
    reason: Reason | None = None


__all__ = ["ACTION_NAME_PATTERN", "BeginAction", "SettleAction"]
