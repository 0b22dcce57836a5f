"""What one decision is asked on, built from the world's rows as every call builds it, and what-if edits.

:func:`decision_inputs` is the principal and resource of ``Runtime.explain`` (``engine.policy.attributes``:
the agent's row, attenuated for the object's task; the object's row). :func:`with_what_if` merges given
attributes over them: only attributes the contract defines (``docs/policy-contract.md``) may be replaced,
and the principal's roles follow a replaced ``role`` exactly as they follow the agent row's ``role_id``.
The values are the PDP's to check: its schemas refuse a wrong type (``PolicyInvalidRequest``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.errors import InvalidInput, NotFound
from engine.policy.attributes import principal, resource
from engine.policy.model import GOVERNOR_ROLE, PrincipalRef, ResourceRef
from engine.world.permissions import OBJECT_TABLES
from store import Reader


def decision_inputs(read: Reader, principal_id: str, kind: str, ident: str) -> tuple[PrincipalRef, ResourceRef]:
    """The principal and resource the PDP is asked on for ``principal_id`` acting on ``kind ident``;
    ``NotFound`` for an unknown agent or a missing object of a kind that has rows."""
    agent = read.get("agents", agent_id=principal_id)
    if agent is None:
        raise NotFound("agent", principal_id)
    row = None
    if kind in OBJECT_TABLES:
        table, key = OBJECT_TABLES[kind]
        row = read.get(table, **{key: ident})
        if row is None:
            raise NotFound(kind, ident)
    res = resource(kind, ident, row)
    return principal(read, agent, task_id=str(res.attr.get("task_id") or "")), res


def _merged(field: str, base: Mapping[str, Any], edits: object) -> dict[str, Any]:
    if edits is None:
        return dict(base)
    if not isinstance(edits, dict):
        raise InvalidInput(field, f"must be a JSON object of attributes, not {type(edits).__name__}")
    unknown = sorted(str(k) for k in edits if k not in base)
    if unknown:
        raise InvalidInput(field, f"no attribute {', '.join(map(repr, unknown))}; one of: {', '.join(sorted(base))}")
    return {**base, **edits}


def with_what_if(p: PrincipalRef, r: ResourceRef, principal_attr: object, resource_attr: object
                 ) -> tuple[PrincipalRef, ResourceRef, list[str]]:
    """``p`` and ``r`` with the given attributes replaced, and the names of what was replaced
    (``principal.status``, ``resource.sensitivity``, ...)."""
    p_attr = _merged("principal_attr", p.attr, principal_attr)
    r_attr = _merged("resource_attr", r.attr, resource_attr)
    roles = (["agent", GOVERNOR_ROLE] if p_attr.get("role") == GOVERNOR_ROLE else ["agent"]) \
        if p_attr.get("role") != p.attr.get("role") else list(p.roles)
    changed = [f"principal.{k}" for k in sorted(p_attr) if p_attr[k] != p.attr.get(k)] + \
        [f"resource.{k}" for k in sorted(r_attr) if r_attr[k] != r.attr.get(k)]
    return (PrincipalRef(id=p.id, roles=roles, attr=p_attr), ResourceRef(kind=r.kind, id=r.id, attr=r_attr),
            changed)


__all__ = ["decision_inputs", "with_what_if"]
