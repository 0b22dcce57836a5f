"""The blackboard controller of one world: World events in, decisions out.

Decisions flow like this: the run loop reads the world's next event (in log order), calls
:meth:`Controller.observe_step` with it (and the world-fact changes that event implies), and commits the
step's decisions and fact changes through the write gateway in one transaction together with the event's
position. ``(world, position, index)`` is unique per decision, so replaying an event after a crash
commits nothing twice. On start the run loop rebuilds the controller from SQL (:meth:`Controller.rebuild`,
no action fires) at the last committed position, then observes the events after it.

A controller owns one thread-less durable_rules host at a time and serialises every call with a lock.
Rules hot-reload by building a new host, rebuilding it from the current facts and swapping it in; a rule
directory that does not validate or compile changes nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.controller.actions import ACTIONS, ActionSpec
from engine.controller.decisions import AnyDecision
from engine.controller.durable_host import CallResult, DurableHost, FactChanges, RuleSet
from engine.controller.errors import ControllerNotLoaded, StaleEvent
from engine.controller.facts import Fact, event_fact, read_event, validate_fact
from engine.controller.rules_file import load_rule_dir
from engine.controller.shadow import ShadowDiff, diff_decisions
from engine.validation import check_id


@dataclass(frozen=True)
class Observation:
    """One recorded input: an event and the world-fact changes it implies (for :meth:`Controller.shadow`)."""

    event: Mapping[str, Any]
    upserts: Sequence[Mapping[str, Any]] = ()
    retracts: Sequence[str] = ()


@dataclass(frozen=True)
class Step:
    """What observing one event decided: the decisions (in firing order, indexed) and the net change to
    the world's stored facts (world facts passed in, controller facts written by actions, expired
    controller facts retracted). Commit both with ``position``."""

    world: str
    position: int
    decisions: tuple[AnyDecision, ...]
    changes: FactChanges


class Controller:
    """The controller of world ``world_id`` with the rules in ``rule_dir``. Call :meth:`load` first."""

    def __init__(self, world_id: str, rule_dir: Path | str, *,
                 actions: Mapping[str, ActionSpec] = ACTIONS) -> None:
        self.world = check_id("world_id", world_id)
        self.rule_dir = Path(rule_dir)
        self._actions = actions
        self._lock = threading.RLock()
        self._host: DurableHost | None = None
        self._position = 0

    @property
    def rules(self) -> RuleSet | None:
        """The rule set in force (``None`` before the first successful :meth:`load`)."""
        host = self._host
        return host.ruleset if host else None

    @property
    def position(self) -> int:
        """The position (seq) of the last event observed, or the one given to :meth:`rebuild`."""
        return self._position

    # -- rules --------------------------------------------------------------------------------------------

    def load(self) -> RuleSet:
        """Validate every rule file, compile the set into a new host, rebuild that host from the current
        facts (none at first) without firing, and swap it in. On any error (:class:`RuleFileError`)
        the previous rules and host stay in force."""
        ruleset = load_rule_dir(self.rule_dir, self._actions)
        with self._lock:
            current = self._host
            self._swap(self._build(ruleset, current.facts(self.world) if current else []))
        return ruleset

    def reload(self) -> RuleSet:
        """Hot reload: :meth:`load` again (new host, rebuilt from the live facts, swapped in)."""
        return self.load()

    # -- facts --------------------------------------------------------------------------------------------

    def rebuild(self, facts: Iterable[Mapping[str, Any]], *, position: int = 0) -> None:
        """Replace the world's facts with ``facts`` (world and controller facts, e.g. read from SQL) in a
        new host, firing no action; ``position`` is the last event those facts include."""
        checked = [validate_fact(f) for f in facts]
        with self._lock:
            host = self._require_host()
            self._swap(self._build(host.ruleset, checked))
            self._position = position

    def facts(self) -> list[Fact]:
        """The world's stored facts (world and controller facts)."""
        with self._lock:
            return self._require_host().facts(self.world)

    # -- events -------------------------------------------------------------------------------------------

    def observe(self, event: Mapping[str, Any], *, upserts: Sequence[Mapping[str, Any]] = (),
                retracts: Sequence[str] = ()) -> list[AnyDecision]:
        """The decisions for ``event`` (see :meth:`observe_step`)."""
        return list(self.observe_step(event, upserts=upserts, retracts=retracts).decisions)

    def observe_step(self, event: Mapping[str, Any], *, upserts: Sequence[Mapping[str, Any]] = (),
                     retracts: Sequence[str] = ()) -> Step:
        """Apply the world-fact changes (``retracts`` then ``upserts``, by id), then assert the event as a
        transient fact (id from its seq, logical time from its ``created_at_us``) and run every rule it
        fires. All or nothing: if an action raises or a fact id collides, the facts are as before and the
        error is raised (:class:`ActionFailed`, :class:`FactIdCollision`, ...).

        Raises :class:`StaleEvent` for an event at or before :attr:`position`, ``InvalidInput`` for a
        malformed event or fact."""
        observed = read_event(event)
        fact = event_fact(observed)
        checked = [validate_fact(u) for u in upserts]
        with self._lock:
            host = self._require_host()
            if observed.seq <= self._position:
                raise StaleEvent(self.world, observed.seq, self._position)
            result = self._execute(host, observed.seq, observed.created_at_us, retracts, checked, fact)
            self._position = observed.seq
        return Step(self.world, observed.seq, result.decisions, result.changes)

    def shadow(self, events: Iterable[Mapping[str, Any] | Observation], other_rule_dir: Path | str, *,
               facts: Iterable[Mapping[str, Any]] = ()) -> list[ShadowDiff]:
        """Run the rules in force and the rules in ``other_rule_dir`` over recorded ``events`` (event dicts
        or :class:`Observation` s, in log order) from ``facts``, each in a private controller, and return
        the events whose decisions differ. Commits nothing and leaves this controller's host, facts and
        position untouched. Raises :class:`RuleFileError` if the other rules do not validate."""
        candidate = load_rule_dir(Path(other_rule_dir), self._actions)
        current = self._require_host().ruleset
        inputs = [e if isinstance(e, Observation) else Observation(e) for e in events]
        start = [validate_fact(f) for f in facts]
        runs = [self._replay(rules, start, inputs) for rules in (current, candidate)]
        return diff_decisions([o.event for o in inputs], runs[0], runs[1])

    @classmethod
    def from_rules(cls, world_id: str, ruleset: RuleSet, *, facts: Iterable[Mapping[str, Any]] = (),
                   position: int = 0, actions: Mapping[str, ActionSpec] = ACTIONS) -> Controller:
        """A controller with an already compiled rule set (e.g. one shared by many worlds), rebuilt from
        ``facts`` at ``position``. Its :meth:`load` reads ``ruleset.source``."""
        controller = cls(world_id, ruleset.source, actions=actions)
        controller._swap(controller._build(ruleset, [validate_fact(f) for f in facts]))
        controller._position = position
        return controller

    def _replay(self, rules: RuleSet, facts: list[Fact],
                inputs: list[Observation]) -> dict[int, tuple[AnyDecision, ...]]:
        private = Controller.from_rules(self.world, rules, facts=facts, actions=self._actions)
        try:
            return {step.position: step.decisions for step in (
                private.observe_step(o.event, upserts=o.upserts, retracts=o.retracts) for o in inputs)}
        finally:
            private.close()

    def close(self) -> None:
        """Free the host. The controller must be loaded again before further use."""
        with self._lock:
            if self._host is not None:
                self._host.close()
                self._host = None

    # -- internals ------------------------------------------------------------------------------------------

    def _execute(self, host: DurableHost, position: int, now: int, retracts: Sequence[str],
                 upserts: Sequence[Fact], event: Fact) -> CallResult:
        expired = host.expired(self.world, now)
        try:
            return host.execute(self.world, position, now, retracts=[*expired, *retracts], upserts=upserts,
                                event=event)
        except BaseException:
            self._swap(self._build(host.ruleset, host.facts(self.world)))  # the mirror was restored
            raise

    def _build(self, ruleset: RuleSet, facts: Iterable[Fact]) -> DurableHost:
        host = DurableHost(ruleset)
        try:
            host.load(self.world, facts)
        except BaseException:
            host.close()
            raise
        return host

    def _swap(self, host: DurableHost) -> None:
        old, self._host = self._host, host
        if old is not None:
            old.close()

    def _require_host(self) -> DurableHost:
        host = self._host
        if host is None:
            raise ControllerNotLoaded(self.world)
        return host


__all__ = ["Controller", "Observation", "Step"]
