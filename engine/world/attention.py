"""The attention broker's World calls (seed 003 §14-16): a human's interruptibility, set by that human or a
governor; a notice to a human, decided by the broker (:func:`engine.attention.decide`) and recorded; and what
the human sees of it.

No table of its own: the state is the newest ``attention.state_set`` event on the human (subject ``agent``,
the human's id), each decision an ``attention.<output>`` event on the human (``FULL_ALERT`` as
``attention.full_alert``), both through the gateway. The budget is counted from the human's newest
``attention.full_alert`` events: at most ``full_alerts`` of them are read.

Who may: setting the state and reading the view need the PDP's ``agent:update`` on the human (the human
itself or a governor, as for the human's own row); a notice needs ``event:append`` of its decision's event
type (a live agent holding ``state.write``, the controller's agent included, or a governor). Only human
principals (:data:`engine.attention.HUMAN_ROLES`) are brokered: a notice for another agent is
``InvalidInput``. Bad input (an unknown state, urgency or risk) is ``InvalidInput`` and nothing is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.attention.broker import decide
from engine.attention.model import (
    HUMAN_ROLES,
    AttentionDecision,
    AttentionOutput,
    AttentionState,
    AttentionView,
    Budget,
    Interruptibility,
    Notice,
)
from engine.attention.table import load_attention_table
from engine.commands.attention import DECISION_EVENTS, NotifyHuman, SetAttentionState
from engine.errors import InvalidInput
from engine.policy.enforcement import Check
from engine.validation import build, check_id
from engine.world.core import Cause, Plan, WorldCore

STATE_EVENT = "attention.state_set"
ALERT_EVENT = f"attention.{AttentionOutput.FULL_ALERT.value.lower()}"
MAX_VIEW = 200


def decision_event(output: AttentionOutput) -> str:
    """The event type a decision with ``output`` is recorded as."""
    return f"attention.{output.value.lower()}"


class AttentionCalls(WorldCore):
    def _attention_table(self) -> Mapping[Interruptibility, Sequence[AttentionOutput]] | None:
        """The broker's table this world decides by (the repository's ``contracts/attention.yaml``, read once;
        ``None``: no file, the built-in table)."""
        if not hasattr(self, "_attention_outputs"):
            table = load_attention_table()
            self._attention_outputs = table.outputs if table is not None else None
        outputs: Mapping[Interruptibility, Sequence[AttentionOutput]] | None = self._attention_outputs
        return outputs

    def set_attention_state(self, actor: str, human: str, state: str, *, full_alerts: int | None = None,
                            window_s: float | None = None, op_id: str | None = None,
                            cause: Cause | None = None) -> AttentionState:
        """Set ``human``'s interruptibility (and budget, where given; the rest stays as it was). Raises
        ``InvalidInput`` (an unknown state, a bad budget, not a human), ``NotFound``, ``PolicyDenied``."""
        req = build(SetAttentionState, human=human, state=state, full_alerts=full_alerts, window_s=window_s)

        def plan(now: int) -> Plan:
            row = self._human_row(req.human)
            before = self._attention_state(req.human)
            budget = Budget(full_alerts=before.budget.full_alerts if req.full_alerts is None else req.full_alerts,
                            window_s=before.budget.window_s if req.window_s is None else req.window_s)
            after = AttentionState(human=req.human, state=req.state, budget=budget, set_by=actor, set_at_us=now)
            return Plan(STATE_EVENT, "agent", req.human, after, payload=after.model_dump(mode="json"),
                        checks=[Check("agent", req.human, "update", row)])
        return self._write("set_attention_state", actor, req, plan, AttentionState, op_id=op_id, cause=cause)

    def notify_human(self, actor: str, human: str, kind: str, subject_kind: str, subject_id: str, *,
                     urgency: str = "normal", risk: str = "low", side_effect: str = "S0",
                     op_id: str | None = None, cause: Cause | None = None) -> AttentionDecision:
        """Decide how far this notice may interrupt ``human`` (``engine.attention.broker``) from their state and
        the FULL_ALERTs they had in the budget's window, and record it. Raises ``InvalidInput``, ``NotFound``,
        ``PolicyDenied``. With ``op_id``, a retry answers the first decision."""
        req = build(NotifyHuman, human=human, kind=kind, subject_kind=subject_kind, subject_id=subject_id,
                    urgency=urgency, risk=risk, side_effect=side_effect)
        notice = Notice(kind=req.kind, subject_kind=req.subject_kind, subject_id=req.subject_id,
                        urgency=req.urgency, risk=req.risk, side_effect=req.side_effect)

        def plan(now: int) -> Plan:
            self._human_row(req.human)
            current = self._attention_state(req.human)
            alerts = self._alerts_since(req.human, now - round(current.budget.window_s * 1_000_000),
                                        current.budget.full_alerts)
            verdict = decide(notice, current.state, alerts, current.budget, self._attention_table())
            decision = AttentionDecision(
                decision_id=self.ids.new("att"), human=req.human, notice=notice, output=verdict.output,
                reasons=list(verdict.reasons), state=current.state, full_alerts_in_window=alerts,
                budget=current.budget, decided_by=actor, decided_at_us=now)
            event = decision_event(verdict.output)
            return Plan(event, "agent", req.human, decision, payload=decision.model_dump(mode="json"),
                        checks=[Check("event", event, "append")])
        return self._write("notify_human", actor, req, plan, AttentionDecision, op_id=op_id, cause=cause)

    def attention_of(self, human: str, *, actor: str, limit: int = 50) -> AttentionView:
        """``human``'s state and newest ``limit`` decisions (newest first): what the broker told them, what it
        held back, and why. Only that human or a governor may read it (``PolicyDenied``, recorded)."""
        who = check_id("actor", actor)
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_VIEW:
            raise InvalidInput("limit", f"must be an integer from 1 to {MAX_VIEW}")
        row = self._human_row(check_id("human", human))
        self._authorize(who, [Check("agent", human, "update", row)], "attention_of")
        rows = self._store.read.rows("events", {"event_type": list(DECISION_EVENTS), "subject_kind": "agent",
                                                "subject_id": human}, order_by=["seq"], descending=True,
                                     limit=limit)
        return AttentionView(state=self._attention_state(human),
                             decisions=[AttentionDecision.model_validate(r["result"]) for r in rows])

    # -- reads -------------------------------------------------------------------------------------

    def _human_row(self, human: str) -> dict[str, Any]:
        row = self._row("agents", "agent", human, agent_id=human)
        if row["role_id"] not in HUMAN_ROLES:
            raise InvalidInput("human", f"{human!r} is a {row['role_id']}, not a human principal "
                                        f"(role {' or '.join(HUMAN_ROLES)})")
        return row

    def _attention_state(self, human: str) -> AttentionState:
        rows = self._store.read.rows("events", {"event_type": STATE_EVENT, "subject_kind": "agent",
                                                "subject_id": human}, order_by=["seq"], descending=True, limit=1)
        return AttentionState.model_validate(rows[0]["result"]) if rows else AttentionState(human=human)

    def _alerts_since(self, human: str, since_us: int, most: int) -> int:
        """FULL_ALERTs decided for ``human`` after ``since_us``, counted up to ``most`` (the budget)."""
        if most <= 0:
            return 0
        rows = self._store.read.rows("events", {"event_type": ALERT_EVENT, "subject_kind": "agent",
                                                "subject_id": human}, order_by=["seq"], descending=True, limit=most)
        return sum(1 for r in rows if int(r["created_at_us"]) > since_us)


__all__ = ["ALERT_EVENT", "STATE_EVENT", "AttentionCalls", "decision_event"]
