"""The retention sweeper (seed 000 §122-124): expire memory and artifacts through the gateway, with events,
and invalidate what was derived from them.

:meth:`RetentionCalls.sweep_retention` is a governor's call (decided by the PDP: ``agent:grant`` on the
caller itself, the authority only live governors hold, as for the other governance commands; a denial is
recorded). It finds memory past its own TTL (``expires_at_us``) or its epistemic type's retention, and
artifacts past their type's retention (``contracts/retention.yaml``, :mod:`engine.contracts.retention`),
as of the world's clock. Each expired object is one write: a memory becomes ``revoked`` (``valid_to_us``
set) with a ``memory.expired`` event (its own ``memory:revoke`` decided too); an artifact becomes
``retired`` with an ``artifact.expired`` event. In the same write, memory derived from the expired object
(provenance ``derived_from`` edges followed transitively, as a revocation does) is revoked, and the event's
``invalidated`` lists each with its provenance path (source first). An object another writer changed
meanwhile is skipped (reported in ``skipped``) and found again by the next sweep.

Scanning: the sweep reads the live memory and active artifacts (at most :data:`MAX_SCAN` rows each) and
selects in Python; a time-indexed query belongs to ``store/`` (not yet).
"""

from __future__ import annotations

from typing import Any

from engine.commands.retention import SweepRetention
from engine.contracts.retention import RetentionRules, load_retention
from engine.errors import ConflictError
from engine.models.artifacts import Artifact, ArtifactStatus
from engine.models.common import Model
from engine.models.memory import Memory, MemoryStatus
from engine.policy.enforcement import Check
from engine.validation import build, check_id
from engine.world.core import Plan
from engine.world.memory import MemoryCalls, invalidated_payload, invalidation_updates
from store import Update

MAX_SCAN = 100_000
_LIVE_MEMORY = [s.value for s in MemoryStatus if s not in (MemoryStatus.REVOKED, MemoryStatus.REJECTED)]


class Expired(Model):
    """One object the sweep expired, with the memory invalidated because it derived from it."""

    kind: str
    id: str
    rule: str
    expired_at_us: int
    invalidated: list[dict[str, Any]]


class SweepReport(Model):
    swept_at_us: int
    expired: list[Expired]
    skipped: list[str]


class RetentionCalls(MemoryCalls):
    def _retention(self) -> RetentionRules:
        """The retention rules this world applies (the repository's ``contracts/retention.yaml``, read once)."""
        rules: RetentionRules | None = getattr(self, "_retention_rules", None)
        if rules is None:
            rules = load_retention()
            self._retention_rules = rules
        return rules

    def sweep_retention(self, actor: str, *, limit: int = 1000) -> SweepReport:
        """Expire what is due (see the module docstring); returns what was expired and skipped. Raises
        ``PolicyDenied`` for a caller who is not a live governor (nothing is read or written)."""
        req = build(SweepRetention, limit=limit)
        self._require_sweeper(check_id("actor", actor))
        now = self.clock.now_us()
        expired: list[Expired] = []
        skipped: list[str] = []
        for kind, row, rule, due in self._due(now)[:req.limit]:
            try:
                expired.append(self._expire(actor, kind, row, rule, due))
            except ConflictError:
                skipped.append(f"{kind}:{row[f'{kind}_id']}")
        return SweepReport(swept_at_us=now, expired=expired, skipped=skipped)

    def _require_sweeper(self, actor: str) -> None:
        row = self._store.read.get("agents", agent_id=actor)
        self._authorize(actor, [Check("agent", actor, "grant", row)], "sweep_retention")

    def _due(self, now: int) -> list[tuple[str, dict[str, Any], str, int]]:
        """(kind, row, rule, when due) of every object past its time, oldest due first."""
        rules = self._retention()
        due: list[tuple[str, dict[str, Any], str, int]] = []
        for row in self._store.read.rows("memory", {"status": _LIVE_MEMORY}, limit=MAX_SCAN):
            at = rules.memory_expiry_us(row["epistemic_type"], row["created_at_us"], row["expires_at_us"])
            if at is not None and at <= now:
                rule = "ttl" if row["expires_at_us"] == at else f"retention:memory:{row['epistemic_type']}"
                due.append(("memory", row, rule, at))
        for row in self._store.read.rows("artifacts", {"status": ArtifactStatus.ACTIVE.value}, limit=MAX_SCAN):
            at = rules.artifact_expiry_us(row["artifact_type"], row["created_at_us"])
            if at is not None and at <= now:
                due.append(("artifact", row, f"retention:artifact:{row['artifact_type']}", at))
        return sorted(due, key=lambda d: (d[3], d[0], str(d[1][f"{d[0]}_id"])))

    def _expire(self, actor: str, kind: str, row: dict[str, Any], rule: str, due: int) -> Expired:
        ident = str(row[f"{kind}_id"])
        request = _Expiry(kind=kind, id=ident, rule=rule, version=int(row["version"]))

        def plan(now: int) -> Plan:
            derived = self._derived_paths([ident])
            record = Expired(kind=kind, id=ident, rule=rule, expired_at_us=due,
                             invalidated=invalidated_payload(derived))
            values: dict[str, Any] = ({"status": MemoryStatus.REVOKED.value, "valid_to_us": now,
                                       "updated_at_us": now} if kind == "memory"
                                      else {"status": ArtifactStatus.RETIRED.value, "updated_at_us": now})
            own = Update("memory" if kind == "memory" else "artifacts", {f"{kind}_id": ident}, int(row["version"]),
                         values, kind, ident)
            checks = [Check("agent", actor, "grant", self._store.read.get("agents", agent_id=actor))]
            if kind == "memory":
                checks.append(Check("memory", ident, "revoke", row))
            model = Memory if kind == "memory" else Artifact
            model.model_validate({**row, **values, "version": int(row["version"]) + 1})  # still a valid object
            return Plan(f"{kind}.expired", kind, ident, record, [own, *invalidation_updates(derived, now)],
                        payload={"rule": rule, "due_at_us": due, "invalidated": record.invalidated},
                        base_version=int(row["version"]), resulting_version=int(row["version"]) + 1, checks=checks)
        return self._write("sweep_retention", actor, request, plan, Expired, op_id=None, cause=None)


class _Expiry(Model):
    kind: str
    id: str
    rule: str
    version: int


__all__ = ["Expired", "RetentionCalls", "SweepReport"]
