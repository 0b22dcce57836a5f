"""The storm rules of ``rules/wake_storm.yaml`` written as plain Python: the reference the durable_rules
controller is checked against (and the baseline a benchmark should compare with)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class PlainLadder:
    """TTL -> depth -> per-chain dedupe -> cooldown -> budget -> allow, with logical time."""

    max_depth: int
    ttl_us: int
    cooldown_us: int
    budget: int
    budget_window_us: int
    woken: dict[tuple[str, str], int] = field(default_factory=dict)  # (chain, agent) -> until
    cooling: dict[str, int] = field(default_factory=dict)  # agent -> until
    spent: dict[str, tuple[int, int]] = field(default_factory=dict)  # agent -> (used, until)

    def decide(self, target: str, chain: str, depth: int, now: int, origin: int) -> tuple[str, ...]:
        """("wake", agent) or ("suppress", agent, reason)."""
        if now - origin > self.ttl_us:
            return ("suppress", target, "ttl")
        if depth >= self.max_depth:
            return ("suppress", target, "depth")
        if self.woken.get((chain, target), now) > now:
            return ("suppress", target, "dedupe")
        if self.cooling.get(target, now) > now:
            return ("suppress", target, "cooldown")
        used, until = self.spent.get(target, (0, now))
        if until > now and used >= self.budget:
            return ("suppress", target, "budget")
        self.spent[target] = (used + 1, until) if until > now else (1, now + self.budget_window_us)
        self.woken[(chain, target)] = now + self.ttl_us
        if self.cooldown_us:
            self.cooling[target] = now + self.cooldown_us
        return ("wake", target)
