"""What ``pmw metrics`` answers: the runtime quality metrics of seed 003 §31 over one world, each with its
definition, its numerator and denominator as counted in the store, and ``n/a`` when nothing was counted."""

from __future__ import annotations

from pydantic import Field

from engine.models.common import Model, TimeUs

NOT_APPLICABLE = "n/a"


class Metric(Model):
    """One §31 metric: ``value = numerator / denominator``, or ``None`` (shown ``n/a``, never 0) when the
    denominator is 0: a world that executed nothing has no duplicate rate, not a perfect one."""

    name: str = Field(description="The seed's abbreviation, e.g. DSR.")
    title: str
    definition: str = Field(description="The seed's formula, e.g. N_duplicate_effects / N_side_effects.")
    counted: str = Field(description="What PMW counts as numerator and denominator, from which records.")
    numerator: int = Field(ge=0)
    denominator: int = Field(ge=0)
    value: float | None = Field(description="numerator / denominator; null when the denominator is 0.")
    shown: str = Field(description="The value to print: four decimals, or n/a.")

    @classmethod
    def of(cls, name: str, title: str, definition: str, counted: str, numerator: int, denominator: int) -> Metric:
        """The metric of these counts (``value`` ``None`` and ``shown`` ``n/a`` when ``denominator`` is 0)."""
        value = numerator / denominator if denominator else None
        return cls(name=name, title=title, definition=definition, counted=counted, numerator=numerator,
                   denominator=denominator, value=value, shown=NOT_APPLICABLE if value is None else f"{value:.4f}")


class WorldMetrics(Model):
    """The §31 metrics of one world as its store records them at ``at_us``, read by ``reader``."""

    reader: str
    at_us: TimeUs
    last_seq: int = Field(ge=0, description="The last event position the counts include.")
    metrics: list[Metric]

    def metric(self, name: str) -> Metric:
        """The metric called ``name`` (``KeyError`` if there is none)."""
        for m in self.metrics:
            if m.name == name:
                return m
        raise KeyError(name)


__all__ = ["NOT_APPLICABLE", "Metric", "WorldMetrics"]
