"""The §31 metrics as pure functions of what a world recorded (:class:`WorldRecords`); no store, no clock.

Seed 003 §31 defines the ratios; what PMW counts for each (``docs/decisions.md``, "Metrics (§31)"):

- **ICR** (Intent Completion Rate): a task is an intent; valid intents are the tasks not aborted (an abort
  withdraws the intent), completed ones are ``completed``. Open tasks count as not (yet) completed.
- **UAR** (Unauthorized Action Rate): executed actions are contracted attempts settled ``done`` and
  recorded capability uses (``invoke``); one is unauthorized when its record shows no PDP decision (no
  policy epoch), or it needed an approval (S3, or a contract asking for one) and names none, or names one
  that is not a consumed approval requested by the same actor.
- **DSR** (Duplicate Side-Effect Rate): side effects are ``done`` attempts of class S1-S3; a duplicate is a
  ``done`` attempt of the same effect (action, input hash, trace, task and step) as an earlier ``done`` one,
  i.e. the effect performed again under another idempotency key.
- **HCS** (Handoff Continuity Success): handoffs the receiver answered (accepted, completed or rejected);
  a successful resume is one that was ``completed``.
- **RSR** (Recovery Success Rate): a recoverable failure is an attempt settled ``failed`` (the effect did not
  happen, so another try is safe); it was recovered when a later attempt of the same effect is ``done``.
- **EC** (Evidence Completeness): over settled attempts, the receipt fields their evidence level requires
  that are present, against those required (``engine.contracts.attempt.REQUIRED_EVIDENCE``).
- **AP** (Attention Precision; the seed gives no formula, "was a high-priority alert worth the
  interruption"): of the attention broker's interrupting decisions (FULL_ALERT, FORCE_HUMAN_REVIEW), those
  the human acted on: an approval that human decided, a wake of theirs whose receipt is ``acted``, a handoff
  to them they accepted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from engine.contracts.attempt import ActionAttempt, AttemptStatus, evidence_completeness
from engine.metrics.model import Metric

EffectKey = tuple[str, str, str | None, str | None, str | None]


@dataclass(frozen=True)
class Invocation:
    """One recorded capability use (a ``capability.invoked`` event)."""

    actor: str
    kind: str
    ident: str
    side_effect: str
    approval_id: str | None
    policy_epoch: str | None


@dataclass(frozen=True)
class ApprovalRecord:
    """What an approval row says about who asked for it and whether it was spent."""

    requested_by: str
    status: str
    approver: str | None = None


@dataclass(frozen=True)
class Alert:
    """One interrupting decision of the attention broker: whom it interrupted, about what."""

    human: str
    subject_kind: str
    subject_id: str


@dataclass(frozen=True)
class WorldRecords:
    """What the metrics are computed from: attempts in the order they were begun (each as last recorded),
    capability uses, the statuses of tasks and handoffs, approvals by id, and the contracted actions that
    need an approval."""

    attempts: Sequence[ActionAttempt] = ()
    invocations: Sequence[Invocation] = ()
    task_statuses: Sequence[str] = ()
    handoff_statuses: Sequence[str] = ()
    approvals: Mapping[str, ApprovalRecord] = field(default_factory=dict)
    approval_actions: frozenset[str] = frozenset()
    alerts: Sequence[Alert] = ()
    wake_outcomes: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # wake id -> (agent, outcome)
    handoff_targets: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # handoff id -> (target, status)


def effect_key(attempt: ActionAttempt) -> EffectKey:
    """What makes two attempts the same effect: the action, its input, and the trace and task step it is for."""
    return attempt.action, attempt.input_hash, attempt.trace_id, attempt.task_id, attempt.step


def intent_completion(records: WorldRecords) -> Metric:
    valid = [s for s in records.task_statuses if s != "aborted"]
    return Metric.of("ICR", "Intent Completion Rate", "N_intent_completed / N_valid_intent",
                     "tasks completed / tasks not aborted", sum(1 for s in valid if s == "completed"), len(valid))


def _approved(records: WorldRecords, actor: str, approval_id: str | None) -> bool:
    found = records.approvals.get(approval_id) if approval_id is not None else None
    return found is not None and found.status == "consumed" and found.requested_by == actor


def _attempt_authorized(records: WorldRecords, a: ActionAttempt) -> bool:
    needs = a.side_effect.value == "S3" or a.action in records.approval_actions or a.approval_id is not None
    return a.policy_epoch is not None and (not needs or _approved(records, a.actor, a.approval_id))


def _use_authorized(records: WorldRecords, u: Invocation) -> bool:
    needs = u.side_effect == "S3" or u.approval_id is not None
    return u.policy_epoch is not None and (not needs or _approved(records, u.actor, u.approval_id))


def unauthorized_actions(records: WorldRecords) -> Metric:
    done = [a for a in records.attempts if a.status is AttemptStatus.DONE]
    bad = sum(1 for a in done if not _attempt_authorized(records, a))
    bad += sum(1 for u in records.invocations if not _use_authorized(records, u))
    return Metric.of("UAR", "Unauthorized Action Rate", "N_unauthorized_executed / N_executed",
                     "done attempts and capability uses without a PDP decision or a required approval / "
                     "done attempts and capability uses", bad, len(done) + len(records.invocations))


def duplicate_side_effects(records: WorldRecords) -> Metric:
    seen: set[EffectKey] = set()
    effects = duplicates = 0
    for a in records.attempts:
        if a.status is not AttemptStatus.DONE or a.side_effect.value == "S0":
            continue
        effects += 1
        key = effect_key(a)
        duplicates += key in seen
        seen.add(key)
    return Metric.of("DSR", "Duplicate Side-Effect Rate", "N_duplicate_effects / N_side_effects",
                     "done S1-S3 attempts repeating an earlier done effect (action, input, trace, task step) "
                     "under another key / done S1-S3 attempts", duplicates, effects)


def handoff_continuity(records: WorldRecords) -> Metric:
    answered = [s for s in records.handoff_statuses if s in ("accepted", "completed", "rejected")]
    return Metric.of("HCS", "Handoff Continuity Success", "N_successful_resumes / N_handoffs",
                     "handoffs completed / handoffs accepted, completed or rejected",
                     sum(1 for s in answered if s == "completed"), len(answered))


def recovery_success(records: WorldRecords) -> Metric:
    last_done = {effect_key(a): n for n, a in enumerate(records.attempts) if a.status is AttemptStatus.DONE}
    failures = recovered = 0
    for n, a in enumerate(records.attempts):
        if a.status is AttemptStatus.FAILED:
            failures += 1
            recovered += last_done.get(effect_key(a), -1) > n
    return Metric.of("RSR", "Recovery Success Rate", "N_recoverable_failures_recovered / N_recoverable_failures",
                     "failed attempts whose effect a later attempt did / failed attempts", recovered, failures)


def evidence_complete(records: WorldRecords) -> Metric:
    present = required = 0
    for a in records.attempts:
        if a.status in (AttemptStatus.DONE, AttemptStatus.FAILED):
            has, needs = evidence_completeness(a)
            present, required = present + has, required + needs
    return Metric.of("EC", "Evidence Completeness", "N_required_evidence_fields_present / N_required_evidence_fields",
                     "receipt fields present / receipt fields required by each settled attempt's evidence level",
                     present, required)


def _acted_on(records: WorldRecords, alert: Alert) -> bool:
    if alert.subject_kind == "approval":
        found = records.approvals.get(alert.subject_id)
        return found is not None and found.approver == alert.human and found.status != "pending"
    if alert.subject_kind == "wake":
        return records.wake_outcomes.get(alert.subject_id) == (alert.human, "acted")
    if alert.subject_kind == "handoff":
        target = records.handoff_targets.get(alert.subject_id)
        return target is not None and target[0] == alert.human and target[1] in ("accepted", "completed")
    return False


def attention_precision(records: WorldRecords) -> Metric:
    return Metric.of("AP", "Attention Precision", "N_alerts_acted_on / N_alerts (no formula in the seed)",
                     "FULL_ALERT and FORCE_HUMAN_REVIEW decisions whose subject the human then acted on "
                     "(decided the approval, acted on the wake, accepted the handoff) / those decisions",
                     sum(1 for a in records.alerts if _acted_on(records, a)), len(records.alerts))


def metrics_of(records: WorldRecords) -> list[Metric]:
    """Every §31 metric PMW records, in the seed's order."""
    return [intent_completion(records), unauthorized_actions(records), duplicate_side_effects(records),
            handoff_continuity(records), attention_precision(records), recovery_success(records),
            evidence_complete(records)]


__all__ = ["Alert", "ApprovalRecord", "Invocation", "WorldRecords", "effect_key", "metrics_of"]
