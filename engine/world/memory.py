"""Scoped memory: private, room and shared, with a reviewed path to "shared" (shared is not true).

A private inference never becomes a shared fact without review: ``store_memory`` writes private or room
memory only; ``propose_memory`` makes it a candidate; a reviewer other than the owner promotes it.
Revoking a source revokes what was derived from it (through provenance ``derived_from`` edges).

Private memory (an unrevealed blind answer included) is sealed from every other agent, governors
included: the policy gives governors no ``read`` of another agent's private memory, projections of
another agent show none, and the log's row images shown to a reader carry no content of memory it may
not read (:func:`seal_memory_content`). A governor who must read it uses :meth:`MemoryCalls.break_glass_read`,
which is decided by the PDP (``memory:break_glass``) and recorded as an event (who, what, why) before
the content is returned.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from engine.commands.memory import (
    ArchiveMemory,
    PromoteMemory,
    ProposeMemory,
    RejectMemory,
    ReopenMemory,
    ReviewMemory,
    RevokeMemory,
    StoreMemory,
    SupersedeMemory,
)
from engine.commands.memory import BreakGlassRead as BreakGlassCommand
from engine.errors import IllegalTransition, InvalidInput, NotFound, NotPermitted, PolicyDenied, VersionConflict
from engine.models.common import Id, Model, TimeUs
from engine.models.memory import MEMORY_LIFECYCLE, Memory, MemoryScope, MemoryStatus
from engine.policy.enforcement import Check
from engine.validation import build, check_id, check_int64
from engine.world.core import Cause, Plan, WorldCore
from store import Change, Insert, Update

MAX_REVOKE_CASCADE = 1000
MAX_LIST_MEMORY = 100_000
# What stands in a row image (or a result) for the content of memory its reader may not read.
SEALED_MARK = "sealed"


#: The memory lifecycle commands (each names one memory and, optionally, the version its caller saw).
_Transition = (ProposeMemory | ReviewMemory | PromoteMemory | RejectMemory | ArchiveMemory | ReopenMemory
               | SupersedeMemory | RevokeMemory)


class BreakGlassRecord(Model):
    """What a break-glass read recorded (its event's result): who read which memory of whom, and why. It
    never holds the content."""

    event_id: Id
    actor: Id
    kind: str
    id: str
    memory_id: Id
    owner: Id
    reason: str
    read_at_us: TimeUs


class BreakGlassRead(Model):
    """A break-glass read: the record written before the read, and the memory as it is now."""

    record: BreakGlassRecord
    memory: Memory


class MemoryCalls(WorldCore):
    def store_memory(self, actor: str, content: str, epistemic_type: str, *, scope: str = "private",
                     room_id: str | None = None, confidence: float = 0.5, source_refs: list[str] | None = None,
                     permission_scope: dict[str, Any] | None = None, valid_to_us: int | None = None,
                     ttl_seconds: int | None = None, memory_id: str | None = None, op_id: str | None = None,
                     cause: Cause | None = None) -> Memory:
        """Write private memory (or room memory, as an active member of ``room_id``)."""
        if scope in (MemoryScope.SHARED.value, MemoryScope.ARCHIVE.value):
            raise InvalidInput("scope", "shared memory comes only from review (propose, then promote)")
        req = build(StoreMemory, content=content, epistemic_type=epistemic_type, scope=scope, room_id=room_id,
                    confidence=confidence, source_refs=source_refs or [], permission_scope=permission_scope or {},
                    valid_to_us=valid_to_us, ttl_seconds=ttl_seconds, memory_id=memory_id)
        return self._write("store_memory", actor, req, lambda now: self._plan_store(actor, req, now), Memory,
                           op_id=op_id, cause=cause)

    def _plan_store(self, actor: str, req: StoreMemory, now: int) -> Plan:
        if req.room_id is not None:
            self._require_member(actor, req.room_id, "store memory in")
        mid = req.memory_id or self.ids.new("mem")
        sources = req.source_refs or []
        mem = Memory(memory_id=mid, scope=MemoryScope(req.scope), owner=actor, room_id=req.room_id,
                     epistemic_type=req.epistemic_type, content=req.content, source_refs=sources,
                     confidence=req.confidence, status=MemoryStatus.PRIVATE,
                     permission_scope=req.permission_scope or {}, valid_from_us=now, valid_to_us=req.valid_to_us,
                     expires_at_us=now + req.ttl_seconds * 1_000_000 if req.ttl_seconds else None,
                     created_at_us=now, updated_at_us=now, version=1)
        row = mem.model_dump(mode="json")
        return Plan("memory.stored", "memory", mid, mem, [Insert("memory", row, "memory", mid)],
                    checks=[Check("memory", mid, "create", {**row, "status": ""})],
                    payload={"scope": req.scope, "epistemic_type": req.epistemic_type.value},
                    provenance=[("ref", ref, "memory", mid, "derived_from") for ref in sources],
                    resulting_version=1)

    def get_memory(self, actor: str, memory_id: str) -> Memory:
        """The memory, if ``actor`` may see it by scope; else ``NotPermitted``."""
        check_id("memory_id", memory_id)
        check_id("actor", actor)
        if self._policy.external:
            if self._store.read.get("memory", memory_id=memory_id) is None:
                self._refuse_unless_visible(actor, "read", memory_id, None, "get_memory")
            return self._get(Memory, "memory", "memory", memory_id, actor, memory_id=memory_id)
        mem = self._load(Memory, "memory", "memory", memory_id, memory_id=memory_id)
        if not self._can_see(actor, mem):
            raise NotPermitted(actor, "read", "memory", memory_id, f"{mem.scope.value} memory of {mem.owner}")
        return mem

    def break_glass_read(self, actor: str, kind: str, ident: str, reason: str, *, op_id: str | None = None,
                         cause: Cause | None = None) -> BreakGlassRead:
        """A governor reads memory sealed from it: another agent's private memory (``kind="memory"``,
        ``ident`` a memory id) or a blind answer before its reveal (``kind="room_answer"``, ``ident``
        ``"<room_id>/<agent_id>"``). Decided by the PDP (``memory:break_glass``: live governors only) and
        recorded as a ``memory.break_glass_read`` event (actor, what, whose, ``reason``) that is committed
        before the content is returned; the event holds no content. A retry with the same ``op_id``
        records nothing new. ``PolicyDenied`` (recorded as a denial) for anyone else, decided before
        anything is looked up (so it is the same whether or not ``ident`` names anything); ``NotFound``
        (to a governor) for nothing by that id; ``InvalidInput`` for a bad kind, id or empty reason."""
        req = build(BreakGlassCommand, kind=kind, ident=ident, reason=reason)
        if not req.reason.strip():
            raise InvalidInput("reason", "a break-glass read says why")
        self._sealed_key(req)  # the id's form only: nothing is read yet
        self._authorize(check_id("actor", actor), [Check("memory", req.ident, "break_glass")], "break_glass_read")
        event_id = self.ids.new("evt")

        def plan(now: int) -> Plan:
            row = self._sealed_row(req)
            record = BreakGlassRecord(event_id=event_id, actor=actor, kind=req.kind, id=req.ident,
                                      memory_id=row["memory_id"], owner=row["owner"], reason=req.reason,
                                      read_at_us=now)
            return Plan("memory.break_glass_read", "memory", str(row["memory_id"]), record,
                        payload={"kind": req.kind, "id": req.ident, "memory_id": row["memory_id"],
                                 "owner": row["owner"], "reason": req.reason},
                        checks=[Check("memory", str(row["memory_id"]), "break_glass", row)])
        done = self._write("break_glass_read", actor, req, plan, BreakGlassRecord, op_id=op_id, cause=cause,
                           event_id=event_id)
        memory = self._load(Memory, "memory", "memory", done.memory_id, memory_id=done.memory_id)
        return BreakGlassRead(record=done, memory=memory)

    @staticmethod
    def _sealed_key(req: BreakGlassCommand) -> tuple[str, str | None]:
        """What a break-glass request names, checked (``InvalidInput``): a memory id, or a room and an agent."""
        if req.kind == "memory":
            return check_id("ident", req.ident), None
        room_id, sep, agent_id = req.ident.partition("/")
        if not sep:
            raise InvalidInput("ident", "a room answer is named <room_id>/<agent_id>")
        return check_id("ident", room_id), check_id("ident", agent_id)

    def _sealed_row(self, req: BreakGlassCommand) -> dict[str, Any]:
        first, agent_id = self._sealed_key(req)
        if agent_id is None:
            return self._row("memory", "memory", first, memory_id=first)
        answer = self._row("room_answers", "room_answer", req.ident, room_id=first, agent_id=agent_id)
        return self._row("memory", "memory", str(answer["memory_id"]), memory_id=answer["memory_id"])

    def _refuse_unless_visible(self, actor: str, action: str, memory_id: str, row: dict[str, Any] | None,
                               command: str) -> None:
        """With a PDP: raise ``PolicyDenied`` for ``action`` (recorded as a denial) when ``actor`` may neither
        read nor break-glass the memory (``row``: as it is, or ``None`` for none by that id). Called where the
        World would otherwise answer from its own rules (not found, owner, status, version), which would
        tell the asker about memory it may not see (``allowed_actions`` answers the same)."""
        if not self._policy.external:
            return
        read, glass = self._policy.decide(actor, [Check("memory", memory_id, "read", row),
                                                 Check("memory", memory_id, "break_glass", row)])
        if read.allowed("read") or glass.allowed("break_glass"):
            return
        denied = PolicyDenied(actor, action, "memory", memory_id, read.epoch)
        self._record_denial(actor, command, denied)
        raise denied

    def _can_see(self, actor: str, mem: Memory) -> bool:
        if mem.scope in (MemoryScope.SHARED, MemoryScope.ARCHIVE) or mem.owner == actor:
            return True
        return mem.scope is MemoryScope.ROOM and mem.room_id in self._store.read.active_rooms_of(actor)

    def propose_memory(self, actor: str, memory_id: str, *, expected_version: int | None = None,
                       op_id: str | None = None, cause: Cause | None = None) -> Memory:
        """The owner offers private (or reopened) memory for review: it becomes a CANDIDATE."""
        req = build(ProposeMemory, memory_id=memory_id, expected_version=expected_version)
        return self._memory_action("propose", actor, req, op_id, cause,
                                   check=lambda m: self._require_memory_owner(actor, m, "propose"))

    def review_memory(self, actor: str, memory_id: str, *, expected_version: int | None = None,
                      op_id: str | None = None, cause: Cause | None = None) -> Memory:
        """A reviewer (not the owner) takes a candidate into review."""
        req = build(ReviewMemory, memory_id=memory_id, expected_version=expected_version)
        return self._memory_action("review", actor, req, op_id, cause, values={"reviewer": actor},
                                   check=lambda m: self._require_reviewer(actor, m, "review"))

    def promote_memory(self, actor: str, memory_id: str, *, expected_version: int | None = None,
                       op_id: str | None = None, cause: Cause | None = None) -> Memory:
        """A reviewer other than the owner promotes a candidate: it becomes SHARED memory."""
        req = build(PromoteMemory, memory_id=memory_id, expected_version=expected_version)
        return self._memory_action("promote", actor, req, op_id, cause,
                                   values={"reviewer": actor, "scope": MemoryScope.SHARED.value},
                                   check=lambda m: self._require_reviewer(actor, m, "promote"))

    def reject_memory(self, actor: str, memory_id: str, reason: str, *, expected_version: int | None = None,
                      op_id: str | None = None, cause: Cause | None = None) -> Memory:
        req = build(RejectMemory, memory_id=memory_id, reason=reason, expected_version=expected_version)
        return self._memory_action("reject", actor, req, op_id, cause, reason=req.reason, values={"reviewer": actor},
                                   check=lambda m: self._require_reviewer(actor, m, "reject"))

    def archive_memory(self, actor: str, memory_id: str, *, expected_version: int | None = None,
                       op_id: str | None = None, cause: Cause | None = None) -> Memory:
        """Shared memory leaves the working set (scope ARCHIVE); it stays readable."""
        req = build(ArchiveMemory, memory_id=memory_id, expected_version=expected_version)
        return self._memory_action("archive", actor, req, op_id, cause,
                                   values={"scope": MemoryScope.ARCHIVE.value, "valid_to_us": None})

    def reopen_memory(self, actor: str, memory_id: str, reason: str, *, expected_version: int | None = None,
                      op_id: str | None = None, cause: Cause | None = None) -> Memory:
        """Shared or archived memory is questioned again: REOPENED (visible, no longer a stable fact)."""
        req = build(ReopenMemory, memory_id=memory_id, reason=reason, expected_version=expected_version)
        return self._memory_action("reopen", actor, req, op_id, cause, reason=req.reason,
                                   values={"scope": MemoryScope.SHARED.value})

    def supersede_memory(self, actor: str, memory_id: str, replacement_id: str, *,
                         expected_version: int | None = None, op_id: str | None = None,
                         cause: Cause | None = None) -> Memory:
        """``replacement_id`` (already SHARED) replaces ``memory_id``, which becomes SUPERSEDED. A replacement
        ``actor`` may not read (another agent's private memory) is answered as a missing one (``NotFound``),
        before its status is looked at: the answer never tells whether an unreadable memory exists."""
        req = build(SupersedeMemory, memory_id=memory_id, replacement_id=replacement_id,
                    expected_version=expected_version)

        def extra(now: int) -> list[Change]:
            found = self._store.read.get("memory", memory_id=req.replacement_id)
            if found is None or not self._readable(actor, "memory", [found], "memory_id"):
                raise NotFound("memory", req.replacement_id)  # unreadable: indistinguishable from missing
            rep = Memory.model_validate(found)
            if rep.status is not MemoryStatus.SHARED or rep.memory_id == req.memory_id:
                raise InvalidInput("replacement_id", "the replacement must be other, shared (reviewed) memory")
            return [Update("memory", {"memory_id": rep.memory_id}, rep.version,
                           {"supersedes": req.memory_id, "updated_at_us": now}, "memory", rep.memory_id)]
        return self._memory_action("supersede", actor, req, op_id, cause, other=req.replacement_id,
                                   values={"superseded_by": req.replacement_id}, extra=extra)

    def revoke_memory(self, actor: str, memory_id: str, reason: str, *, expected_version: int | None = None,
                      op_id: str | None = None, cause: Cause | None = None) -> Memory:
        """Withdraw memory; everything derived from it (transitively, by provenance) is revoked too."""
        req = build(RevokeMemory, memory_id=memory_id, reason=reason, expected_version=expected_version)

        details: dict[str, Any] = {}

        def extra(now: int) -> list[Change]:
            derived = self._derived_paths([req.memory_id])
            details["invalidated"] = invalidated_payload(derived)
            return invalidation_updates(derived, now)
        return self._memory_action("revoke", actor, req, op_id, cause, reason=req.reason,
                                   check=lambda m: self._require_memory_owner(actor, m, "revoke")
                                   if m.reviewer != actor else None, extra=extra, details=details)

    def _derived_live(self, memory_id: str) -> list[Memory]:
        """Memory derived from ``memory_id`` (breadth-first, bounded), not yet revoked."""
        return [m for m, _ in self._derived_paths([memory_id]).values()]

    def _derived_paths(self, sources: Sequence[str]) -> dict[str, tuple[Memory, list[str]]]:
        """Memory derived from any of ``sources`` (ids of memory, artifacts, tasks ... named in a memory's
        ``source_refs``), transitively through provenance ``derived_from`` edges, breadth-first and bounded
        (:data:`MAX_REVOKE_CASCADE`), not yet revoked: memory id -> (the memory, the provenance path from
        the source to it, source first)."""
        seen: dict[str, tuple[Memory, list[str]]] = {}
        paths: dict[str, list[str]] = {src: [src] for src in sources}
        frontier = list(sources)
        while frontier and len(seen) < MAX_REVOKE_CASCADE:
            edges = self._store.read.rows("provenance_edges", {"src_id": frontier, "dst_kind": "memory",
                                                              "relation": "derived_from"})
            parent = {e["dst_id"]: e["src_id"] for e in sorted(edges, key=lambda e: (e["src_id"], e["dst_id"]))}
            targets = sorted(set(parent) - set(seen) - set(sources))
            rows = self._store.read.rows("memory", {"memory_id": targets}) if targets else []
            frontier = []
            for row in rows:
                if row["status"] != MemoryStatus.REVOKED.value:
                    mid = str(row["memory_id"])
                    paths[mid] = [*paths[parent[mid]], mid]
                    seen[mid] = (Memory.model_validate(row), paths[mid])
                    frontier.append(mid)
        return seen

    def list_memory(self, actor: str, *, limit: int = 500) -> list[Memory]:
        """Memory ``actor`` may see by scope, newest first, at most ``limit`` (1 to 100,000)."""
        check_id("actor", actor)
        if not 1 <= check_int64("limit", limit) <= MAX_LIST_MEMORY:
            raise InvalidInput("limit", f"{limit!r} is not a whole number from 1 to {MAX_LIST_MEMORY}")
        if self._policy.external:
            now = self.clock.now_us()
            live = [m for m in self._list(Memory, "memory", "memory", actor, {}, order_by=("updated_at_us",),
                                          descending=True)
                    if m.status.value not in ("revoked", "rejected") and (m.expires_at_us or now + 1) > now]
            return live[:limit]
        rooms = self._store.read.active_rooms_of(actor)
        rows = self._store.read.visible_memory(actor, rooms, self.clock.now_us(), limit)
        return [Memory.model_validate(r) for r in rows]

    def _memory_action(self, action: str, actor: str, req: _Transition, op_id: str | None, cause: Cause | None, *,
                       values: dict[str, Any] | None = None, check: Callable[[Memory], None] | None = None,
                       reason: str | None = None, other: str | None = None,
                       extra: Callable[[int], list[Change]] | None = None,
                       details: dict[str, Any] | None = None) -> Memory:
        """The lifecycle transition ``action`` of the memory ``req`` names (``reason``, ``other`` and
        ``details``, which ``extra`` may fill in, are what the event's payload records)."""
        def plan(now: int) -> Plan:
            try:
                plan, _ = self._transition(Memory, "memory", "memory", req.memory_id, MEMORY_LIFECYCLE, action,
                                           now, expected_version=req.expected_version, values=values, check=check,
                                           extra=extra(now) if extra else (),
                                           payload={"reason": reason, "other": other, **(details or {})})
            except (NotFound, NotPermitted, IllegalTransition, VersionConflict) as refusal:
                if isinstance(refusal, PolicyDenied):
                    raise
                # the World's own rules would tell about the memory (that it exists, its owner, status,
                # version): not to one who may not see it
                self._refuse_unless_visible(actor, action, req.memory_id,
                                            self._store.read.get("memory", memory_id=req.memory_id),
                                            f"{action}_memory")
                raise
            return plan
        return self._write(f"{action}_memory", actor, req, plan, Memory, op_id=op_id, cause=cause)

    @staticmethod
    def _require_memory_owner(actor: str, mem: Memory, action: str) -> None:
        if mem.owner != actor:
            raise NotPermitted(actor, action, "memory", mem.memory_id, f"owned by {mem.owner}")

    @staticmethod
    def _require_reviewer(actor: str, mem: Memory, action: str) -> None:
        if mem.owner == actor:
            raise NotPermitted(actor, action, "memory", mem.memory_id, "an owner cannot review its own memory")
        if mem.reviewer not in (None, actor):
            raise NotPermitted(actor, action, "memory", mem.memory_id, f"under review by {mem.reviewer}")

    def _require_member(self, actor: str, room_id: str, action: str) -> None:
        if room_id not in self._store.read.active_rooms_of(actor):
            raise NotPermitted(actor, action, "room", room_id, "not an active member")


def invalidation_updates(derived: dict[str, tuple[Memory, list[str]]], now: int) -> list[Change]:
    """The compare-and-sets that revoke each memory of ``derived`` (what :meth:`MemoryCalls._derived_paths`
    found) at ``now``."""
    return [Update("memory", {"memory_id": m.memory_id}, m.version,
                   {"status": MemoryStatus.REVOKED.value, "updated_at_us": now}, "memory", m.memory_id)
            for m, _ in derived.values()]


def invalidated_payload(derived: dict[str, tuple[Memory, list[str]]]) -> list[dict[str, Any]]:
    """What an event records of the memory it invalidated: each id with its provenance path."""
    return [{"memory_id": mid, "path": path} for mid, (_, path) in derived.items()]


def seal_memory_content(world: WorldCore, reader: str, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Event rows as ``reader`` may see them: the ``content`` of every memory ``reader`` may not read now
    (the policy's ``memory:read`` on the memory as it is: another agent's private memory, an unrevealed
    answer) is taken out of the row images (``changes`` on the memory table) and of results that are that
    memory, with ``sealed: true`` in its place. One read of the memory rows and one PDP call per page."""
    def memory_of(change: dict[str, Any]) -> str | None:
        key = change.get("key") or {}
        return str(key["memory_id"]) if change.get("table") == "memory" and "memory_id" in key else None

    def result_memory(result: Any) -> str | None:
        return str(result["memory_id"]) if isinstance(result, dict) and "memory_id" in result \
            and "content" in result else None

    wanted = {m for r in rows for m in [*(memory_of(c) for c in r.get("changes") or ()),
                                        result_memory(r.get("result"))] if m is not None}
    if not wanted:
        return list(rows)
    found = world._store.read.rows("memory", {"memory_id": sorted(wanted)})
    readable = {str(m["memory_id"]) for m in world._readable(reader, "memory", found, "memory_id")}
    sealed = wanted - readable  # memory gone from the table is sealed too
    if not sealed:
        return list(rows)

    def cut(values: dict[str, Any]) -> dict[str, Any]:
        return {**{k: v for k, v in values.items() if k != "content"}, SEALED_MARK: True} \
            if "content" in values else values
    out: list[dict[str, Any]] = []
    for r in rows:
        changes = [{**c, "values": cut(dict(c.get("values") or {}))} if memory_of(c) in sealed else c
                   for c in r.get("changes") or ()]
        result = r.get("result")
        if isinstance(result, dict) and result_memory(result) in sealed:
            result = cut(result)
        out.append({**r, "changes": changes, "result": result})
    return out
