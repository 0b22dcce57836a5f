"""What the runtime tells the PDP: principal and resource attributes, built from the world's own rows.

Shapes follow ``docs/policy-contract.md`` (and ``policies/_schemas/``): every kind carries the shared keys;
a task also carries ``priority`` (its ``constraints.priority``, 0..9, default 0). Authority attenuation is
computed here: acting on a task handed over by an accepted handoff, an agent's effective capabilities are the
handoff's authority scope intersected with its own maximum.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from engine.models.common import ID_PATTERN
from engine.models.trusted import trusted
from engine.policy.model import GOVERNOR_ROLE, PrincipalRef, ResourceRef
from store import Reader

_EMPTY: dict[str, Any] = {"owner": "", "assignee": "", "task_id": "", "room": "", "scope": "", "status": "",
                          "reviewer": "", "sensitivity": 0, "side_effect": "S0", "role": "", "membership": "",
                          "event_type": ""}


def capabilities_of(profile: Mapping[str, Any]) -> set[str]:
    caps = profile.get("capabilities", [])
    return {c for c in caps if isinstance(c, str)} if isinstance(caps, list) else set()


def clearance_of(profile: Mapping[str, Any]) -> int:
    value = profile.get("clearance", 0)
    return value if isinstance(value, int) and 0 <= value <= 5 else 0


def delegations(read: Reader, agent_id: str, accepted: list[dict[str, Any]] | None = None
                ) -> dict[str, set[str] | None]:
    """Tasks handed to ``agent_id`` by accepted handoffs -> the handoff's capability scope (None: no limit
    stated, which grants nothing beyond the agent's own maximum)."""
    out: dict[str, set[str] | None] = {}
    rows = accepted if accepted is not None else read.rows("handoffs", {"target_agent": agent_id,
                                                                        "status": "accepted"})
    for h in rows:
        scope = h["authority_scope"] or {}
        caps = capabilities_of(scope) if "capabilities" in scope else None
        held = out.get(h["task_id"])
        # several delegations of one task: the narrowest wins
        out[h["task_id"]] = caps if held is None else (held if caps is None else held & caps)
    return out


def principal(read: Reader, agent: Mapping[str, Any], *, task_id: str = "",
              accepted: list[dict[str, Any]] | None = None, rooms: list[str] | None = None) -> PrincipalRef:
    """The PDP principal for ``agent`` (an agents row), attenuated for ``task_id`` if it was delegated
    (``accepted`` handoffs and ``rooms``, when the caller already read them, save two reads)."""
    caps = capabilities_of(agent["capability_profile"])
    delegated = delegations(read, agent["agent_id"], accepted)
    scope = delegated.get(task_id) if task_id else None
    if scope is not None:
        caps &= scope
    roles = ["agent", GOVERNOR_ROLE] if agent["role_id"] == GOVERNOR_ROLE else ["agent"]
    # built from the store's rows (validated on their way in), not from a caller's input: not validated again
    return trusted(PrincipalRef)({"id": agent["agent_id"], "roles": roles, "attr": {
        "role": agent["role_id"], "status": agent["status"], "capabilities": sorted(caps),
        "rooms": sorted(rooms if rooms is not None else read.active_rooms_of(agent["agent_id"])),
        "delegated_tasks": sorted(delegated),
        "clearance": clearance_of(agent["permission_profile"])}})


# Attributes only some kinds carry (optional in policies/_schemas/resource.json), with their defaults: a
# task always carries its ``priority``, even when decided before its row exists.
_KIND_EXTRA: dict[str, dict[str, Any]] = {"task": {"priority": 0}}
_PLAIN_ID = re.compile(ID_PATTERN.removeprefix("^").removesuffix("$"))


def _level(row: Mapping[str, Any], field: str, key: str, top: int) -> int:
    """The integer ``row[field][key]`` if it is one from 0 to ``top``, else 0 (what the command model lets
    through; a row written before it checked cannot step out of the schema's range)."""
    scope = row.get(field) or {}
    value = scope.get(key, 0) if isinstance(scope, dict) else 0
    return value if isinstance(value, int) and 0 <= value <= top else 0


def _sensitivity(row: Mapping[str, Any], field: str) -> int:
    return _level(row, field, "sensitivity", 5)


def _attrs(kind: str, row: Mapping[str, Any]) -> dict[str, Any]:
    g = row.get
    if kind == "agent":
        return {"owner": g("agent_id", ""), "status": g("status", ""), "role": g("role_id", "")}
    if kind == "task":
        return {"owner": g("owner_agent", ""), "assignee": g("assignee") or "", "task_id": g("task_id", ""),
                "status": g("status", ""), "sensitivity": _sensitivity(row, "constraints"),
                "priority": _level(row, "constraints", "priority", 9)}
    if kind == "artifact":
        return {"owner": g("owner", ""), "task_id": g("task_id") or "", "status": g("status", "")}
    if kind == "memory":
        return {"owner": g("owner", ""), "room": g("room_id") or "", "scope": g("scope", ""),
                "status": g("status", ""), "reviewer": g("reviewer") or "",
                "sensitivity": _sensitivity(row, "permission_scope")}
    if kind == "wake":
        payload = g("payload") or {}
        return {"owner": g("target_agent", ""), "status": g("status", ""),
                "task_id": str(payload.get("task_id", "")) if isinstance(payload, dict) else ""}
    if kind == "handoff":
        return {"owner": g("source_agent", ""), "assignee": g("target_agent", ""), "task_id": g("task_id", ""),
                "status": g("status", "")}
    if kind == "receipt":
        return {"owner": g("agent_id", ""), "task_id": g("task_id") or ""}
    if kind == "room":  # a membership action names its agent (``member``) and that agent's ``membership``
        return {"owner": g("opened_by", ""), "room": g("room_id", ""), "status": g("status", ""),
                "assignee": g("member") or "", "membership": g("membership") or ""}
    if kind == "event":
        return {"event_type": g("event_type", "")}
    if kind == "message":
        direct = g("recipient_kind") in ("agent", "all")
        return {"owner": g("sender", ""), "assignee": (g("recipient") or "") if direct else "",
                "status": g("status", "")}
    if kind == "approval":
        return {"owner": g("requested_by", ""), "status": g("status", ""), "side_effect": g("side_effect", "S3")}
    return {}  # state, topology, channel, tool: nothing owner-specific


def resource(kind: str, ident: str, row: Mapping[str, Any] | None = None, *, side_effect: str = "S0"
             ) -> ResourceRef:
    """The PDP resource for ``row`` of ``kind`` (``row=None``: an object with no attributes yet)."""
    if row is None and kind == "event":
        row = {"event_type": ident}  # an event type is its own object: allowed_actions("event", type)
    attr = {**_EMPTY, "side_effect": side_effect, **_KIND_EXTRA.get(kind, {}),
            **(_attrs(kind, row) if row is not None else {})}
    if isinstance(ident, str) and _PLAIN_ID.fullmatch(ident):  # attributes of a store row (or one to be written)
        return trusted(ResourceRef)({"kind": kind, "id": ident, "attr": attr})
    return ResourceRef(kind=kind, id=ident, attr=attr)  # any other name (a state key, a caller's string): checked


__all__ = ["GOVERNOR_ROLE", "capabilities_of", "clearance_of", "delegations", "principal", "resource"]
