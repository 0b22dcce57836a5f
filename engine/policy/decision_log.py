"""The PDP's decision log, read back: ``<data dir>/audit/decisions.log`` and its rotated files.

The runtime's PDP writes one JSON line per request (Cerbos's file audit backend, rotated at 50 MB, five
files kept: ``decisions-<time>.log``, possibly gzipped). A ``checkResources`` entry holds the principal (id,
roles, attributes), each resource with its attributes and actions, and per action the effect and the policy
that decided, plus the epoch marker's output; ``auditTrail.effectivePolicies`` names each policy's file.
Query plans (``planResources``) have no per-object effect and are not read. Lines that are not a complete
JSON object (a line being written, a foreign line) are skipped.

:func:`read_checks` yields one :class:`LoggedCheck` per (request, resource), oldest file first;
:func:`audit_rows` flattens them to one :class:`AuditRow` per action and filters them. The runtime's own
epoch probes (principal ``pmw-epoch-probe``) are not an agent's decisions and are left out.

A runtime that starts several PDPs (``PMW_PDP_REPLICAS``) spreads its calls over them, and each writes its
own log (replica ``i`` > 0: ``decisions-r<i>.log``): :func:`audit_rows` and :func:`newest_checks` read every
log they are given and merge them by the PDP's time, each row naming the replica whose log holds it.
"""

from __future__ import annotations

import gzip
import heapq
import json
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any, Literal

from pydantic import Field

from engine.errors import InvalidInput
from engine.models.common import Model
from engine.policy.model import ACTIONS, KINDS, PrincipalRef, ResourceRef

PROBE_PRINCIPAL = "pmw-epoch-probe"  # engine.runtime.PROBE_ACTOR (not imported: the runtime imports policy)
LOG_NAME = "decisions.log"
EPOCH_MARKER = "#epoch-marker"
MAX_LIMIT = 100_000
Effect = Literal["ALLOW", "DENY"]


def log_path(data_dir: Path) -> Path:
    """Where the runtime's PDP writes its decision log for the world whose data directory is ``data_dir``."""
    return data_dir / "audit" / LOG_NAME


def log_files(path: Path) -> list[Path]:
    """``path`` and its rotated files, oldest first (rotated names carry their time; the live file is last)."""
    rotated = sorted(p for p in path.parent.glob(f"{path.stem}-*{path.suffix}*") if p.is_file())
    return [*rotated, *([path] if path.is_file() else [])]


@dataclass(frozen=True)
class LoggedCheck:
    """One resource of one logged ``CheckResources`` request, as the PDP was asked and answered."""

    time_us: int
    call_id: str
    principal: PrincipalRef
    resource: ResourceRef
    effects: dict[str, Effect]
    policies: dict[str, str]  # action -> the policy that decided
    policy_files: dict[str, str]  # policy -> its file
    epoch: str | None
    invalid: bool = False  # the PDP's schemas refused the attributes (the runtime raised PolicyInvalidRequest)


class AuditRow(Model):
    """One logged decision of one action."""

    time_us: int = Field(description="when the PDP decided (µs since the Unix epoch)")
    call_id: str = Field(description="the PDP's call id (one per request)")
    principal: str
    roles: list[str]
    kind: str
    id: str
    action: str
    effect: Effect
    policy: str | None = Field(default=None, description="the policy that decided, e.g. resource.task.vdefault")
    policy_file: str | None = None
    policy_epoch: str | None = None
    invalid_request: bool = Field(default=False, description="the PDP's schemas refused the attributes "
                                                             "(the caller got policy_invalid_request)")
    replica: int = Field(default=0, ge=0, description="the PDP whose log holds it (0: the first; i: the "
                                                      "runtime's replica i, decisions-r<i>.log)")


def parse_time_us(text: str) -> int:
    """An RFC 3339 time as Cerbos writes it (nanoseconds, ``Z``) -> µs since the Unix epoch."""
    head, _, frac = text.rstrip("Z").partition(".")
    digits = "".join(ch for ch in frac if ch.isdigit())
    base = datetime.fromisoformat(head + "+00:00")
    return int(base.timestamp()) * 1_000_000 + int((digits + "000000")[:6])


def _open(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return path.open(encoding="utf-8", errors="replace")


def _lines(files: list[Path]) -> Iterator[dict[str, Any]]:
    for path in files:
        try:
            handle = _open(path)
        except OSError:
            continue  # rotated away between the listing and the open
        with handle:
            for line in handle:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if isinstance(entry, dict):
                    yield entry


def _checks_of(entry: dict[str, Any]) -> Iterator[LoggedCheck]:
    body = entry.get("checkResources")
    if entry.get("log.kind") != "decision" or not isinstance(body, dict):
        return
    try:
        time_us = parse_time_us(str(entry.get("timestamp", "")))
    except ValueError:
        return
    trail = (entry.get("auditTrail") or {}).get("effectivePolicies") or {}
    files = {name: str((v.get("attributes") or {}).get("source", "")) for name, v in trail.items()
             if isinstance(v, dict)}
    inputs, outputs = body.get("inputs") or [], body.get("outputs") or []
    for given, answer in zip(inputs, outputs, strict=False):
        try:
            p, r = given["principal"], given["resource"]
            principal = PrincipalRef(id=p["id"], roles=p.get("roles") or ["agent"], attr=p.get("attr") or {})
            resource = ResourceRef(kind=r["kind"], id=r["id"], attr=r.get("attr") or {})
            acts = answer.get("actions") or {}
            effects: dict[str, Effect] = {a: "ALLOW" if v.get("effect") == "EFFECT_ALLOW" else "DENY"
                                          for a, v in acts.items()}
        except (KeyError, TypeError, AttributeError, ValueError):
            continue
        epoch = next((o.get("val") for o in answer.get("outputs") or []
                      if str(o.get("src", "")).endswith(EPOCH_MARKER) and isinstance(o.get("val"), str)), None)
        yield LoggedCheck(time_us=time_us, call_id=str(entry.get("callId", "")), principal=principal,
                          resource=resource, effects=effects,
                          policies={a: str(v.get("policy", "")) for a, v in acts.items() if v.get("policy")},
                          policy_files=files, epoch=epoch, invalid=bool(answer.get("validationErrors")))


def read_checks(path: Path, *, include_probes: bool = False) -> Iterator[LoggedCheck]:
    """Every logged check of the log at ``path`` (rotated files first), the runtime's epoch probes left out."""
    for entry in _lines(log_files(path)):
        for check in _checks_of(entry):
            if include_probes or check.principal.id != PROBE_PRINCIPAL:
                yield check


@dataclass(frozen=True)
class AuditFilter:
    """What ``pmw audit`` asks for; build it with :func:`audit_filter` (which validates)."""

    agent: str | None = None
    kind: str | None = None
    action: str | None = None
    effect: Effect | None = None
    since_us: int | None = None
    until_us: int | None = None
    limit: int = 100

    def keeps(self, row: AuditRow) -> bool:
        return ((self.agent is None or row.principal == self.agent)
                and (self.kind is None or row.kind == self.kind)
                and (self.action is None or row.action == self.action)
                and (self.effect is None or row.effect == self.effect)
                and (self.since_us is None or row.time_us >= self.since_us)
                and (self.until_us is None or row.time_us <= self.until_us))


def _time_arg(field: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        raise InvalidInput(field, f"{value!r} is not a time in µs since the Unix epoch (a whole number >= 0)")
    return value


def audit_filter(*, agent: object = None, kind: object = None, action: object = None, effect: object = None,
                 since_us: object = None, until_us: object = None, limit: object = 100) -> AuditFilter:
    """Validated filters: ``kind`` one of the contract's kinds, ``action`` one of its actions (of ``kind`` when
    given), ``effect`` ALLOW or DENY, times in µs with ``since_us <= until_us``, ``limit`` 1..100000.
    Anything else is ``InvalidInput`` naming the filter."""
    if agent is not None and (not isinstance(agent, str) or not agent or len(agent) > 200):
        raise InvalidInput("agent", f"{agent!r} is not an agent id")
    if kind is not None and kind not in KINDS:
        raise InvalidInput("kind", f"{kind!r} is not a kind; one of: {', '.join(KINDS)}")
    if action is not None:
        known = ACTIONS[str(kind)] if kind is not None else {a for acts in ACTIONS.values() for a in acts}
        if action not in known:
            where = f"{kind!r} has" if kind is not None else "no kind has"
            raise InvalidInput("action", f"{where} no action {action!r}")
    if effect is not None and effect not in ("ALLOW", "DENY"):
        raise InvalidInput("effect", f"{effect!r} is not ALLOW or DENY")
    since, until = _time_arg("since_us", since_us), _time_arg("until_us", until_us)
    if since is not None and until is not None and since > until:
        raise InvalidInput("until_us", f"{until} is before since_us {since}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput("limit", f"{limit!r} is not a whole number from 1 to {MAX_LIMIT}")
    return AuditFilter(agent=agent, kind=kind, action=action, effect=effect,  # type: ignore[arg-type]
                       since_us=since, until_us=until, limit=limit)


def rows_of(check: LoggedCheck, replica: int = 0) -> Iterator[AuditRow]:
    for action, effect in check.effects.items():
        policy = check.policies.get(action)
        yield AuditRow(time_us=check.time_us, call_id=check.call_id, principal=check.principal.id,
                       roles=list(check.principal.roles), kind=check.resource.kind, id=check.resource.id,
                       action=action, effect=effect, policy=policy,
                       policy_file=check.policy_files.get(policy) if policy else None, policy_epoch=check.epoch,
                       invalid_request=check.invalid, replica=replica)


def _paths(logs: Path | Sequence[Path]) -> list[Path]:
    return [logs] if isinstance(logs, Path) else list(logs)


def audit_rows(logs: Path | Sequence[Path], query: AuditFilter) -> list[AuditRow]:
    """The newest ``query.limit`` logged decisions that pass ``query``, oldest first (by the PDP's time: the
    log's lines are written as requests finish, not quite in time order). ``logs``: one log, or the logs of
    every replica (``logs[i]`` is replica ``i``'s), merged."""
    kept: list[tuple[int, int, int, AuditRow]] = []  # a min-heap of the newest: (time, replica, line order, row)
    for replica, path in enumerate(_paths(logs)):
        for order, row in enumerate(row for check in read_checks(path)
                                    if query.agent is None or check.principal.id == query.agent
                                    for row in rows_of(check, replica) if query.keeps(row)):
            item = (row.time_us, replica, order, row)
            if len(kept) < query.limit:
                heapq.heappush(kept, item)
            elif item[:3] > kept[0][:3]:
                heapq.heapreplace(kept, item)
    return [row for *_, row in sorted(kept, key=lambda item: item[:3])]


def newest_checks(logs: Path | Sequence[Path], limit: int) -> list[LoggedCheck]:
    """The newest ``limit`` logged checks of ``logs`` (one log, or every replica's), oldest first."""
    newest: list[tuple[int, int, int, LoggedCheck]] = []
    for replica, path in enumerate(_paths(logs)):
        newest.extend((c.time_us, replica, order, c) for order, c in enumerate(deque(read_checks(path), maxlen=limit)))
    newest.sort(key=lambda item: item[:3])
    return [check for *_, check in newest[-limit:]] if limit > 0 else []


__all__ = ["AuditFilter", "AuditRow", "LoggedCheck", "audit_filter", "audit_rows", "log_files", "log_path",
           "newest_checks", "parse_time_us", "read_checks", "rows_of"]
