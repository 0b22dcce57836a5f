"""A worker runs the protocol for due wakes: claim with a lease, rehydrate, observe, decide, act, receipt.

Effects go through the World (PDP, then gateway) with operation ids derived from the wake id and the
effect's position, so a worker that dies after an effect committed and before the ack never repeats it:
the wake is claimed again once its lease expires, the same operation ids replay their stored results, and
the wake ends in exactly one receipt with a typed outcome (acted, no_action, denied, conflict, failed).

Every effect carries the wake's chain as its correlation id (and the operation id names the wake), so
the controller can tell how deep in a cascade the resulting events are. The ack writes the run's trace
(seed 000 §55: what was retrieved, used, decided and committed, cost and latency; never the agent's
reasoning) in the same transaction as the receipt.

The act and receipt half of the protocol (:class:`WakeProtocol`) is shared by the in-process
:class:`Worker`, whose adapters decide, and the pull path (:mod:`engine.protocol.pull`), where an external
agent decides: the receipts and traces of both are written by the same code.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import orjson

from engine.errors import (
    ConflictError,
    InvalidInput,
    OperationConflict,
    PMWError,
    PolicyDenied,
    PolicyEpochChanged,
    PolicyUnavailable,
    StaleRead,
)
from engine.models.agents import Agent
from engine.models.common import ID_PATTERN, JsonValue
from engine.models.receipts import Decision, Outcome, Receipt
from engine.models.traces import TraceBody
from engine.models.trusted import trusted
from engine.models.wakes import Wake
from engine.protocol.adapters import AgentAdapter, AgentDecision, Effect
from engine.world import Cause, World
from engine.world.book import RuntimeBook
from engine.world.core import PlannedBatch, PlannedDenied
from engine.world.projection import WorldView
from engine.world.read_set import ReadSetFence, projection_fence, world_key
from store import BatchRefused, CommitOutcome, WakeFence, WriteRequest

DEFAULT_LEASE_S = 30.0
_REF = re.compile(ID_PATTERN)
MAX_TRACE_REFS = 200


class EpochMoved(Exception):
    """A write of this worker was decided under a policy epoch that is no longer the world's (another process
    reloaded the policy). Nothing of that write was committed; the wake (if one was claimed) stays leased to
    this worker. The runner brings its PDP to the new epoch and runs the wake again: its recorded decision
    replays and the effects already committed return their stored results, so nothing is applied twice."""

    def __init__(self, wake: Wake | None, cause: PolicyEpochChanged) -> None:
        super().__init__(cause.message)
        self.wake = wake
        self.cause = cause


class SimulatedCrash(Exception):
    """Raised by a worker told to crash (simulations, crash tests): it stops after the effects and before
    the ack, exactly as a killed process would. The wake stays leased; nothing else is undone."""


@dataclass
class EffectVerdict:
    """What became of one effect of a decision, as the receipt and the trace list it: ``verdict`` is
    ``committed``, ``denied``, ``conflict`` or ``failed`` (with ``reason``), ``not_committed`` (allowed, but
    another effect was refused: nothing of the decision committed) or ``not_attempted`` (after the refused one)."""

    effect: str
    verdict: str = "not_attempted"
    reason: str | None = None

    def as_json(self) -> dict[str, JsonValue]:
        return {"effect": self.effect, "verdict": self.verdict, "reason": self.reason}


@dataclass(frozen=True)
class Cycle:
    """One wake carried through the protocol."""

    wake: Wake
    decision: AgentDecision | None
    receipt: Receipt


@dataclass
class PlannedAct:
    """A decision's effects and ack as :meth:`WakeProtocol._plan` planned them in a read transaction: the batch
    to commit, or the ack to run instead (no action, or a refusal met while planning)."""

    wake: Wake
    decided: AgentDecision | None  # None: an ack without a decision (``ack``)
    started: int
    shown: Shown
    read_fence: ReadSetFence | None = None
    verdicts: list[EffectVerdict] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)  # the batch's writes of each effect
    batch: PlannedBatch | None = None
    finished: Cycle | None = None  # the ack as planned: its receipt is what the commit writes
    ack: Callable[[], Cycle] | None = None
    crash: bool = False  # crash_before_ack: the batch has the effects only


@dataclass(frozen=True)
class Shown:
    """What a run was shown, as its trace reports it: the references of the projection (ids, never contents)
    and the size of the projection as JSON; and what the decision rests on: the read token of the
    projection's state (``engine.world.read_set``) and the fence the decision's effects commit under."""

    retrieved: list[str]
    context_bytes: int
    read_token: str | None = None
    read_fence: ReadSetFence | None = None

    @classmethod
    def of(cls, view: WorldView | None, *, key: bytes | None = None) -> Shown:
        """What ``view`` showed; its read token signed with the world's ``key`` (``None``: this process's)."""
        if view is None:
            return cls([], 0)
        token, fence = projection_fence(view.state, key=key)
        return cls(_retrieved(view), len(orjson.dumps(view.model_dump(mode="json"))), token, fence)

    def fence_for(self, reads: list[str] | None) -> ReadSetFence | None:
        """The fence of the part of this projection a decision says it rests on (``AgentDecision.reads``;
        ``None``: all of it); ``InvalidInput`` for a key it did not show."""
        return (self.read_fence or ReadSetFence(())).narrowed(reads)


class WakeProtocol:
    """The act and receipt half of the protocol for wakes leased to ``worker_id``: carry a decision's effects
    out as the wake's target agent (operation ids ``<wake_id>:<n>``, the wake's chain as correlation id) and
    ack with one receipt and the run's trace. The caller has recorded the decision (``book.record_decision``)
    before calling :meth:`act`."""

    def __init__(self, book: RuntimeBook, worker_id: str) -> None:
        self.book = book
        self.world = book.world
        self.worker_id = worker_id
        # Crash points (SimulatedCrash; simulations and crash tests), each counted down once per crash:
        # crash_before_commit: after the decision is recorded and the effects are planned, before the one
        # transaction of effects and ack (nothing of the cycle is committed; the retry replays the decision).
        # crash_before_ack: as a worker of before atomic effects would have died: its effects committed
        # (together), its ack not (the retry's operation ids return the effects' stored results).
        self.crash_before_commit = 0
        self.crash_before_ack = 0

    def act(self, wake: Wake, agent_id: str, decided: AgentDecision, started: int, shown: Shown) -> Cycle:
        """Apply ``decided``'s effects as ``agent_id`` and ack ``wake``, all or nothing: every effect is
        planned, all their checks and the ack's go to the PDP together, and the effects, the receipt, the
        trace and the ack commit in ONE transaction. A denied, conflicting or failing effect commits no
        effect: the wake is acked ``denied``, ``conflict`` or ``failed``, the reason names the effect, and the
        receipt's ``payload.effects`` (and the trace's decision) lists every effect with its verdict. Else
        ``acted`` (``no_action`` for that decision or no effects). Raises ``PolicyUnavailable`` and
        ``PolicyEpochChanged`` with nothing written: the wake stays leased (its decision stays recorded).

        Fenced by the claim: every commit of the cycle is refused (``WakeLeaseLost``, nothing of the cycle
        written) unless ``wake`` is still claimed by this worker under the same claim (``wake.attempts``)
        with its lease running, checked in the commit's own transaction (:mod:`store.fences`)."""
        with self._fenced(wake):
            with self.world.reading():  # the plan's reads: one read transaction
                planned = self._plan(wake, agent_id, decided, started, shown)
            return self._carry(planned)

    def _fenced(self, wake: Wake) -> AbstractContextManager[None]:
        """This thread's commits refused unless ``wake``'s claim (this worker, its attempt) still holds."""
        return self.book.store.fenced(WakeFence(wake.wake_id, self.worker_id, wake.attempts, self.world.clock.now_us))

    def shown(self, view: WorldView | None) -> Shown:
        """What ``view`` showed, its read token signed with this world's key (valid in every process)."""
        return Shown.of(view, key=world_key(self.book.store.read))

    def _commit_effects(self, wake: Wake, batch: PlannedBatch, read_fence: ReadSetFence | None,
                        record: WriteRequest | None) -> list[CommitOutcome]:
        """Commit the planned effects and ack of ``wake`` under ``read_fence`` (the part of the projection the
        decision rests on; ``None``: none): ``StaleRead`` if any key of it changed since, nothing written. A
        retry whose effects are already in the ledger (its worker died after committing them, before its ack)
        only replays them: it commits without the read set, which its own effects may have moved on.
        ``record``: the decision's record (``book.plan_decision``), committed first in the same transaction;
        the outcomes returned are the batch's."""
        def commit() -> list[CommitOutcome]:
            if record is None:
                return self.world.commit_planned(batch)
            return self.book.commit_decided(record, batch)[1:]
        if read_fence is None:
            return commit()
        try:
            with self.book.store.fenced(read_fence):
                return commit()
        except StaleRead:
            if self.book.store.operation(f"{wake.wake_id}:0") is None:
                raise
            return commit()

    def _plan(self, wake: Wake, agent_id: str, decided: AgentDecision, started: int, shown: Shown) -> PlannedAct:
        """Plan ``decided``'s effects and the ack as ``agent_id`` (inside the caller's read transaction):
        nothing is written here; :meth:`_carry` commits the plan (or acks a refusal) after the transaction."""
        planned = PlannedAct(wake, decided, started, shown)
        try:  # the part of the projection the decision says it rests on (``decided.reads``)
            planned.read_fence = shown.fence_for(decided.reads if decided.effects else [])
        except InvalidInput as bad:
            why = bad.message
            planned.verdicts = [EffectVerdict(e.effect) for e in decided.effects]
            planned.ack = lambda: self._refused(wake, decided, planned.verdicts, 0, Outcome.FAILED, why, started,
                                                shown, whole=True)
            return planned
        if decided.decision is Decision.NO_ACTION or not decided.effects:
            planned.ack = lambda: self._finish(wake, decided, Outcome.NO_ACTION, decided.reason, started, shown=shown)
            return planned
        verdicts = planned.verdicts = [EffectVerdict(e.effect) for e in decided.effects]
        chain = wake.payload.get("chain")
        cause = Cause(causation_id=wake.cause_event_id,
                      correlation_id=chain if isinstance(chain, str) and chain else wake.wake_id)
        refs: list[str] = []
        refusal: tuple[int, PMWError] | None = None
        with self.world.planning() as batch:
            for index, effect in enumerate(decided.effects):
                op_id = f"{wake.wake_id}:{index}"
                first = len(batch)
                try:
                    ref = self._apply(agent_id, effect, op_id, cause)
                except (PolicyEpochChanged, PolicyUnavailable):
                    raise  # decided under a stale epoch, or no answer: nothing written, the wake stays leased
                except PMWError as exc:
                    refusal = (index, exc)
                    break
                planned.spans.append((first, len(batch)))
                verdicts[index].verdict = "planned"
                refs.append(ref if _REF.match(ref) else op_id)  # e.g. a state key with "/": its operation
            planned.crash = self.crash_before_ack > 0
            if refusal is None and not planned.crash:
                if self.crash_before_commit > 0:
                    self.crash_before_commit -= 1
                    raise SimulatedCrash(f"{self.worker_id} crashed before committing {wake.wake_id}")
                for v in verdicts:
                    v.verdict = "committed"
                planned.finished = self._finish(wake, decided, Outcome.ACTED, decided.reason, started, refs, shown,
                                                verdicts)
        if refusal is not None:  # planning refused an effect: the batch is dropped, the wake acked alone
            index, error = refusal
            planned.ack = lambda: self._refused(wake, decided, verdicts, index, _outcome_of(error), error.message,
                                                started, shown)
        else:
            planned.batch = batch
        return planned

    def _carry(self, planned: PlannedAct, record: WriteRequest | None = None) -> Cycle:
        """Commit what :meth:`_plan` planned (after its read transaction), with ``record`` (the decision's
        record, ``book.plan_decision``) first in the same transaction; or ack the refusal the plan or the
        commit met (the record committed with that ack)."""
        wake, decided, started, shown, verdicts = (planned.wake, planned.decided, planned.started, planned.shown,
                                                   planned.verdicts)
        if planned.batch is None:
            assert planned.ack is not None, "a plan without a batch acks"
            return self._acked(planned.ack, record)
        assert decided is not None, "a planned batch carries a decision"
        try:
            outcomes = self._commit_effects(wake, planned.batch, planned.read_fence, record)
        except StaleRead as stale:  # another writer moved what the decision read: no effect committed
            why = stale.message
            return self._acked(lambda: self._refused(wake, decided, verdicts, 0, Outcome.CONFLICT, why, started,
                                                     shown, whole=True), record)
        except PlannedDenied as denied:
            spans = planned.spans
            for index, (lo, hi) in enumerate(spans):
                found = next((denied.denied[n] for n in range(lo, hi) if n in denied.denied), None)
                verdicts[index].verdict, verdicts[index].reason = ("denied", found.message) if found else (
                    "not_committed", None)
            ack_denied = [d for n, d in denied.denied.items() if spans and n >= spans[-1][1]]
            if ack_denied:
                raise ack_denied[0] from denied  # the ack itself is denied (as a single ack would be)
            index = next(i for i, v in enumerate(verdicts) if v.verdict == "denied")
            return self._acked(lambda: self._refused(wake, decided, verdicts, index, Outcome.DENIED,
                                                     verdicts[index].reason or "", started, shown), record)
        except BatchRefused as refused:
            hit = next((i for i, (lo, hi) in enumerate(planned.spans) if lo <= refused.index < hi), None)
            if hit is None or isinstance(refused.error, PolicyEpochChanged):
                raise refused.error from refused  # the ack's own refusal, or a stale epoch: as a single write's
            error = refused.error
            return self._acked(lambda: self._refused(wake, decided, verdicts, hit, _outcome_of(error), error.message,
                                                     started, shown), record)
        if planned.crash:  # a world left by a worker that committed its effects and died before its ack
            self.crash_before_ack -= 1
            raise SimulatedCrash(f"{self.worker_id} crashed before acking {wake.wake_id}")
        return _committed(planned.finished, outcomes[-1])

    def _acked(self, ack: Callable[[], Cycle], record: WriteRequest | None) -> Cycle:
        """Run ``ack`` (an ack of the wake alone); with ``record``, planned and committed after it in ONE
        transaction (the decision's record first)."""
        if record is None:
            return ack()
        with self.world.reading(), self.world.planning() as batch:
            planned = ack()
        try:
            outcomes = self.book.commit_decided(record, batch)
        except BatchRefused as refused:  # the ack's own refusal (a stale epoch ...), as a single ack raises it
            raise refused.error from refused
        except PlannedDenied as denied:  # the ack itself denied, as a single ack's denial
            raise next(iter(denied.denied.values())) from denied
        return _committed(planned, outcomes[-1])

    def _refused(self, wake: Wake, decided: AgentDecision, verdicts: list[EffectVerdict], index: int,
                 outcome: Outcome, why: str, started: int, shown: Shown, *, whole: bool = False) -> Cycle:
        """Ack ``wake`` ``outcome`` for effect ``index``'s refusal (``why``): no effect was committed. Other
        effects keep a verdict of their own (``denied`` by the same PDP answer); the rest are listed as
        ``not_committed`` (planned and allowed) or ``not_attempted``. ``whole``: the decision as a whole was
        refused (its read set moved on: ``stale_read``), every effect ``conflict`` with ``why``."""
        if whole:
            for v in verdicts:
                v.verdict, v.reason = outcome.value, why
            return self._finish(wake, decided, outcome, f"{why} [the read set of the decision]"[:4000],
                                started, [], shown, verdicts)
        for n, v in enumerate(verdicts):
            if n == index:
                v.verdict, v.reason = outcome.value, why
            elif v.verdict in ("planned", "committed", "not_committed"):
                v.verdict = "not_committed"
                v.reason = f"effect {index} ({verdicts[index].effect}) was {outcome.value}: no effect committed"
        return self._finish(wake, decided, outcome, f"{why} [effect {index} ({verdicts[index].effect})]"[:4000],
                            started, [], shown, verdicts)

    def deny(self, wake: Wake, reason: str, started: int) -> Cycle:
        """Ack ``wake`` ``denied`` without a decision: its agent may no longer be rehydrated or observed
        (fenced by the claim, as :meth:`act`)."""
        with self._fenced(wake):
            return self._finish(wake, None, Outcome.DENIED, reason, started)

    def _apply(self, actor: str, effect: Effect, op_id: str, cause: Cause) -> str:
        """Carry out one effect as ``actor``: its command through ``world.execute`` (the PDP, then the
        gateway); returns what it wrote (the effect's ref of the result, else the operation id)."""
        result = self.world.execute(actor, effect.command(), op_id=op_id, cause=cause)
        return effect.ref(result) or op_id

    def _finish(self, wake: Wake, decided: AgentDecision | None, outcome: Outcome, reason: str | None,
                started: int, refs: list[str] | None = None, shown: Shown | None = None,
                verdicts: list[EffectVerdict] | None = None) -> Cycle:
        """Ack ``wake`` (op id ``<wake_id>:ack``: a retried ack returns the first receipt) with its trace;
        ``verdicts``: every effect's, listed by the receipt (``payload.effects``) and the trace."""
        shown = shown or Shown([], 0)
        listed = [v.as_json() for v in verdicts] if verdicts else []
        deferred = wake.payload.get("deferred")  # a wake the cooldown deferred says so on its receipt and trace
        said: dict[str, Any] = {"deferred": deferred} if isinstance(deferred, dict) else {}
        # not validated here: ack_wake validates the trace's fields as it validates any caller's
        trace = trusted(TraceBody)({
            "worker_id": self.worker_id, "retrieved_refs": shown.retrieved[:MAX_TRACE_REFS],
            "tools": [e.effect for e in decided.effects] if decided else [],
            "decisions": [{"decision": decided.decision.value, "reason": decided.reason,
                           "effects": len(decided.effects), **({"verdicts": listed} if listed else {}), **said}]
            if decided else [],
            "commits": refs or [], "cost": {"context_items": len(shown.retrieved), "context_bytes": shown.context_bytes,
                                            "effects": len(decided.effects) if decided else 0},
            "started_at_us": started, "result": reason})
        receipt = self.world.ack_wake(
            self.worker_id, wake.wake_id, (decided.decision if decided else Decision.NO_ACTION).value,
            outcome=outcome.value, reason=reason, action_refs=refs or [], op_id=f"{wake.wake_id}:ack",
            observed_state_version=wake.base_state_version, trace=trace,
            payload={**({"effects": listed} if listed else {}), **said})
        return Cycle(wake=wake, decision=decided, receipt=receipt)


class Worker(WakeProtocol):
    """Runs wakes for the agents it has adapters for, and claims no other agent's wakes (they wait for the
    worker or external agent that runs them). ``worker_id`` names its leases. The worker is runtime
    machinery: it holds the runtime's book (to record decisions) and acts through ``book.world``."""

    def __init__(self, book: RuntimeBook, worker_id: str, adapters: dict[str, AgentAdapter], *,
                 lease_seconds: float = DEFAULT_LEASE_S) -> None:
        super().__init__(book, worker_id)
        self.adapters = adapters
        self.lease_seconds = lease_seconds

    def run_once(self, agent_id: str | None = None) -> Cycle | None:
        """Claim and run the most urgent due wake of an agent this worker has an adapter for (of
        ``agent_id``, if given); ``None`` if none is due (always, without adapters or for an agent this
        worker has no adapter for: nothing is claimed)."""
        agents = sorted(self.adapters) if agent_id is None else [agent_id] if agent_id in self.adapters else []
        if not agents:
            return None
        try:
            wake = self.world.claim_wake(self.worker_id, agent_ids=agents, lease_seconds=self.lease_seconds)
        except PolicyEpochChanged as exc:
            raise EpochMoved(None, exc) from exc
        if wake is None:
            return None
        return self.run_wake(wake)

    def run_until_idle(self, max_cycles: int = 1000) -> list[Cycle]:
        """Run due wakes until none is due (bounded)."""
        cycles = []
        for _ in range(max_cycles):
            cycle = self.run_once()
            if cycle is None:
                break
            cycles.append(cycle)
        return cycles

    def run_wake(self, wake: Wake) -> Cycle:
        """Carry ``wake`` (leased to this worker) through the protocol to its receipt. Raises
        :class:`EpochMoved` when a write was decided under an epoch that is no longer current."""
        try:
            return self._run_wake(wake)
        except PolicyEpochChanged as exc:
            raise EpochMoved(wake, exc) from exc

    def _run_wake(self, wake: Wake) -> Cycle:
        started = self.world.clock.now_us()
        adapter = self.adapters.get(wake.target_agent)
        if adapter is None:  # a wake leased to this worker some other way (run_wake given any wake)
            with self._fenced(wake):
                return self._finish(wake, None, Outcome.FAILED, f"no adapter for {wake.target_agent}", started)
        if not getattr(adapter, "record_first", True):
            return self._run_at_once(wake, adapter, started)
        try:
            with self.world.reading():  # rehydrate, observe and the ledger: one read transaction
                agent, view = observe(self.world, wake)
                recorded = self.book.recorded_decision(wake.wake_id)  # a retried wake replays its decision
        except PolicyDenied as exc:
            return self.deny(wake, exc.message, started)
        if recorded is not None:
            decided = AgentDecision.model_validate(recorded.decision)
        else:
            decided = adapter.run(agent, view, wake)                                   # decide
            mine = decided.model_dump(mode="json")
            first = self.book.record_decision(self.worker_id, wake.wake_id, agent.agent_id, mine)
            if first.decision != mine:  # another worker's, if it decided first
                decided = AgentDecision.model_validate(first.decision)
        return self.act(wake, agent.agent_id, decided, started, self.shown(view))

    def _run_at_once(self, wake: Wake, adapter: AgentAdapter, started: int) -> Cycle:
        """The cycle of an adapter that may be asked again (``record_first = False``: a rule agent): rehydrate,
        observe, the ledger, decide and plan in ONE read transaction, then the decision's record, its effects,
        the receipt, the trace and the ack in ONE write transaction. A crash before that commit leaves nothing
        of the decision (the retry decides again, on the world as it then is); a retried wake whose decision
        was recorded by a worker that records first replays it."""
        with self._fenced(wake):
            denied: str | None = None
            with self.world.reading():
                try:
                    agent, view = observe(self.world, wake)
                except PolicyDenied as exc:  # it may no longer be rehydrated or observed
                    denied = exc.message
                else:
                    recorded = self.book.recorded_decision(wake.wake_id)
                    record: WriteRequest | None = None
                    if recorded is not None:
                        decided = AgentDecision.model_validate(recorded.decision)
                    else:
                        decided = adapter.run(agent, view, wake)                           # decide
                        record = self.book.plan_decision(self.worker_id, wake.wake_id, agent.agent_id,
                                                         decided.model_dump(mode="json"))
                    shown = self.shown(view)
                    planned = self._plan(wake, agent.agent_id, decided, started, shown)
            if denied is not None:
                return self._finish(wake, None, Outcome.DENIED, denied, started)
            try:
                return self._carry(planned, record)
            except OperationConflict:  # another worker recorded this wake's decision since we read: it stands
                first = self.book.recorded_decision(wake.wake_id)
                if first is None:
                    raise
        return self.act(wake, agent.agent_id, AgentDecision.model_validate(first.decision), started, shown)


def _committed(planned: Cycle | None, ack: CommitOutcome) -> Cycle:
    """The cycle whose ack committed as ``ack``: as planned, or for a retried ack the receipt its first
    commit wrote."""
    assert planned is not None, "a committed cycle planned its ack"
    if ack.replayed:
        return dataclasses.replace(planned, receipt=Receipt.model_validate(ack.result))
    return planned


def _outcome_of(error: PMWError) -> Outcome:
    """The receipt's outcome for an effect refused with ``error``."""
    if isinstance(error, PolicyDenied):
        return Outcome.DENIED
    return Outcome.CONFLICT if isinstance(error, ConflictError) else Outcome.FAILED


def observe(world: World, wake: Wake) -> tuple[Agent, WorldView]:
    """Rehydrate and observe for ``wake``: its target agent's row and projection, both read as that agent
    (through the PDP: ``PolicyDenied`` if it may no longer read them)."""
    agent = world.get_agent(wake.target_agent, actor=wake.target_agent)  # rehydrate, re-checked
    return agent, world.project_world(wake.target_agent)                 # observe


def _retrieved(view: WorldView | None) -> list[str]:
    """The references of what the run was shown (ids, never contents)."""
    if view is None:
        return []
    return [*(f"task:{t.task_id}" for t in view.tasks), *(f"state:{s.key}" for s in view.state),
            *(f"memory:{m.memory_id}" for m in (*view.shared_facts, *view.working_memory)),
            *(f"handoff:{h.handoff_id}" for h in view.handoffs), *(f"room:{r.room_id}" for r in view.rooms),
            *(f"artifact:{a.artifact_id}" for a in view.artifacts)]


__all__ = ["Cycle", "EffectVerdict", "EpochMoved", "PlannedAct", "Shown", "SimulatedCrash", "WakeProtocol", "Worker",
           "observe"]
