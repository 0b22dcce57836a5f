"""What a sweep runs: axes (a dotted key of the scenario and its values), their grid, and the seeds.

``--sweep key=v1,v2`` is one :class:`Axis` (``key1+key2=v1,v2`` sets both keys to each value: the three
wake intervals of a scenario moved together); several make a grid, the cartesian product of their values in
the order given (the first axis varies slowest). Values are YAML scalars (``3`` is an int, ``0.5`` a float,
``pointers`` a string). ``--seeds N`` runs every variant with N seeds (the scenario's seed, seed + 1, ...);
``--seeds 1,4,9`` with those seeds. Errors are :class:`~simulations.errors.ScenarioError` (field ``sweep`` or
``seeds``) raised before anything runs.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from simulations.errors import ScenarioError

MAX_CELLS = 10_000
Scalar = str | int | float | bool | None


@dataclass(frozen=True)
class Axis:
    """One swept key and its values, in order."""

    key: str
    values: tuple[Scalar, ...]

    @property
    def numeric(self) -> bool:
        """Every value is a number (not a bool): the axis is drawn to scale."""
        return all(isinstance(v, int | float) and not isinstance(v, bool) for v in self.values)


@dataclass(frozen=True)
class Variant:
    """One point of the grid (or one file of a comparison): its label and the overrides it applies."""

    label: str
    point: tuple[tuple[str, Scalar], ...] = ()
    file_label: str = ""

    @property
    def overrides(self) -> dict[str, Scalar]:
        """The dotted keys to set: an axis key ``a+b`` sets ``a`` and ``b`` to the same value."""
        return {part: value for key, value in self.point for part in key.split("+")}

    def value(self, key: str) -> Scalar:
        return dict(self.point)[key]


def format_value(value: Scalar) -> str:
    """A value as a sweep spec writes it (``2``, ``0.5``, ``pointers``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


def parse_axis(spec: str) -> Axis:
    """``key=v1,v2,...`` -> :class:`Axis`; ``ScenarioError`` for a malformed spec or a repeated value."""
    from engine.yaml_input import parse_yaml_data

    key, sep, raw = spec.partition("=")
    values = [v for v in raw.split(",") if v.strip()]
    if not sep or not key.strip() or not values:
        raise ScenarioError("--sweep", 0, "sweep", f"expected key=v1,v2,... (got {spec!r})")
    parsed = tuple(parse_yaml_data(v, "--sweep") for v in values)
    if any(isinstance(v, dict | list) for v in parsed):
        raise ScenarioError("--sweep", 0, "sweep", f"{key.strip()}: a sweep value is a scalar (got {raw!r})")
    if len(set(map(format_value, parsed))) != len(parsed):
        raise ScenarioError("--sweep", 0, "sweep", f"{key.strip()}: a value is repeated (got {raw!r})")
    return Axis(key.strip(), parsed)


def parse_axes(specs: Sequence[str]) -> list[Axis]:
    """Each spec an axis; the same key twice is a ``ScenarioError``."""
    axes = [parse_axis(s) for s in specs]
    keys = [a.key for a in axes]
    for key in keys:
        if keys.count(key) > 1:
            raise ScenarioError("--sweep", 0, "sweep", f"key {key!r} is swept twice")
    return axes


def grid(axes: Sequence[Axis]) -> list[Variant]:
    """The cartesian product of the axes' values (first axis slowest); no axis: one variant, no overrides."""
    if not axes:
        return [Variant("base")]
    points = list(itertools.product(*[[(a.key, v) for v in a.values] for a in axes]))
    if len(points) > MAX_CELLS:
        raise ScenarioError("--sweep", 0, "sweep", f"the grid has {len(points)} points (at most {MAX_CELLS})")
    return [Variant(",".join(f"{k}={format_value(v)}" for k, v in p), tuple(p)) for p in points]


def parse_seeds(spec: str | int | Sequence[int] | None, base: int) -> list[int]:
    """``None`` -> [base]; an int or ``"N"`` -> N seeds from ``base``; ``"1,4,9"`` or a list -> those."""
    if spec is None:
        return [base]
    if isinstance(spec, int):
        return _count(spec, base)
    if isinstance(spec, str):
        parts = [p.strip() for p in spec.split(",") if p.strip()]
        if not parts or not all(p.isdigit() for p in parts):
            raise ScenarioError("--seeds", 0, "seeds", f"expected N or s1,s2,... of non-negative integers "
                                f"(got {spec!r})")
        return _count(int(parts[0]), base) if "," not in spec else _distinct([int(p) for p in parts])
    return _distinct([int(s) for s in spec])


def _count(n: int, base: int) -> list[int]:
    if not 1 <= n <= 1000:
        raise ScenarioError("--seeds", 0, "seeds", f"between 1 and 1000 seeds (got {n})")
    return [base + i for i in range(n)]


def _distinct(seeds: list[int]) -> list[int]:
    if not seeds or any(s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
        raise ScenarioError("--seeds", 0, "seeds", f"seeds are distinct non-negative integers (got {seeds})")
    return seeds


def axis_of(axes: Sequence[Axis], key: str) -> Axis | None:
    return next((a for a in axes if a.key == key), None)


def scalars(values: Sequence[Any]) -> tuple[Scalar, ...]:
    """Values of a study's axis (already parsed YAML) as scalars; ``ScenarioError`` for a list or mapping."""
    if any(isinstance(v, dict | list) for v in values):
        raise ScenarioError("sweep", 0, "sweep", "a sweep value is a scalar")
    return tuple(values)


__all__ = ["Axis", "Scalar", "Variant", "axis_of", "format_value", "grid", "parse_axes", "parse_axis",
           "parse_seeds", "scalars"]
