"""Projection scoring (seed 000 §48-49): which visible objects an agent is shown, within a budget.

``score(x) = a*relevance + b*recency + c*causality + d*authority + e*risk + f*dependency``, each term in
[0, 1]. When uncertainty or conflict rises among what the agent can see, the projection widens: the
budget doubles, so the wider view contains the narrower one (``pi^(1) ⊇ pi^(0)``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import Field

from engine.models.common import Model


class ProjectionWeights(Model):
    relevance: float = Field(default=1.0, ge=0)
    recency: float = Field(default=0.5, ge=0)
    causality: float = Field(default=0.5, ge=0)
    authority: float = Field(default=0.7, ge=0)
    risk: float = Field(default=0.3, ge=0)
    dependency: float = Field(default=0.6, ge=0)
    half_life_s: float = Field(default=3600.0, gt=0)


@dataclass(frozen=True)
class Features:
    """What the scorer knows of one object, each already in [0, 1] except ``age_s``."""

    relevance: float
    age_s: float
    causality: float
    authority: float
    risk: float
    dependency: float


def score(f: Features, w: ProjectionWeights) -> float:
    recency = math.exp(-math.log(2) * max(f.age_s, 0.0) / w.half_life_s)
    return (w.relevance * f.relevance + w.recency * recency + w.causality * f.causality
            + w.authority * f.authority + w.risk * f.risk + w.dependency * f.dependency)


def top(items: Iterable[tuple[str, Features]], budget: int, w: ProjectionWeights) -> list[tuple[str, float]]:
    """The ``budget`` best (id, score), best first; ties broken by id so the view is deterministic."""
    scored = [(ident, score(f, w)) for ident, f in items]
    scored.sort(key=lambda p: (-p[1], p[0]))
    return scored[:budget]


def widened_budget(budget: int, conflict_signals: int, uncertainty_signals: int) -> tuple[int, bool]:
    """Double the budget when anything visible is contested or uncertain."""
    if conflict_signals + uncertainty_signals > 0:
        return budget * 2, True
    return budget, False


def unit(values: Sequence[float]) -> float:
    return max(0.0, min(1.0, max(values, default=0.0)))


__all__ = ["Features", "ProjectionWeights", "score", "top", "unit", "widened_budget"]
