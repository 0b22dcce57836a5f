"""Shadow mode: compare what two rule sets decide for the same recorded events.

Two decisions are the same when their :meth:`~engine.controller.decisions.DecisionBase.signature` is equal
(what is decided, not which rule decided it or its rank), compared as multisets per event position.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.controller.decisions import AnyDecision, DeferWake, Suppress, TopologyProposal, WakeTarget


@dataclass(frozen=True)
class ShadowDiff:
    """At ``position`` the rules in force decide ``only_current`` that the candidate rules do not, and
    the candidate rules decide ``only_candidate``."""

    position: int
    event_type: str
    only_current: tuple[AnyDecision, ...]
    only_candidate: tuple[AnyDecision, ...]


def diff_decisions(events: Sequence[Mapping[str, Any]], current: Mapping[int, Sequence[AnyDecision]],
                   candidate: Mapping[int, Sequence[AnyDecision]]) -> list[ShadowDiff]:
    """The positions of ``events`` whose decisions differ between the two runs, in event order."""
    diffs: list[ShadowDiff] = []
    for event in events:
        position = int(event["seq"])
        ours, theirs = current.get(position, ()), candidate.get(position, ())
        only_ours, only_theirs = _minus(ours, theirs), _minus(theirs, ours)
        if only_ours or only_theirs:
            diffs.append(ShadowDiff(position, str(event.get("event_type", "")), only_ours, only_theirs))
    return diffs


def _minus(left: Sequence[AnyDecision], right: Sequence[AnyDecision]) -> tuple[AnyDecision, ...]:
    remaining = Counter(_sig(d) for d in right)
    out: list[AnyDecision] = []
    for decision in left:
        sig = _sig(decision)
        if remaining[sig]:
            remaining[sig] -= 1
        else:
            out.append(decision)
    return tuple(out)


def _sig(decision: AnyDecision) -> str:
    return json.dumps(decision.signature(), sort_keys=True)


def describe(decision: AnyDecision) -> str:
    """One line for a person: what is decided and by which rule."""
    if isinstance(decision, WakeTarget):
        what = f"wake {decision.agent} ({decision.cause}, depth {decision.depth}, chain {decision.chain})"
    elif isinstance(decision, Suppress):
        what = f"suppress wake of {decision.agent}: {decision.reason.value} ({decision.detail})"
    elif isinstance(decision, DeferWake):
        joins = f", joins {decision.joins}" if decision.joins else ""
        what = (f"defer wake of {decision.agent} to {decision.not_before_us}: {decision.reason.value} "
                f"({decision.cause}, depth {decision.depth}, chain {decision.chain}{joins})")
    elif isinstance(decision, TopologyProposal):
        room = f" room {decision.room}" if decision.room else ""
        what = f"topology {decision.op.value} {', '.join(decision.agents)}{room}{' +close' if decision.close else ''}"
    else:
        fields = decision.model_dump(mode="json", exclude={"world", "position", "index", "rule", "kind"})
        what = f"{decision.kind} {json.dumps(fields, sort_keys=True)}"
    return f"{what}  [{decision.rule}]"


def format_diffs(diffs: Sequence[ShadowDiff]) -> str:
    """The differences as text: ``-`` only with the rules in force, ``+`` only with the candidate."""
    if not diffs:
        return "no decision differs"
    lines: list[str] = []
    for diff in diffs:
        lines.append(f"@{diff.position} {diff.event_type}")
        lines.extend(f"  - {describe(d)}" for d in diff.only_current)
        lines.extend(f"  + {describe(d)}" for d in diff.only_candidate)
    return "\n".join(lines)


__all__ = ["ShadowDiff", "describe", "diff_decisions", "format_diffs"]
