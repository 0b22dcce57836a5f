"""Policy shadowing: the recorded decisions of the PDP's decision log, asked again of a candidate set.

Each logged check (principal and resource exactly as the PDP was asked, with its attributes, its actions and
the effects it got) is sent unchanged to a PDP serving the candidate (``engine.policy.candidate_pdp``); every
action whose effect differs is listed. Nothing is deployed, written or logged: the world's epoch and its
store are untouched. A check the candidate's schemas refuse is reported as ``INVALID`` (a schema change
that would make the runtime's requests invalid is a change worth seeing).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field

from engine.errors import InvalidInput, PolicyInvalidRequest
from engine.models.common import Model
from engine.policy.cerbos_adapter import MAX_RESOURCES_PER_REQUEST, CerbosPdp
from engine.policy.decision_log import LoggedCheck, log_files

DEFAULT_LIMIT = 10_000
MAX_LIMIT = 100_000
After = Literal["ALLOW", "DENY", "INVALID"]


class ShadowChange(Model):
    """One recorded decision the candidate would answer differently."""

    time_us: int
    call_id: str
    principal: str
    kind: str
    id: str
    action: str
    before: After = Field(description="INVALID: the PDP's schemas refused the request")
    after: After


class ShadowReport(Model):
    """What a candidate policy set would change over the recorded decisions (nothing was committed)."""

    policy_dir: str
    candidate_epoch: str = Field(description="the epoch the candidate would be deployed under")
    log_files: list[str]
    checks_replayed: int = Field(description="logged (request, resource) pairs asked again")
    decisions_replayed: int = Field(description="actions compared")
    changed: int
    allow_to_deny: int
    deny_to_allow: int
    invalid: int = Field(description="checks the candidate's schemas refuse (a change if the log's were valid)")
    changes: list[ShadowChange]


def shadow_limit(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise InvalidInput("limit", f"{value!r} is not a whole number from 1 to {MAX_LIMIT}")
    return value


def _key(check: LoggedCheck) -> str:
    p = check.principal
    return json.dumps([p.id, sorted(p.roles), p.attr], sort_keys=True)


def _groups(checks: Sequence[LoggedCheck]) -> list[list[LoggedCheck]]:
    """Consecutive checks of one principal (as sent) in batches the PDP accepts in one request."""
    out: list[list[LoggedCheck]] = []
    last = ""
    for check in checks:
        key = _key(check)
        if not out or key != last or len(out[-1]) >= MAX_RESOURCES_PER_REQUEST:
            out.append([])
        out[-1].append(check)
        last = key
    return out


def _answers(pdp: CerbosPdp, batch: list[LoggedCheck]) -> list[dict[str, After] | None]:
    """The candidate's effects per check (None: its schemas refuse the check)."""
    try:
        decisions = pdp.check(batch[0].principal, [(c.resource, list(c.effects)) for c in batch])
        return [{a: "ALLOW" if ok else "DENY" for a, ok in d.actions.items()} for d in decisions]
    except PolicyInvalidRequest:
        if len(batch) == 1:
            return [None]
        return [a for c in batch for a in _answers(pdp, [c])]


def replay(pdp: CerbosPdp, checks: Sequence[LoggedCheck], *, policy_dir: Path, candidate_epoch: str,
           log: Path | Sequence[Path]) -> ShadowReport:
    """Ask ``pdp`` (serving the candidate) every check again and report what differs. ``log``: the decision
    log the checks were read from (or every replica's), named in the report."""
    changes: list[ShadowChange] = []
    decided = invalid = 0
    for batch in _groups(checks):
        for check, answer in zip(batch, _answers(pdp, batch), strict=True):
            invalid += answer is None
            for action, effect in check.effects.items():
                decided += 1
                before: After = "INVALID" if check.invalid else effect
                after: After = "INVALID" if answer is None else answer.get(action, "DENY")
                if after != before:
                    changes.append(ShadowChange(time_us=check.time_us, call_id=check.call_id,
                                                principal=check.principal.id, kind=check.resource.kind,
                                                id=check.resource.id, action=action, before=before, after=after))
    logs = [log] if isinstance(log, Path) else list(log)
    return ShadowReport(
        policy_dir=str(policy_dir), candidate_epoch=candidate_epoch,
        log_files=[str(f) for path in logs for f in log_files(path)],
        checks_replayed=len(checks), decisions_replayed=decided, changed=len(changes),
        allow_to_deny=sum(c.before == "ALLOW" and c.after == "DENY" for c in changes),
        deny_to_allow=sum(c.before == "DENY" and c.after == "ALLOW" for c in changes),
        invalid=invalid, changes=changes)


__all__ = ["DEFAULT_LIMIT", "ShadowChange", "ShadowReport", "replay", "shadow_limit"]
