"""The attention broker's decision (seed 003 §3.4, §14-16): a pure function of the notice, the human's
interruptibility and what is left of their attention budget. No store, no clock: :func:`decide`.

The rules, in the order they apply (hard-safety rules override the score, §3.4):

1. An S3 side effect (irreversible or high-impact, §11) is ``FORCE_HUMAN_REVIEW`` in every state: a human
   reviews it before it runs, whatever the budget.
2. Otherwise the *need* of the notice is the higher of its urgency (low 0, normal 1, high 2, critical 3) and
   its risk (low 0, medium 1, high 2), and the table (governance's ``contracts/attention.yaml``, else
   :data:`TABLE`) gives the output for the state and the need: a
   MEETING lets only high-need notices through as FULL_ALERT (§14), SLEEP only critical ones (its
   whitelist), DRIVING none (hard safety: never a full alert while driving), and UNKNOWN never the most
   intrusive output below critical (§15).
3. A FULL_ALERT beyond the budget (``full_alerts`` in the last ``window_s``) is held: ``BATCH_LATER``, unless
   the risk is high, which forces a review instead (``FORCE_HUMAN_REVIEW``, which spends no alert).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from engine.attention.model import AttentionOutput, Budget, Interruptibility, Notice, Risk, Urgency

_S, _B, _P, _F = (AttentionOutput.SILENT_LOG, AttentionOutput.BATCH_LATER, AttentionOutput.PASSIVE_BADGE,
                  AttentionOutput.FULL_ALERT)

#: The output for each state by need (0 low ... 3 critical).
TABLE: dict[Interruptibility, tuple[AttentionOutput, AttentionOutput, AttentionOutput, AttentionOutput]] = {
    Interruptibility.FREE: (_P, _F, _F, _F),
    Interruptibility.FOCUSED: (_B, _P, _F, _F),
    Interruptibility.MEETING: (_B, _B, _F, _F),
    Interruptibility.DRIVING: (_S, _B, _B, _P),
    Interruptibility.RESTING: (_S, _B, _P, _F),
    Interruptibility.SLEEP: (_S, _S, _B, _F),
    Interruptibility.UNKNOWN: (_B, _P, _P, _F),
}
_URGENCY = {Urgency.LOW: 0, Urgency.NORMAL: 1, Urgency.HIGH: 2, Urgency.CRITICAL: 3}
_RISK = {Risk.LOW: 0, Risk.MEDIUM: 1, Risk.HIGH: 2}


@dataclass(frozen=True)
class Verdict:
    """The broker's output for one notice and why (each reason one sentence, in the order applied)."""

    output: AttentionOutput
    reasons: tuple[str, ...]


def need_of(notice: Notice) -> int:
    """The notice's need: the higher of its urgency and risk ranks (0 to 3)."""
    return max(_URGENCY[notice.urgency], _RISK[notice.risk])


def decide(notice: Notice, state: Interruptibility, full_alerts_in_window: int, budget: Budget,
           table: Mapping[Interruptibility, Sequence[AttentionOutput]] | None = None) -> Verdict:
    """The output for ``notice`` to a human in ``state`` who had ``full_alerts_in_window`` FULL_ALERTs in the
    budget's window (see the module docstring for the rules), by ``table`` (governance's
    ``contracts/attention.yaml``, :mod:`engine.attention.table`; default :data:`TABLE`)."""
    if notice.side_effect == "S3":
        return Verdict(AttentionOutput.FORCE_HUMAN_REVIEW, (
            f"S3 side effect: a human reviews it before it runs, whatever the state ({state.value})",))
    output = (TABLE if table is None else table)[state][need_of(notice)]
    reasons = [f"{state.value}, urgency {notice.urgency.value}, risk {notice.risk.value}: {output.value}"]
    if output is AttentionOutput.FULL_ALERT and full_alerts_in_window >= budget.full_alerts:
        spent = (f"attention budget spent: {full_alerts_in_window} of {budget.full_alerts} full alerts in the "
                 f"last {budget.window_s:g} s")
        if notice.risk is Risk.HIGH:
            return Verdict(AttentionOutput.FORCE_HUMAN_REVIEW, (*reasons, spent, "high risk forces a review"))
        return Verdict(AttentionOutput.BATCH_LATER, (*reasons, spent, "held for the next batch"))
    return Verdict(output, tuple(reasons))


__all__ = ["TABLE", "Verdict", "decide", "need_of"]
