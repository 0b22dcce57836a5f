"""``world_metrics``: the §31 metrics of a world for one reader, decided by the PDP as a governance read.

Who may read them is the policy's: action ``metrics`` on the ``governance`` resource
(``policies/resources/governance.yaml``: live governors and reviewers, as the other governance reads). A
reader the PDP refuses gets ``PolicyDenied``, recorded as a ``policy.denied`` event (the only write), before
anything is counted; no answer from the PDP is ``PolicyUnavailable``. Everything else is a read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from engine.errors import PolicyDenied
from engine.metrics.fold import metrics_of
from engine.metrics.model import WorldMetrics
from engine.metrics.reads import records_of
from engine.policy.decision_inputs import decision_inputs
from engine.policy.decision_point import DecisionPoint
from engine.sources import Clock
from engine.validation import check_id
from store import Reader

if TYPE_CHECKING:
    from engine.contracts.loader import ContractBook
    from engine.runtime import Runtime

GOVERNANCE = "governance"  # the resource governance reads are decided on (not a world object)
METRICS_ACTION = "metrics"

DenialRecorder = Callable[[str, str, PolicyDenied], None]


class MetricsCalls:
    """The metrics read of one world: its reader, the PDP that decides who reads, where denials are recorded."""

    def __init__(self, read: Reader, pdp: DecisionPoint, clock: Clock, record_denial: DenialRecorder, *,
                 contracts: ContractBook | None = None) -> None:
        self._read = read
        self._pdp = pdp
        self._clock = clock
        self._record_denial = record_denial
        self._contracts = contracts

    @classmethod
    def of(cls, runtime: Runtime) -> MetricsCalls:
        """The metrics read of ``runtime``'s world (its store, PDP, clock and book)."""
        return cls(runtime.store.read, runtime.pdp, runtime.book.clock, runtime.book.record_denial)

    def world_metrics(self, actor: str) -> WorldMetrics:
        """ICR, UAR, DSR, HCS, RSR and EC of the whole world (``engine.metrics.fold``), if the PDP lets
        ``actor`` read them. Raises ``InvalidInput`` (a bad id), ``NotFound`` (no such agent),
        ``PolicyDenied`` (recorded), ``PolicyUnavailable``."""
        reader = check_id("actor", actor)
        p, r = decision_inputs(self._read, reader, GOVERNANCE, GOVERNANCE)
        decision = self._pdp.check(p, [(r, [METRICS_ACTION])])[0]
        if not decision.allowed(METRICS_ACTION):
            denied = PolicyDenied(reader, METRICS_ACTION, GOVERNANCE, GOVERNANCE, decision.epoch)
            self._record_denial(reader, "metrics", denied)
            raise denied
        records, last = records_of(self._read, self._contracts)
        return WorldMetrics(reader=reader, at_us=self._clock.now_us(), last_seq=last, metrics=metrics_of(records))


__all__ = ["GOVERNANCE", "METRICS_ACTION", "MetricsCalls"]
