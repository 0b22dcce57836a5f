"""The policy enforcement point: every World call asks an :class:`Authorizer` before it acts.

- :class:`PdpAuthorizer` asks the Cerbos PDP (the runtime's default): principals and resources are built
  from the world's rows, a deny is :class:`~engine.errors.PolicyDenied`, no answer is
  :class:`~engine.errors.PolicyUnavailable` (fail closed).
- :class:`LocalScopeRules` asks nobody: only the World's own domain rules and memory scopes apply. It exists
  for the store's conformance tests and for single-user embedded use; it is never the runtime's default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from engine.errors import InvalidInput, NotPermitted, PolicyDenied, PolicyUnavailable
from engine.policy.attributes import principal, resource
from engine.policy.decision_memo import DecisionMemo, epoch_scanner
from engine.policy.decision_point import DecisionPoint
from engine.policy.model import ACTIONS, Decision, PlanFilter, PrincipalRef, ResourceRef
from engine.policy.plan_memo import PlanMemo
from store import Reader


@dataclass(frozen=True)
class Check:
    """One question for the PDP: may the actor do ``action`` to this object (``row``: its current row, or
    the row it is about to become)?"""

    kind: str
    id: str
    action: str
    row: Mapping[str, Any] | None = None
    side_effect: str = "S0"

    def __post_init__(self) -> None:
        if self.action not in ACTIONS.get(self.kind, {}):
            raise ValueError(f"{self.kind!r} has no policy action {self.action!r}")  # a programming error

    @property
    def task_id(self) -> str:
        row = self.row or {}
        if self.kind == "task":
            return str(row.get("task_id") or self.id)
        value = row.get("task_id")
        return str(value) if value else ""


class Authorizer(Protocol):
    """Decides before the World acts."""

    #: True when decisions come from an external PDP (reads then need an actor).
    external: bool

    def authorize(self, actor: str, checks: Sequence[Check]) -> str | None:
        """Allow all ``checks`` or raise (``PolicyDenied``, ``NotPermitted``, ``PolicyUnavailable``).
        Returns the policy epoch the decision was taken under (``None``: no PDP)."""
        ...

    def decide(self, actor: str, checks: Sequence[Check]) -> list[Decision]:
        """Every check's decision, allowed or not (``allowed_actions``); raises only when no answer."""
        ...

    def plan(self, actor: str, kind: str, action: str) -> PlanFilter | None:
        """The objects of ``kind`` the actor may ``action``, as a filter (``None``: no PDP)."""
        ...

    def plans(self, actor: str, asked: Sequence[tuple[str, str]]) -> list[PlanFilter | None]:
        """:meth:`plan` for several (kind, action) pairs at once (one round trip)."""
        ...

    def decide_actions(self, actor: str, objects: Sequence[tuple[str, str, Mapping[str, Any] | None]]
                       ) -> list[Decision]:
        """For each (kind, id, row): every action of its kind, allowed or denied, in one PDP call."""
        ...


class LocalScopeRules:
    """No PDP: the World's domain rules and memory scopes only."""

    external = False

    def authorize(self, actor: str, checks: Sequence[Check]) -> str | None:
        return None

    def decide(self, actor: str, checks: Sequence[Check]) -> list[Decision]:
        return [Decision(kind=c.kind, id=c.id, actions={c.action: True}, epoch=None) for c in checks]

    def plan(self, actor: str, kind: str, action: str) -> PlanFilter | None:
        return None

    def plans(self, actor: str, asked: Sequence[tuple[str, str]]) -> list[PlanFilter | None]:
        return [None] * len(asked)

    def decide_actions(self, actor: str, objects: Sequence[tuple[str, str, Mapping[str, Any] | None]]
                       ) -> list[Decision]:
        return [Decision(kind=k, id=i, actions=dict.fromkeys(ACTIONS[k], True), epoch=None) for k, i, _ in objects]


def provisional_principal(actor: str) -> PrincipalRef:
    """The principal of an agent that is registering itself: no capabilities, no rooms, no clearance."""
    return PrincipalRef(id=actor, roles=["agent"], attr={
        "role": "unregistered", "status": "attached", "capabilities": [], "rooms": [], "delegated_tasks": [],
        "clearance": 0})


class PdpAuthorizer:
    """Decisions from a Cerbos PDP, with principals and resources built from the world's rows at decision
    time: capabilities are re-checked on every use. Query plans are remembered by (epoch, principal, kind,
    action) (:mod:`engine.policy.plan_memo`) and check decisions by (epoch, principal, resource, actions)
    (:mod:`engine.policy.decision_memo`, off for an epoch whose policy set reads the clock): exactly what
    decides them. Both are forgotten on a new epoch and by :meth:`forget`.

    ``deploy_root``: where the world's deployments live (``<root>/<epoch>``), scanned for clock functions
    when an epoch is first seen; without it the decision memo is off (visibly: ``decision_memo.status``).
    ``decision_memo_size`` bounds the decision memo (0: off); ``decision_memo`` replaces it outright."""

    external = True

    def __init__(self, pdp: DecisionPoint, read: Reader, *, plan_memo: PlanMemo | None = None,
                 decision_memo: DecisionMemo | None = None, decision_memo_size: int | None = None,
                 deploy_root: Path | None = None) -> None:
        self.pdp = pdp
        self.read = read
        self.plan_memo = plan_memo if plan_memo is not None else PlanMemo()
        if decision_memo is None:
            scan = epoch_scanner(deploy_root) if deploy_root is not None else None
            decision_memo = DecisionMemo(scan=scan) if decision_memo_size is None else DecisionMemo(
                decision_memo_size, scan=scan)
        self.decision_memo = decision_memo

    def forget(self) -> None:
        """Forget every remembered plan and decision (the runtime's PDP reloads: a new epoch is coming)."""
        self.plan_memo.clear()
        self.decision_memo.clear()

    def _epoch(self) -> str | None:
        row = self.read.current_policy_epoch()
        return str(row["epoch"]) if row else None

    def _memo_epoch(self) -> str | None:
        """The store's epoch for the decision memo's key (not read when the memo is off: no extra read)."""
        return self._epoch() if self.decision_memo.active else None

    def _check(self, epoch: str | None, principal: PrincipalRef, asked: Sequence[tuple[ResourceRef, list[str]]]
               ) -> list[Decision]:
        """One check request, answered from the decision memo where it can be."""
        return self.decision_memo.check(epoch, principal, asked, lambda missing: self.pdp.check(principal, missing))

    def _principal(self, actor: str, task_id: str = "", *, registering: bool = False) -> PrincipalRef:
        agent, accepted, rooms = self.read.principal_inputs(actor)
        if agent is None:
            if registering:
                return provisional_principal(actor)
            raise NotPermitted(actor, "act", "agent", actor, "not a registered agent")
        if registering:  # an agent registering itself is decided as the attached agent it is becoming
            agent = {**agent, "status": "attached"}
        return principal(self.read, agent, task_id=task_id, accepted=accepted, rooms=rooms)

    def decide(self, actor: str, checks: Sequence[Check]) -> list[Decision]:
        registering = any(c.action == "register" for c in checks) and all(
            c.kind == "agent" and c.id == actor for c in checks)  # an agent registering itself
        by_task: dict[str, list[int]] = {}
        for i, c in enumerate(checks):
            by_task.setdefault(c.task_id, []).append(i)
        out: list[Decision | None] = [None] * len(checks)
        epoch = self._memo_epoch()
        for task_id, idx in by_task.items():
            p = self._principal(actor, task_id, registering=registering)
            asked = [(resource(checks[i].kind, checks[i].id, checks[i].row, side_effect=checks[i].side_effect),
                      [checks[i].action]) for i in idx]
            for i, decision in zip(idx, self._check(epoch, p, asked), strict=True):
                out[i] = decision
        return _one_epoch([d for d in out if d is not None])

    def authorize(self, actor: str, checks: Sequence[Check]) -> str | None:
        if not checks:
            raise PolicyUnavailable("a write with nothing to decide: refusing (every write names its checks)")
        decisions = self.decide(actor, checks)
        epochs = {d.epoch for d in decisions}
        if None in epochs or len(epochs) != 1:
            raise PolicyUnavailable(f"the PDP answered without one policy epoch ({sorted(map(str, epochs))})")
        for check, decision in zip(checks, decisions, strict=True):
            if not decision.allowed(check.action):
                raise PolicyDenied(actor, check.action, check.kind, check.id, decision.epoch)
        return decisions[0].epoch

    def plan(self, actor: str, kind: str, action: str) -> PlanFilter:
        (found,) = self._plans(actor, [(kind, action)])
        return found

    def plans(self, actor: str, asked: Sequence[tuple[str, str]]) -> list[PlanFilter | None]:
        return list(self._plans(actor, asked))

    def _plans(self, actor: str, asked: Sequence[tuple[str, str]]) -> list[PlanFilter]:
        """Plans for the principal as it is now (built from the rows), remembered per policy epoch
        (:mod:`engine.policy.plan_memo`)."""
        principal = self._principal(actor)
        return self.plan_memo.plans(self._epoch(), principal, asked,
                                    lambda missing: self.pdp.plans(principal, missing))

    def decide_actions(self, actor: str, objects: Sequence[tuple[str, str, Mapping[str, Any] | None]]
                       ) -> list[Decision]:
        for kind, _, _ in objects:
            if kind not in ACTIONS:
                raise InvalidInput("kind", f"{kind!r} is not one of: {', '.join(ACTIONS)}")
        checks = [Check(k, i, next(iter(ACTIONS[k])), row) for k, i, row in objects]
        by_task: dict[str, list[int]] = {}
        for n, c in enumerate(checks):
            by_task.setdefault(c.task_id, []).append(n)
        out: list[Decision | None] = [None] * len(checks)
        epoch = self._memo_epoch()
        for task_id, idx in by_task.items():
            p = self._principal(actor, task_id)
            asked = [(resource(checks[n].kind, checks[n].id, checks[n].row), list(ACTIONS[checks[n].kind]))
                     for n in idx]
            for n, decision in zip(idx, self._check(epoch, p, asked), strict=True):
                out[n] = decision
        return _one_epoch([d for d in out if d is not None])


def _one_epoch(decisions: list[Decision]) -> list[Decision]:
    """``decisions`` if they were all taken under one policy epoch, else ``PolicyUnavailable``: the answers of
    several requests (one per task) may come from different PDP replicas while a deployment is under way,
    and a mixed answer is never handed out."""
    if len({d.epoch for d in decisions}) > 1:
        raise PolicyUnavailable(f"the PDP answered under several epochs ({sorted({str(d.epoch) for d in decisions})})")
    return decisions


__all__ = ["Authorizer", "Check", "LocalScopeRules", "PdpAuthorizer", "provisional_principal"]
