"""What each console page shows, read as its viewer through :class:`~engine.console.calls.PrincipalCalls`
(the same calls, PDP and gateway as any client) and, for the policies page, the candidate's files and test
run. Each function returns the template's context; a part its viewer may not see is a ``Refused``.

Never shown: memory content the viewer may not read (``get_memory`` decides), an answer before its
room's reveal (only revealed answers' memory is read), ``events.jsonl`` of a report.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.console.calls import PrincipalCalls, Refused, section
from engine.console.log_fold import LogFold, fold_log
from engine.console.policy_files import policy_diff
from engine.console.topology_svg import Grouping, open_rooms, render_svg, version_diff
from engine.errors import InvalidInput, PolicyUnavailable
from engine.policy.candidate_pdp import candidate_dir, candidate_epoch
from engine.policy.governance import current_deployment, run_policy_tests
from engine.policy.model import ACTIONS, KINDS
from engine.runtime import Runtime
from engine.world.approvals import action_hash

EFFECTS = ("ALLOW", "DENY")
LISTED = 200


@dataclass(frozen=True)
class CandidateTests:
    """The candidate's ``cerbos compile`` with every suite: whether it passed, and its output."""

    ok: bool
    exit_code: int
    output: str


def fold_as(calls: PrincipalCalls) -> LogFold:
    """The log as the viewer reads it, folded."""
    return fold_log(lambda after, limit: calls.world("events", after_seq=after, limit=limit))


def deploy_root(calls: PrincipalCalls) -> Path:
    return Runtime.deploy_root(calls.service.settings)


def policies(calls: PrincipalCalls, candidate: str | None) -> dict[str, Any]:
    """The deployed epoch, its history and, for a governor, a candidate set's diff, tests and shadow replay."""
    history = section(lambda: calls.governance("history", limit=100))
    context: dict[str, Any] = {"current": calls.world("current_policy_epoch"), "history": history,
                               "candidate": candidate or "", "diff": None, "tests": None, "shadow": None,
                               "candidate_epoch": None, "candidate_error": None}
    if isinstance(history, Refused):
        context["rollback_epochs"] = []
        return context
    context["rollback_epochs"] = sorted({h.epoch for h in history if (deploy_root(calls) / h.epoch).is_dir()})
    if candidate:
        try:
            directory = candidate_dir("candidate", candidate)
            deployed = current_deployment(deploy_root(calls))
            context["candidate_epoch"] = candidate_epoch(directory)
            context["diff"] = policy_diff(deployed.path, directory) if deployed is not None else []
            context["tests"] = candidate_tests(directory)
            context["shadow"] = section(lambda: calls.governance("shadow", policy_dir=str(directory), limit=1000))
        except InvalidInput as exc:
            context["candidate_error"] = Refused(exc.code, exc.message)
    return context


def candidate_tests(directory: Path) -> CandidateTests:
    """``pmw policy test`` on ``directory`` (the gate ``reload`` applies before it deploys)."""
    try:
        report = run_policy_tests(directory)
    except subprocess.TimeoutExpired as exc:
        raise PolicyUnavailable(f"cerbos compile did not finish within {exc.timeout} s") from exc
    return CandidateTests(report.ok, report.exit_code, report.output[-20_000:])


def _time_us(field: str, text: str | None) -> int | None:
    """A ``datetime-local`` value (taken as UTC) in µs; ``InvalidInput`` naming ``field`` if it is not one."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(field, f"{text[:40]!r} is not a time (YYYY-MM-DDTHH:MM)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1_000_000)


def decisions(calls: PrincipalCalls, query: dict[str, str]) -> dict[str, Any]:
    """The decision log searched with the page's filters (``GovernanceCalls.audit``)."""
    filters = {k: (query.get(k) or None) for k in ("agent", "kind", "action", "effect")}
    context: dict[str, Any] = {"query": query, "kinds": KINDS, "effects": EFFECTS, "rows": None}

    def search() -> Any:
        limit = query.get("limit") or "100"
        if not limit.isdigit():
            raise InvalidInput("limit", f"{limit[:20]!r} is not a whole number")
        return calls.governance("audit", **filters, since_us=_time_us("since", query.get("since")),
                                until_us=_time_us("until", query.get("until")), limit=int(limit))
    context["rows"] = section(search)
    return context


def _attributes(field: str, text: str | None) -> dict[str, object] | None:
    from engine.validation import parse_json_text

    if not text or not text.strip():
        return None
    found = parse_json_text(field, text)
    if not isinstance(found, dict):
        raise InvalidInput(field, "must be a JSON object of attributes")
    return found


def explain(calls: PrincipalCalls, query: dict[str, str]) -> dict[str, Any]:
    """One decision explained (the playground): ``GovernanceCalls.explain`` with what-if attributes."""
    context: dict[str, Any] = {"query": query, "kinds": KINDS, "actions": ACTIONS, "explanation": None}
    if not all(query.get(k) for k in ("principal", "kind", "id", "action")):
        return context
    context["explanation"] = section(lambda: calls.governance(
        "explain", principal_id=query["principal"], kind=query["kind"], id=query["id"], action=query["action"],
        principal_attr=_attributes("principal_attr", query.get("principal_attr")),
        resource_attr=_attributes("resource_attr", query.get("resource_attr"))))
    return context


def approvals(calls: PrincipalCalls) -> dict[str, Any]:
    """Pending S3 approvals (folded from the log the viewer may read, each read again with ``get_approval``)."""
    fold = section(lambda: fold_as(calls))
    if isinstance(fold, Refused):
        return {"pending": fold, "current": calls.world("current_policy_epoch")}
    pending, payloads = [], {}
    for row in fold.pending_approvals():
        found = section(_reader(calls, "get_approval", approval_id=row["approval_id"]))
        if not isinstance(found, Refused) and found.status.value == "pending":
            pending.append(found)
            payloads[found.approval_id] = shown_payload(found, row.get("payload"))
    return {"pending": pending, "payloads": payloads, "current": calls.world("current_policy_epoch")}


@dataclass(frozen=True)
class ShownPayload:
    """An approval's payload as the page shows it (JSON text, escaped by the template), and whether it is
    the payload the action hash covers (``None``: the request's event is not in the log the viewer read)."""

    text: str
    matches_hash: bool | None


def shown_payload(approval: Any, payload: object) -> ShownPayload:
    """The payload of ``approval``'s request event, checked against its action hash."""
    if not isinstance(payload, dict):
        return ShownPayload("", None)
    matches = action_hash(approval.kind, approval.object_id, approval.action, payload) == approval.action_hash
    return ShownPayload(json.dumps(payload, indent=1, sort_keys=True, ensure_ascii=False), matches)


def _reader(calls: PrincipalCalls, name: str, **arguments: Any) -> Callable[[], Any]:
    """A read of ``World.<name>`` for :func:`section`."""
    return lambda: calls.world(name, **arguments)


def _answers(calls: PrincipalCalls, room_id: str) -> list[dict[str, Any]] | Refused:
    """A room's answers as the viewer may see them: content only once revealed (and readable)."""
    found = section(lambda: calls.world("room_answers", room_id=room_id))
    if isinstance(found, Refused):
        return found
    out = []
    for answer in found:
        content: str | Refused | None = None
        if answer.revealed:
            memory = section(_reader(calls, "get_memory", memory_id=answer.memory_id))
            content = memory if isinstance(memory, Refused) else memory.content
        out.append({"agent_id": answer.agent_id, "revealed": answer.revealed, "content": content,
                    "committed_at_us": answer.committed_at_us})
    return out


def _claims(calls: PrincipalCalls, fold: LogFold) -> list[dict[str, Any]]:
    """Each contest with its claims side by side (a claim the viewer may not read is shown refused)."""
    out = []
    for event in fold.contests[-LISTED:]:
        claim_ids = [str(c) for c in event.payload.get("claims", [])][:10]
        claims = [{"memory_id": cid, "memory": section(_reader(calls, "get_memory", memory_id=cid))}
                  for cid in claim_ids]
        out.append({"event": event, "claims": claims})
    return out


def world(calls: PrincipalCalls) -> dict[str, Any]:
    """Agents, tasks, contests, rooms with their answers, receipts, run traces and controller steps."""
    fold = section(lambda: fold_as(calls))
    context: dict[str, Any] = {
        "agents": section(lambda: calls.world("list_agents")),
        "tasks": section(lambda: calls.world("list_tasks", limit=LISTED)),
        "receipts": section(lambda: calls.world("list_receipts", limit=LISTED)),
        "traces": section(lambda: calls.world("list_traces", limit=LISTED)),
        "fold": fold, "rooms": [], "contests": [], "steps": []}
    if not isinstance(fold, Refused):
        context["rooms"] = [{"room_id": rid, "row": row, "answers": _answers(calls, rid),
                             "members": sorted(a for a, m in fold.members.get(rid, {}).items() if m.get("active"))}
                            for rid, row in sorted(fold.rooms.items())[-LISTED:]]
        context["contests"] = _claims(calls, fold)
        context["steps"] = list(reversed(fold.steps))
    return context


def topology(calls: PrincipalCalls, query: dict[str, str]) -> dict[str, Any]:
    """The topology at a version (default the newest), grouped, and its changes from another version."""
    grouping: Grouping = "room" if query.get("group") == "room" else "role"
    fold = fold_as(calls)
    agents = calls.world("list_agents")
    roles = {a.agent_id: a.role_id for a in agents}
    numbers = [v.version for v in fold.versions]
    context: dict[str, Any] = {"numbers": numbers, "grouping": grouping, "version": None, "svg": None,
                               "diff": None, "diff_from": None, "open_rooms": [], "truncated": fold.truncated}
    if not numbers:
        return context
    chosen = _version_number("v", query.get("v"), numbers[-1])
    version = fold.version(chosen)
    if version is None:
        raise InvalidInput("v", f"topology version {chosen} is not in the log (versions {numbers[0]}..{numbers[-1]})")
    context.update(version=version, svg=render_svg(version, roles, grouping), open_rooms=open_rooms(version),
                   edges=sorted((k, e) for k, e in version.edges.items() if e.get("active")))
    if query.get("from"):
        before = fold.version(_version_number("from", query.get("from"), chosen))
        if before is None:
            raise InvalidInput("from", "no such topology version in the log")
        context.update(diff=version_diff(before, version), diff_from=before.version,
                       rooms_before=open_rooms(before))
    return context


def _version_number(field: str, text: str | None, default: int) -> int:
    if not text:
        return default
    if not text.isdigit() or len(text) > 12:
        raise InvalidInput(field, f"{text[:20]!r} is not a topology version")
    return int(text)


__all__ = ["CandidateTests", "ShownPayload", "approvals", "decisions", "explain", "fold_as", "policies",
           "shown_payload", "topology", "world"]
