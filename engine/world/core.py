"""The heart of the World facade: validation, operation identity and the path to the gateway.

Every mutating World call runs through :meth:`WorldCore._write`:

1. the request is validated into a pydantic model (bad input: typed error, nothing read or written);
2. its operation id (given, or generated) and request hash are fixed; a known id is answered from the
   ledger before anything else is read, so a retry after an unclear outcome never applies twice;
3. the call's ``plan`` reads what it needs and returns the row changes (compare-and-set on the versions it
   read), the event and the result;
4. the store's gateway commits it all in one transaction and success is returned only after commit.

A World writes through the door it was given (:class:`store.Door`). The agent-facing
:class:`~engine.world.World` holds the store's decided door, so every write it makes carries the policy
decision it was taken under; the runtime's own bookkeeping goes through the runtime door, which only
:class:`~engine.world.book.RuntimeBook` holds (``docs/security.md``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from engine.errors import InvalidInput, NotFound, OperationConflict, PolicyDenied, PolicyUnavailable, VersionConflict
from engine.models.common import Id, Model
from engine.models.lifecycle import Lifecycle
from engine.models.trusted import trusted
from engine.policy.enforcement import Authorizer, Check
from engine.policy.model import PlanFilter
from engine.sources import Clock, IdSource, RandomIds, SystemClock
from engine.validation import check_id, invalid_from
from store import (
    STATE_TABLE_KEYS,
    BatchRefused,
    Change,
    CommitOutcome,
    Door,
    Provenance,
    ReadOnlyStore,
    Store,
    Update,
    WriteRequest,
)
from store.plan_sql import UntranslatablePlan

R = TypeVar("R", bound=BaseModel)


class Cause(Model):
    """Where a write comes from: the event that caused it and the chain (correlation) it belongs to."""

    causation_id: Id | None = None
    correlation_id: Id | None = None
    parent_event_id: Id | None = None


@dataclass
class Plan:
    """What one World call will write: built by the call, committed by the gateway."""

    event_type: str
    subject_kind: str
    subject_id: str
    result: BaseModel
    changes: Sequence[Change] = ()
    payload: dict[str, Any] = field(default_factory=dict)
    provenance: Sequence[tuple[str, str, str, str, str]] = ()  # src_kind, src_id, dst_kind, dst_id, relation
    base_version: int | None = None
    resulting_version: int | None = None
    topology_version: int | None = None
    checks: Sequence[Check] = ()  # what the policy decides before this plan may be committed
    #: fills in what the plan records of the policy epoch it is decided under (a single write: called with
    #: that epoch once decided, before the request is built; a planned batch's write keeps its plan's)
    on_decided: Callable[[str | None], None] | None = None


@dataclass(frozen=True)
class PlannedWrite:
    """One write planned inside :meth:`WorldCore.planning`: neither decided nor committed yet."""

    actor: str
    command: str
    checks: Sequence[Check]
    request: WriteRequest  # its policy_epoch is filled in when the batch is decided
    decided: bool


class PlannedBatch:
    """The writes World calls planned inside one :meth:`WorldCore.planning` block, in order; committed (all
    or nothing) by :meth:`WorldCore.commit_planned` of the World that planned them, and by nothing else."""

    def __init__(self, owner: object) -> None:
        self._owner = owner
        self._writes: list[PlannedWrite] = []
        self._committed = False

    def __len__(self) -> int:
        return len(self._writes)

    def commands(self) -> list[str]:
        """The command of each planned write, in order."""
        return [w.command for w in self._writes]


class PlannedDenied(Exception):
    """The policy denied writes of a planned batch (``denied``: write index -> the denial, every denied write
    of the batch); nothing of the batch was committed. ``epoch``: the epoch the batch was decided under."""

    def __init__(self, denied: dict[int, PolicyDenied], epoch: str | None) -> None:
        super().__init__("; ".join(f"write {i}: {d.message}" for i, d in sorted(denied.items())))
        self.denied = denied
        self.epoch = epoch


def request_hash(command: str, actor: str, request: BaseModel) -> str:
    """The identity of a request (what a retried operation id must match): sha256 of its sorted JSON."""
    body = {"command": command, "actor": actor, "request": request.model_dump(mode="json")}
    return hashlib.sha256(orjson.dumps(body, option=_SORTED)).hexdigest()


DenialRecorder = Callable[[str, str, PolicyDenied], None]
class OpIdGuard(Protocol):
    """Why ``actor`` may not use ``op_id`` for ``command`` (``engine.world.op_ids``), or None."""

    def __call__(self, actor: str, op_id: str, command: str = "") -> str | None: ...



class WorldCore:
    """State shared by every group of World calls: the store (reads), the door its writes go through, the
    policy that decides them, the injected clock and id source."""


    def __init__(self, store: Store | ReadOnlyStore, *, door: Door, policy: Authorizer, clock: Clock | None = None,
                 ids: IdSource | None = None, artifact_dir: Path | None = None,
                 denials: DenialRecorder | None = None, op_ids: OpIdGuard | None = None) -> None:
        self._store = store
        self._door = door
        self._policy = policy
        self._clock: Clock = clock or SystemClock()
        self._ids: IdSource = ids or RandomIds()
        self._artifact_dir = artifact_dir
        self._denials = denials
        self._op_ids = op_ids  # the agent-facing World's: engine.world.op_ids (None: the runtime's book)
        self._planning_now = threading.local()  # this thread's open PlannedBatch, if any
        self._held = threading.local()  # denials noted inside this thread's open reading() block

    @property
    def clock(self) -> Clock:
        """The world's clock (injected: simulations and tests replay exactly)."""
        return self._clock

    @property
    def ids(self) -> IdSource:
        """The world's id source (injected)."""
        return self._ids

    @property
    def artifact_dir(self) -> Path | None:
        """Where artifact content is kept (content-addressed)."""
        return self._artifact_dir


    # -- reads -------------------------------------------------------------------------------------

    def _row(self, table: str, kind: str, ident: str, **key: Any) -> dict[str, Any]:
        row = self._store.read.get(table, **key)
        if row is None:
            raise NotFound(kind, ident)
        return row

    def _load(self, model: type[R], table: str, kind: str, ident: str, **key: Any) -> R:
        return trusted(model)(self._row(table, kind, ident, **key))

    def _reader(self, actor: str | None) -> str | None:
        """The reading agent: required (and validated) when an external PDP decides reads."""
        if actor is None:
            if self._policy.external:
                raise InvalidInput("actor", "reads are decided by the policy: say who is reading")
            return None
        return check_id("actor", actor)

    def _may_read(self, actor: str | None, kind: str, ident: str, row: dict[str, Any]) -> None:
        """Raise unless ``actor`` may read this row (no-op without a PDP)."""
        who = self._reader(actor)
        if who is not None and self._policy.external:
            self._authorize(who, [Check(kind, ident, "read", row)], "read")

    def _readable(self, actor: str | None, kind: str, rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
        """The rows ``actor`` may read, in order (all of them without a PDP)."""
        who = self._reader(actor)
        if who is None or not self._policy.external or not rows:
            return rows
        decisions = self._policy.decide(who, [Check(kind, str(r[key]), "read", r) for r in rows])
        return [r for r, d in zip(rows, decisions, strict=True) if d.allowed("read")]

    def _get(self, model: type[R], table: str, kind: str, ident: str, actor: str | None, **key: Any) -> R:
        """One object, if it exists (``NotFound``) and ``actor`` may read it (``PolicyDenied``)."""
        self._reader(actor)  # who is reading comes first: an anonymous read learns nothing
        row = self._row(table, kind, ident, **key)
        self._may_read(actor, kind, ident, row)
        return trusted(model)(row)

    def _list(self, model: type[R], table: str, kind: str, actor: str | None, where: dict[str, Any], *,
              order_by: Sequence[str] = (), limit: int | None = None, descending: bool = False,
              plans: Mapping[str, PlanFilter | None] | None = None) -> list[R]:
        """The objects matching ``where`` that ``actor`` may read: with a PDP, one query filtered by the
        policy's plan (or, if the plan cannot be expressed in SQL, batched single checks). ``plans``: read
        plans by kind already asked for ``actor`` in this call (several kinds in one round trip)."""
        who = self._reader(actor)
        if who is None or not self._policy.external:
            rows = self._store.read.rows(table, where, order_by=order_by, limit=limit, descending=descending)
            return list(map(trusted(model), rows))
        plan = plans[kind] if plans is not None and kind in plans else self._policy.plan(who, kind, "read")
        try:
            rows = self._store.read.rows_allowed(kind, plan, where, order_by=order_by, limit=limit,
                                                descending=descending) if plan is not None else []
        except UntranslatablePlan:
            rows = self._store.read.rows(table, where, order_by=order_by, descending=descending)
            key = next(iter(STATE_TABLE_KEYS[table]))
            rows = self._readable(who, kind, rows, key)[:limit]
        return list(map(trusted(model), rows))

    def _authorize(self, actor: str, checks: Sequence[Check], command: str) -> str | None:
        """The PDP's decision for ``checks``; a denial is recorded in the log (audit) and re-raised."""
        try:
            return self._policy.authorize(actor, checks)
        except PolicyDenied as denied:
            self._record_denial(actor, command, denied)
            raise

    def _record_denial(self, actor: str, command: str, denied: PolicyDenied) -> None:
        """Record ``denied`` in the log (audit): at once, or inside :meth:`reading` when the block ends."""
        if self._denials is None:
            return
        held: list[tuple[str, str, PolicyDenied]] | None = getattr(self._held, "denials", None)
        if held is not None:
            held.append((actor, command, denied))
        else:
            self._denials(actor, command, denied)

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Within this block (in this thread), this World's reads run in ONE read transaction
        (:meth:`store.reads.Reader.snapshot`: one consistent view, one BEGIN), e.g. a cycle's rehydrate and
        projection, or the planning of its effects and ack. A denial recorded by a call inside (its own
        write: on a SQLite file nothing may write inside the read transaction) is recorded when the block
        ends, also when it ends by raising. Nothing else may write inside it; nested, it adds nothing."""
        if getattr(self._held, "denials", None) is not None:
            yield
            return
        held: list[tuple[str, str, PolicyDenied]] = []
        self._held.denials = held
        try:
            with self._store.read.snapshot():
                yield
        finally:
            self._held.denials = None
            for actor, command, denied in held:
                self._record_denial(actor, command, denied)

    # -- planned batches ---------------------------------------------------------------------------

    @contextmanager
    def planning(self) -> Iterator[PlannedBatch]:
        """Within this block (in this thread), World writes are planned and collected, not decided or
        committed: each call validates, answers a known operation id from the ledger, plans (reads) and
        returns its planned result. Policy checks a call makes outside its write (e.g. before staging an
        artifact's bytes) are still asked at once. :meth:`commit_planned` decides and commits the batch."""
        if getattr(self._planning_now, "batch", None) is not None:
            raise RuntimeError("a planned batch is open in this thread already")  # a programming error
        batch = PlannedBatch(self)
        self._planning_now.batch = batch
        try:
            with self._store.read.pending_rows():  # a later write of the batch is planned on the earlier
                yield batch
        finally:
            self._planning_now.batch = None

    def commit_planned(self, batch: PlannedBatch) -> list[CommitOutcome]:
        """Decide and commit ``batch`` (planned by this World) in one transaction, all or nothing.

        All checks of the batch's writes go to the policy at once, inside the commit's own transaction (the
        principal and resources read there: the answer and the commit see one state of the world): one
        request per acting principal (and task the principal acts for). A denied write commits nothing:
        :class:`PlannedDenied` names every denied write (each denial is recorded after the rollback, as a
        single write's is). Then the gateway commits every write in that transaction
        (:func:`store.gateway.commit_many`: :class:`store.BatchRefused` names the write that was refused and
        why; nothing was written). ``PolicyUnavailable`` leaves nothing written."""
        return self._commit_batch(batch, self._door, [])

    def _commit_batch(self, batch: PlannedBatch, door: Door, leading: list[WriteRequest]) -> list[CommitOutcome]:
        """:meth:`commit_planned` through ``door``, with ``leading`` (the runtime's own undecided writes: only
        the runtime's door takes them) committed first in the same transaction. Returns the leading writes'
        outcomes, then the batch's. A refused batch write is ``BatchRefused`` with its index in the batch; a
        refused leading write raises its own error (e.g. ``OperationConflict``); nothing is written either way."""
        if batch._owner is not self or batch._committed:
            raise InvalidInput("batch", "not an uncommitted batch planned by this world")
        writes = batch._writes
        by_actor: dict[str, list[tuple[int, Check]]] = {}
        for n, w in enumerate(writes):
            if w.decided:
                if not w.checks and self._policy.external:
                    raise PolicyUnavailable(f"{w.command}: a write with nothing to decide: refusing")
                by_actor.setdefault(w.actor, []).extend((n, c) for c in w.checks)

        def decide(requests: list[WriteRequest]) -> list[WriteRequest]:
            denied: dict[int, PolicyDenied] = {}
            epochs: set[str | None] = set()
            for actor, asked in by_actor.items():
                decisions = self._policy.decide(actor, [c for _, c in asked])
                for (n, check), decision in zip(asked, decisions, strict=True):
                    epochs.add(decision.epoch)
                    if not decision.allowed(check.action) and n not in denied:
                        denied[n] = PolicyDenied(actor, check.action, check.kind, check.id, decision.epoch)
            if self._policy.external and by_actor and (None in epochs or len(epochs) != 1):
                raise PolicyUnavailable(f"the PDP answered without one policy epoch ({sorted(map(str, epochs))})")
            epoch = next(iter(epochs)) if len(epochs) == 1 else None
            if denied:
                raise PlannedDenied(denied, epoch)
            return [*requests[:ahead], *(dataclasses.replace(r, policy_epoch=epoch) if w.decided else r
                                         for w, r in zip(writes, requests[ahead:], strict=True))]

        ahead = len(leading)
        try:
            outcomes = door.commit_many([*leading, *(w.request for w in writes)], decide, runtime_writes=ahead)
        except PlannedDenied as refused:  # rolled back: each denial recorded now, its own write
            for n, refusal in sorted(refused.denied.items()):
                self._record_denial(writes[n].actor, writes[n].command, refusal)
            raise
        except BatchRefused as refused:
            if refused.index < ahead:
                raise refused.error from refused
            if ahead:
                raise BatchRefused(refused.index - ahead, refused.error) from refused
            raise
        batch._committed = True
        return outcomes

    # -- the write path ----------------------------------------------------------------------------

    def _replayed(self, command: str, caller: str | None, request: BaseModel, result_type: type[R],
                  op_id: str | None) -> R | None:
        """The stored result of operation ``op_id`` if it was committed (``None`` if not, or no id):
        ``OperationConflict`` when the id was used for another request. ``caller`` is who the request
        names as acting (``None``: the call derives it, e.g. from a target), so a retry is recognised
        before anything it would derive is read again."""
        if op_id is None:
            return None
        check_id("op_id", op_id)
        stored = self._store.operation(op_id)
        if stored is None:
            return None
        if stored.request_hash != request_hash(command, caller or "", request) or stored.command != command:
            raise OperationConflict(op_id, command)
        return result_type.model_validate(stored.result)

    def _write(self, command: str, actor: str, request: BaseModel, plan: Callable[[int], Plan],
               result_type: type[R], *, op_id: str | None, cause: Cause | None,
               event_id: str | None = None, decided: bool = True, caller: str | None = None,
               ledger_first: bool = True) -> R:
        """Validate identity, dedupe by operation id, plan at ``now``, ask the policy, and commit through
        this World's door. ``decided=False`` skips the policy: only the runtime's book does that (the first
        governor's bootstrap, epochs, denial records, revocations, recorded decisions, controller steps),
        and the gateway refuses an undecided write through any other door. ``caller``: who the request named
        as acting, when ``actor`` was derived from it (the operation's identity is the request as asked).
        ``ledger_first=False``: no ledger read before planning, for a write whose plan reads nothing and
        decides nothing (a retry is answered by the gateway's unique operation id instead, one read fewer)."""
        check_id("actor", actor)
        if op_id is not None and self._op_ids is not None and (
                refusal := self._op_ids(actor, check_id("op_id", op_id), command)) is not None:
            raise InvalidInput("op_id", refusal)
        identity = caller if caller is not None else actor
        digest = request_hash(command, identity, request)
        if ledger_first and (stored := self._replayed(command, identity, request, result_type, op_id)) is not None:
            return stored
        now = self.clock.now_us()
        p = plan(now)
        batch: PlannedBatch | None = getattr(self._planning_now, "batch", None)
        epoch = self._authorize(actor, p.checks, command) if decided and batch is None else None
        if p.on_decided is not None and batch is None:
            p.on_decided(epoch)
        checked = self._checked_cause(cause)
        event_id = event_id or self.ids.new("evt")  # ids drawn in this order: evt, op, prv (seeded worlds replay)
        write = self._request(command, actor, digest, p, now, op_id=op_id or self.ids.new("op"), cause=checked,
                              epoch=epoch, event_id=event_id)
        if batch is not None:  # planned only: decided and committed with its batch (commit_planned)
            batch._writes.append(PlannedWrite(actor, command, p.checks, write, decided))
            for change in p.changes:
                if isinstance(change, Update):
                    self._store.read.add_pending(change.table, change.key,
                                                 {**change.values, "version": change.expected_version + 1},
                                                 insert=False)
                else:
                    key = {k: change.row[k] for k in STATE_TABLE_KEYS.get(change.table, ()) if k in change.row}
                    if key:
                        self._store.read.add_pending(change.table, key, change.row, insert=True)
            return p.result if isinstance(p.result, result_type) else result_type.model_validate(write.result)
        outcome = self._door.commit(write)
        if not outcome.replayed and isinstance(p.result, result_type):
            return p.result
        return result_type.model_validate(outcome.result)  # a concurrent twin committed first

    def _request(self, command: str, actor: str, digest: str, p: Plan, now: int, *, op_id: str, cause: Cause,
                 epoch: str | None, event_id: str | None = None) -> WriteRequest:
        """The gateway's request for plan ``p`` of operation ``op_id`` (request hash ``digest``), decided under
        ``epoch``: its event (a fresh id unless ``event_id``), changes and provenance edges."""
        return WriteRequest(
            op_id=op_id, command=command, request_hash=digest, actor_id=actor,
            event_id=event_id or self.ids.new("evt"), event_type=p.event_type, subject_kind=p.subject_kind,
            subject_id=p.subject_id, created_at_us=now, result=p.result.model_dump(mode="json"),
            changes=p.changes, payload=p.payload,
            provenance=[Provenance(self.ids.new("prv"), *edge) for edge in p.provenance],
            parent_event_id=cause.parent_event_id, causation_id=cause.causation_id,
            correlation_id=cause.correlation_id, base_version=p.base_version,
            resulting_version=p.resulting_version, topology_version=p.topology_version, policy_epoch=epoch)

    def _transition(self, model: type[R], table: str, kind: str, ident: str, lifecycle: Lifecycle,
                    action: str, now: int, *, expected_version: int | None = None,
                    values: dict[str, Any] | None = None, check: Callable[[R], None] | None = None,
                    status_field: str = "status", time_field: str | None = "updated_at_us",
                    event_type: str | None = None, extra: Sequence[Change] = (),
                    payload: dict[str, Any] | None = None, policy_action: str | None = None,
                    side_effect: str = "S0") -> tuple[Plan, R]:
        """Plan a lifecycle transition of one row: read it, check the caller's expected version, the
        state machine and ``check``; then compare-and-set status, time and ``values``."""
        (key_field,) = STATE_TABLE_KEYS[table]  # lifecycle objects have a one-column key
        row = self._row(table, kind, ident, **{key_field: ident})
        current, version = trusted(model)(row), int(row["version"])
        if expected_version is not None and expected_version != version:
            raise VersionConflict(kind, ident, expected_version, version)
        status = lifecycle.target(ident, str(row[status_field]), action)
        if check is not None:
            check(current)
        new_values = {status_field: status, **(values or {})}
        if time_field is not None:
            new_values[time_field] = now
        updated = model.model_validate({**current.model_dump(), **new_values, "version": version + 1})
        check_kind = _POLICY_KIND.get(kind, kind)
        decide = Check(check_kind, str(row["agent_id"]) if kind == "session" else ident,
                       policy_action or _POLICY_ACTION.get((kind, action), action), row, side_effect)
        plan = Plan(event_type or f"{kind}.{action}", kind, ident, updated,
                    [Update(table, {key_field: ident}, version, _jsonable(new_values), kind, ident), *extra],
                    payload=payload or {}, base_version=version, resulting_version=version + 1, checks=[decide])
        return plan, updated

    @staticmethod
    def _checked_cause(cause: object) -> Cause:
        """The cause of a write, validated whatever the caller passed (a Cause built without validation, a
        mapping, anything else): ``InvalidInput`` naming ``cause`` when it is not one."""
        if cause is None:
            return Cause()
        if isinstance(cause, Cause):  # perhaps built without validation: its fields, read as they are
            cause = {name: getattr(cause, name, None) for name in Cause.model_fields}
        if not isinstance(cause, dict):
            raise InvalidInput("cause", f"must be a Cause (causation_id, correlation_id, parent_event_id), "
                                        f"not {type(cause).__name__}")
        try:
            return Cause.model_validate(cause)
        except ValidationError as exc:
            raise invalid_from(exc, "cause") from exc


_POLICY_KIND = {"delivery": "message", "session": "agent"}
_POLICY_ACTION = {("session", "activate"): "update", ("session", "relinquish"): "update",
                  ("session", "detach"): "update", ("session", "attach"): "update"}


def request_hash_of(value: Any) -> str:
    return hashlib.sha256(orjson.dumps(value, option=_SORTED)).hexdigest()


_SORTED = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


def _jsonable(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v.model_dump(mode="json") if isinstance(v, BaseModel) else v for k, v in values.items()}


__all__ = ["Cause", "Plan", "PlannedBatch", "PlannedDenied", "PlannedWrite", "WorldCore", "request_hash"]
