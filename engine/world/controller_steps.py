"""The controller's durable steps: what it decided for one event, committed in one transaction.

A step holds, for the event at ``position``:

* the compare-and-set of the controller's position (two controllers of one world cannot both commit it);
* the stored facts it upserted and retracted (``controller_facts``: its mirror, rebuilt from SQL on start);
* the wakes it decided, inserted with their idempotency keys (a key already queued is skipped);
* its other decisions and every suppression with its reason, in the step event's payload;
* the reviewer each ``route_review`` decision routes a memory candidate to, set as the memory's ``reviewer``
  (the first route of a candidate that has none: that reviewer, and only it, may review, promote or reject it;
  a memory no longer a candidate, already held by a reviewer, or owned by the reviewer is left as it is).

A leader's step records its lease generation (``payload.generation``); committed inside the leader's fence
(:meth:`engine.controller.leadership.ControllerLeadership.fenced`), the gateway refuses it from a stale
generation or an expired lease (``NotLeader``, nothing written).

The operation id is ``ctl:<world>:<position>``, so a controller that crashed after the commit and observes
the event again gets the stored result back: nothing is committed twice. The step is runtime bookkeeping
(the controller's own decisions about the queue), so it is not decided by the PDP; each wake it queues is
decided when it is claimed, under the target agent's authority, and the controller's topology changes
are ordinary World calls the PDP decides.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from engine.errors import VersionConflict
from engine.models.common import Id, JsonValue, Model, TimeUs
from engine.models.memory import MemoryStatus
from engine.models.wakes import Wake, WakeStatus
from engine.validation import build, check_id
from engine.world.core import Cause, Plan, WorldCore
from store import Change, Insert, Update

MAX_STEP_WAKES = 1000
MAX_STEP_FACTS = 5000


class StepWake(Model):
    """A wake the controller decided: target, cause, idempotency key and its chain (depth, chain, origin)."""

    target_agent: Id
    cause: str = Field(min_length=1, max_length=200)
    idempotency_key: str = Field(min_length=1, max_length=256)
    depth: int = Field(ge=0)
    chain: str = Field(min_length=1, max_length=300)
    origin_us: TimeUs
    cause_event_id: Id | None = None
    rule: str
    #: a wake the cooldown deferred: due at the cooldown's end (never before the step commits), its payload
    #: carrying why (reason, until, detail, deferrals in a row); committed with the step like any other wake
    not_before_us: TimeUs | None = None
    deferred: dict[str, JsonValue] | None = None
    #: the layered wake's signals the controller's rules gave it (``payload.signals``, read by the worker's
    #: classifier) and why (``payload.signal_reasons``); ``None``: no signals, a full run
    signals: dict[str, float] | None = None
    signal_reasons: list[str] | None = Field(default=None, max_length=50)
    #: with signals: what triggered the wake (the event's ``type``, ``subject_kind``, ``subject_id``), all a
    #: lightweight check is told of it (``payload.trigger``)
    trigger: dict[str, str] | None = None


#: a step's facts are ordered ``position * FACT_ORDINAL_SPAN + index`` (MAX_STEP_FACTS fit in a span)
FACT_ORDINAL_SPAN = 8192


class StepFact(Model):
    fact_id: str = Field(min_length=1, max_length=300)
    kind: str = Field(min_length=1, max_length=50)
    fact: dict[str, JsonValue]
    #: where the controller's engine last asserted the fact (see FACT_ORDINAL_SPAN): the stored facts are
    #: loaded in this order on a rebuild, so the rebuilt engine fires simultaneous activations as it did
    ordinal: int = Field(default=0, ge=0, le=2**62)


class ControllerStep(Model):
    world_id: Id
    position: int = Field(ge=1)
    expected_version: int = Field(ge=0)  # 0: no position stored yet
    upserts: list[StepFact] = Field(default_factory=list, max_length=MAX_STEP_FACTS)
    retracts: list[str] = Field(default_factory=list, max_length=MAX_STEP_FACTS)
    wakes: list[StepWake] = Field(default_factory=list, max_length=MAX_STEP_WAKES)
    decisions: list[dict[str, JsonValue]] = Field(default_factory=list, max_length=MAX_STEP_WAKES)
    #: the leader's lease generation (fencing token) the step is committed under; ``None``: an unelected
    #: controller (one process owns the world). The gateway's fence, not this field, refuses a stale leader.
    generation: int | None = Field(default=None, ge=1)


class StepResult(Model):
    world_id: Id
    position: int
    version: int
    wake_ids: list[Id]
    skipped_keys: list[str]
    decisions: int


class ControllerPosition(Model):
    world_id: Id
    position: int
    steps: int
    updated_at_us: TimeUs
    version: int


class ControllerStepCalls(WorldCore):
    def commit_controller_step(self, actor: str, step: ControllerStep, *, cause: Cause | None = None) -> StepResult:
        """Commit one controller step (op id ``ctl:<world>:<position>``): a replay returns the stored
        result; a position moved by another controller is a ``VersionConflict`` with the current version."""
        req = build(ControllerStep, **step.model_dump())
        return self._write("controller_step", actor, req, lambda now: self._plan_step(req, now), StepResult,
                           op_id=f"ctl:{req.world_id}:{req.position}", cause=cause, decided=False)

    def _plan_step(self, req: ControllerStep, now: int) -> Plan:
        changes: list[Change] = []
        pos = self._store.read.get("controller_positions", world_id=req.world_id)
        current = int(pos["version"]) if pos else 0
        if current != req.expected_version:
            raise VersionConflict("controller", req.world_id, req.expected_version, current)
        if pos is None:
            changes.append(Insert("controller_positions", {
                "world_id": req.world_id, "position": req.position, "steps": 1, "updated_at_us": now,
                "version": 1}, "controller", req.world_id))
        else:
            changes.append(Update("controller_positions", {"world_id": req.world_id}, current, {
                "position": req.position, "steps": int(pos["steps"]) + 1, "updated_at_us": now},
                "controller", req.world_id))
        changes += self._fact_changes(req, now)
        changes += self._reviewer_changes(req, now)
        wake_ids: list[str] = []
        skipped: list[str] = []
        for w in req.wakes:
            if self._store.read.rows("wakes", {"idempotency_key": w.idempotency_key}, limit=1):
                skipped.append(w.idempotency_key)  # already queued (by an earlier delivery of the same key)
                continue
            self._row("agents", "agent", w.target_agent, agent_id=w.target_agent)
            wake_payload: dict[str, Any] = {"depth": w.depth, "chain": w.chain, "origin_us": w.origin_us,
                                            "rule": w.rule}
            if w.deferred is not None:
                wake_payload["deferred"] = w.deferred
            if w.signals is not None:
                wake_payload["signals"] = w.signals
                wake_payload["signal_reasons"] = w.signal_reasons or []
                if w.trigger is not None:
                    wake_payload["trigger"] = dict(w.trigger)
            wake = Wake(wake_id=self.ids.new("wak"), target_agent=w.target_agent, cause=w.cause,
                        cause_event_id=w.cause_event_id, status=WakeStatus.PENDING,
                        not_before_us=max(now, w.not_before_us or now), payload=wake_payload,
                        idempotency_key=w.idempotency_key, attempts=0, created_at_us=now, updated_at_us=now,
                        version=1)
            changes.append(Insert("wakes", wake.model_dump(mode="json"), "wake", w.idempotency_key))
            wake_ids.append(wake.wake_id)
        result = StepResult(world_id=req.world_id, position=req.position, version=current + 1, wake_ids=wake_ids,
                            skipped_keys=skipped, decisions=len(req.decisions))
        payload: dict[str, Any] = {"position": req.position, "decisions": req.decisions, "wake_ids": wake_ids,
                                   "skipped_keys": skipped}
        if req.generation is not None:
            payload["generation"] = req.generation
        provenance = [("event", w.cause_event_id, "wake", wid, "caused")
                      for w, wid in zip([w for w in req.wakes if w.idempotency_key not in skipped], wake_ids,
                                        strict=True) if w.cause_event_id]
        return Plan("controller.step", "controller", req.world_id, result, changes, payload=payload,
                    provenance=provenance, base_version=current, resulting_version=current + 1)

    def _fact_changes(self, req: ControllerStep, now: int) -> list[Change]:
        changes: list[Change] = []
        upserted = {f.fact_id for f in req.upserts}
        for fact in req.upserts:
            row = self._store.read.get("controller_facts", world_id=req.world_id, fact_id=fact.fact_id)
            values = {"kind": fact.kind, "fact": fact.fact, "active": True, "updated_at_us": now,
                      "ordinal": fact.ordinal}
            changes.append(Insert("controller_facts", {"world_id": req.world_id, "fact_id": fact.fact_id,
                                                       **values, "version": 1}, "controller_fact", fact.fact_id)
                           if row is None else Update("controller_facts",
                                                      {"world_id": req.world_id, "fact_id": fact.fact_id},
                                                      int(row["version"]), values, "controller_fact", fact.fact_id))
        for fact_id in req.retracts:
            if fact_id in upserted:
                continue
            row = self._store.read.get("controller_facts", world_id=req.world_id, fact_id=fact_id)
            if row is not None and row["active"]:
                changes.append(Update("controller_facts", {"world_id": req.world_id, "fact_id": fact_id},
                                      int(row["version"]), {"active": False, "updated_at_us": now},
                                      "controller_fact", fact_id))
        return changes

    def _reviewer_changes(self, req: ControllerStep, now: int) -> list[Change]:
        """The compare-and-sets that record, on each memory candidate the step routes to a reviewer, that
        reviewer (the first route per memory; see the module docstring for what is left alone)."""
        changes: list[Change] = []
        routed: set[str] = set()
        for d in req.decisions:
            memory_id, reviewer = d.get("memory"), d.get("reviewer")
            if d.get("kind") != "route_review" or not isinstance(memory_id, str) or not isinstance(reviewer, str):
                continue
            if memory_id in routed:
                continue
            row = self._store.read.get("memory", memory_id=memory_id)
            if (row is None or row["status"] != MemoryStatus.CANDIDATE.value or row["reviewer"] is not None
                    or row["owner"] == reviewer):
                continue
            changes.append(Update("memory", {"memory_id": memory_id}, int(row["version"]),
                                  {"reviewer": reviewer, "updated_at_us": now}, "memory", memory_id))
            routed.add(memory_id)
        return changes

    def controller_position(self, world_id: str) -> ControllerPosition | None:
        """Where the controller of ``world_id`` stands (``None`` before its first step)."""
        row = self._store.read.get("controller_positions", world_id=check_id("world_id", world_id))
        return ControllerPosition.model_validate(row) if row else None

    def controller_facts(self, world_id: str) -> list[dict[str, Any]]:
        """The controller's stored (active) facts, as committed with its steps, in the order its engine last
        asserted them (``ordinal``, then ``fact_id``): the order a rebuild must load them in."""
        rows = self._store.read.rows("controller_facts", {"world_id": check_id("world_id", world_id), "active": True},
                                    order_by=("ordinal", "fact_id"))
        return [dict(r["fact"]) for r in rows]


__all__ = ["FACT_ORDINAL_SPAN", "ControllerPosition", "ControllerStep", "ControllerStepCalls", "StepFact", "StepResult",
           "StepWake"]
