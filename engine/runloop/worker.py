"""The run loop's worker: the protocol's :class:`~engine.protocol.worker.Worker`, honouring the decision
envelope (:mod:`engine.runloop.envelope`) and the layered wake (:mod:`engine.runloop.wake_depth`).

For each wake it claims:

1. **classify** (layer 1): a wake carrying ``payload.signals`` gets a depth from :func:`wake_depth` under the
   worker's thresholds; a wake without signals is a full run. A wake with a recorded decision (a retry)
   reached its full run already and runs it again.
2. **monitor** (layer 0): the wake is acked ``monitored``, nothing read, the agent not run; the receipt's
   ``payload.wake_layer`` says why.
3. **check** (layer 2): the agent is rehydrated (read as itself, through the PDP) and the adapter's optional
   ``check(agent_state, event)`` answers whether the wake is worth acting on (a ``bool``, or a
   :class:`WakeCheck` with its reason): no, and the wake is acked ``no_action`` with the check's reason; yes
   (or an adapter without ``check``), and it goes on to
4. **full run** (layer 3): today's cycle (observe the projection, decide, record the decision, act, ack), the
   decision read as an envelope: each outcome's writes are planned with the receipt in one batch, decided by
   the PDP together and committed together (:meth:`WakeProtocol.act`).

A legacy decision on a wake without signals is carried out by the protocol exactly as before (same record,
same receipt). Otherwise the receipt's ``payload`` adds ``envelope`` (the outcome asked for, each action's
side-effect class, the approval state, the evidence level, the recovery path, and the ids written: draft
refs, approval, handoff, next wake) and ``wake_layer`` (depth, signals, score, whether a check ran).

An adapter's answer that is not a valid decision (or an envelope the runtime refuses: a declared approval
state the actions contradict, a deferral in the past) is acked ``failed`` with the ``InvalidInput`` message;
nothing else is written.

The envelope-carrying half (lower a recorded envelope, carry its writes out, ack with its receipt) is
:class:`EnvelopeProtocol`, which the pull path for agents in other processes uses too
(:class:`~engine.protocol.pull.ExternalAgents`; there an envelope the runtime refuses is ``InvalidInput``
to its synchronous caller, nothing recorded). A recorded envelope is lowered at the time it was recorded, so
a replay (its worker died between its writes and its ack) writes exactly what the first attempt wrote.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from engine.errors import InvalidInput, OperationConflict, PolicyDenied
from engine.models.agents import Agent
from engine.models.receipts import Decision, Outcome
from engine.models.traces import TraceBody
from engine.models.wakes import Wake
from engine.protocol.adapters import AgentAdapter, AgentDecision, AgentEffect, CallableAdapter
from engine.protocol.worker import (
    DEFAULT_LEASE_S,
    MAX_TRACE_REFS,
    Cycle,
    EffectVerdict,
    PlannedAct,
    Shown,
    WakeProtocol,
    Worker,
    observe,
)
from engine.runloop.envelope import DecisionEnvelope, EnvelopeOutcome, Lowered, contracts_of, lower, parse
from engine.runloop.wake_depth import DepthThresholds, WakeDepth, score, signals_of, wake_depth
from engine.world import Cause
from engine.world.book import RuntimeBook
from engine.world.decisions import DecisionRecord
from engine.world.projection import WorldView
from store import WriteRequest


@dataclass(frozen=True)
class WakeCheck:
    """A lightweight check's answer: is the wake worth a full run, and why."""

    worth_acting: bool
    reason: str = ""


@runtime_checkable
class CheckingAdapter(Protocol):
    """An adapter with the optional lightweight check (layer 2): cheap, no projection, no writes."""

    def check(self, agent_state: Agent, event: Wake) -> WakeCheck | bool: ...


@runtime_checkable
class EnvelopeAdapter(Protocol):
    """An adapter that answers with an envelope (``run`` may also return one, or today's decision)."""

    def decide(self, agent_state: Agent, world_view: WorldView, event: Wake) -> DecisionEnvelope: ...


def decide(adapter: AgentAdapter, agent: Agent, view: WorldView, wake: Wake) -> DecisionEnvelope:
    """``adapter``'s decision as an envelope. A :class:`CallableAdapter`'s function may return envelope JSON
    (its context is the one ``CallableAdapter`` builds); ``decide`` is preferred to ``run`` when present."""
    if isinstance(adapter, EnvelopeAdapter):
        return parse(adapter.decide(agent, view, wake))
    if isinstance(adapter, CallableAdapter):
        context = {"agent": agent.model_dump(mode="json"), "view": view.model_dump(mode="json"),
                   "wake": wake.model_dump(mode="json")}
        return parse(adapter.fn(context))
    return parse(adapter.run(agent, view, wake))


@dataclass
class _Said:
    """What the cycle in progress adds to its receipt: the envelope's account and the wake's layer."""

    decision: Decision
    outcome: Outcome | None = None  # on success; None: as the protocol says (acted / no_action)
    envelope: dict[str, Any] | None = None
    layer: dict[str, Any] | None = None
    roles: Mapping[int, str] = field(default_factory=dict)
    written: dict[str, list[str]] = field(default_factory=dict)  # role -> refs (planned; kept on success)


class EnvelopeProtocol(WakeProtocol):
    """The act-and-ack protocol honouring decision envelopes: :meth:`carry` carries a recorded envelope out
    for a wake leased to ``worker_id`` and acks it with the envelope's receipt. Shared by
    :class:`EnvelopeWorker` (the run loop) and the pull path's workers
    (:class:`~engine.protocol.pull.ExternalAgents`), so an envelope has the same writes, receipt and
    refusals whoever decided it. Calls on one instance are serialised by its caller (a cycle's account is
    kept on the instance while it runs)."""

    _said: _Said | None = None  # the cycle in progress's account (None: the protocol's own receipt)

    # -- outcomes -------------------------------------------------------------------------------------------

    def lower(self, wake: Wake, agent_id: str, envelope: DecisionEnvelope, now_us: int | None = None) -> Lowered:
        """What ``envelope`` writes for ``wake`` of ``agent_id`` at ``now_us`` (default: now)
        (:func:`~engine.runloop.envelope.lower`, its contracts read as the agent); ``InvalidInput`` for an
        envelope the runtime refuses. Writes nothing."""
        return lower(envelope, wake, agent_id, self.world.clock.now_us() if now_us is None else now_us,
                     contracts_of(self.world.action_contract, agent_id, envelope), self.book.store.read)

    def decided_at(self, wake_id: str) -> int | None:
        """When ``wake_id``'s decision was recorded (world time; ``None``: it was not)."""
        row = self.book.store.read.get("events", op_id=f"{wake_id}:decide")
        return None if row is None else int(row["created_at_us"])

    def carry(self, wake: Wake, agent_id: str, envelope: DecisionEnvelope, started: int, shown: Shown,
              layer: dict[str, Any] | None = None) -> Cycle:
        """Carry out ``envelope`` (recorded already) for ``wake`` as ``agent_id`` and ack it: today's decision
        on a wake without a layer exactly as the protocol does (:meth:`act`); any other through
        :meth:`lower` at the time the decision was recorded (so a replay's writes are the first attempt's:
        a deferral's time, the requests of its operation ids), its writes planned with the receipt in the
        wake's one batch, the receipt's ``payload`` adding ``envelope`` (and ``wake_layer``: ``layer``). An
        envelope :meth:`lower` refuses is acked ``failed`` with nothing else written."""
        with self._fenced(wake):
            with self.world.reading():  # the plan's reads: one read transaction
                planned, said = self._plan_envelope(wake, agent_id, envelope, started, shown, layer,
                                                    self.decided_at(wake.wake_id))
            return self._carry_said(planned, said)

    def _plan_envelope(self, wake: Wake, agent_id: str, envelope: DecisionEnvelope, started: int, shown: Shown,
                       layer: dict[str, Any] | None, decided_at: int | None) -> tuple[PlannedAct, _Said | None]:
        """What :meth:`carry` plans, inside the caller's read transaction (nothing written): the protocol's
        plan of the decision ``envelope`` lowers to at ``decided_at`` (when it was decided), or the ``failed``
        ack of an envelope :meth:`lower` refuses; with the account the receipt adds (``None``: the protocol's)."""
        if envelope.legacy and layer is None:
            return self._plan(wake, agent_id, envelope.as_agent_decision(), started, shown), None  # today's cycle
        try:
            lowered = self.lower(wake, agent_id, envelope, decided_at)
        except InvalidInput as bad:
            why = f"envelope refused: {bad.message}"
            refused = _Said(envelope.receipt_decision(), Outcome.FAILED, layer=layer,
                            envelope={"outcome": envelope.effective.value})
            return PlannedAct(wake, None, started, shown,
                            ack=lambda: self._finish(wake, None, Outcome.FAILED, why, started)), refused
        said = _Said(lowered.decision, lowered.outcome, None if envelope.legacy else lowered.summary, layer,
                     lowered.roles)
        self._said = said
        try:
            return self._plan(wake, agent_id, lowered.agent_decision(envelope.reason, envelope.reads), started,
                              shown), said
        finally:
            self._said = None

    def _carry_said(self, planned: PlannedAct, said: _Said | None, record: WriteRequest | None = None) -> Cycle:
        """The protocol's commit of ``planned`` (with ``record`` first: ``book.plan_decision``), the receipt
        adding ``said``'s account."""
        self._said = said
        try:
            return self._carry(planned, record)
        finally:
            self._said = None

    def _ack_only(self, wake: Wake, said: _Said, reason: str, started: int) -> Cycle:
        """Ack ``wake`` with nothing but its receipt (and trace), as ``said`` says (fenced by the claim)."""
        self._said = said
        try:
            with self._fenced(wake):
                return self._finish(wake, None, said.outcome or Outcome.NO_ACTION, reason, started)
        finally:
            self._said = None

    def _apply(self, actor: str, effect: AgentEffect, op_id: str, cause: Cause) -> str:
        ref = super()._apply(actor, effect, op_id, cause)
        said = self._said
        if said is not None:
            role = said.roles.get(int(op_id.rsplit(":", 1)[1]))
            if role is not None:
                said.written.setdefault(role, []).append(ref)
        return ref

    def _finish(self, wake: Wake, decided: AgentDecision | None, outcome: Outcome, reason: str | None,
                started: int, refs: list[str] | None = None, shown: Shown | None = None,
                verdicts: list[EffectVerdict] | None = None) -> Cycle:
        """The protocol's ack, with what the envelope and the layer add (module docstring); without them,
        the protocol's own."""
        said = self._said
        if said is None:
            return super()._finish(wake, decided, outcome, reason, started, refs, shown, verdicts)
        carried = outcome in (Outcome.ACTED, Outcome.NO_ACTION) and decided is not None
        if carried and said.outcome is not None:
            outcome = said.outcome
        shown = shown or Shown([], 0)
        listed = [v.as_json() for v in verdicts] if verdicts else []
        deferred = wake.payload.get("deferred")
        extra: dict[str, Any] = {"deferred": deferred} if isinstance(deferred, dict) else {}
        if said.envelope is not None:
            extra["envelope"] = {**said.envelope, **({"written": said.written} if carried and said.written else {})}
        if said.layer is not None:
            extra["wake_layer"] = said.layer
        effects = decided.effects if decided else []
        next_wake = said.written.get("next_wake", [None])[0] if carried else None
        trace = TraceBody(
            worker_id=self.worker_id, retrieved_refs=shown.retrieved[:MAX_TRACE_REFS],
            tools=[e.effect for e in effects],
            decisions=[{"decision": said.decision.value, "reason": decided.reason if decided else reason,
                        "effects": len(effects), **({"verdicts": listed} if listed else {}), **extra}],
            commits=refs or [], started_at_us=started, result=reason,
            cost={"context_items": len(shown.retrieved), "context_bytes": shown.context_bytes,
                  "effects": len(effects)})
        receipt = self.world.ack_wake(
            self.worker_id, wake.wake_id, said.decision.value, outcome=outcome.value, reason=reason,
            action_refs=refs or [], next_wake=next_wake, op_id=f"{wake.wake_id}:ack",
            observed_state_version=wake.base_state_version,
            trace=trace, payload={**({"effects": listed} if listed else {}), **extra})
        return Cycle(wake=wake, decision=decided, receipt=receipt)


class EnvelopeWorker(EnvelopeProtocol, Worker):
    """A :class:`Worker` that honours decision envelopes and layered wakes (module docstring)."""

    def __init__(self, book: RuntimeBook, worker_id: str, adapters: dict[str, AgentAdapter], *,
                 lease_seconds: float = DEFAULT_LEASE_S, thresholds: DepthThresholds | None = None) -> None:
        super().__init__(book, worker_id, adapters, lease_seconds=lease_seconds)
        self.thresholds = thresholds or DepthThresholds()
        self._said = None

    # -- layers ---------------------------------------------------------------------------------------------

    def classify(self, wake: Wake) -> dict[str, Any] | None:
        """The wake's layer as its receipt records it (``depth`` and what decided it), or ``None`` for a wake
        without signals (a full run). ``InvalidInput`` for signals that are not valid."""
        signals = signals_of(wake.payload)
        if signals is None:
            return None
        depth = wake_depth(signals, self.thresholds)
        return {"depth": depth.label, "layer": int(depth), "signals": signals.model_dump(mode="json"),
                "score": round(score(signals, self.thresholds), 6)}

    def _run_wake(self, wake: Wake) -> Cycle:
        started = self.world.clock.now_us()
        adapter = self.adapters.get(wake.target_agent)
        if adapter is None:
            return super()._run_wake(wake)
        try:
            layer = self.classify(wake)
        except InvalidInput as bad:
            return self._ack_only(wake, _Said(Decision.NO_ACTION, Outcome.FAILED), bad.message, started)
        # a wake without signals reads its ledger with its observation (one read transaction, below)
        recorded = self.book.recorded_decision(wake.wake_id) if layer is not None else None
        if layer is not None and recorded is None:
            if layer["depth"] == WakeDepth.MONITOR.label:
                return self._ack_only(wake, _Said(Decision.NO_ACTION, Outcome.MONITORED, layer=layer),
                                      f"passive monitor: score {layer['score']} under the check threshold", started)
            if layer["depth"] == WakeDepth.CHECK.label:
                stopped = self._check(wake, adapter, layer, started)
                if stopped is not None:
                    return stopped
        elif layer is not None:
            layer["checked"] = layer["depth"] == WakeDepth.CHECK.label  # a replay: its check said yes
        if layer is not None:
            layer["reached"] = WakeDepth.FULL.label
        if not getattr(adapter, "record_first", True):
            return self._run_at_once(wake, adapter, started, layer, recorded)
        try:
            with self.world.reading():  # rehydrate, observe (and the ledger): one read transaction
                agent, view = observe(self.world, wake)
                if layer is None:
                    recorded = self.book.recorded_decision(wake.wake_id)
        except PolicyDenied as exc:
            return self.deny(wake, exc.message, started)
        if recorded is not None:
            envelope = parse(recorded.decision)
        else:
            try:
                envelope = decide(adapter, agent, view, wake)                                # decide
            except InvalidInput as bad:
                return self._ack_only(wake, _Said(Decision.NO_ACTION, Outcome.FAILED, layer=layer),
                                      f"not a valid decision: {bad.message}", started)
            first = self.book.record_decision(self.worker_id, wake.wake_id, agent.agent_id, envelope.recorded())
            envelope = parse(first.decision)  # another worker's, if it decided first
        return self.carry(wake, agent.agent_id, envelope, started, self.shown(view), layer)

    def _run_at_once(self, wake: Wake, adapter: AgentAdapter, started: int,
                     layer: dict[str, Any] | None = None, recorded: DecisionRecord | None = None) -> Cycle:
        """The full run of an adapter that may be asked again (``record_first = False``), as the protocol's
        (:meth:`Worker._run_at_once`): rehydrate, observe, the ledger, decide, lower and plan in ONE read
        transaction; the decision's record, the envelope's writes, the receipt, the trace and the ack in ONE
        write transaction. ``recorded``: the decision a wake with a layer found recorded (a retry) before."""
        invalid: str | None = None
        denied: str | None = None
        with self._fenced(wake):
            with self.world.reading():
                try:
                    agent, view = observe(self.world, wake)
                except PolicyDenied as exc:  # it may no longer be rehydrated or observed
                    denied = exc.message
                else:
                    if layer is None:
                        recorded = self.book.recorded_decision(wake.wake_id)
                    record: WriteRequest | None = None
                    decided_at: int | None = None
                    if recorded is not None:  # a retry of a wake whose decision was recorded first: replayed
                        envelope = parse(recorded.decision)
                        decided_at = self.decided_at(wake.wake_id)
                    else:
                        try:
                            envelope = decide(adapter, agent, view, wake)                    # decide
                        except InvalidInput as bad:
                            invalid = f"not a valid decision: {bad.message}"
                        else:
                            record = self.book.plan_decision(self.worker_id, wake.wake_id, agent.agent_id,
                                                             envelope.recorded())
                            decided_at = record.created_at_us
                    shown = self.shown(view)
                    if invalid is None:
                        planned, said = self._plan_envelope(wake, agent.agent_id, envelope, started, shown, layer,
                                                            decided_at)
            if denied is not None:
                return self._finish(wake, None, Outcome.DENIED, denied, started)
            if invalid is not None:
                why = invalid
                return self._carry_said(
                    PlannedAct(wake, None, started, shown, ack=lambda: self._finish(wake, None, Outcome.FAILED, why,
                                                                                  started)),
                    _Said(Decision.NO_ACTION, Outcome.FAILED, layer=layer))
            try:
                return self._carry_said(planned, said, record)
            except OperationConflict:  # another worker recorded this wake's decision since we read: it stands
                first = self.book.recorded_decision(wake.wake_id)
                if first is None:
                    raise
        return self.carry(wake, agent.agent_id, parse(first.decision), started, shown, layer)

    def _check(self, wake: Wake, adapter: AgentAdapter, layer: dict[str, Any], started: int) -> Cycle | None:
        """Layer 2: the adapter's cheap check; the wake's receipt if it stops here, ``None`` to go on."""
        if not isinstance(adapter, CheckingAdapter):
            layer["checked"] = False  # no check in this adapter: a full run
            return None
        try:
            agent = self.world.get_agent(wake.target_agent, actor=wake.target_agent)  # rehydrate, re-checked
        except PolicyDenied as exc:
            return self.deny(wake, exc.message, started)
        answer = adapter.check(agent, wake)
        verdict = answer if isinstance(answer, WakeCheck) else WakeCheck(bool(answer))
        layer["checked"] = True
        layer["worth_acting"] = verdict.worth_acting
        if verdict.worth_acting:
            return None
        layer["reached"] = WakeDepth.CHECK.label
        return self._ack_only(wake, _Said(Decision.NO_ACTION, Outcome.NO_ACTION, layer=layer),
                              f"lightweight check: not worth acting{': ' + verdict.reason if verdict.reason else ''}",
                              started)


__all__ = ["CheckingAdapter", "EnvelopeAdapter", "EnvelopeOutcome", "EnvelopeProtocol", "EnvelopeWorker", "WakeCheck",
           "decide"]
