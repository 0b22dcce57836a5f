"""The attention broker's decision as a pure function (``engine.attention.decide``): each state against each
need, the hard-safety rule for S3, and the attention budget."""

from __future__ import annotations

import pytest

from engine.attention import AttentionOutput, Budget, Interruptibility, Notice, NoticeKind, Risk, Urgency, decide

S, B, P, F, R = ("SILENT_LOG", "BATCH_LATER", "PASSIVE_BADGE", "FULL_ALERT", "FORCE_HUMAN_REVIEW")
#: state -> the output for urgency low, normal, high, critical (risk low), written out by hand
EXPECTED = {
    "FREE": (P, F, F, F),
    "FOCUSED": (B, P, F, F),
    "MEETING": (B, B, F, F),
    "DRIVING": (S, B, B, P),
    "RESTING": (S, B, P, F),
    "SLEEP": (S, S, B, F),
    "UNKNOWN": (B, P, P, F),
}
URGENCIES = ("low", "normal", "high", "critical")
ROOMY = Budget(full_alerts=10, window_s=3600)


def notice(urgency: str = "normal", risk: str = "low", side_effect: str = "S0",
           kind: NoticeKind = NoticeKind.APPROVAL_REQUEST) -> Notice:
    return Notice(kind=kind, subject_kind="approval", subject_id="apr-1", urgency=Urgency(urgency), risk=Risk(risk),
                  side_effect=side_effect)


@pytest.mark.parametrize("state", list(EXPECTED))
@pytest.mark.parametrize("urgency", URGENCIES)
def test_each_state_and_urgency_gives_the_tables_output(state: str, urgency: str) -> None:
    verdict = decide(notice(urgency), Interruptibility(state), 0, ROOMY)
    assert verdict.output.value == EXPECTED[state][URGENCIES.index(urgency)]
    assert state in verdict.reasons[0] and urgency in verdict.reasons[0]


@pytest.mark.parametrize("state", list(EXPECTED))
def test_risk_counts_like_urgency(state: str) -> None:
    """A low-urgency notice of high risk is decided as a high-urgency one (need = the higher of the two)."""
    assert decide(notice("low", "high"), Interruptibility(state), 0, ROOMY).output == \
        decide(notice("high", "low"), Interruptibility(state), 0, ROOMY).output
    assert decide(notice("low", "medium"), Interruptibility(state), 0, ROOMY).output == \
        decide(notice("normal", "low"), Interruptibility(state), 0, ROOMY).output


@pytest.mark.parametrize("state", list(EXPECTED))
def test_s3_forces_a_human_review_whatever_the_state_and_budget(state: str) -> None:
    for urgency in URGENCIES:
        verdict = decide(notice(urgency, "low", "S3"), Interruptibility(state), 99, Budget(full_alerts=0))
        assert verdict.output is AttentionOutput.FORCE_HUMAN_REVIEW
        assert "S3" in verdict.reasons[0]


def test_a_meeting_batches_low_risk_and_alerts_high_risk_approvals() -> None:
    assert decide(notice("low", "low"), Interruptibility.MEETING, 0, ROOMY).output is AttentionOutput.BATCH_LATER
    assert decide(notice("normal", "high", "S2"), Interruptibility.MEETING, 0, ROOMY).output is \
        AttentionOutput.FULL_ALERT


def test_an_unknown_state_never_gets_the_most_intrusive_output_below_critical() -> None:
    for urgency in ("low", "normal", "high"):
        assert decide(notice(urgency), Interruptibility.UNKNOWN, 0, ROOMY).output is not AttentionOutput.FULL_ALERT


def test_over_budget_a_full_alert_is_batched_and_high_risk_forces_review() -> None:
    budget = Budget(full_alerts=2, window_s=600)
    assert decide(notice("high", "medium"), Interruptibility.FREE, 1, budget).output is AttentionOutput.FULL_ALERT
    held = decide(notice("high", "medium"), Interruptibility.FREE, 2, budget)
    assert held.output is AttentionOutput.BATCH_LATER
    assert any("budget spent: 2 of 2" in r for r in held.reasons)
    forced = decide(notice("high", "high"), Interruptibility.FREE, 2, budget)
    assert forced.output is AttentionOutput.FORCE_HUMAN_REVIEW and "high risk forces a review" in forced.reasons
    assert decide(notice("low"), Interruptibility.FREE, 2, budget).output is AttentionOutput.PASSIVE_BADGE  # no alert
