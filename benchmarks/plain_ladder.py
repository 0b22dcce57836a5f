"""The controller's wake rules written as plain Python: the baseline of ``benchmarks/controller_bench.py``.

:class:`PlainLadder` is the storm ladder of ``rules/wake_storm.yaml`` (the same guards, in the same order, as
``tests/controller/plain_ladder.py``, whose decisions the tests check the durable_rules controller
against), extended to return what the controller returns. :class:`PlainController` wraps it in the same
envelope as :meth:`engine.controller.Controller.observe_step`: the event is validated (``read_event``) and
turned into the event fact (``event_fact``), world-fact upserts are validated (``validate_fact``), expired
controller facts are retracted lazily, the wake-targeting rules of ``rules/wake_targeting.yaml`` and the
epistemic lease of ``rules/epistemic_lease.yaml`` are applied with dict indexes, every decision is a
pydantic model (``WakeTarget``, ``DeferWake``, ``Suppress``, ``ForceRefresh``) with the same fields, rule
names and detail texts (a wake the cooldown stops is deferred to its end, joined or suppressed, as
``defer_wake`` does), and the step reports the net fact changes as a ``Step`` with ``FactChanges``.

It is a baseline for the event mix of the benchmark, not a second controller: it implements only the rules
that mix can fire (no topology, conflict or memory-review rules), and it checks nothing the benchmark does
not need. The constants are read from the rule files (:func:`storm_constants`), so a change there is
followed here; ``PlainLadder.max_deferrals`` defaults to the file's 3 for a caller that passes only the other
five.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from engine.controller import Step
from engine.controller.actions import budget_fact, cooldown_fact, woken_fact
from engine.controller.decisions import AnyDecision, DeferWake, ForceRefresh, Suppress, SuppressReason, WakeTarget
from engine.controller.durable_host import FactChanges
from engine.controller.facts import EXPIRING_KINDS, Fact, event_fact, read_event, validate_fact

_STORM = "wake_storm"
_TARGETING = "wake_targeting"


def storm_constants(rule_dir: Path) -> dict[str, int]:
    """The ``constants`` of ``wake_storm.yaml`` in ``rule_dir``."""
    data = yaml.safe_load((rule_dir / f"{_STORM}.yaml").read_text())
    return {k: int(v) for k, v in data["constants"].items()}


@dataclass
class PlainLadder:
    """TTL -> depth -> per-chain dedupe -> join a pending deferred wake -> budget -> defer on cooldown
    (bounded by ``max_deferrals``, then suppress with reason ``cooldown``) -> allow, with logical time, as
    ``tests/controller/plain_ladder.py`` orders them and ``engine.controller.actions.defer_wake`` decides
    them. It reads and writes the controller facts (``woken``, ``cooldown``, ``budget``) in ``facts``
    (id -> fact), built by the controller's own fact builders so the shapes are the ones it reports."""

    max_depth: int
    ttl_us: int
    cooldown_us: int
    budget: int
    budget_window_us: int
    max_deferrals: int = 3

    def decide(self, facts: dict[str, Fact], world: str, position: int, index: int, cand: Mapping[str, Any],
               write: list[Fact]) -> AnyDecision:
        """The decision for one wake candidate (the dict a ``wake_candidate`` fact holds); facts an allowed,
        deferred or joining wake records are appended to ``write`` (the caller upserts them)."""
        target, chain, depth, now = cand["target"], cand["chain"], cand["depth"], cand["now"]
        if cand["age"] > self.ttl_us:
            return self._suppress(world, position, index, "storm_ttl", SuppressReason.TTL, cand,
                                  f"chain {chain} began {cand['age']} us ago; the limit is {self.ttl_us} us")
        if depth >= self.max_depth:
            return self._suppress(world, position, index, "storm_depth", SuppressReason.DEPTH, cand,
                                  f"cascade depth {depth} reached the limit of {self.max_depth}")
        seen = facts.get(f"woken:{chain}:{target}")
        if seen is not None and seen["until"] > now:
            return self._suppress(world, position, index, "storm_dedupe", SuppressReason.DEDUPE, cand,
                                  f"chain {chain} already woke {target}")
        cool = facts.get(f"cooldown:{target}")
        if cool is not None and cool["until"] <= now:
            cool = None
        if cool is not None and int(cool.get("wake_at") or 0) > now:
            return self._defer(world, position, index, "storm_cooldown_join", cand, cool, None, write)
        spent = facts.get(f"budget:{target}")
        if spent is not None and spent["until"] <= now:
            spent = None
        if spent is not None and spent["used"] >= self.budget:
            return self._suppress(world, position, index, "storm_budget", SuppressReason.BUDGET, cand,
                                  f"{target} used {spent['used']} of {self.budget} wakes in the window "
                                  f"ending {spent['until']}")
        if cool is not None:
            rule = "storm_cooldown" if spent else "storm_cooldown_new_window"
            return self._defer(world, position, index, rule, cand, cool, spent, write)
        used, until = (spent["used"] + 1, spent["until"]) if spent else (1, now + self.budget_window_us)
        write.append(woken_fact(chain, target, now + self.ttl_us))
        write.append(budget_fact(target, used, until))
        if self.cooldown_us:
            write.append(cooldown_fact(target, now + self.cooldown_us, wake_at=now, wake_key=cand["key"]))
        rule = "allow_in_window" if spent else "allow_new_window"
        return WakeTarget(world=world, position=position, index=index, rule=f"{_STORM}/{rule}", agent=target,
                          cause=cand["cause"], idempotency_key=cand["key"], depth=depth, chain=chain,
                          origin_us=cand["origin"], source=cand["source"])

    def _defer(self, world: str, position: int, index: int, rule: str, cand: Mapping[str, Any],
               cool: Mapping[str, Any], spent: Mapping[str, Any] | None, write: list[Fact]) -> AnyDecision:
        """The candidate's target cools down (``cool``, live): join the deferred wake that has not run yet,
        else defer to the cooldown's end (one budget unit, ``spent``: the open window or ``None``), else
        (``max_deferrals`` reached) suppress with reason ``cooldown``; ``defer_wake``'s three cases."""
        target, chain, now, until = cand["target"], cand["chain"], cand["now"], cool["until"]
        wake_at, done = int(cool.get("wake_at") or 0), int(cool.get("deferrals") or 0)
        origin = {"world": world, "position": position, "index": index, "rule": f"{_STORM}/{rule}",
                  "agent": target, "cause": cand["cause"], "depth": cand["depth"], "chain": chain}
        joined = cool.get("wake_key")
        if wake_at > now and isinstance(joined, str):
            write.append(woken_fact(chain, target, now + self.ttl_us))
            return DeferWake(**origin, idempotency_key=cand["key"], origin_us=cand["origin"],
                             source=cand["source"], not_before_us=wake_at, deferrals=max(done, 1), joins=joined,
                             detail=f"joins the wake of {target} deferred by cooldown until {wake_at}")
        if done >= self.max_deferrals:
            return Suppress(**origin, reason=SuppressReason.COOLDOWN, idempotency_key=cand["key"],
                            detail=f"{target} cools down until {until} after {done} deferred wakes in a row "
                                   f"(the limit is {self.max_deferrals})")
        used, window = (spent["used"] + 1, spent["until"]) if spent else (1, now + self.budget_window_us)
        write.append(woken_fact(chain, target, now + self.ttl_us))
        write.append(budget_fact(target, used, window))
        write.append(cooldown_fact(target, until + self.cooldown_us, wake_at=until, wake_key=cand["key"],
                                   deferrals=done + 1))
        return DeferWake(**origin, idempotency_key=cand["key"], origin_us=cand["origin"], source=cand["source"],
                         not_before_us=until, deferrals=done + 1, detail=f"deferred by cooldown until {until}")

    @staticmethod
    def _suppress(world: str, position: int, index: int, rule: str, reason: SuppressReason,
                  cand: Mapping[str, Any], detail: str) -> Suppress:
        return Suppress(world=world, position=position, index=index, rule=f"{_STORM}/{rule}",
                        agent=cand["target"], reason=reason, detail=detail, idempotency_key=cand["key"],
                        depth=cand["depth"], chain=cand["chain"], cause=cand["cause"])


@dataclass
class PlainController:
    """One world's wake rules in plain Python, with ``observe_step``'s envelope (see the module doc).

    ``targeting=False`` keeps only the handoff rule (the benchmark's ladder-only scenario)."""

    world: str
    ladder: PlainLadder
    targeting: bool = True
    facts: dict[str, Fact] = field(default_factory=dict)
    position: int = 0
    _by_kind_key: dict[tuple[str, str], dict[str, Fact]] = field(default_factory=dict)
    _context: dict[str, dict[str, Fact]] = field(default_factory=dict)  # agent -> context facts
    _expiry: list[tuple[int, str]] = field(default_factory=list)

    def rebuild(self, facts: Sequence[Mapping[str, Any]], *, position: int = 0) -> None:
        self.facts.clear()
        self._by_kind_key.clear()
        self._context.clear()
        self._expiry.clear()
        for f in facts:
            self._put(validate_fact(f))
        self.position = position

    def observe_step(self, event: Mapping[str, Any], *, upserts: Sequence[Mapping[str, Any]] = (),
                     retracts: Sequence[str] = ()) -> Step:
        observed = read_event(event)
        ev = event_fact(observed)
        checked = [validate_fact(u) for u in upserts]
        if observed.seq <= self.position:
            raise ValueError(f"stale event {observed.seq} at position {self.position}")
        world, seq, now = self.world, observed.seq, observed.created_at_us
        journal: dict[str, Fact | None] = {}
        for fid in [*self._expired(now), *retracts]:
            self._drop(fid, journal)
        for fact in checked:
            self._upsert(fact, journal)
        decisions: list[AnyDecision] = []
        write: list[Fact] = []
        actor = ev["actor"]
        for target, cause, rule in self._targets(ev):
            if target == actor:
                continue
            cand = {"key": f"ctl:{world}:{seq}:{target}", "target": target, "cause": cause, "source": actor,
                    "chain": ev["chain"], "depth": ev["depth"], "origin": ev["origin"], "now": now,
                    "age": now - ev["origin"], "rule": rule}
            decisions.append(self.ladder.decide(self.facts, world, seq, len(decisions), cand, write))
            for fact in write:
                self._upsert(fact, journal)
            write.clear()
        if self.targeting and ev.get("payload.risk") in ("high", "critical") and not any(
                c["valid_until"] > now for c in self._context.get(actor, {}).values()):
            decisions.append(ForceRefresh(world=world, position=seq, index=len(decisions),
                                          rule="epistemic_lease/refresh_before_high_risk", agent=actor,
                                          reason=f"high-risk {ev['type']} on an expired context"))
        self.position = seq
        upserted: list[Fact] = []
        retracted: list[str] = []
        for fid, before in journal.items():
            after = self.facts.get(fid)
            if after == before:
                continue
            if after is None:
                retracted.append(fid)
            else:
                upserted.append(dict(after))
        return Step(world, seq, tuple(decisions), FactChanges(tuple(upserted), tuple(retracted)))

    # -- targeting ------------------------------------------------------------------------------------------

    def _targets(self, ev: Fact) -> list[tuple[str, str, str]]:
        """(target, cause, rule) for each wake candidate the event's targeting rules post."""
        out: list[tuple[str, str, str]] = []
        subject, kind, actor = ev["subject"], ev["subject_kind"], ev["actor"]
        if self.targeting:
            if kind == "task":
                for task in self._by_kind_key.get(("task", subject), {}).values():
                    owner = task.get("owner")
                    if owner is not None and owner != actor:
                        out.append((owner, "task_owner", f"{_TARGETING}/wake_task_owner"))
            for sub in self._by_kind_key.get(("subscription", subject), {}).values():
                if sub["agent"] != actor:
                    out.append((sub["agent"], "subscriber", f"{_TARGETING}/wake_subscribers"))
            if kind == "room":
                for member in self._by_kind_key.get(("member", subject), {}).values():
                    if member["agent"] != actor:
                        out.append((member["agent"], "room_member", f"{_TARGETING}/wake_room_members"))
        target = ev.get("payload.target_agent")
        if ev["type"] == "handoff.created" and isinstance(target, str) and target:
            out.append((target, "handoff_target", f"{_TARGETING}/wake_handoff_target"))
        return out

    # -- facts ----------------------------------------------------------------------------------------------

    def _expired(self, now: int) -> list[str]:
        due: list[str] = []
        while self._expiry and self._expiry[0][0] <= now:
            until, fid = heapq.heappop(self._expiry)
            if self.facts.get(fid, {}).get("until") == until:
                due.append(fid)
        return due

    def _upsert(self, fact: Fact, journal: dict[str, Fact | None]) -> None:
        fid = fact["id"]
        before = self.facts.get(fid)
        if before == fact:
            return
        journal.setdefault(fid, before)
        if before is not None:
            self._unindex(before)
        self._put(fact)

    def _drop(self, fid: str, journal: dict[str, Fact | None]) -> None:
        before = self.facts.pop(fid, None)
        if before is None:
            return
        journal.setdefault(fid, before)
        self._unindex(before)

    def _put(self, fact: Fact) -> None:
        fid, kind = fact["id"], fact["kind"]
        self.facts[fid] = fact
        self._by_kind_key.setdefault((kind, fact["key"]), {})[fid] = fact
        if kind == "context":
            self._context.setdefault(fact["agent"], {})[fid] = fact
        until = fact.get("until")
        if kind in EXPIRING_KINDS and isinstance(until, int):
            heapq.heappush(self._expiry, (until, fid))

    def _unindex(self, fact: Fact) -> None:
        self._by_kind_key.get((fact["kind"], fact["key"]), {}).pop(fact["id"], None)
        if fact["kind"] == "context":
            self._context.get(fact["agent"], {}).pop(fact["id"], None)


__all__ = ["PlainController", "PlainLadder", "storm_constants"]
