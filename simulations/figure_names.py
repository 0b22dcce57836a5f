"""The names of every figure a run reports (metrics, counts, checks): what ``expect``, ``--metrics`` and a
study's claims may name.

The names are read from :mod:`simulations.metrics` itself (the :class:`~simulations.metrics.Metrics` fields
and :func:`~simulations.metrics.count_and_check_names`), so a figure added there is known here without a
second list.
A count per suppression reason (``suppressed_<reason>``, one per reason the controller gives) is open-ended:
any ``suppressed_`` name of lower-case words is accepted.
"""

from __future__ import annotations

import re
from functools import cache

NOT_FIGURES = frozenset({"scenario", "seed", "counts", "checks"})
_SUPPRESSED = re.compile(r"^suppressed_[a-z][a-z0-9_]*$")


@cache
def figure_names() -> frozenset[str]:
    """Every fixed figure name (metrics, counts, checks)."""
    from simulations.metrics import Metrics, count_and_check_names

    metrics = {n for n in Metrics.model_fields if n not in NOT_FIGURES}
    return frozenset(metrics) | count_and_check_names()


def is_figure(name: str) -> bool:
    """``name`` is a figure a run can report."""
    return name in figure_names() or _SUPPRESSED.match(name) is not None


__all__ = ["figure_names", "is_figure"]
