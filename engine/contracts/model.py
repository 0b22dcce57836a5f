"""An action contract (seed 003 §3.3, §11-13, §3.6/§27): what one external action declares about itself.

A contract is data (one YAML file per action under ``contracts/actions/``), read by
:mod:`engine.contracts.loader`; it names schemas, classes and other actions, never code. What it says is
enforced by the World before an action begins (:mod:`engine.world.actions`): the input must match
``input_schema``; the side-effect class is the one the PDP is asked about (``tool:<action>`` ``invoke``),
never the caller's; an S3 action, or one whose ``confirmation`` is ``approval``, needs a governor's approval
bound to exactly that action and input, in addition to the PDP's allow, never instead of it.

Rules a contract must keep (checked at load): S3 needs ``confirmation: approval`` and evidence E3; S2 needs
evidence E2 or more; an S2/S3 action whose idempotency policy is ``none`` (no way to learn an unknown
outcome, not safe to repeat) may not be retried (``retry.max_attempts: 1``); ``TRUE_ROLLBACK`` names an
``inverse`` action that exists and whose ``inverse_input`` maps only ``$input.<field>`` and
``$output.<field>`` references or literal values.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field, field_validator, model_validator

from engine.contracts.json_schema import check_schema
from engine.models.common import Model

ACTION_PATTERN = r"^[a-z][a-z0-9_]{0,62}$"
MAX_TIMEOUT_S = 3600.0
MAX_ATTEMPTS = 10


class SideEffectClass(StrEnum):
    """§11: S0 read-only, S1 reversible local, S2 external reversible or bounded, S3 external irreversible."""

    S0 = "S0"
    S1 = "S1"
    S2 = "S2"
    S3 = "S3"


class IdempotencyPolicy(StrEnum):
    """How a retry after an unknown outcome stays safe (§3.3, §12).

    ``status_query``: the connector can be asked whether the effect under a key happened; a retry asks
    first and never repeats a done effect. ``external_key``: the external system itself deduplicates by the
    key (a repeat is safe; the status is still asked first). ``natural``: repeating the effect changes
    nothing (setting a value). ``none``: none of these; an unknown outcome stays unknown (never retried).
    """

    STATUS_QUERY = "status_query"
    EXTERNAL_KEY = "external_key"
    NATURAL = "natural"
    NONE = "none"


class Confirmation(StrEnum):
    NONE = "none"
    APPROVAL = "approval"


class CompensationKind(StrEnum):
    """§13: compensation is not a universal undo."""

    TRUE_ROLLBACK = "TRUE_ROLLBACK"
    BEST_EFFORT_REVERSE = "BEST_EFFORT_REVERSE"
    FOLLOW_UP_CORRECTION = "FOLLOW_UP_CORRECTION"
    NO_COMPENSATION = "NO_COMPENSATION"


class EvidenceLevel(StrEnum):
    """§3.6: E0 ephemeral trace, E1 metadata + result, E2 policy decision + action receipt, E3 approval +
    immutable evidence bundle."""

    E0 = "E0"
    E1 = "E1"
    E2 = "E2"
    E3 = "E3"


class Idempotency(Model):
    policy: IdempotencyPolicy
    key_required: bool = True


class Retry(Model):
    max_attempts: int = Field(default=1, ge=1, le=MAX_ATTEMPTS)
    backoff_s: float = Field(default=0.0, ge=0.0, le=MAX_TIMEOUT_S)


class Authority(Model):
    """What the actor must hold: the capability the PDP checks (``tool:<action>``); informational roles."""

    capability: str = Field(pattern=r"^tool:[a-z][a-z0-9_]{0,62}$")
    roles: list[str] = Field(default_factory=list, max_length=20)


class Compensation(Model):
    kind: CompensationKind
    inverse: str | None = Field(default=None, pattern=ACTION_PATTERN)
    inverse_input: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _inverse_declared(self) -> Compensation:
        if self.kind is CompensationKind.TRUE_ROLLBACK and self.inverse is None:
            raise ValueError("a TRUE_ROLLBACK names its inverse action")
        if self.kind is not CompensationKind.TRUE_ROLLBACK and (self.inverse or self.inverse_input):
            raise ValueError("only a TRUE_ROLLBACK names an inverse action")
        for name, ref in self.inverse_input.items():
            if isinstance(ref, str) and ref.startswith("$") and not ref.startswith(("$input.", "$output.")):
                raise ValueError(f"inverse_input.{name}: a reference is $input.<field> or $output.<field>")
        return self


_RANK = {EvidenceLevel.E0: 0, EvidenceLevel.E1: 1, EvidenceLevel.E2: 2, EvidenceLevel.E3: 3}


class ActionContract(Model):
    """One action's contract (the §3.3 fields). ``action`` is its name, which is also the tool the PDP
    decides; ``file`` is where it was read (set by the loader, for messages)."""

    action: str = Field(pattern=ACTION_PATTERN)
    description: str = Field(default="", max_length=2000)
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    side_effect: SideEffectClass
    idempotency: Idempotency
    required_authority: Authority
    confirmation: Confirmation = Confirmation.NONE
    timeout_s: float = Field(gt=0, le=MAX_TIMEOUT_S)
    retry: Retry = Field(default_factory=Retry)
    compensation: Compensation
    evidence: EvidenceLevel

    @field_validator("input_schema", "output_schema")
    @classmethod
    def _subset(cls, schema: dict[str, Any]) -> dict[str, Any]:
        check_schema(schema)  # SchemaProblem: the loader names the key's line
        return schema

    @model_validator(mode="after")
    def _classes_agree(self) -> ActionContract:
        if self.required_authority.capability != f"tool:{self.action}":
            raise ValueError(f"required_authority.capability: the PDP decides tool:{self.action}")
        if self.side_effect is SideEffectClass.S3 and self.confirmation is not Confirmation.APPROVAL:
            raise ValueError("confirmation: an S3 action needs approval")
        floor = {SideEffectClass.S3: EvidenceLevel.E3, SideEffectClass.S2: EvidenceLevel.E2}.get(self.side_effect)
        if floor is not None and _RANK[self.evidence] < _RANK[floor]:
            raise ValueError(f"evidence: an {self.side_effect.value} action needs {floor.value} or more")
        if (self.side_effect in (SideEffectClass.S2, SideEffectClass.S3)
                and self.idempotency.policy is IdempotencyPolicy.NONE and self.retry.max_attempts > 1):
            raise ValueError("retry.max_attempts: an external action with no idempotency is never retried")
        return self

    @property
    def needs_approval(self) -> bool:
        """Whether a governor's approval is required (S3, or a contract that asks for confirmation)."""
        return self.side_effect is SideEffectClass.S3 or self.confirmation is Confirmation.APPROVAL

    @property
    def external(self) -> bool:
        """Whether the action has an external side effect (S2, S3): the ones whose duplicates count."""
        return self.side_effect in (SideEffectClass.S2, SideEffectClass.S3)


__all__ = ["ACTION_PATTERN", "ActionContract", "Authority", "Compensation", "CompensationKind", "Confirmation",
           "EvidenceLevel", "Idempotency", "IdempotencyPolicy", "Retry", "SideEffectClass"]
