"""The heart of the World facade: validation, operation identity and the path to the gateway.

Every mutating World call runs through :meth:`WorldCore._write`:

1. the request is validated into a pydantic model (bad input: typed error, nothing read or written);
2. its operation id (given, or generated) and request hash are fixed; a known id is answered from the
   ledger before anything else is read, so a retry after an unclear outcome never applies twice;
3. the call's ``plan`` reads what it needs and returns the row changes (compare-and-set on the versions it
   read), the event and the result;
4. the store's gateway commits it all in one transaction and success is returned only after commit.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from engine.errors import NotFound, OperationConflict, VersionConflict
from engine.models.common import Model, canonical_json
from engine.models.lifecycle import Lifecycle
from engine.sources import Clock, IdSource, RandomIds, SystemClock
from engine.validation import build, check_id
from store import Change, Provenance, Store, Update, WriteRequest

R = TypeVar("R", bound=BaseModel)


class Cause(Model):
    """Where a write comes from: the event that caused it and the chain (correlation) it belongs to."""

    causation_id: str | None = None
    correlation_id: str | None = None
    parent_event_id: str | None = None


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


def request_hash(command: str, actor: str, request: BaseModel) -> str:
    body = canonical_json({"command": command, "actor": actor, "request": request.model_dump(mode="json")})
    return hashlib.sha256(body.encode()).hexdigest()


class WorldCore:
    """State shared by every group of World calls: the store, the injected clock and id source."""

    def __init__(self, store: Store, *, clock: Clock | None = None, ids: IdSource | None = None,
                 artifact_dir: Path | None = None) -> None:
        self.store = store
        self.clock: Clock = clock or SystemClock()
        self.ids: IdSource = ids or RandomIds()
        self.artifact_dir = artifact_dir

    # -- reads -------------------------------------------------------------------------------------

    def _row(self, table: str, kind: str, ident: str, **key: Any) -> dict[str, Any]:
        row = self.store.read.get(table, **key)
        if row is None:
            raise NotFound(kind, ident)
        return row

    def _load(self, model: type[R], table: str, kind: str, ident: str, **key: Any) -> R:
        return model.model_validate(self._row(table, kind, ident, **key))

    # -- the write path ----------------------------------------------------------------------------

    def _write(self, command: str, actor: str, request: BaseModel, plan: Callable[[int], Plan],
               result_type: type[R], *, op_id: str | None, cause: Cause | None,
               event_id: str | None = None) -> R:
        """Validate identity, dedupe by operation id, plan at ``now`` and commit through the gateway."""
        check_id("actor", actor)
        digest = request_hash(command, actor, request)
        if op_id is not None:
            check_id("op_id", op_id)
            stored = self.store.operation(op_id)
            if stored is not None:
                if stored.request_hash != digest or stored.command != command:
                    raise OperationConflict(op_id, command)
                return result_type.model_validate(stored.result)
        now = self.clock.now_us()
        p = plan(now)
        cause = cause or Cause()
        event_id = event_id or self.ids.new("evt")
        outcome = self.store.commit(WriteRequest(
            op_id=op_id or self.ids.new("op"), command=command, request_hash=digest, actor_id=actor,
            event_id=event_id, event_type=p.event_type, subject_kind=p.subject_kind,
            subject_id=p.subject_id, created_at_us=now, result=p.result.model_dump(mode="json"),
            changes=p.changes, payload=p.payload,
            provenance=[Provenance(self.ids.new("prv"), *edge) for edge in p.provenance],
            parent_event_id=cause.parent_event_id, causation_id=cause.causation_id,
            correlation_id=cause.correlation_id, base_version=p.base_version,
            resulting_version=p.resulting_version, topology_version=p.topology_version))
        if not outcome.replayed and isinstance(p.result, result_type):
            return p.result
        return result_type.model_validate(outcome.result)  # a concurrent twin committed first

    def _transition(self, model: type[R], table: str, kind: str, ident: str, lifecycle: Lifecycle,
                    action: str, now: int, *, expected_version: int | None = None,
                    values: dict[str, Any] | None = None, check: Callable[[R], None] | None = None,
                    status_field: str = "status", time_field: str | None = "updated_at_us",
                    event_type: str | None = None, extra: Sequence[Change] = (),
                    payload: dict[str, Any] | None = None) -> tuple[Plan, R]:
        """Plan a lifecycle transition of one row: read it, check the caller's expected version, the
        state machine and ``check``; then compare-and-set status, time and ``values``."""
        key_field = {"tasks": "task_id", "memory": "memory_id", "wakes": "wake_id",
                     "handoffs": "handoff_id", "rooms": "room_id", "deliveries": "delivery_id",
                     "sessions": "session_id", "artifacts": "artifact_id"}[table]
        row = self._row(table, kind, ident, **{key_field: ident})
        current, version = model.model_validate(row), int(row["version"])
        if expected_version is not None and expected_version != version:
            raise VersionConflict(kind, ident, expected_version, version)
        status = lifecycle.target(ident, str(row[status_field]), action)
        if check is not None:
            check(current)
        new_values = {status_field: status, **(values or {})}
        if time_field is not None:
            new_values[time_field] = now
        updated = model.model_validate({**current.model_dump(), **new_values, "version": version + 1})
        plan = Plan(event_type or f"{kind}.{action}", kind, ident, updated,
                    [Update(table, {key_field: ident}, version, _jsonable(new_values), kind, ident), *extra],
                    payload=payload or {}, base_version=version, resulting_version=version + 1)
        return plan, updated

    @staticmethod
    def _cause(cause: Cause | dict[str, Any] | None) -> Cause | None:
        if cause is None or isinstance(cause, Cause):
            return cause
        return build(Cause, **cause)


def _jsonable(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v.model_dump(mode="json") if isinstance(v, BaseModel) else v for k, v in values.items()}


__all__ = ["Cause", "Plan", "WorldCore", "request_hash"]
