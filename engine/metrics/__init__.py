"""The runtime quality metrics of seed 003 §31 over a whole world (``pmw metrics``).

- :class:`MetricsCalls`: ``world_metrics(actor)``, decided by the PDP as a governance read;
- :func:`metrics_of` over :class:`WorldRecords`: the metrics as pure functions of what was recorded;
- :func:`records_of`: those records, read from the store (reads only).
"""

from __future__ import annotations

from engine.metrics.calls import MetricsCalls
from engine.metrics.fold import WorldRecords, metrics_of
from engine.metrics.model import NOT_APPLICABLE, Metric, WorldMetrics
from engine.metrics.reads import records_of

__all__ = ["NOT_APPLICABLE", "Metric", "MetricsCalls", "WorldMetrics", "WorldRecords", "metrics_of", "records_of"]
