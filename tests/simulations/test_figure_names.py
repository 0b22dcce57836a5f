"""The figure names ``expect``, ``--metrics`` and studies may use are exactly what a run reports: read from
:mod:`simulations.metrics` through its public :func:`~simulations.metrics.count_and_check_names`."""

from __future__ import annotations

from collections.abc import Callable

from simulations.figure_names import NOT_FIGURES, figure_names, is_figure
from simulations.metrics import Metrics, count_and_check_names
from simulations.run import Result


def test_the_names_are_the_counts_and_checks_a_run_reports(shipped: Callable[[str], Result]) -> None:
    m = shipped("candidate_memory.yaml").metrics
    reported = {n for n in m.counts if not n.startswith("suppressed_")} | set(m.checks)
    assert count_and_check_names() == reported
    assert figure_names() == {n for n in Metrics.model_fields if n not in NOT_FIGURES} | reported


def test_a_suppression_reason_count_is_a_figure_and_a_typo_is_not() -> None:
    assert is_figure("runs_refused_by_pdp_outage") and is_figure("suppressed_cooldown")
    assert is_figure("wake_efficiency") and is_figure("no_duplicate_side_effect")
    assert not is_figure("runs_refused_by_pdp_outag") and not is_figure("counts")
