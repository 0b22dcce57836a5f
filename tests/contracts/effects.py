"""An external system of our own for the action tests: a real in-memory mailbox that performs effects under
idempotency keys and can lose answers (a seeded random source decides, per call, whether the answer of an
effect that did happen, or of a status query, is lost as a timeout)."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from engine.contracts import EffectOutcome, EffectTimeout


class FlakyMailbox:
    """Sends are effects: ``effects[key]`` counts how often the effect under ``key`` happened."""

    def __init__(self, seed: int, *, lose_answer: float = 0.5, lose_status: float = 0.3,
                 fail_before: float = 0.1) -> None:
        self._random = random.Random(seed)
        self.lose_answer = lose_answer
        self.lose_status = lose_status
        self.fail_before = fail_before
        self.effects: Counter[str] = Counter()
        self.sent: dict[str, EffectOutcome] = {}
        self.recalled: set[str] = set()

    def perform(self, action: str, key: str, input: dict[str, Any], timeout_s: float) -> EffectOutcome:
        if self._random.random() < self.fail_before:
            raise EffectTimeout(f"{action}: no connection (nothing sent)")
        self.effects[key] += 1
        if action == "recall_message":
            self.recalled.add(str(input["message_id"]))
            outcome = EffectOutcome({"recalled": True}, f"recall:{input['message_id']}")
        else:
            outcome = EffectOutcome({"message_id": f"msg-{key}"}, f"smtp:{key}")
        self.sent[key] = outcome
        if self._random.random() < self.lose_answer:
            raise EffectTimeout(f"{action}: sent, but the answer was lost")
        return outcome

    def status(self, action: str, key: str, timeout_s: float) -> EffectOutcome | None:
        if self._random.random() < self.lose_status:
            raise EffectTimeout("status query timed out")
        return self.sent.get(key)


class NaiveOperator:
    """What the contracts prevent: retry on timeout without asking the status (the control of the DSR test)."""

    def __init__(self, mailbox: FlakyMailbox, attempts: int) -> None:
        self.mailbox = mailbox
        self.attempts = attempts

    def send(self, key: str, input: dict[str, Any]) -> None:
        for _ in range(self.attempts):
            try:
                self.mailbox.perform("send_message", key, input, 5.0)
                return
            except EffectTimeout:
                continue
