"""Typed results of the simulations API: one run (:class:`Result`), a batch of runs (:class:`SweepResult`:
a sweep, a grid, replicates) and a comparison of two files (:class:`CompareResult`).

Every figure of a run is a number or ``None`` (n/a: the metric does not apply, e.g. ``recovery_success``
when no fault was injected); :func:`figures` flattens a run's metrics, counts and checks (checks as 1/0)
into one ordered mapping, the vocabulary of ``--metrics`` and of a study's claims. A batch summarizes each
figure per variant over its seeds (:class:`~simulations.stats.Summary`). :meth:`SweepResult.to_frame`
gives the runs as a pandas data frame (the optional ``data`` extra).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from simulations.figure_names import NOT_FIGURES
from simulations.grid import Axis, Variant
from simulations.metrics import Metrics
from simulations.scenario import Bounds, Scenario
from simulations.stats import Delta, Summary, delta

Status = Literal["met", "not met", "n/a"]


def figures(m: Metrics) -> dict[str, float | None]:
    """Every figure of a run, in a stable order: the metrics, then the counts, then the checks (1 or 0)."""
    data = m.model_dump()
    out: dict[str, float | None] = {}
    for name, value in data.items():
        if name not in NOT_FIGURES:
            out[name] = None if value is None else float(value)
    out.update({k: float(v) for k, v in m.counts.items()})
    out.update({k: 1.0 if v else 0.0 for k, v in m.checks.items()})
    return out


def expectation_status(scenario: Scenario, m: Metrics) -> dict[str, Status]:
    """Each ``expect`` entry: ``met``, ``not met``, or ``n/a`` when the figure does not apply to this run (a
    ``recovery_success`` with nothing injected is n/a, not a failure)."""
    values = figures(m)
    out: dict[str, Status] = {}
    for name, want in scenario.expect.items():
        got = values.get(name)
        if got is None:
            out[name] = "n/a"
        elif isinstance(want, Bounds):
            ok = (want.min is None or got >= want.min) and (want.max is None or got <= want.max)
            out[name] = "met" if ok else "not met"
        else:
            out[name] = "met" if math.isclose(got, float(want), rel_tol=1e-9, abs_tol=1e-9) else "not met"
    return out


@dataclass(frozen=True)
class Result:
    """One finished run: its scenario, metrics, expectation results and output folder.

    ``expectations`` maps each ``expect`` entry to met (True), not met (False) or n/a (None), as the run's
    report writes it;
    ``status`` is the three-valued reading (an n/a figure is neither met nor failed); :attr:`ok` is True when
    no expectation is ``not met``."""

    scenario: Scenario
    metrics: Metrics
    expectations: dict[str, bool | None]
    out: Path

    @property
    def status(self) -> dict[str, Status]:
        return expectation_status(self.scenario, self.metrics)

    @property
    def ok(self) -> bool:
        return all(s != "not met" for s in self.status.values())

    @property
    def figures(self) -> dict[str, float | None]:
        return figures(self.metrics)


@dataclass(frozen=True)
class Replicate:
    """One run of a batch: which variant, which seed, and its result."""

    variant: Variant
    seed: int
    result: Result


@dataclass(frozen=True)
class VariantSummary:
    """One variant over its seeds: each figure's :class:`~simulations.stats.Summary`."""

    variant: Variant
    seeds: tuple[int, ...]
    summaries: Mapping[str, Summary]

    def mean(self, figure: str) -> float | None:
        return self.summaries[figure].mean


@dataclass(frozen=True)
class SweepResult:
    """A batch: ``variants`` (the grid's points, or the files compared) x ``seeds``; ``runs`` in that order
    (variant-major); ``shown`` the figures its table and plots show; ``out`` the folder it wrote."""

    axes: tuple[Axis, ...]
    seeds: tuple[int, ...]
    runs: tuple[Replicate, ...]
    variants: tuple[VariantSummary, ...]
    shown: tuple[str, ...]
    constant: Mapping[str, float | None]
    out: Path

    @property
    def ok(self) -> bool:
        """No run has an expectation not met."""
        return all(r.result.ok for r in self.runs)

    def variant(self, label: str) -> VariantSummary:
        """The variant named ``label`` (``KeyError`` if none)."""
        for v in self.variants:
            if v.variant.label == label:
                return v
        raise KeyError(label)

    def delta(self, figure: str, a: str | None = None, b: str | None = None) -> Delta:
        """``b - a`` for ``figure`` (default: the last variant minus the first) with Welch's interval."""
        first = self.variant(a) if a else self.variants[0]
        last = self.variant(b) if b else self.variants[-1]
        return delta(first.summaries[figure], last.summaries[figure])

    def rows(self) -> list[dict[str, Any]]:
        """One tidy row per run: variant, each axis's value, seed, then every figure."""
        out: list[dict[str, Any]] = []
        for r in self.runs:
            row: dict[str, Any] = {"variant": r.variant.label}
            if r.variant.file_label:
                row["scenario"] = r.variant.file_label
            row.update(dict(r.variant.point))
            row["seed"] = r.seed
            row.update(r.result.figures)
            out.append(row)
        return out

    def to_frame(self) -> Any:
        """The runs as a pandas data frame (one row per run; n/a is NaN). Needs pandas (extra ``data``)."""
        import pandas as pd  # type: ignore[import-untyped]

        return pd.DataFrame(self.rows())


@dataclass(frozen=True)
class CompareResult(SweepResult):
    """A comparison of two files; unpacks as ``a, b = compare(...)`` into the first seed's two runs."""

    @property
    def a(self) -> Result:
        return self.runs[0].result

    @property
    def b(self) -> Result:
        return next(r.result for r in self.runs if r.variant == self.variants[-1].variant)

    def __iter__(self) -> Iterator[Result]:
        return iter((self.a, self.b))


__all__ = ["CompareResult", "Replicate", "Result", "Status", "SweepResult", "VariantSummary",
           "expectation_status", "figures"]
