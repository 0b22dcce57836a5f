"""The wake queue and decision receipts.

A wake is keyed by its idempotency key (UNIQUE in the database): delivering the same wake ten times
creates one. Claims take a lease; an expired lease is claimable again. Every wake ends in exactly one
receipt (UNIQUE ``wake_id``): acked with the agent's decision (``no_action`` included) or cancelled
with the reason (``suppressed``, ``cancelled``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from engine.commands.wakes import AckWake, CancelWake, ClaimWake, EnqueueWake, WriteReceipt
from engine.errors import (
    AlreadyExists,
    InvalidInput,
    LeaseHeld,
    NotFound,
    NotPermitted,
    OperationConflict,
    PolicyDenied,
)
from engine.models.receipts import Decision, Outcome, Receipt, ReceiptBody
from engine.models.traces import Trace, TraceBody
from engine.models.trusted import trusted
from engine.models.wakes import WAKE_LIFECYCLE, EnqueueResult, Wake, WakeStatus
from engine.policy.attributes import GOVERNOR_ROLE
from engine.policy.enforcement import Check
from engine.validation import build, check_id, check_int64, parse_enum
from engine.world.core import Cause, Plan, WorldCore, request_hash
from engine.world.list_limits import MAX_LISTED, check_limit
from store import Change, Insert, Update, WakeClaim, WriteRequest

MAX_TRACES = 10_000


class _KeyTaken(Exception):  # an internal signal from a plan, never raised to a caller
    """The plan found a wake with the request's idempotency key: nothing is to be written."""

    def __init__(self, wake: Wake, check: Check) -> None:
        super().__init__(wake.wake_id)
        self.wake = wake
        self.check = check


#: The wake actions a worker takes for the wake's target agent (it runs the wake for it): decided with the
#: target's authority. Cancelling is decided with the caller's own.
RUN_FOR_TARGET = frozenset({"claim", "ack"})


def decided_as(actor: str, action: str, wake: Wake) -> str:
    """Whose authority the policy decides ``action`` on ``wake`` with (see :data:`RUN_FOR_TARGET`)."""
    return wake.target_agent if action in RUN_FOR_TARGET else actor


def enqueuer_of(world: WorldCore, wake_id: str) -> str | None:
    """The agent that enqueued ``wake_id``: the actor of its ``wake.issued`` event (a wake row does not
    name it); ``None`` if no such event is in the log."""
    rows = world._store.read.rows("events", {"subject_id": wake_id, "event_type": "wake.issued"}, limit=1)
    return str(rows[0]["actor_id"]) if rows else None


def check_cancel_party(world: WorldCore, actor: str, wake: Wake) -> None:
    """``NotPermitted`` for a cancel by anyone but the wake's target, the agent that enqueued it or a
    governor. The policy decides the rest: the target and governors cancel, a ``wake.enqueue`` holder only
    a pending wake (never one leased), and the enqueuer is not a resource attribute the PDP sees."""
    if actor == wake.target_agent:
        return
    agent = world._store.read.get("agents", agent_id=actor)
    if agent is not None and agent["role_id"] == GOVERNOR_ROLE:
        return
    if enqueuer_of(world, wake.wake_id) != actor:
        raise NotPermitted(actor, "cancel", "wake", wake.wake_id,
                           "only its target, the agent that enqueued it or a governor cancels a wake")


def check_wake_rules(worker: str, action: str, wake: Wake, now: int, *, world: WorldCore | None = None) -> None:
    """The World's own rules for ``action`` on ``wake`` (after its lifecycle, before the policy):
    ``LeaseHeld`` for a claim while another lease runs or before the wake is due, and for an ack by anyone
    but the lease owner; with ``world``, :func:`check_cancel_party` for a cancel."""
    if action == "cancel" and world is not None:
        check_cancel_party(world, worker, wake)
    if action == "claim":
        if wake.status is WakeStatus.CLAIMED and (wake.lease_until_us or 0) >= now:
            raise LeaseHeld(wake.wake_id, wake.lease_owner, wake.lease_until_us)
        if wake.not_before_us > now:
            raise LeaseHeld(wake.wake_id, None, None)
    elif action == "ack" and wake.lease_owner != worker:
        raise LeaseHeld(wake.wake_id, wake.lease_owner, wake.lease_until_us)


_OUTCOME_OF = {Decision.NO_ACTION: Outcome.NO_ACTION}


def _fields_of(value: Any) -> Any:
    """A model given as an argument, as its field values (so the command validates them: pydantic takes an
    instance of a field's model class as it is, even one built without validation)."""
    return dict(value) if isinstance(value, BaseModel) else value


_CLAIM_REQUESTS: OrderedDict[tuple[Any, ...], tuple[ClaimWake, list[str] | None]] = OrderedDict()
_CLAIM_REQUESTS_MAX = 64
_CLAIM_REQUESTS_LOCK = threading.Lock()


def _claim_request(agent_id: object, agent_ids: object, lease_seconds: object
                   ) -> tuple[ClaimWake, list[str] | None]:
    """The validated claim request and its sorted targets. A runner claims with the same arguments over and
    over (the agents it runs: a thousand of them is ~0.7 ms of validation and sorting a claim), so a request
    of plain strings and a plain number is remembered (its model is frozen, its targets a fresh copy each
    time); anything else is validated every time, and a refused request is never remembered."""
    key: tuple[Any, ...] | None = None
    if (agent_id is None or type(agent_id) is str) and type(lease_seconds) in (int, float) and (
            agent_ids is None or (type(agent_ids) is list and all(type(a) is str for a in agent_ids))):
        key = (agent_id, None if agent_ids is None else tuple(agent_ids), type(lease_seconds), lease_seconds)
        with _CLAIM_REQUESTS_LOCK:
            found = _CLAIM_REQUESTS.get(key)
            if found is not None:
                _CLAIM_REQUESTS.move_to_end(key)
                return found[0], None if found[1] is None else list(found[1])
    req = build(ClaimWake, agent_id=agent_id, agent_ids=agent_ids, lease_seconds=lease_seconds)
    targets = req.targets()
    if key is not None:
        with _CLAIM_REQUESTS_LOCK:
            _CLAIM_REQUESTS[key] = (req, None if targets is None else list(targets))
            while len(_CLAIM_REQUESTS) > _CLAIM_REQUESTS_MAX:
                _CLAIM_REQUESTS.popitem(last=False)
    return req, targets


class WakeCalls(WorldCore):
    def enqueue_wake(self, actor: str, target_agent: str, cause: str, idempotency_key: str, *,
                     not_before_us: int | None = None, priority: int = 0,
                     payload: dict[str, Any] | None = None, payload_refs: list[str] | None = None,
                     base_state_version: int | None = None, authority_scope: dict[str, Any] | None = None,
                     cause_event_id: str | None = None, op_id: str | None = None,
                     causation: Cause | None = None) -> EnqueueResult:
        """Queue a wake for ``target_agent`` unless one with this idempotency key exists: then that one is
        returned with ``created=False`` and nothing is written (if ``actor`` may enqueue the wake asked
        for: the answer is decided like the enqueue it stands for).

        Operation identity comes first: a known ``op_id`` returns the original result exactly (``created``
        included) or raises ``OperationConflict`` for a different request, before the key is looked at."""
        req = build(EnqueueWake, target_agent=target_agent, cause=cause, idempotency_key=idempotency_key,
                    not_before_us=not_before_us, priority=priority, payload=payload or {},
                    payload_refs=payload_refs or [], base_state_version=base_state_version,
                    authority_scope=authority_scope or {}, cause_event_id=cause_event_id)
        try:
            return self._write("enqueue_wake", actor, req, lambda now: self._plan_enqueue(req, now),
                               EnqueueResult, op_id=op_id, cause=causation)
        except _KeyTaken as taken:
            self._authorize(actor, [taken.check], "enqueue_wake")
            return EnqueueResult(wake=taken.wake, created=False)
        except AlreadyExists:  # a concurrent enqueue of the same key committed first
            found = self._wake_by_key(req.idempotency_key)
            if found is None:
                raise
            return EnqueueResult(wake=found, created=False)

    def _wake_by_key(self, key: str) -> Wake | None:
        rows = self._store.read.rows("wakes", {"idempotency_key": key}, limit=1)
        return Wake.model_validate(rows[0]) if rows else None

    def _plan_enqueue(self, req: EnqueueWake, now: int) -> Plan:
        existing = self._wake_by_key(req.idempotency_key)
        self._row("agents", "agent", req.target_agent, agent_id=req.target_agent)
        wid = existing.wake_id if existing is not None else self.ids.new("wak")
        wake = Wake(wake_id=wid, status=WakeStatus.PENDING, attempts=0, created_at_us=now, updated_at_us=now,
                    version=1, **{**req.model_dump(), "not_before_us": req.not_before_us or now})
        check = Check("wake", wid, "enqueue", wake.model_dump(mode="json"))
        if existing is not None:
            raise _KeyTaken(existing, check)
        return Plan("wake.issued", "wake", wid, EnqueueResult(wake=wake, created=True), checks=[check],
                    changes=[Insert("wakes", wake.model_dump(mode="json"), "wake", req.idempotency_key)],
                    payload={"target_agent": req.target_agent, "cause": req.cause},
                    provenance=[("event", req.cause_event_id, "wake", wid, "caused")] if req.cause_event_id
                    else (), resulting_version=1)

    def claim_wake(self, worker: str, *, agent_id: str | None = None, agent_ids: list[str] | None = None,
                   lease_seconds: float = 30.0, op_id: str | None = None,
                   cause: Cause | None = None) -> Wake | None:
        """Lease the most urgent due wake (optionally only ``agent_id``'s, or only those of the agents in
        ``agent_ids``: at most one of the two; an empty list claims nothing), or ``None`` if none is due.
        Expired leases are reclaimed. Concurrent claimers never get the same wake.

        One write transaction (:meth:`store.Door.claim_wake`): one conditional statement leases the wake,
        the policy decides the claim on the leased row with the target agent's authority
        (:func:`decided_as`), and the event is appended; a denial (``PolicyDenied``, recorded as any
        denial is, after the rollback) or no answer from the PDP rolls it all back, so no other worker ever
        sees the lease. No claim is lost to a race (nothing to skip, nothing raised for it).

        With ``op_id``: a known id returns the wake its claim leased, exactly as it was then (or
        ``OperationConflict`` for another request: another worker, agent or lease)."""
        check_id("worker", worker)
        req, targets = _claim_request(agent_id, agent_ids, lease_seconds)  # bad input fails on an empty queue
        # the operation's identity: this request by this worker (whatever wake it leased, whoever it runs for)
        if op_id is not None and (stored := self._store.operation(check_id("op_id", op_id))) is not None:
            if stored.command != "claim_wake":
                raise OperationConflict(op_id, "claim_wake")
            leased = Wake.model_validate(stored.result)
            return self._write("claim_wake", decided_as(worker, "claim", leased), req, self._replayed_only,
                               Wake, op_id=op_id, cause=cause, caller=worker)  # answered from the ledger
        checked = self._checked_cause(cause)
        if targets is not None and not targets:
            return None
        if getattr(self._planning_now, "batch", None) is not None:
            raise InvalidInput("claim_wake", "a claim leases at once: it is never planned in a batch")
        digest = request_hash("claim_wake", worker, req)
        now = self.clock.now_us()
        lease = WakeClaim(owner=worker, now_us=now, lease_until_us=now + round(req.lease_seconds * 1_000_000),
                          targets=tuple(targets) if targets is not None else None)
        denied: list[tuple[str, PolicyDenied]] = []
        taken: list[Wake] = []

        def decide(row: dict[str, Any], update: Update) -> WriteRequest:
            """The claim of the leased ``row``, decided inside the claim's transaction."""
            wake = trusted(Wake)(row)  # the store's row, as the claim's statement leased it
            taken.append(wake)
            actor = decided_as(worker, "claim", wake)
            if op_id is not None and self._op_ids is not None and (refusal := self._op_ids(actor, op_id)):
                raise InvalidInput("op_id", refusal)
            plan = Plan("wake.claim", "wake", wake.wake_id, wake, [update], payload={"worker": worker},
                        base_version=wake.version - 1, resulting_version=wake.version,
                        checks=[Check("wake", wake.wake_id, "claim", row)])  # the row it is becoming
            try:
                epoch = self._policy.authorize(actor, plan.checks)
            except PolicyDenied as refusal:
                denied.append((actor, refusal))
                raise
            event_id = self.ids.new("evt")  # ids drawn in the order every write draws them: evt, op
            return self._request("claim_wake", actor, digest, plan, now, op_id=op_id or self.ids.new("op"),
                                 cause=checked, epoch=epoch, event_id=event_id)

        try:
            outcome = self._door.claim_wake(lease, decide)
        except PolicyDenied:
            if denied:  # recorded after the rollback: its own write
                actor, refusal = denied[-1]
                self._record_denial(actor, "claim_wake", refusal)
            raise
        if outcome is None:
            return None
        return taken[-1] if not outcome.replayed else Wake.model_validate(outcome.result)

    @staticmethod
    def _replayed_only(now: int) -> Plan:
        raise AssertionError("a known operation is answered from the ledger, never planned")

    def _plan_wake_transition(self, actor: str, row: dict[str, Any], action: str, now: int, *,
                              values: dict[str, Any] | None = None, extra: Sequence[Change] = (),
                              payload: dict[str, Any] | None = None) -> Plan:
        """One wake's lifecycle transition planned from ``row``, read once by the caller: the lifecycle,
        then :func:`check_wake_rules`, then compare-and-set on the version read (a stale row loses)."""
        wake = trusted(Wake)(row)
        status = WAKE_LIFECYCLE.target(wake.wake_id, wake.status.value, action)
        check_wake_rules(actor, action, wake, now, world=self)
        new_values = {"status": status, **(values or {}), "updated_at_us": now}
        updated = Wake.model_validate({**wake.model_dump(), **new_values, "version": wake.version + 1})
        return Plan(f"wake.{action}", "wake", wake.wake_id, updated,
                    [Update("wakes", {"wake_id": wake.wake_id}, wake.version, new_values, "wake", wake.wake_id),
                     *extra], payload=payload or {}, base_version=wake.version,
                    resulting_version=wake.version + 1, checks=[Check("wake", wake.wake_id, action, row)])

    def ack_wake(self, worker: str, wake_id: str, decision: str = "no_action", *, outcome: str | None = None,
                 trace: TraceBody | None = None, task_id: str | None = None, reason: str | None = None,
                 observed_state_version: int | None = None, topology_version: int | None = None,
                 base_state_version: int | None = None, resulting_state_version: int | None = None,
                 action_refs: list[str] = [],  # noqa: B006 - never mutated: validated into a copy
                 artifact_refs: list[str] = [],  # noqa: B006
                 next_wake: str | None = None, policy_epoch: str | None = None,
                 payload: dict[str, Any] = {},  # noqa: B006
                 op_id: str | None = None, cause: Cause | None = None) -> Receipt:
        """Finish a claimed wake: mark it acked and write its one receipt (and the run's ``trace``, if
        given), in one transaction. ``outcome`` defaults to ``acted`` (``no_action`` for that decision). Only
        the lease owner may ack (``LeaseHeld`` otherwise).

        What the receipt vouches for is split: the runtime sets ``policy_epoch`` to the epoch the ack is
        decided under (in a planned batch: the epoch current when it is planned, which the gateway requires
        at commit); an agent may not give one (``InvalidInput`` naming ``policy_epoch``). A
        ``topology_version`` beyond the world's current one is refused (``InvalidInput`` naming it). The
        decision, outcome, reason, ``task_id``, ``action_refs``, ``artifact_refs``, state versions,
        ``next_wake`` and ``payload`` are the agent's own account of its run, stored as given; the ack's
        event (actor, epoch) is the runtime's record of who acked."""
        if policy_epoch is not None:
            raise InvalidInput("policy_epoch", "set by the runtime (the epoch the ack is decided under); "
                                               "an agent may not give one")
        given = build(AckWake, wake_id=wake_id, decision=decision, outcome=outcome, trace=_fields_of(trace),
                      task_id=task_id, reason=reason, observed_state_version=observed_state_version,
                      topology_version=topology_version, base_state_version=base_state_version,
                      resulting_state_version=resulting_state_version, action_refs=action_refs,
                      artifact_refs=artifact_refs, next_wake=next_wake, policy_epoch=policy_epoch, payload=payload)
        # the outcome filled in: an ack that names its default outcome is the same request as one that does not
        req = given.model_copy(update={"outcome": given.outcome or _OUTCOME_OF.get(given.decision, Outcome.ACTED)})
        if req.topology_version is not None and req.topology_version > (known := self._store.read.topology_version()):
            raise InvalidInput("topology_version", f"{req.topology_version} is beyond the world's topology "
                                                   f"version ({known})")
        row = self._row("wakes", "wake", req.wake_id, wake_id=req.wake_id)
        wake = trusted(Wake)(row)
        body = trusted(ReceiptBody)({"agent_id": wake.target_agent, **req.model_dump(exclude={"trace"})})

        def plan(now: int) -> Plan:
            current = self._store.read.current_policy_epoch()  # what a planned batch's ack keeps
            stamped = body.model_copy(update={"policy_epoch": str(current["epoch"]) if current else None})
            return self._plan_finish(worker, stamped, row, "ack", now, req.trace, stamp_epoch=True)
        return self._write("ack_wake", decided_as(worker, "ack", wake), req, plan, Receipt, op_id=op_id,
                           cause=cause)

    def cancel_wake(self, actor: str, wake_id: str, reason: str, *, outcome: str = "suppressed",
                    op_id: str | None = None, cause: Cause | None = None) -> Receipt:
        """End a pending or claimed wake without running it; its receipt says why (``outcome`` suppressed,
        cancelled or denied). Decided with ``actor``'s own authority, after the World's party rule
        (:func:`check_cancel_party`: the target, the wake's enqueuer or a governor, else ``NotPermitted``):
        the policy lets the target and governors cancel, and a ``wake.enqueue`` holder only a pending wake,
        never one leased (``policies/resources/wake.yaml``). The receipt answered says nothing its caller
        did not give or know: a cancel's receipt holds the wake, its target (whom the enqueuer named), the
        caller's reason and outcome, and no decision, refs or versions of the target's."""
        req = build(CancelWake, wake_id=wake_id, reason=reason, outcome=outcome)
        row = self._row("wakes", "wake", req.wake_id, wake_id=req.wake_id)
        wake = trusted(Wake)(row)
        body = ReceiptBody(agent_id=wake.target_agent, decision=Decision.NO_ACTION, outcome=Outcome(req.outcome),
                           wake_id=req.wake_id, reason=req.reason)
        return self._write("cancel_wake", decided_as(actor, "cancel", wake), req,
                           lambda now: self._plan_finish(actor, body, row, "cancel", now), Receipt, op_id=op_id,
                           cause=cause)

    def write_receipt(self, actor: str, agent_id: str, decision: str, outcome: str, *, task_id: str | None = None,
                      reason: str | None = None, observed_state_version: int | None = None,
                      topology_version: int | None = None, base_state_version: int | None = None,
                      resulting_state_version: int | None = None,
                      action_refs: list[str] = [],  # noqa: B006 - never mutated: validated into a copy
                      artifact_refs: list[str] = [],  # noqa: B006
                      next_wake: str | None = None, policy_epoch: str | None = None,
                      payload: dict[str, Any] = {},  # noqa: B006
                      op_id: str | None = None, cause: Cause | None = None) -> Receipt:
        """A receipt for work not started by a wake (a wake's receipt comes from ack or cancel)."""
        req = build(WriteReceipt, agent_id=agent_id, decision=decision, outcome=outcome, task_id=task_id,
                    reason=reason, observed_state_version=observed_state_version, topology_version=topology_version,
                    base_state_version=base_state_version, resulting_state_version=resulting_state_version,
                    action_refs=action_refs, artifact_refs=artifact_refs, next_wake=next_wake,
                    policy_epoch=policy_epoch, payload=payload)
        body = ReceiptBody(**req.model_dump())

        def plan(now: int) -> Plan:
            rec = self._receipt(body, now)
            return Plan("receipt.written", "receipt", rec.receipt_id, rec,
                        checks=[Check("receipt", rec.receipt_id, "create", rec.model_dump(mode="json"))],
                        changes=[Insert("receipts", rec.model_dump(mode="json"), "receipt", rec.receipt_id)],
                        payload={"decision": body.decision.value, "outcome": body.outcome.value})
        return self._write("write_receipt", actor, req, plan, Receipt, op_id=op_id, cause=cause)

    def _receipt(self, body: ReceiptBody, now: int) -> Receipt:
        # built from a validated body, a fresh id and the clock: nothing to validate again
        return trusted(Receipt)({**body.model_dump(), "receipt_id": self.ids.new("rcp"), "created_at_us": now})

    def _plan_finish(self, actor: str, body: ReceiptBody, row: dict[str, Any], action: str, now: int,
                     trace: TraceBody | None = None, *, stamp_epoch: bool = False) -> Plan:
        """Ack or cancel the wake ``row`` (read once by the call) and write its receipt ``body`` (and
        trace). ``stamp_epoch``: the receipt's ``policy_epoch`` becomes the epoch the write is decided under."""
        assert body.wake_id is not None
        rec = self._receipt(body, now)
        receipt_row = Insert("receipts", rec.model_dump(mode="json"), "receipt", f"for wake {body.wake_id}")
        inserts = [receipt_row]
        if trace is not None:
            done = trusted(Trace)({**trace.model_dump(), "trace_id": body.wake_id, "agent_id": body.agent_id,
                                   "outcome": body.outcome.value, "decision": body.decision.value,
                                   "finished_at_us": now, "latency_us": max(0, now - trace.started_at_us),
                                   "version": 1})  # a validated body and the runtime's own values
            inserts.append(Insert("traces", done.model_dump(mode="json"), "trace", body.wake_id))
        plan = self._plan_wake_transition(actor, row, action, now, extra=inserts, payload={
            "decision": body.decision.value, "outcome": body.outcome.value, "reason": body.reason,
            "receipt_id": rec.receipt_id})
        plan.result = rec
        plan.provenance = [("wake", body.wake_id, "receipt", rec.receipt_id, "answered_by")]
        if stamp_epoch:
            def decided_under(epoch: str | None) -> None:
                stamped = rec.model_copy(update={"policy_epoch": epoch})
                plan.result = stamped
                plan.changes = [Insert("receipts", stamped.model_dump(mode="json"), "receipt",
                                       f"for wake {body.wake_id}") if c is receipt_row else c
                                for c in plan.changes]
            plan.on_decided = decided_under
        return plan

    def get_wake(self, wake_id: str, *, actor: str | None = None) -> Wake:
        check_id("wake_id", wake_id)
        return self._get(Wake, "wakes", "wake", wake_id, actor, wake_id=wake_id)

    def list_wakes(self, *, status: str | None = None, target_agent: str | None = None,
                   limit: int = 1000, actor: str | None = None) -> list[Wake]:
        where: dict[str, Any] = {}
        if status is not None:
            where["status"] = parse_enum("status", WakeStatus, status).value
        if target_agent is not None:
            where["target_agent"] = check_id("target_agent", target_agent)
        return self._list(Wake, "wakes", "wake", actor, where, order_by=("created_at_us", "wake_id"),
                          limit=check_limit(limit, MAX_LISTED))

    def get_trace(self, wake_id: str, *, actor: str | None = None) -> Trace:
        """The trace of the run that answered ``wake_id`` (readable by whoever may read the wake)."""
        check_id("wake_id", wake_id)
        row = self._row("traces", "trace", wake_id, trace_id=wake_id)
        self._may_read(actor, "wake", wake_id, self._row("wakes", "wake", wake_id, wake_id=wake_id))
        return trusted(Trace)(row)

    def list_traces(self, *, agent_id: str | None = None, limit: int = 100, actor: str | None = None) -> list[Trace]:
        """The most recent traces (of ``agent_id``), newest first, at most ``limit`` (1 to 10,000), those of
        wakes ``actor`` may read."""
        if not 1 <= check_int64("limit", limit) <= MAX_TRACES:
            raise InvalidInput("limit", f"{limit!r} is not a whole number from 1 to {MAX_TRACES}")
        where = {"agent_id": check_id("agent_id", agent_id)} if agent_id is not None else {}
        rows = self._store.read.rows("traces", where, order_by=("finished_at_us", "trace_id"), limit=limit,
                                    descending=True)
        wakes = [w for r in rows if (w := self._store.read.get("wakes", wake_id=r["trace_id"])) is not None]
        readable = {w["wake_id"] for w in self._readable(actor, "wake", wakes, "wake_id")}
        rows = [r for r in rows if r["trace_id"] in readable]
        return list(map(trusted(Trace), rows))

    def get_receipt(self, receipt_id: str, *, actor: str | None = None) -> Receipt:
        check_id("receipt_id", receipt_id)
        return self._get(Receipt, "receipts", "receipt", receipt_id, actor, receipt_id=receipt_id)

    def receipt_for_wake(self, wake_id: str, *, actor: str | None = None) -> Receipt:
        check_id("wake_id", wake_id)
        rows = self._store.read.rows("receipts", {"wake_id": wake_id}, limit=1)
        if not rows:
            raise NotFound("receipt", f"for wake {wake_id}")
        self._may_read(actor, "receipt", rows[0]["receipt_id"], rows[0])
        return Receipt.model_validate(rows[0])

    def list_receipts(self, *, agent_id: str | None = None, limit: int = 1000,
                      actor: str | None = None) -> list[Receipt]:
        where = {"agent_id": check_id("agent_id", agent_id)} if agent_id is not None else {}
        return self._list(Receipt, "receipts", "receipt", actor, where, order_by=("created_at_us", "receipt_id"),
                          limit=check_limit(limit, MAX_LISTED))
