"""The attention broker for humans (seed 003 §3.4, §14-16): interruptibility, attention budget and how far a
notice may interrupt a human.

- :mod:`engine.attention.model`: the vocabulary (states, outputs, notices, budget, recorded decisions);
- :func:`decide` (:mod:`engine.attention.broker`): the decision, a pure function;
- ``World.set_attention_state`` / ``World.notify_human`` / ``World.attention_of``
  (:mod:`engine.world.attention`): the state set, the decision recorded, the human's view;
- :mod:`engine.attention.notices`: the notices of what the world asks of humans (approval requests,
  reviews routed to a human, handoffs to a human), for the run loop and the controller.
"""

from __future__ import annotations

from engine.attention.broker import TABLE, Verdict, decide
from engine.attention.model import (
    HUMAN_ROLES,
    AttentionDecision,
    AttentionOutput,
    AttentionState,
    AttentionView,
    Budget,
    Interruptibility,
    Notice,
    NoticeKind,
    Risk,
    Urgency,
)

__all__ = ["HUMAN_ROLES", "TABLE", "AttentionDecision", "AttentionOutput", "AttentionState", "AttentionView",
           "Budget", "Interruptibility", "Notice", "NoticeKind", "Risk", "Urgency", "Verdict", "decide"]
