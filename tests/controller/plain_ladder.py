"""The storm rules of ``rules/wake_storm.yaml`` written as plain Python: the reference the durable_rules
controller is checked against (and the baseline a benchmark should compare with)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Cooling:
    """An agent's cooldown: until when, the time the wake it follows runs, and the deferrals in a row."""

    until: int
    wake_at: int
    deferrals: int


@dataclass
class PlainLadder:
    """TTL -> depth -> per-chain dedupe -> join a pending deferred wake -> budget -> defer on cooldown
    (bounded by ``max_deferrals``, then suppress) -> allow, with logical time."""

    max_depth: int
    ttl_us: int
    cooldown_us: int
    budget: int
    budget_window_us: int
    max_deferrals: int = 3
    woken: dict[tuple[str, str], int] = field(default_factory=dict)  # (chain, agent) -> until
    cooling: dict[str, Cooling] = field(default_factory=dict)  # agent -> its cooldown
    spent: dict[str, tuple[int, int]] = field(default_factory=dict)  # agent -> (used, until)

    def decide(self, target: str, chain: str, depth: int, now: int, origin: int) -> tuple[str, ...]:
        """("wake", agent), ("defer", agent, due), ("join", agent, due) or ("suppress", agent, reason)."""
        if now - origin > self.ttl_us:
            return ("suppress", target, "ttl")
        if depth >= self.max_depth:
            return ("suppress", target, "depth")
        if self.woken.get((chain, target), now) > now:
            return ("suppress", target, "dedupe")
        cool = self.cooling.get(target)
        if cool is not None and cool.until <= now:
            cool = None
        if cool is not None and cool.wake_at > now:
            self.woken[(chain, target)] = now + self.ttl_us
            return ("join", target, str(cool.wake_at))
        used, until = self.spent.get(target, (0, now))
        if until > now and used >= self.budget:
            return ("suppress", target, "budget")
        if cool is not None and cool.deferrals >= self.max_deferrals:
            return ("suppress", target, "cooldown")
        self.spent[target] = (used + 1, until) if until > now else (1, now + self.budget_window_us)
        self.woken[(chain, target)] = now + self.ttl_us
        if cool is not None:
            self.cooling[target] = Cooling(cool.until + self.cooldown_us, cool.until, cool.deferrals + 1)
            return ("defer", target, str(cool.until))
        if self.cooldown_us:
            self.cooling[target] = Cooling(now + self.cooldown_us, now, 0)
        return ("wake", target)
