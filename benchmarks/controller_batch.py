"""The events of one log batch, posted to the controller together (issue 12, item 6): measurement code.

Measured and **not used by the run loop** (no gain: ``docs/benchmarks-controller.md``); it lives with the
benchmarks (``benchmarks/controller_bench.py`` runs both entry points) because it drives the controller's
host through private machinery no runtime code may use.

Two entry points, both taking the controller and a run of :class:`~engine.controller.Observation` s in log
order (strictly increasing ``seq``, all after the controller's position):

* :func:`observe_batch` -- the batch the run loop could call. Its result is, by contract, exactly what
  :meth:`Controller.observe_step` gives one event at a time: the same decisions (same fields, same index, same
  order) and the same fact changes per event, and the same facts afterwards
  (``tests/test_benchmarks_controller_batch.py`` checks it on random logs). Every event and fact of the batch is
  validated before anything is observed (a bad one raises ``InvalidInput`` and nothing changes); then each
  event is one engine call, under one hold of the controller's lock. An event that fails (e.g.
  ``EngineFailure``) ends the batch: the steps before it are returned with the error, and the controller is
  where one-at-a-time observation would have left it (at the last good step, host rebuilt from its facts).
* :func:`post_together` -- durable_rules' own batch: the world-fact changes of the whole batch first, then
  every event fact in **one** ``assert_facts`` call, one dispatch of every activation they queue, and every
  event fact retracted in one ``retract_facts`` call. Decisions are attributed to the event whose event fact
  or wake candidate the activation matched (its position, its logical time), indexed per event. It is kept
  to measure the engine's batch semantics (``benchmarks/controller_bench.py``), **not** for the run loop:
  durable_rules fires the whole batch's activations by priority, so every targeting rule of every event runs
  before any storm-ladder decision, and the ladder's guards then see the facts that *later* events' wakes
  recorded (a cooldown or budget spent by event 9 suppresses the wake of event 3); world-fact changes of later
  events are visible to earlier ones; a fact that expires inside the batch is retracted only at the next
  batch. All or nothing for the whole batch: on any error the facts are as before and the error is raised.

Measured (``docs/benchmarks-controller.md``): the engine's own C work per event (the candidate's join
against the ladder's facts, the fact asserts of an allowed wake) does not shrink when events arrive together;
a batch only saves the per-event ``assert_fact``/``retract_fact``/``start_action_for_state`` round trips.

:func:`post_together` drives :class:`~engine.controller.durable_host.DurableHost` through its private call
machinery (the mirror, the journal, the network); it would belong in ``durable_host.py`` as a host method if it
were ever used beyond measurement.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.controller import durable_host as _dh
from engine.controller.controller import Controller, Observation, Step
from engine.controller.durable_host import DurableHost, FactChanges
from engine.controller.errors import ActionFailed, StaleEvent
from engine.controller.facts import TRANSIENT_KINDS, Fact, ObservedEvent, event_fact, read_event, validate_fact


@dataclass(frozen=True)
class BatchResult:
    """The steps observed, in log order, one per observation; ``error`` is the exception of the first
    observation that failed (``None``: all were observed). When ``error`` is set, ``steps`` holds the ones
    before it: commit those, then handle the error as for :meth:`Controller.observe_step`."""

    steps: tuple[Step, ...]
    error: BaseException | None = None


@dataclass(frozen=True)
class _Item:
    observed: ObservedEvent
    fact: Fact
    upserts: tuple[Fact, ...]
    retracts: tuple[str, ...]


def _prepare(controller: Controller, batch: Sequence[Observation], *, facts: bool) -> list[_Item]:
    """Validate every observation (``InvalidInput`` naming the field) and the order of their positions
    (``StaleEvent``: a ``seq`` at or before the controller's position or the previous observation's).
    ``facts``: also build the event facts (``event_fact``)."""
    items: list[_Item] = []
    last = controller.position
    for obs in batch:
        observed = read_event(obs.event)
        if observed.seq <= last:
            raise StaleEvent(controller.world, observed.seq, last)
        last = observed.seq
        items.append(_Item(observed, event_fact(observed) if facts else {},
                           tuple(validate_fact(u) for u in obs.upserts), tuple(obs.retracts)))
    return items


def observe_batch(controller: Controller, batch: Sequence[Observation]) -> BatchResult:
    """Observe ``batch`` (log order) exactly as one :meth:`Controller.observe_step` per observation would.

    Raises ``InvalidInput`` / :class:`StaleEvent` before observing anything if any observation is malformed
    or out of order, and ``ControllerNotLoaded`` before the first :meth:`Controller.load`. Any other error
    of an observation ends the batch and is returned in :attr:`BatchResult.error` with the steps before it
    (the failing event is not observed, as with ``observe_step``)."""
    with controller._lock:
        controller._require_host()
        _prepare(controller, batch, facts=False)
        steps: list[Step] = []
        for obs in batch:
            try:
                steps.append(controller.observe_step(obs.event, upserts=obs.upserts, retracts=obs.retracts))
            except Exception as exc:  # noqa: BLE001 -- handed to the caller with the steps before it
                return BatchResult(tuple(steps), exc)
        return BatchResult(tuple(steps))


# -- durable_rules' own batch (for measurement) ---------------------------------------------------------------


@dataclass
class _Attribution:
    """Which step each journal entry and decision of the one engine call belongs to."""

    journal_step: list[int]
    decision_step: list[int]

    def mark(self, call: Any, step: int) -> None:
        """The call's journal entries and decisions not yet attributed belong to ``step``."""
        self.journal_step.extend([step] * (len(call.journal) - len(self.journal_step)))
        self.decision_step.extend([step] * (len(call.decisions) - len(self.decision_step)))


def post_together(controller: Controller, batch: Sequence[Observation]) -> BatchResult:
    """Post ``batch`` with durable_rules' batch semantics (see the module doc: **not** equivalent to one at a
    time). Returns one step per observation. Raises ``InvalidInput`` / :class:`StaleEvent` before anything
    is posted; on an engine or action error the facts are as before, the host is rebuilt and the error is
    raised (nothing of the batch is observed)."""
    with controller._lock:
        host = controller._require_host()
        items = _prepare(controller, batch, facts=True)
        if not items:
            return BatchResult(())
        try:
            call, attribution = _post(host, controller.world, items)
        except BaseException:
            controller._swap(controller._build(host.ruleset, host.facts(controller.world)))
            raise
        controller._position = items[-1].observed.seq
    return BatchResult(_steps(controller.world, items, call, attribution))


def _post(host: DurableHost, world: str, items: list[_Item]) -> tuple[Any, _Attribution]:
    """One engine call for the whole batch (the call's journal and decisions, and their steps)."""
    host._check_open("execute")
    memory = host._memory(world)
    first = items[0].observed
    call = _dh._Call(world, first.seq, first.created_at_us, memory)
    attribution = _Attribution([], [])
    network = host._network
    fire: Callable[[str, dict[str, dict[str, Any]]], None] = network._fire
    host._call = call
    network._fire = _firing_at_its_event(fire, call, attribution, items)
    try:
        expired = host.expired(world, first.created_at_us)
        for n, item in enumerate(items):
            call.position, call.now = item.observed.seq, item.observed.created_at_us
            host._run_call(call, [*expired, *item.retracts] if n == 0 else item.retracts, item.upserts, None)
            attribution.mark(call, n)
        _assert_and_retract_events(host, call, attribution, items)
    except BaseException:
        host._undo(call)
        host.poisoned = True
        raise
    finally:
        network._fire = fire
        host._call = None
    return call, attribution


def _firing_at_its_event(fire: Callable[[str, dict[str, dict[str, Any]]], None], call: Any,
                         attribution: _Attribution, items: list[_Item]) -> Callable[[str, dict[str, Any]], None]:
    """``fire``, run at the position and logical time of the event whose event fact or wake candidate the
    activation matched (an activation matching neither stays at the event being applied)."""
    step_of = {item.observed.seq: n for n, item in enumerate(items)}

    def fire_at_its_event(rule: str, matched: dict[str, dict[str, Any]]) -> None:
        source = next((f for f in matched.values() if f.get("kind") in TRANSIENT_KINDS), None)
        if source is not None and source.get("seq") in step_of:
            call.position, call.now = source["seq"], source["now"]
        fire(rule, matched)
        attribution.mark(call, step_of.get(call.position, 0))

    return fire_at_its_event


def _assert_and_retract_events(host: DurableHost, call: Any, attribution: _Attribution, items: list[_Item]) -> None:
    world, memory, network = call.world, call.memory, host._network
    facts = []
    for item in items:
        fact = {**item.fact, "id": host._free_id(call, item.fact["id"])}
        call.journal.append((fact["id"], None))
        host._remember(world, memory, fact)
        facts.append(fact)
    attribution.mark(call, 0)  # transient: in no step's changes
    body = "[" + ",".join(_dh._dumps({**f, "sid": world}) for f in facts) + "]"
    network._result("assert", _dh._dre.assert_facts, body, True)
    host._raise_failure(call)
    for fact in facts:
        call.journal.append((fact["id"], memory.facts.pop(fact["id"])))
        memory.hashes.pop(_dh._cached_hash(fact["id"]), None)
    attribution.mark(call, 0)
    ids = "[" + ",".join(_dh._dumps({"id": f["id"], "sid": world}) for f in facts) + "]"
    network._result("retract", _dh._dre.retract_facts, ids, True)
    host._raise_failure(call)
    attribution.mark(call, len(items) - 1)
    if call.pending:
        fid, rule = next(iter(call.pending.items()))
        raise ActionFailed(rule, host.ruleset.bindings[rule].action, f"posted {fid!r}, which no rule consumed")


def _steps(world: str, items: list[_Item], call: Any, attribution: _Attribution) -> tuple[Step, ...]:
    decisions: list[list[Any]] = [[] for _ in items]
    for decision, step in zip(call.decisions, attribution.decision_step, strict=True):
        own = decisions[step]
        own.append(decision.model_copy(update={"index": len(own)}) if decision.index != len(own) else decision)
    journal: list[tuple[str, Fact | None]] = call.journal
    # the value of each entry's fact after it: the next entry's ``before`` for that fact, else the mirror's
    after: list[Fact | None] = [None] * len(journal)
    newest: dict[str, Fact | None] = {}
    for at in range(len(journal) - 1, -1, -1):
        fid, before = journal[at]
        after[at] = newest[fid] if fid in newest else call.memory.facts.get(fid)
        newest[fid] = before
    per_step: list[dict[str, list[Fact | None]]] = [{} for _ in items]
    for at, ((fid, before), step) in enumerate(zip(journal, attribution.journal_step, strict=True)):
        span = per_step[step].get(fid)
        if span is None:
            per_step[step][fid] = [before, after[at]]
        else:
            span[1] = after[at]
    return tuple(Step(world, item.observed.seq, tuple(decisions[n]), _changes(per_step[n]))
                 for n, item in enumerate(items))


def _changes(spans: dict[str, list[Fact | None]]) -> FactChanges:
    """A step's net change: each fact's value before the step's first entry for it against its value after
    the step's last one (transient facts left out)."""
    upserted: list[Fact] = []
    retracted: list[str] = []
    for fid, (before, after) in spans.items():
        if after == before or (after or before or {}).get("kind") in TRANSIENT_KINDS:
            continue
        if after is None:
            retracted.append(fid)
        else:
            upserted.append(dict(after))
    return FactChanges(tuple(upserted), tuple(retracted))


__all__ = ["BatchResult", "observe_batch", "post_together"]
