"""Shared state: versioned keys written only by compare-and-set; free-standing events."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from engine.commands.state import AppendEvent, CompareAndSetState
from engine.errors import InvalidInput
from engine.models.common import Id, Model, TimeUs
from engine.models.events import Event
from engine.models.state import StateEntry, StateRead
from engine.policy.attributes import GOVERNOR_ROLE
from engine.policy.enforcement import Check
from engine.policy.model import ACTOR_ROLE_FIELD, DECISION_EVENTS
from engine.validation import build, check_id, check_int64
from engine.world.core import Cause, Plan, WorldCore
from engine.world.event_types import append_refusal
from engine.world.list_limits import MAX_EVENTS, check_limit
from engine.world.log_view import shown_records
from engine.world.read_set import fenced, issue, world_key
from store import Insert, Update


class EventRef(Model):
    """What ``append_event`` returns (the log position is assigned at commit; read it with ``events``)."""

    event_id: Id
    event_type: str
    created_at_us: TimeUs


class StateCalls(WorldCore):
    def get_state(self, key: str, *, actor: str | None = None) -> StateRead:
        """The current entry for ``key`` with its read token (pass it to ``compare_and_set_state`` so the
        write is refused if the key changed since: ``engine.world.read_set``); raises ``NotFound``."""
        k = build(CompareAndSetState, key=key, expected_version=0, value=None).key
        entry = self._get(StateEntry, "state_entries", "state", k, actor, key=k)
        return StateRead(**entry.model_dump(), read_token=issue([(entry.key, entry.version)],
                                                                    key=world_key(self._store.read)))

    def list_state(self, prefix: str = "", limit: int = 1000, *, actor: str | None = None) -> list[StateEntry]:
        """Entries whose key starts with ``prefix``, in key order, at most ``limit`` (1 to 100,000)."""
        if not 1 <= check_int64("limit", limit) <= 100_000:
            raise InvalidInput("limit", f"{limit!r} is not a whole number from 1 to 100000")
        entries = self._list(StateEntry, "state_entries", "state", actor, {})
        return [e for e in entries if e.key.startswith(prefix)][:limit]

    def compare_and_set_state(self, actor: str, key: str, expected_version: int, value: Any, *,
                              read_token: str | None = None, op_id: str | None = None,
                              cause: Cause | None = None) -> StateEntry:
        """Write ``value`` only if ``key`` is at ``expected_version`` (0: the key must not exist yet) and,
        with ``read_token``, only if every key that read saw is still at the version it was read at.

        Raises ``VersionConflict`` (with the current version) on a stale write, ``StaleRead`` (what changed)
        when the read set moved on, ``InvalidInput`` on a token this server did not issue, ``AlreadyExists``
        when creating a key that exists, ``NotFound`` when updating a key that does not.
        """
        req = build(CompareAndSetState, key=key, expected_version=expected_version, value=value,
                    read_token=read_token)
        with self._read_set_fence(req.read_token):
            return self._write("compare_and_set_state", actor, req, lambda now: self._plan_cas(actor, req, now),
                               StateEntry, op_id=op_id, cause=cause)

    def _read_set_fence(self, read_token: str | None) -> AbstractContextManager[None]:
        """The write's read-set check, run by the gateway in the write's transaction (none without a token).
        A planned batch commits later, outside this call: a token there is refused (the batch's committer
        fences the batch's commit with ``read_set.fence`` itself)."""
        if read_token is not None and getattr(self._planning_now, "batch", None) is not None:
            raise InvalidInput("read_token", "not accepted in a planned batch: fence the batch's commit instead")
        return fenced(self._door, read_token, key=world_key(self._store.read) if read_token is not None else None)

    @staticmethod
    def _plan_cas(actor: str, req: CompareAndSetState, now: int) -> Plan:
        version = req.expected_version + 1
        # every field is already validated (the request, the actor id, the clock): construct, don't re-check
        entry = StateEntry.model_construct(key=req.key, value=req.value, version=version, updated_by=actor,
                                           updated_at_us=now)
        change: Insert | Update
        if req.expected_version == 0:
            change = Insert("state_entries", entry.model_dump(mode="json"), "state", req.key)
        else:
            change = Update("state_entries", {"key": req.key}, req.expected_version,
                            {"value": req.value, "updated_by": actor, "updated_at_us": now}, "state", req.key)
        return Plan("state.set", "state", req.key, entry, [change], payload={"key": req.key},
                    checks=[Check("state", req.key, "write", entry.model_dump(mode="json"))],
                    base_version=req.expected_version, resulting_version=version)

    def append_event(self, actor: str, event_type: str, payload: dict[str, Any] | None = None, *,
                     subject_kind: str = "world", subject_id: str = "world", op_id: str | None = None,
                     cause: Cause | None = None) -> EventRef:
        """Append an event that changes no state (a claim asserted, a conflict raised, a delta noted).

        The World's own event types (every command's, the runtime book's) and the controller's records are
        never appended by hand (``InvalidInput``, ``engine.world.event_types``). The policy decides the event
        type (``event:append`` on the type): most types need ``state.write``; a decision event
        (``DECISION_EVENTS``: ``conflict.resolved``, ``review.done``, ``review.requested``), which changes the
        controller's decisions, only the workspace roles the policy names for it. On a decision event the
        runtime records the appender's role in the payload (``actor_role``, from its row), which the
        controller checks again; a payload that brings its own ``actor_role`` is ``InvalidInput``."""
        req = build(AppendEvent, event_type=event_type, subject_kind=subject_kind, subject_id=subject_id,
                    payload=payload or {})
        if (refusal := append_refusal(check_id("actor", actor), req.event_type, _controller_agent())) is not None:
            raise InvalidInput("event_type", refusal)
        given = req.payload or {}
        decision = req.event_type in DECISION_EVENTS
        if decision and ACTOR_ROLE_FIELD in given:
            raise InvalidInput(f"payload.{ACTOR_ROLE_FIELD}", "is recorded by the runtime, never given")
        event_id = self.ids.new("evt")

        def plan(now: int) -> Plan:
            body = given
            if decision:
                row = self._store.read.get("agents", agent_id=actor)
                body = {**body, ACTOR_ROLE_FIELD: str(row["role_id"]) if row is not None else ""}
            return Plan(req.event_type, req.subject_kind, req.subject_id,
                        EventRef(event_id=event_id, event_type=req.event_type, created_at_us=now),
                        payload=body, checks=[Check("event", req.event_type, "append",
                                                    {"event_type": req.event_type})])
        return self._write("append_event", actor, req, plan, EventRef, op_id=op_id, cause=cause, event_id=event_id)

    def events(self, after_seq: int = 0, limit: int = 100, *, newest: bool = False,
               actor: str | None = None) -> list[Event]:
        """Events after position ``after_seq`` in log order (``newest``: the last ``limit`` events), at most
        ``limit`` (1 to :data:`~engine.world.list_limits.MAX_EVENTS`; page on with ``after_seq``).
        With a PDP the reader needs ``state:read`` on ``log``. What a record shows is decided by
        :mod:`engine.world.log_view`: row images only of the tables it lists (never a snapshot's image);
        the full record (row images, results, payloads) is the governors' audit view, any other reader gets
        every event's envelope (ids, type, actor, subject, versions, chain, time) and the full record of its
        own events only; in every full record, governors' included, the content of memory the reader may
        not read now (another agent's private memory, an unrevealed answer) and the discussion of a room it
        is not an active member of are sealed."""
        after_seq, limit = check_int64("after_seq", after_seq), check_limit(limit, MAX_EVENTS)
        self._may_read(actor, "state", "log", {})
        rows = self._store.read.events(after_seq, limit, newest=newest)
        governor = actor is not None and self._policy.external and self._is_governor(actor)
        return [Event.model_validate(r) for r in shown_records(self, actor, rows, governor=governor)]

    def _is_governor(self, agent_id: str) -> bool:
        row = self._store.read.get("agents", agent_id=agent_id)
        return row is not None and row["role_id"] == GOVERNOR_ROLE


def _controller_agent() -> str:
    from engine.world import CONTROLLER_AGENT  # the package's constant (engine.world imports this module)

    return CONTROLLER_AGENT
