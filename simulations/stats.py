"""Summaries of replicated runs: mean, sample standard deviation and a 95 % Student-t confidence interval.

A figure that does not apply to a run (``None``, shown as n/a) is *missing*: it is left out of the mean and
counted in :attr:`Summary.missing`, never read as 0. A summary of no present value has every statistic
``None``. One present value has a mean and no spread (``std``, ``ci_low``, ``ci_high`` are ``None``: one run
says nothing about its variance). Two or more give ``mean ± t(0.975, n-1) * std / sqrt(n)``.

:func:`delta` is the difference of two summaries' means with Welch's interval; :func:`correlation` is
Pearson's r over paired values with a Fisher-z interval. Everything is pure and deterministic (no numpy or
scipy: the t quantiles are tabled).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# t(0.975, df) for df = 1..30 (two-sided 95 %); beyond 30 the Cornish-Fisher expansion below is within 1e-3.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)
_Z975 = 1.959964


def t975(df: float) -> float:
    """The 97.5 % quantile of Student's t with ``df`` degrees of freedom (``df`` >= 1; fractional df, as
    Welch's gives, are interpolated)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1 (got {df})")
    if df <= len(_T975):
        low = math.floor(df)
        high = min(len(_T975), low + 1)
        frac = df - low
        return _T975[low - 1] + (_T975[high - 1] - _T975[low - 1]) * frac
    z = _Z975
    return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)


@dataclass(frozen=True)
class Summary:
    """One figure over the replicates of one variant (``None``: not applicable or not estimable)."""

    n: int
    missing: int
    mean: float | None
    std: float | None
    ci_low: float | None
    ci_high: float | None

    @property
    def half_width(self) -> float | None:
        """Half the interval's width (``None`` without an interval)."""
        if self.ci_low is None or self.ci_high is None:
            return None
        return (self.ci_high - self.ci_low) / 2

    def as_dict(self) -> dict[str, float | int | None]:
        return {"n": self.n, "missing": self.missing, "mean": self.mean, "std": self.std, "ci_low": self.ci_low,
                "ci_high": self.ci_high}


def _round(x: float) -> float:
    return round(x, 9)


def summarize(values: Sequence[float | None]) -> Summary:
    """Mean, sample std (n - 1) and the 95 % t interval of the present values; ``None`` values are missing."""
    present = [float(v) for v in values if v is not None]
    missing = len(values) - len(present)
    n = len(present)
    if n == 0:
        return Summary(0, missing, None, None, None, None)
    mean = math.fsum(present) / n
    if n == 1:
        return Summary(1, missing, _round(mean), None, None, None)
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in present) / (n - 1))
    half = t975(n - 1) * std / math.sqrt(n)
    return Summary(n, missing, _round(mean), _round(std), _round(mean - half), _round(mean + half))


@dataclass(frozen=True)
class Delta:
    """``b - a`` of two summaries' means, with Welch's 95 % interval when both have two values or more."""

    value: float | None
    ci_low: float | None
    ci_high: float | None

    @property
    def separated(self) -> bool:
        """The interval excludes 0 (with no spread in either side: the means differ)."""
        if self.value is None:
            return False
        if self.ci_low is None or self.ci_high is None:
            return self.value != 0
        return self.ci_low > 0 or self.ci_high < 0


def delta(a: Summary, b: Summary) -> Delta:
    """The difference ``b.mean - a.mean`` and its Welch interval (``None`` where it cannot be had)."""
    if a.mean is None or b.mean is None:
        return Delta(None, None, None)
    value = b.mean - a.mean
    if a.std is None or b.std is None:
        return Delta(_round(value), None, None)
    va, vb = a.std ** 2 / a.n, b.std ** 2 / b.n
    se = math.sqrt(va + vb)
    if se == 0:
        return Delta(_round(value), _round(value), _round(value))
    df = (va + vb) ** 2 / ((va ** 2 / (a.n - 1) if va else 0.0) + (vb ** 2 / (b.n - 1) if vb else 0.0))
    half = t975(max(1.0, df)) * se
    return Delta(_round(value), _round(value - half), _round(value + half))


@dataclass(frozen=True)
class Correlation:
    """Pearson's r over ``n`` pairs with a Fisher-z 95 % interval (``None``: a constant side, or n < 4)."""

    n: int
    r: float | None
    ci_low: float | None
    ci_high: float | None


def correlation(xs: Sequence[float | None], ys: Sequence[float | None]) -> Correlation:
    """Pearson's r of the pairs where both values are present."""
    pairs = [(float(x), float(y)) for x, y in zip(xs, ys, strict=True) if x is not None and y is not None]
    n = len(pairs)
    if n < 2:
        return Correlation(n, None, None, None)
    mx, my = math.fsum(p[0] for p in pairs) / n, math.fsum(p[1] for p in pairs) / n
    sxy = math.fsum((x - mx) * (y - my) for x, y in pairs)
    sxx, syy = math.fsum((x - mx) ** 2 for x, _ in pairs), math.fsum((y - my) ** 2 for _, y in pairs)
    if sxx == 0 or syy == 0:
        return Correlation(n, None, None, None)
    r = max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))
    if n < 4 or abs(r) == 1.0:
        return Correlation(n, _round(r), None, None)
    z, se = math.atanh(r), 1 / math.sqrt(n - 3)
    return Correlation(n, _round(r), _round(math.tanh(z - _Z975 * se)), _round(math.tanh(z + _Z975 * se)))


__all__ = ["Correlation", "Delta", "Summary", "correlation", "delta", "summarize", "t975"]
