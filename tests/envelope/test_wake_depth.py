"""The layered wake's classifier (engine/runloop/wake_depth.py) as a pure function: monotone in every
signal (risk and importance above all), a low-importance, low-risk wake never reaches a full run, a high-risk
one always does; thresholds are data (a YAML file, checked)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import InvalidInput
from engine.runloop.wake_depth import (
    DepthThresholds,
    WakeDepth,
    WakeSignals,
    load_thresholds,
    signals_of,
    wake_depth,
)
from tests.hypothesis_budget import examples

unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
signals = st.builds(WakeSignals, importance=unit, uncertainty=unit, risk=unit, novelty=unit)
weight = st.floats(min_value=0.0, max_value=10.0, allow_nan=False)


@st.composite
def thresholds(draw: st.DrawFn) -> DepthThresholds:
    check, full = sorted((draw(st.floats(0.0, 40.0)), draw(st.floats(0.0, 40.0))))
    return DepthThresholds(importance_weight=draw(weight), uncertainty_weight=draw(weight), risk_weight=draw(weight),
                           novelty_weight=draw(weight), check_score=check, full_score=full,
                           min_importance=draw(unit), full_risk=draw(unit))


BUDGET = settings(max_examples=examples(ci=150, thorough=2000), deadline=None)


@BUDGET
@given(signals, thresholds(), st.sampled_from(["importance", "uncertainty", "risk", "novelty"]), unit)
def test_more_of_any_signal_never_wakes_less_deep(s: WakeSignals, t: DepthThresholds, name: str,
                                                   more: float) -> None:
    raised = s.model_copy(update={name: max(getattr(s, name), more)})
    assert wake_depth(raised, t) >= wake_depth(s, t)


@BUDGET
@given(signals, thresholds(), unit, unit)
def test_monotone_in_risk_and_importance_together(s: WakeSignals, t: DepthThresholds, risk: float,
                                                  importance: float) -> None:
    raised = s.model_copy(update={"risk": max(s.risk, risk), "importance": max(s.importance, importance)})
    assert wake_depth(raised, t) >= wake_depth(s, t)


@BUDGET
@given(signals, thresholds())
def test_low_importance_and_risk_never_full_high_risk_always_full(s: WakeSignals, t: DepthThresholds) -> None:
    depth = wake_depth(s, t)
    if s.risk >= t.full_risk:
        assert depth is WakeDepth.FULL
    elif s.importance < t.min_importance:
        assert depth is WakeDepth.MONITOR  # neither a full run nor the check (which could lead to one)


def test_the_default_thresholds_at_the_edges() -> None:
    t = DepthThresholds()
    assert wake_depth(WakeSignals(), t) is WakeDepth.MONITOR
    assert wake_depth(WakeSignals(importance=0.2, uncertainty=1, novelty=1), t) is WakeDepth.MONITOR  # unimportant
    assert wake_depth(WakeSignals(importance=0.6, uncertainty=0.9), t) is WakeDepth.FULL           # 1.05
    assert wake_depth(WakeSignals(risk=0.7), t) is WakeDepth.FULL                                   # hard safety
    assert wake_depth(WakeSignals(importance=0.4), t) is WakeDepth.CHECK


def test_thresholds_are_data_read_from_yaml_and_checked(tmp_path: Path) -> None:
    good = tmp_path / "depth.yaml"
    good.write_text("check_score: 0.1\nfull_risk: 0.5\n")
    t = load_thresholds(good)
    assert (t.check_score, t.full_risk, t.full_score) == (0.1, 0.5, DepthThresholds().full_score)
    assert wake_depth(WakeSignals(risk=0.5), t) is WakeDepth.FULL
    bad = tmp_path / "bad.yaml"
    bad.write_text("check_score: 2.0\nfull_score: 1.0\n")
    with pytest.raises(InvalidInput, match="check_score must not be above full_score"):
        load_thresholds(bad)
    typo = tmp_path / "typo.yaml"
    typo.write_text("ful_risk: 0.5\n")
    with pytest.raises(InvalidInput, match="ful_risk"):
        load_thresholds(typo)


@pytest.mark.parametrize("payload", [{"signals": [1]}, {"signals": {"risk": 2}}, {"signals": {"mood": 1}}])
def test_bad_signals_are_refused(payload: dict[str, object]) -> None:
    with pytest.raises(InvalidInput, match=r"payload\.signals"):
        signals_of(payload)
    assert signals_of({}) is None
