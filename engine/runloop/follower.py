"""The controller in the loop: a follower of the world's event log that commits the controller's steps.

On start it reads the controller's position and stored facts from SQL and rebuilds the durable_rules host
from them (no rule fires). Then, for each event after the position, in log order (PostgreSQL hands out
log positions in commit order, so none is skipped):

1. the event's chain is recovered: an event written for a wake (operation id ``<wake_id>:...``) continues
   that wake's chain at ``depth + 1``; any other event starts a chain at depth 0 (its correlation id, else
   itself). The World calls the controller makes for one step share the chain ``ctl:<world>:<seq>``:
   convening a room is a new episode of coordination, not a hop of the cascade that led to it (so the
   members are woken even if that cascade woke them already), and the storm rules still bound whatever
   follows from it;
2. the world facts it implies are derived from its recorded row changes (:mod:`engine.runloop.world_facts`);
3. the controller observes it; if that decided or changed anything:
4. the decisions that are World calls (rooms, topology edges, contests, refreshes) are made by the
   controller agent, each under the PDP, with operation ids ``ctl:<world>:<seq>:<n>``;
5. the step (position, facts, wakes, suppressions, deferrals) is committed in one transaction, operation id
   ``ctl:<world>:<seq>``. A wake the cooldown deferred (:class:`DeferWake`) is one of the step's wakes, due at
   the cooldown's end (``not_before_us``), its payload carrying the chain like any controller wake plus
   ``deferred`` (reason, until, detail, deferrals in a row): what its receipt and trace are read with. A
   candidate that joins a deferred wake queues nothing; its decision names the wake's key.

A crash anywhere leaves a state the next start resumes from: before step 5 the position is unchanged and
the event is observed again (the same decisions, deterministically; the World calls of step 4 return
their stored results), after it the event is done. Any failure rebuilds the controller from SQL, so its
memory never runs ahead of what was committed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from engine.attention.notices import attend
from engine.commands.attention import DECISION_EVENTS as ATTENTION_EVENTS
from engine.contracts.loader import ContractBook, load_contracts
from engine.controller import Controller
from engine.controller.decisions import (
    AnyDecision,
    Contest,
    DeferWake,
    ForceRefresh,
    Suppress,
    TopologyOp,
    TopologyProposal,
    WakeTarget,
    WeighWakes,
)
from engine.controller.durable_host import RuleSet
from engine.controller.errors import EngineFailure
from engine.controller.facts import Fact
from engine.controller.leadership import ControllerLeadership
from engine.errors import (
    AlreadyExists,
    ConflictError,
    FencedOut,
    IllegalTransition,
    OperationConflict,
    PMWError,
    PolicyEpochChanged,
    PolicyUnavailable,
    RoomTaken,
    VersionConflict,
)
from engine.models.topology import EdgeType
from engine.runloop.world_facts import fact_changes
from engine.world import CONTROLLER_AGENT, Cause
from engine.world.book import RuntimeBook
from engine.world.controller_steps import FACT_ORDINAL_SPAN, ControllerStep, StepFact, StepWake
from engine.world.topology import EdgeChange

CONTROLLER_CAPABILITIES = ("room.open", "state.write", "topology.write")
# A conflict room the agents abandon is a zombie: closed once nobody is left, or after an idle hour.
CONFLICT_ROOM_STOP = "members:0|idle:3600"
# Runtime bookkeeping that no rule reads: observing it could only cost time (and the controller's own
# step events must never feed back into it).
# The attention broker's records (``attention.*``) are its own output about a human: never an input.
SKIPPED_EVENTS = frozenset({"controller.step", "agent.decided", "wake.claim", "policy.activated",
                            "policy.denied", *ATTENTION_EVENTS})
SIGNALS = ("importance", "uncertainty", "risk", "novelty")
_WAKE_OP = re.compile(r"^(wak_[0-9a-f]+):")


@dataclass
class DrainStats:
    """What one :meth:`ControllerLoop.drain` did."""

    events: int = 0
    steps: int = 0
    wakes: int = 0
    suppressed: int = 0
    deferred: int = 0  # candidates deferred by the cooldown (joins of a deferred wake included)
    decisions: int = 0
    attention: int = 0  # the attention broker's decisions recorded for humans (replays answered included)
    failed_followups: list[str] = field(default_factory=list)
    failed_attention: list[str] = field(default_factory=list)

    def add(self, other: DrainStats) -> None:
        """Sum ``other``'s figures (the fields both have) into this one."""
        for f in fields(other):
            if hasattr(self, f.name):
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


def ensure_controller_agent(book: RuntimeBook, governor: str) -> str:
    """Register the controller's own agent and have ``governor`` grant it what its decisions need:
    opening rooms, writing topology edges, recording contests and refresh demands. Each step is checked
    on its own (registration, an active session, the grant), so a start killed between them completes
    them on the next start, and controllers starting together (a leader and its standby) each complete
    what the other has not: a step another starter made first (already registered, a version moved, the
    session activated) is read again and the remaining steps made, a bounded number of times.

    The first registration attaches the session :data:`CONTROLLER_SESSION` (a fixed id), so a second
    starter that also saw no agent cannot attach a second session: its registration collides with the
    first (``AlreadyExists``) and is read again. The sessions are read again after the agent: a starter
    that saw the agent attached while another activated it finds the active session and activates nothing
    (CI, stop 27: it took "no attached session" for "every session detached" and attached a second one).
    The session activated is the terminal's attached one with the smallest id, the same for every starter
    (a world registered before the fixed id, by starters that raced, may hold two); when every session is
    detached, the new one is named by their count, so starters racing to replace it collide too."""
    for attempt in range(ENSURE_ATTEMPTS):
        try:
            _ensure_controller_agent_once(book, governor)
            return CONTROLLER_AGENT
        except (ConflictError, IllegalTransition):
            if attempt == ENSURE_ATTEMPTS - 1:
                raise
    return CONTROLLER_AGENT  # not reached: the last attempt returns or raises


#: Attempts of :func:`ensure_controller_agent` when another starter's steps race its own.
ENSURE_ATTEMPTS = 5
#: The session the controller's agent is first registered with (on the terminal ``t-pmw-controller``).
CONTROLLER_SESSION = f"ses-{CONTROLLER_AGENT}"
CONTROLLER_TERMINAL = f"t-{CONTROLLER_AGENT}"


def _ensure_controller_agent_once(book: RuntimeBook, governor: str) -> None:
    world, read = book.world, book.store.read
    row = read.get("agents", agent_id=CONTROLLER_AGENT)
    if row is None:
        world.register_agent(CONTROLLER_AGENT, "PMW controller", "controller", CONTROLLER_TERMINAL,
                             session_id=CONTROLLER_SESSION)
        row = read.get("agents", agent_id=CONTROLLER_AGENT)
    if row is not None and row["status"] != "active":
        sessions = read.rows("sessions", {"agent_id": CONTROLLER_AGENT, "term_key": CONTROLLER_TERMINAL},
                             order_by=["session_id"])
        if not any(s["status"] == "active" for s in sessions):  # else another starter activated since ``row``
            attached = [str(s["session_id"]) for s in sessions if s["status"] == "attached"]
            if attached:
                session = attached[0]
            else:  # every session detached: a new one, named by their count so racing starters collide
                session = f"{CONTROLLER_SESSION}-{len(sessions)}"
                world.register_agent(CONTROLLER_AGENT, "PMW controller", "controller", CONTROLLER_TERMINAL,
                                     session_id=session)
            world.activate_session(f"session:{session}")
    held = set((row or {}).get("capability_profile", {}).get("capabilities", []))
    if not set(CONTROLLER_CAPABILITIES) <= held:
        world.grant(governor, CONTROLLER_AGENT, capabilities=sorted(held | set(CONTROLLER_CAPABILITIES)))


class ControllerLoop:
    """Follows ``world``'s log with the rules in ``rule_dir`` as the controller of ``world_id``."""

    def __init__(self, book: RuntimeBook, rule_dir: Path | str, *, world_id: str = "main",
                 actor: str = CONTROLLER_AGENT, batch: int = 256,
                 leadership: ControllerLeadership | None = None, attention: bool = True) -> None:
        """``attention``: the attention broker runs on every event read (:meth:`_attend`). ``leadership``:
        this follower is its world's elected leader; each step (its follow-up World calls included) is
        committed inside the lease's fence and records its generation, so a step of a lost lease is refused
        (``NotLeader``, raised by :meth:`drain`; nothing of it written)."""
        if leadership is not None and leadership.world_id != world_id:
            raise ValueError("a leadership of another world")  # a programming error
        self.leadership = leadership
        self.book = book
        self.world = book.world
        self.world_id = world_id
        self.actor = actor
        self.batch = batch
        self.controller = Controller(world_id, rule_dir)
        self._facts: dict[str, Fact] = {}
        self._version = 0
        self._seen = 0
        self._engine_retry = 0
        self._loaded = False
        self.attention = attention
        self._contracts: ContractBook | None = None

    # -- lifecycle ------------------------------------------------------------------------------------------

    def load(self) -> None:
        """Validate and compile the rules (once): a bad rule directory fails here, before anything is written."""
        if not self._loaded:
            self.controller.load()
            self._loaded = True

    def start(self) -> None:
        """Load the rules (first start) and rebuild the controller from the committed position and facts."""
        self.load()
        pos = self.book.controller_position(self.world_id)
        facts = self.book.controller_facts(self.world_id)
        position = pos.position if pos else 0
        self.controller.rebuild(facts, position=position)
        self._facts = {f["id"]: f for f in facts}
        self._version = pos.version if pos else 0
        self._seen = position

    def reload_rules(self, rule_dir: Path | str | None = None) -> RuleSet:
        """Hot reload (optionally from another directory): a bad rule set raises ``RuleFileError`` and the
        rules in force stay."""
        previous = self.controller.rule_dir
        if rule_dir is not None:
            self.controller.rule_dir = Path(rule_dir)
        try:
            return self.controller.reload()
        except BaseException:
            self.controller.rule_dir = previous
            raise

    def close(self) -> None:
        self.controller.close()
        self._loaded = False

    @property
    def position(self) -> int:
        """The last event read (observed or skipped)."""
        return self._seen

    def pending(self) -> bool:
        """Whether the log has events this follower has not read."""
        return self.book.store.read.last_seq() > self._seen

    # -- the loop -------------------------------------------------------------------------------------------

    def drain(self, max_events: int = 100_000) -> DrainStats:
        """Observe the events after the position (at most ``max_events``), committing each step."""
        stats = DrainStats()
        while stats.events < max_events:
            rows = self.book.store.read.events(self._seen, min(self.batch, max_events - stats.events))
            if not rows:
                break
            for row in rows:
                stats.events += 1
                if not self._one(row, stats):
                    break  # rebuilt from SQL: read again from the committed position
        return stats

    def _one(self, row: Mapping[str, Any], stats: DrainStats) -> bool:
        """Observe one event and commit its step; False if the controller had to be rebuilt instead."""
        seq = int(row["seq"])
        if self.attention:
            self._attend(row, stats)
        if row["event_type"] in SKIPPED_EVENTS:
            self._seen = seq
            return True
        event = self.observed(row)
        chain = str(event["correlation_id"])
        upserts, retracts = fact_changes(row, self._facts)
        try:
            step = self.controller.observe_step(event, upserts=upserts, retracts=retracts)
            decisions = _weighed(step.decisions)
            if decisions or step.changes.upserted or step.changes.retracted:
                with self.leadership.fenced() if self.leadership is not None else nullcontext():
                    self._commit(row, chain, decisions, step.changes.upserted, step.changes.retracted, stats)
        except EngineFailure:
            # durable_rules now and then hands back a spurious activation after a long history
            # (docs/benchmarks-controller.md): a host rebuilt from the committed facts decides the event
            # correctly. Retry once; the same failure twice on one event is a real fault.
            if self._engine_retry == seq:
                self.start()
                raise
            self._engine_retry = seq
            self.start()
            return False
        except (VersionConflict, AlreadyExists, OperationConflict):
            # another controller committed this position first (its step holds this op id, or moved the
            # position), or a wake key was queued meanwhile: continue from what is committed (a queued key
            # is skipped the next time)
            self.start()
            return False
        except BaseException:
            self.start()  # the controller's memory must never run ahead of what was committed
            raise
        self._seen = seq
        self._engine_retry = 0
        return True

    def _commit(self, row: Mapping[str, Any], chain: str, decisions: tuple[AnyDecision, ...],
                upserted: tuple[Fact, ...], retracted: tuple[str, ...], stats: DrainStats) -> None:
        seq = int(row["seq"])
        cause = Cause(causation_id=row["event_id"], correlation_id=chain)
        follow_cause = Cause(causation_id=row["event_id"], correlation_id=f"ctl:{self.world_id}:{seq}")
        records: list[dict[str, Any]] = []
        wakes: list[StepWake] = []
        weighings = [d for d in decisions if isinstance(d, WeighWakes)]
        for d in decisions:
            record: dict[str, Any] = {"kind": d.kind, "rule": d.rule, **d.signature()}
            record.pop("world", None)
            if isinstance(d, WeighWakes):
                pass  # recorded; its signals are on the step's wakes
            elif isinstance(d, WakeTarget):
                signals, reasons = wake_signals(weighings, d.cause)
                wakes.append(StepWake(target_agent=d.agent, cause=d.cause, idempotency_key=d.idempotency_key,
                                      depth=d.depth, chain=d.chain, origin_us=d.origin_us,
                                      cause_event_id=row["event_id"], rule=d.rule, signals=signals,
                                      signal_reasons=reasons, trigger=_trigger(row) if signals else None))
            elif isinstance(d, Suppress):
                stats.suppressed += 1
            elif isinstance(d, DeferWake):
                stats.deferred += 1
                if d.joins is None:  # a join queues nothing: the deferred wake it joins runs for both
                    signals, reasons = wake_signals(weighings, d.cause)
                    wakes.append(StepWake(
                        target_agent=d.agent, cause=d.cause, idempotency_key=d.idempotency_key, depth=d.depth,
                        chain=d.chain, origin_us=d.origin_us, cause_event_id=row["event_id"], rule=d.rule,
                        not_before_us=d.not_before_us,
                        deferred={"reason": d.reason.value, "until_us": d.not_before_us, "detail": d.detail,
                                  "deferrals": d.deferrals, "position": d.position},
                        signals=signals, signal_reasons=reasons, trigger=_trigger(row) if signals else None))
            else:
                error = self._follow_up(d, f"ctl:{self.world_id}:{seq}:{d.index}", follow_cause)
                if error is not None:
                    record["error"] = error
                    stats.failed_followups.append(f"{seq}:{d.index}:{error}")
            records.append(record)
        step = ControllerStep(
            world_id=self.world_id, position=seq, expected_version=self._version,
            upserts=[StepFact(fact_id=f["id"], kind=f["kind"], fact=f, ordinal=seq * FACT_ORDINAL_SPAN + n)
                     for n, f in enumerate(upserted)],  # in the engine's assertion order: a rebuild loads it
            retracts=list(retracted), wakes=wakes, decisions=records,
            generation=self.leadership.fencing_token if self.leadership is not None else None)
        result = self.book.commit_controller_step(self.actor, step, cause=cause)
        self._version = result.version
        for fact_id in retracted:
            self._facts.pop(fact_id, None)
        for f in upserted:
            self._facts[f["id"]] = f
        stats.steps += 1
        stats.wakes += len(result.wake_ids)
        stats.decisions += len(decisions)

    def _attend(self, row: Mapping[str, Any], stats: DrainStats) -> None:
        """The attention broker on the event ``row`` (seed 003 §14-16): for each human it would wake or notify
        (:func:`engine.attention.notices.notices_for`: an approval asked of governors, a handoff or a wake
        for a human, a wake the controller queued included), the broker's decision with its reasons is
        recorded as the controller's agent (``World.notify_human``), under an operation id derived from the
        event and the human. Called before the event's step is committed, so an event whose step a crash
        lost is attended again when observed again, and answered by the decision recorded the first time:
        a replay never decides twice. A leader records them inside its lease's fence, as its steps. No PDP
        (or a stale epoch, a lost lease) stops the loop as a step's follow-ups do; another refusal is counted
        in ``failed_attention`` and the loop goes on."""
        if row["event_type"] not in _NOTIFYING:
            return
        if self._contracts is None:
            self._contracts = load_contracts()
        try:
            with self.leadership.fenced() if self.leadership is not None else nullcontext():  # a leader's only
                decided = attend(self.world, self.book.store.read, self.actor, row, self._contracts)
        except (PolicyUnavailable, PolicyEpochChanged, FencedOut):
            raise
        except PMWError as exc:
            stats.failed_attention.append(f"{row['seq']}:{exc.code}")
            return
        stats.attention += len(decided)

    def _follow_up(self, d: AnyDecision, op: str, cause: Cause) -> str | None:
        """Carry out a decision that is a World call; the error code if the World refused it."""
        w, me = self.world, self.actor
        try:
            if isinstance(d, TopologyProposal):
                self._topology(d, op, cause)
            elif isinstance(d, Contest):
                w.append_event(me, "claim.contested", {"term": d.term, "claims": list(d.claims),
                                                       "agents": list(d.agents), "reason": d.reason},
                               subject_kind="claim", subject_id=d.term, op_id=op, cause=cause)
            elif isinstance(d, ForceRefresh):
                w.append_event(me, "context.refresh_required", {"agent": d.agent, "reason": d.reason},
                               subject_kind="agent", subject_id=d.agent, op_id=op, cause=cause)
            # RouteReview: its wake is a WakeTarget of the same step; the step records its reviewer on the
            # memory (controller_steps._reviewer_changes)
        except (PolicyUnavailable, PolicyEpochChanged, FencedOut):
            raise  # no decision, one under a stale epoch, or a lost lease: the step is not committed
        except PMWError as exc:
            return exc.code
        return None

    def _topology(self, d: TopologyProposal, op: str, cause: Cause) -> None:
        w, me = self.world, self.actor
        if d.op in (TopologyOp.SHARE, TopologyOp.ISOLATE):
            if self.book.store.operation(op) is not None:
                return  # committed before a crash: its request was computed from the topology as it was then
            topology = w.get_topology(actor=me)
            if d.op is TopologyOp.SHARE:  # info flows along the named agents, in order
                changes = [EdgeChange(source_agent=src, target_agent=dst, edge_type=EdgeType.INFO)
                           for src, dst in zip(d.agents, d.agents[1:], strict=False)]
            else:  # the agents' active info edges, both ways, are cut
                changes = [EdgeChange(source_agent=e.source_agent, target_agent=e.target_agent,
                                      edge_type=EdgeType.INFO, active=False)
                           for e in sorted(topology.edges, key=lambda e: (e.source_agent, e.target_agent))
                           if e.edge_type is EdgeType.INFO and e.active
                           and (e.source_agent in d.agents or e.target_agent in d.agents)]
            if changes:  # one transaction, one new topology version, on the version just read
                w.change_topology(me, changes, expected_topology_version=topology.version, reason=d.reason,
                                  op_id=op, cause=cause)
        elif d.op is TopologyOp.JOIN and d.room is not None:
            try:
                w.create_room(me, d.reason, members=list(d.agents), room_id=d.room, op_id=f"{op}.open", cause=cause,
                              stop_condition=CONFLICT_ROOM_STOP)
            except AlreadyExists:
                opened_by = (self.book.store.read.get("rooms", room_id=d.room) or {}).get("opened_by")
                if opened_by != me:  # never seat agents in a room someone else opened (and owns)
                    raise RoomTaken(d.room, str(opened_by), me) from None
                for n, agent in enumerate(d.agents):
                    w.join_room(me, d.room, agent_id=agent, op_id=f"{op}.join{n}", cause=cause)
                return
            w.leave_room(me, d.room, op_id=f"{op}.leave", cause=cause)  # the controller convenes, never sits in
        elif d.op is TopologyOp.LEAVE and d.room is not None:
            if d.close:
                w.close_room(me, d.room, op_id=f"{op}.close", cause=cause)
            else:
                for n, agent in enumerate(d.agents):
                    w.leave_room(me, d.room, agent_id=agent, op_id=f"{op}.leave{n}", cause=cause)

    # -- chains ---------------------------------------------------------------------------------------------

    def observed(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """The controller's input for the events row ``row``: its fields, with the chain it belongs to
        (``correlation_id``), its cascade depth and the chain's origin time."""
        depth, chain, origin = self._chain(row)
        event = {k: row[k] for k in ("seq", "event_id", "event_type", "actor_id", "subject_kind", "payload",
                                     "causation_id", "created_at_us")}
        event.update(subject_id=str(row["subject_id"])[:256], correlation_id=chain, cascade_depth=depth,
                     chain_origin_us=origin)
        return event

    def _chain(self, row: Mapping[str, Any]) -> tuple[int, str, int]:
        """(depth, chain, origin) of the event ``row`` (see the module docstring)."""
        op = str(row["op_id"])
        own = (0, str(row["correlation_id"] or row["event_id"]), int(row["created_at_us"]))
        if (m := _WAKE_OP.match(op)) is not None:
            wake = self.book.store.read.get("wakes", wake_id=m[1])
            if wake is None:
                return own
            p = wake["payload"] or {}
            if isinstance(p.get("depth"), int) and isinstance(p.get("chain"), str):
                return p["depth"] + 1, p["chain"], int(p.get("origin_us") or wake["created_at_us"])
            return 1, str(wake["wake_id"]), int(wake["created_at_us"])  # a wake queued by hand starts a chain
        return own


#: The event types :func:`engine.attention.notices.notices_for` may find a human's notice in.
_NOTIFYING = frozenset({"approval.requested", "handoff.created", "wake.issued", "controller.step"})


def _weighed(decisions: tuple[AnyDecision, ...]) -> tuple[AnyDecision, ...]:
    """The step's decisions, without its weighings when it queues no wake (they would weigh nothing, and an
    event whose only decision is a weighing commits no step)."""
    if any(isinstance(d, WakeTarget | DeferWake) for d in decisions):
        return decisions
    return tuple(d for d in decisions if not isinstance(d, WeighWakes))


def _trigger(row: Mapping[str, Any]) -> dict[str, str]:
    """What triggered a wake of the event ``row``, as its lightweight check is told: type and subject."""
    return {"type": str(row["event_type"]), "subject_kind": str(row.get("subject_kind") or ""),
            "subject_id": str(row.get("subject_id") or "")}


def wake_signals(weighings: list[WeighWakes], cause: str) -> tuple[dict[str, float] | None, list[str] | None]:
    """The layered wake's signals of a wake with ``cause`` weighed by ``weighings`` (the ``weigh_wakes``
    decisions of its step, rules/wake_signals.yaml): per signal the highest value any sets (a signal none
    sets is 0), importance from the cause included; and the reasons, ``<rule>: <reason> (<signals>)``, of
    those that set one. ``(None, None)`` when none does: the wake carries no signals (a full run)."""
    signals = dict.fromkeys(SIGNALS, 0.0)
    reasons: list[str] = []
    for w in weighings:
        values = {name: getattr(w, name) for name in SIGNALS if getattr(w, name) is not None}
        if cause in w.importance_by_cause:
            values["importance"] = max(values.get("importance", 0.0), w.importance_by_cause[cause])
        if not values:
            continue
        for name, value in values.items():
            signals[name] = max(signals[name], float(value))
        shown = ", ".join(f"{name} {value:g}" for name, value in values.items())
        reasons.append(f"{w.rule}: {w.reason} ({shown})"[:500])
    if not reasons:
        return None, None
    return signals, reasons[:50]


__all__ = ["CONTROLLER_AGENT", "ControllerLoop", "DrainStats", "ensure_controller_agent", "wake_signals"]
