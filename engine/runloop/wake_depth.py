"""Layered wake (seed 001 §45-46): how deep a wake goes, as a pure function of its signals.

The layers are the seed's: **passive monitor** (layer 0: the wake is logged, the agent is not run),
**trigger classifier** (layer 1: this function, deciding from the wake's signals whether and how deep to
wake), **lightweight check** (layer 2: the adapter's optional cheap ``check``, "worth acting?") and **full
run** (layer 3: today's cycle: rehydrate, project, decide, act). ``Resource(e) = f(Importance, Uncertainty,
Risk, Novelty)``: :func:`wake_depth` is that ``f``.

A wake carries its signals in ``payload.signals`` (``importance``, ``uncertainty``, ``risk``, ``novelty``,
each from 0 to 1), set by whoever queued it (a controller rule, an ``enqueue_wake`` call). A wake without
signals is a full run, as every wake was before layers existed. The thresholds are data
(:class:`DepthThresholds`: its defaults, or a YAML file of the same fields read by :func:`load_thresholds`;
``InProcessRunner(wake_thresholds=...)`` gives a runner others).

The rule, in order:

1. ``risk >= full_risk``: a full run, whatever else (a hard-safety rule overrides the score);
2. ``importance < min_importance``: the passive monitor (only risk wakes an agent for an unimportant event);
3. ``score = w_i * importance + w_u * uncertainty + w_r * risk + w_n * novelty`` (weights >= 0);
4. ``score >= full_score``: a full run;
5. ``score >= check_score``: the lightweight check, then a full run if the check finds it worth acting;
6. otherwise the passive monitor.

So a wake whose importance is under ``min_importance`` and whose risk is under ``full_risk`` never reaches a
full run (nor the check), a wake at or above ``full_risk`` always does, and the depth never decreases when
any signal increases (``tests/envelope/test_wake_depth.py`` checks all three with hypothesis).
"""

from __future__ import annotations

from enum import IntEnum
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from engine.errors import InvalidInput
from engine.models.common import Model


class WakeDepth(IntEnum):
    """How deep a wake goes; the value is the seed's layer number (1, the classifier, always runs)."""

    MONITOR = 0
    CHECK = 2
    FULL = 3

    @property
    def label(self) -> str:
        return self.name.lower()


Signal = Field(default=0.0, ge=0.0, le=1.0)


class WakeSignals(Model):
    """What the classifier weighs: each from 0 (none) to 1."""

    importance: float = Signal
    uncertainty: float = Signal
    risk: float = Signal
    novelty: float = Signal


MAX_WEIGHT = 10.0
MAX_SCORE = 4 * MAX_WEIGHT


class DepthThresholds(Model):
    """The classifier's data: the weights of the score and the thresholds of each depth (signals are 0..1)."""

    importance_weight: float = Field(default=1.0, ge=0.0, le=MAX_WEIGHT)
    uncertainty_weight: float = Field(default=0.5, ge=0.0, le=MAX_WEIGHT)
    risk_weight: float = Field(default=1.0, ge=0.0, le=MAX_WEIGHT)
    novelty_weight: float = Field(default=0.5, ge=0.0, le=MAX_WEIGHT)
    check_score: float = Field(default=0.4, ge=0.0, le=MAX_SCORE, description=(
        "At or above: the lightweight check (below: the passive monitor, logged only)."))
    full_score: float = Field(default=1.0, ge=0.0, le=MAX_SCORE, description="At or above: a full run.")
    min_importance: float = Field(default=0.3, ge=0.0, le=1.0, description=(
        "Under it, the passive monitor unless risk makes a full run."))
    full_risk: float = Field(default=0.7, ge=0.0, le=1.0, description=(
        "At or above: always a full run (hard safety overrides the score)."))

    @model_validator(mode="after")
    def _ordered(self) -> DepthThresholds:
        if self.check_score > self.full_score:
            raise ValueError("check_score must not be above full_score")
        return self


def score(signals: WakeSignals, t: DepthThresholds) -> float:
    """The weighted sum the classifier compares with its thresholds."""
    return (t.importance_weight * signals.importance + t.uncertainty_weight * signals.uncertainty
            + t.risk_weight * signals.risk + t.novelty_weight * signals.novelty)


def wake_depth(signals: WakeSignals, t: DepthThresholds) -> WakeDepth:
    """How deep a wake with ``signals`` goes under ``t`` (the rule of the module docstring). Pure."""
    if signals.risk >= t.full_risk:
        return WakeDepth.FULL
    if signals.importance < t.min_importance:
        return WakeDepth.MONITOR
    s = score(signals, t)
    if s >= t.full_score:
        return WakeDepth.FULL
    if s >= t.check_score:
        return WakeDepth.CHECK
    return WakeDepth.MONITOR


def signals_of(payload: dict[str, Any]) -> WakeSignals | None:
    """The signals a wake's payload carries (``payload.signals``), or ``None`` (then it is a full run).
    Signals that are not a valid :class:`WakeSignals` are ``InvalidInput`` naming ``payload.signals``."""
    raw = payload.get("signals")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise InvalidInput("payload.signals", "an object of importance, uncertainty, risk and novelty (0 to 1)")
    try:
        return WakeSignals.model_validate(raw)
    except ValueError as exc:
        raise InvalidInput("payload.signals", str(exc).splitlines()[-1] if str(exc) else "invalid") from exc


def load_thresholds(path: Path | None = None) -> DepthThresholds:
    """The thresholds in the YAML file ``path`` (its fields; those left out keep their defaults), or the
    defaults without one. ``InvalidInput`` naming the file if they are not valid; ``YamlRefused`` for a file
    that is not safe YAML."""
    if path is None:
        return DepthThresholds()
    from engine.yaml_input import load_yaml_data

    try:
        return DepthThresholds.model_validate(load_yaml_data(path))
    except (OSError, ValueError) as exc:
        raise InvalidInput(str(path), str(exc)) from exc


__all__ = ["DepthThresholds", "WakeDepth", "WakeSignals", "load_thresholds", "score",
           "signals_of", "wake_depth"]
