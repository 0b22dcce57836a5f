"""The one adapter to durable_rules. Nothing else in PMW imports ``durable`` (ruff bans it).

The fences (``notes/durable-rules.md`` section 7), each kept here:

* **Thread-less.** :class:`_QuietHost` overrides ``Host._run``: no dispatcher or timer threads, so no
  activation is ever run (or stolen) by a background thread; every action runs inside the caller's call.
  A :class:`DurableHost` is owned by one thread (the controller serialises calls with a lock).
* **One host per controller, per test, per reload.** Nothing uses ``durable.lang``'s process-global host.
* **sid = world id.** Worlds are checked for 32-bit sid-hash collisions and capped at
  :data:`MAX_WORLDS` per host.
* **Explicit fact ids.** Every fact has an ``id``; the host mirrors each world's facts and their 32-bit
  id hashes, so a new id that would collide with a live one raises :class:`FactIdCollision` before the
  engine is touched (and an engine "already observed" for an id the mirror lacks is reported the same
  way). Transient ids (events, wake candidates) are salted (``~n``) instead.
* **Logical time.** No engine timers; time arrives in the facts.
* **Exceptions re-raised.** Activations are run by :class:`_Network` (durable's C core driven the way its
  own ``Host`` does, minus the per-action ``Closure``/``Promise`` machinery that swallows exceptions into
  ``state['exception']``). The first exception of a call is recorded, later activations of the call are
  skipped, and the call raises it after the engine returns, as :class:`ActionFailed` (or the controller
  error itself).
* **Never ``delete_state``.** Worlds are forgotten by dropping the whole host. A failed call leaves the
  engine's state unknown: the host marks itself :attr:`DurableHost.poisoned` and its owner rebuilds a new
  host from the (restored) mirror.
* **Rebuild without firing.** :meth:`DurableHost.load` replays facts through
  ``complete_get_idle_state`` into a world this host has never seen: joins and negations are primed and
  no action runs.
"""

from __future__ import annotations

import copy
import heapq
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import orjson
from durable import engine as durable_engine  # type: ignore[import-untyped]

from engine.controller.actions import Activation, Handler, Params
from engine.controller.decisions import AnyDecision
from engine.controller.errors import (
    ActionFailed,
    ControllerError,
    EngineFailure,
    FactIdCollision,
    RuleFileError,
    WorldIdCollision,
)
from engine.controller.facts import EXPIRING_KINDS, TRANSIENT_KINDS, Fact, fact_hash

_dre = durable_engine.durable_rules_engine  # the C core
_NOT_HANDLED, _OBSERVED, _QUEUED = 1, 2, 3  # result codes of its assert/retract calls
MAX_WORLDS = 1000  # durable_rules allows 1024 sids per ruleset; the 1025th raises MemoryError
_cached_hash = lru_cache(maxsize=65536)(fact_hash)


@dataclass(frozen=True)
class Binding:
    """A rule's action, bound by name: the pure handler and its validated parameters."""

    rule: str
    action: str
    handler: Handler
    params: Params
    file: str
    line: int | None = None


@dataclass(frozen=True)
class RuleSet:
    """A rule set compiled from data: durable_rules' JSON definition (rule -> ``{pri, all, run}``, ``run``
    being the rule's own name) and the action bound to each rule."""

    name: str
    definition: Mapping[str, Mapping[str, Any]]
    bindings: Mapping[str, Binding]
    source: str = "rules"
    digest: str = ""  # sha256 over the rule files (names and bytes): which rules decided


@dataclass(frozen=True)
class FactChanges:
    """The net change a call made to a world's stored facts (transient facts excluded). ``upserted`` is in
    the engine's assertion order, last asserted last: durable_rules fires simultaneous activations in the
    order their facts were asserted, so a host rebuilt from stored facts decides as the one that followed
    the log only when it loads them in that order (the follower stores each fact's ordinal with its step)."""

    upserted: tuple[Fact, ...] = ()
    retracted: tuple[str, ...] = ()


@dataclass(frozen=True)
class CallResult:
    decisions: tuple[AnyDecision, ...]
    changes: FactChanges


@dataclass
class _World:
    facts: dict[str, Fact] = field(default_factory=dict)
    hashes: dict[int, str] = field(default_factory=dict)
    expiry: list[tuple[int, str]] = field(default_factory=list)


@dataclass
class _Call:
    world: str
    position: int
    now: int
    memory: _World
    decisions: list[AnyDecision] = field(default_factory=list)
    journal: list[tuple[str, Fact | None]] = field(default_factory=list)
    pending: dict[str, str] = field(default_factory=dict)  # posted transient id -> posting rule
    posted: int = 0
    error: BaseException | None = None
    failed: Binding | None = None


class _QuietHost(durable_engine.Host):  # type: ignore[misc]
    """A durable_rules Host without its two polling threads. It only compiles the rule set and replays
    stored facts; activations are run by :class:`_Network` (each rule's ``run`` names the rule, and the
    placeholder resolved here is never called)."""

    def _run(self) -> None:
        """No dispatcher/timer threads: the owner thread runs every action inside its own call."""

    def get_action(self, action_name: str) -> Callable[[Any], None]:
        return _noop


class DurableHost:
    """One compiled rule set in one thread-less durable_rules Host, with per-world fact mirrors.

    Not thread-safe: one owner thread (or a lock around every call)."""

    def __init__(self, ruleset: RuleSet) -> None:
        self.ruleset = ruleset
        self.poisoned = False
        self.stray_activations = 0
        self._closed = False
        self._worlds: dict[str, _World] = {}
        self._sids: dict[int, str] = {}
        self._call: _Call | None = None
        self._engine = self._compile(ruleset)
        self._network = _Network(self._engine._ruleset_directory[ruleset.name]._handle, self._fire)

    # -- compile ------------------------------------------------------------------------------------------

    @staticmethod
    def _compile(ruleset: RuleSet) -> Any:
        host = _QuietHost()
        try:
            host.register_rulesets({ruleset.name: copy.deepcopy(dict(ruleset.definition))})
        except Exception as exc:
            raise _blame(ruleset, exc) from exc
        return host

    # -- public calls -------------------------------------------------------------------------------------

    def load(self, world: str, facts: Iterable[Fact]) -> None:
        """Replay ``facts`` into ``world`` without running any action (joins and negations are primed).
        Only for a world this host has not seen: reloading an existing world would need
        ``delete_state``, which crashes."""
        self._check_open("load")
        if world in self._worlds:
            raise EngineFailure("load", f"world {world!r} already has state in this host; use a new host")
        memory = self._memory(world)
        for fact in facts:
            self._remember(world, memory, dict(fact))
        # the world's state message comes first: without it durable_rules reads uninitialised memory
        # (get_state on a world loaded from an empty list returns garbage or segfaults)
        state = {"sid": world, "id": _state_id(world), "$s": 1}
        body = ",".join(["4," + _dumps(state)] + ["1," + _dumps({**f, "sid": world}) for f in memory.facts.values()])
        try:
            self._engine.complete_get_idle_state(self.ruleset.name, world, f"[{body}]")
        except Exception as exc:
            raise EngineFailure("load", str(exc)) from exc

    def execute(self, world: str, position: int, now: int, *, retracts: Sequence[str] = (),
                upserts: Sequence[Fact] = (), event: Fact | None = None) -> CallResult:
        """Retract, upsert, then assert ``event`` as a transient fact (retracted again at the end), running
        every action that fires. Returns the decisions in firing order and the net fact changes.
        On any error the world's mirror is restored, the host is :attr:`poisoned` and the error raised."""
        self._check_open("execute")
        memory = self._memory(world)
        call = _Call(world, position, now, memory)
        self._call = call
        try:
            self._run_call(call, retracts, upserts, event)
        except BaseException:
            self._undo(call)
            self.poisoned = True
            raise
        finally:
            self._call = None
        return CallResult(tuple(call.decisions), _net_changes(call))

    def facts(self, world: str) -> list[Fact]:
        """The world's stored facts (the mirror: everything asserted, whether or not a rule uses it)."""
        memory = self._worlds.get(world)
        return [dict(f) for f in memory.facts.values()] if memory else []

    def expired(self, world: str, now: int) -> list[str]:
        """Ids of controller facts whose ``until`` is at or before ``now`` (to retract: they no longer
        match any rule that compares ``until``)."""
        memory = self._worlds.get(world)
        due: list[str] = []
        while memory and memory.expiry and memory.expiry[0][0] <= now:
            until, fid = heapq.heappop(memory.expiry)
            if memory.facts.get(fid, {}).get("until") == until:
                due.append(fid)
        return due

    def close(self) -> None:
        """Free the compiled network (the per-world state pools are not freed by durable_rules)."""
        if self._closed:
            return
        self._closed = True
        for rs in list(self._engine._ruleset_list):
            _dre.delete_ruleset(rs._handle)

    # -- the call -----------------------------------------------------------------------------------------

    def _run_call(self, call: _Call, retracts: Sequence[str], upserts: Sequence[Fact],
                  event: Fact | None) -> None:
        for fid in retracts:
            self._retract(call, fid, dispatch=True)
            self._raise_failure(call)
        for fact in upserts:
            self._upsert(call, fact, dispatch=True)
            self._raise_failure(call)
        if event is not None:
            self._assert_transient(call, event)
            self._raise_failure(call)
        if call.pending:
            fid, rule = next(iter(call.pending.items()))
            binding = self.ruleset.bindings[rule]
            raise ActionFailed(rule, binding.action, f"posted {fid!r}, which no rule consumed (the storm "
                                                     "rules must decide every wake candidate)")

    def _raise_failure(self, call: _Call) -> None:
        if call.error is None:
            return
        error, binding = call.error, call.failed
        if isinstance(error, ControllerError) or not isinstance(error, Exception) or binding is None:
            raise error
        raise ActionFailed(binding.rule, binding.action, f"{type(error).__name__}: {error}") from error

    def _fire(self, rule: str, matched: dict[str, dict[str, Any]]) -> None:
        """Run one activation (called by the network's dispatch loop, inside the caller's call)."""
        call = self._call
        if call is None:
            self.stray_activations += 1  # cannot happen thread-less; counted, never silent
            return
        if call.error is not None:
            return
        binding = self.ruleset.bindings.get(rule)
        if binding is None:  # seen with durable_rules 2.0.28: an activation named after the rule set
            raise EngineFailure("dispatch", f"durable_rules returned an activation of unknown rule {rule!r}")
        try:
            for fact in matched.values():
                call.pending.pop(fact.get("id", ""), None)
            first = len(call.decisions)
            act = Activation(call.world, call.position, call.now, binding.rule, matched, first)
            effect = binding.handler(act, binding.params)
            for fid in effect.retracts:
                self._retract(call, fid, dispatch=False)
            for fact in effect.upserts:
                self._upsert(call, fact, dispatch=False)
            for i, decision in enumerate(effect.decisions, start=first):
                call.decisions.append(decision if decision.index == i else decision.model_copy(update={"index": i}))
            for posted in effect.posts:
                self._post(call, binding, posted)
        except BaseException as exc:  # noqa: BLE001 -- recorded here, re-raised by the caller after the engine returns
            call.error, call.failed = exc, binding

    # -- fact operations ------------------------------------------------------------------------------------

    def _retract(self, call: _Call, fid: str, *, dispatch: bool) -> None:
        memory = call.memory
        before = memory.facts.get(fid)
        if before is None:
            return
        call.journal.append((fid, before))
        del memory.facts[fid]
        memory.hashes.pop(_cached_hash(fid), None)
        self._network.retract(call.world, fid, dispatch=dispatch)

    def _upsert(self, call: _Call, fact: Fact, *, dispatch: bool) -> None:
        fid = fact["id"]
        memory = call.memory
        before = memory.facts.get(fid)
        if before == fact:
            return
        if before is not None:
            self._network.retract(call.world, fid, dispatch=dispatch)
        call.journal.append((fid, before))
        self._remember(call.world, memory, fact)
        self._assert(call, fact, dispatch=dispatch)

    def _assert(self, call: _Call, fact: Fact, *, dispatch: bool) -> None:
        try:
            self._network.assert_fact(call.world, fact, dispatch=dispatch)
        except _Observed as exc:
            raise FactIdCollision(call.world, fact["id"], None) from exc

    def _assert_transient(self, call: _Call, event: Fact) -> None:
        fact = {**event, "id": self._free_id(call, event["id"])}
        call.journal.append((fact["id"], None))
        self._remember(call.world, call.memory, fact)
        self._assert(call, fact, dispatch=True)
        self._raise_failure(call)
        self._retract(call, fact["id"], dispatch=True)

    def _post(self, call: _Call, binding: Binding, event: Fact) -> None:
        call.posted += 1
        fid = self._free_id(call, f"{event['id']}.{call.posted}")  # unique within the call, short to hash
        call.pending[fid] = binding.rule
        try:
            handled = self._network.post(call.world, {**event, "id": fid})
        except _Observed as exc:
            raise FactIdCollision(call.world, fid, None) from exc
        if not handled:
            raise ActionFailed(binding.rule, binding.action,
                               f"posted {fid!r} ({event.get('kind')}), which no rule matches")

    def _free_id(self, call: _Call, base: str) -> str:
        """``base``, or ``base~n`` for the first n whose hash collides with no live or pending id."""
        taken = call.memory.hashes
        pending = {_cached_hash(p) for p in call.pending} if call.pending else set()
        candidate, n = base, 0
        while ((h := _cached_hash(candidate)) in taken and taken[h] != candidate) or h in pending:
            n += 1
            candidate = f"{base}~{n}"
        return candidate

    def _remember(self, world: str, memory: _World, fact: Fact) -> None:
        fid = fact.get("id")
        if not isinstance(fid, str) or not fid:
            raise EngineFailure("assert", f"a fact without a string id: {fact!r}")
        h = _cached_hash(fid)
        other = memory.hashes.get(h)
        if other is not None and (other != fid or fid == _state_id(world)):
            raise FactIdCollision(world, fid, other)
        memory.facts.pop(fid, None)  # the mirror keeps the engine's assertion order: a re-asserted fact goes last
        memory.facts[fid] = fact
        memory.hashes[h] = fid
        until = fact.get("until")
        if fact.get("kind") in EXPIRING_KINDS and isinstance(until, int):
            heapq.heappush(memory.expiry, (until, fid))

    def _undo(self, call: _Call) -> None:
        memory = call.memory
        for fid, before in reversed(call.journal):
            h = _cached_hash(fid)
            if before is None:
                memory.facts.pop(fid, None)
                if memory.hashes.get(h) == fid:
                    del memory.hashes[h]
            else:
                memory.facts[fid] = before
                memory.hashes[h] = fid

    # -- worlds and engine calls ------------------------------------------------------------------------------

    def _memory(self, world: str) -> _World:
        memory = self._worlds.get(world)
        if memory is not None:
            return memory
        h = _cached_hash(world)
        other = self._sids.get(h)
        if other is not None:
            raise WorldIdCollision(world, other)
        if len(self._worlds) >= MAX_WORLDS:
            raise EngineFailure("assert", f"more than {MAX_WORLDS} worlds in one host: shard the worlds")
        self._sids[h] = world
        memory = self._worlds[world] = _World()
        memory.hashes[_cached_hash(_state_id(world))] = _state_id(world)  # the engine stores the state too
        return memory

    def _check_open(self, operation: str) -> None:
        if self._closed:
            raise EngineFailure(operation, "the host is closed")
        if self.poisoned:
            raise EngineFailure(operation, "a previous call failed; rebuild a new host from the facts")


class _Observed(Exception):
    """The engine already holds a message with this id hash."""


class _Network:
    """The compiled rule set in durable_rules' C core, driven directly.

    durable's Python ``Host`` compiles the rule set and replays stored facts; the hot path calls the C
    functions the way ``Host.post``/``Ruleset.do_actions`` do, without the per-action ``Closure``,
    ``Promise``, wall-clock reads and state re-serialisation (the state is never changed). An assert from
    outside an action dispatches the activations it queued (``start_action_for_state`` then
    ``complete_and_start_action`` until none is left); one from inside an action only queues them, and
    the running dispatch loop picks them up."""

    def __init__(self, handle: int, fire: Callable[[str, dict[str, dict[str, Any]]], None]) -> None:
        self._handle = handle
        self._fire = fire

    def assert_fact(self, world: str, fact: Fact, *, dispatch: bool) -> bool:
        """False when no rule tests the fact (the engine then keeps nothing)."""
        body = _dumps({**fact, "sid": world})
        return self._result("assert", _dre.assert_fact, body, dispatch)

    def retract(self, world: str, fid: str, *, dispatch: bool) -> None:
        self._result("retract", _dre.retract_fact, _dumps({"id": fid, "sid": world}), dispatch)

    def post(self, world: str, event: Fact) -> bool:
        """Post a transient event from inside an action. False when no rule matches it."""
        body = _dumps({**event, "sid": world})
        return self._result("post", _dre.assert_event, body, False)

    def _result(self, operation: str, fn: Callable[[int, str], Any], body: str, dispatch: bool) -> bool:
        try:
            result = fn(self._handle, body)
        except Exception as exc:
            raise EngineFailure(operation, str(exc)) from exc
        code = result[0]
        if code == _NOT_HANDLED:
            return False
        if code == _OBSERVED:
            raise _Observed(body)
        if dispatch:
            self._dispatch(0 if code == _QUEUED else result[1])
        return True

    def _dispatch(self, state_handle: int) -> None:
        try:
            started = _dre.start_action_for_state(self._handle, state_handle)
            if not started:
                return
            message = started[1]
            # The world's state message is never changed by an action, so unlike durable's do_actions the
            # loop does not write it back (update_state) before completing each activation.
            while message:
                rule, matched = next(iter(orjson.loads(message).items()))  # one activation per message
                self._fire(rule, matched)
                message = _dre.complete_and_start_action(self._handle, state_handle)
        except ControllerError:
            raise
        except Exception as exc:
            raise EngineFailure("dispatch", str(exc)) from exc


def _dumps(message: Mapping[str, Any]) -> str:
    """A message as durable_rules reads it: compact JSON, non-ASCII characters as they are (what
    ``json.dumps(..., ensure_ascii=False)`` gives, several times faster). Values orjson refuses (integers
    beyond 64 bits) fall back to the standard encoder."""
    try:
        return orjson.dumps(message).decode()
    except orjson.JSONEncodeError:
        return json.dumps(message, ensure_ascii=False)


def _state_id(world: str) -> str:
    """The id durable_rules gives a world's state message (it shares the id hash space with facts)."""
    return f"sid-{world}"


def _net_changes(call: _Call) -> FactChanges:
    """The call's net change to the stored facts. ``upserted`` is in the order the engine last asserted them
    (the order its activations follow: a rebuild must load the facts in it, see ``FactChanges``), and holds
    every fact the call re-asserted, even one that ends equal to what it was (it moved in that order)."""
    initial: dict[str, Fact | None] = {}
    last: dict[str, int] = {}
    for n, (fid, before) in enumerate(call.journal):
        initial.setdefault(fid, before)
        last[fid] = n
    upserted: list[Fact] = []
    retracted: list[str] = []
    for fid in sorted(initial, key=last.__getitem__):
        before, after = initial[fid], call.memory.facts.get(fid)
        if (after or before or {}).get("kind") in TRANSIENT_KINDS:
            continue
        if after is None:
            if before is not None:
                retracted.append(fid)
        else:
            upserted.append(dict(after))
    return FactChanges(tuple(upserted), tuple(retracted))


def _blame(ruleset: RuleSet, exc: Exception) -> RuleFileError:
    """The rule durable_rules refuses to compile (each rule compiled alone), as a RuleFileError."""
    for name, rule in ruleset.definition.items():
        probe = _QuietHost()
        try:
            probe.register_rulesets({f"{ruleset.name}_probe": {name: copy.deepcopy(dict(rule))}})
        except Exception as alone:  # noqa: BLE001 -- any compile failure blames this rule
            binding = ruleset.bindings.get(name)
            file = binding.file if binding else ruleset.source
            line = binding.line if binding else None
            return RuleFileError(file, f"durable_rules cannot compile the rule: {alone}", line=line,
                                 rule=name.rpartition("/")[2])
        else:
            for rs in probe._ruleset_list:
                _dre.delete_ruleset(rs._handle)
    return RuleFileError(ruleset.source, f"durable_rules cannot compile the rule set "
                                         f"({len(ruleset.definition)} rules): {exc}")


def _noop(c: Any) -> None:
    """Placeholder action for compile probes."""


__all__ = ["MAX_WORLDS", "Binding", "CallResult", "DurableHost", "FactChanges", "RuleSet"]
