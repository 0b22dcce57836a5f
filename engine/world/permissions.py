"""What an agent may do: every action on an object, and invoking a capability.

``allowed_actions`` answers "what may I do to X" (and a batch form for many objects) with the answer the
calls will give: an action is allowed only if the World's own rules allow it (the kind's lifecycle from
the object's status, then its party rules: owner, assignee, target, reviewer, member, lease holder) and
the PDP allows it; each refused action says why (:class:`~engine.models.lifecycle.Refusal`), in the order
the call checks (its world rules, then the policy). The rules are the ones the calls run
(:data:`WORLD_RULES` names them), never a copy of them. ``invoke`` asks the PDP before a capability or
tool is used and records the use. An S3 (irreversible, external) side effect additionally needs an
approval (``engine.world.approvals``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import Field

from engine.commands.approvals import Invoke
from engine.errors import AlreadyExists, IllegalTransition, InvalidInput, NotFound, NotPermitted, PMWError
from engine.models.approvals import APPROVAL_LIFECYCLE
from engine.models.artifacts import Artifact
from engine.models.channels import DELIVERY_LIFECYCLE, Delivery
from engine.models.common import Model
from engine.models.handoffs import HANDOFF_LIFECYCLE, Handoff
from engine.models.lifecycle import Lifecycle, Refusal, refusal_of
from engine.models.memory import MEMORY_LIFECYCLE, Memory
from engine.models.rooms import ROOM_LIFECYCLE
from engine.models.tasks import TASK_LIFECYCLE, Task
from engine.models.wakes import WAKE_LIFECYCLE, Wake
from engine.policy.enforcement import Check
from engine.policy.model import ACTIONS, KINDS, Decision
from engine.validation import build, check_id
from engine.world.approvals import ApprovalCalls
from engine.world.artifacts import check_artifact_rules
from engine.world.channels import check_delivery_rules, check_delivery_visible
from engine.world.core import Cause, Plan, WorldCore
from engine.world.handoffs import check_handoff_rules
from engine.world.memory import MemoryCalls
from engine.world.rooms import RoomCalls, membership_check, membership_of
from engine.world.tasks import check_task_parties
from engine.world.wakes import RUN_FOR_TARGET, check_wake_rules
from store import STATE_TABLE_KEYS

W = TypeVar("W", bound=WorldCore)

# kind -> (table, key column) for kinds whose objects are rows; the key comes from the schema
OBJECT_TABLES: dict[str, tuple[str, str]] = {
    kind: (table, STATE_TABLE_KEYS[table][0]) for kind, table in {
        "agent": "agents", "state": "state_entries", "task": "tasks", "artifact": "artifacts",
        "memory": "memory", "wake": "wakes", "handoff": "handoffs", "receipt": "receipts", "room": "rooms",
        "message": "deliveries", "approval": "approvals"}.items()
}
SIDE_EFFECTS = ("S0", "S1", "S2", "S3")
#: Kinds whose objects may be sealed from their asker (private memory, unrevealed answers): a question about
#: one it may neither read nor break-glass gets the policy's refusal only, existing or not.
SEALED_KINDS = frozenset({"memory"})
HIDDEN_REASON = "refused: policy"


class AllowedActions(Model):
    """Every action of the object's kind, allowed or not, under ``policy_epoch``: ``allowed`` are the
    actions the calls would take now, ``denied`` every other one, and ``refused`` says for each denied
    action why (``why``: the message of the error the call would raise). Barring a concurrent change, a
    call of an allowed action succeeds and a call of a denied one raises the error its reason names.
    Actions whose outcome depends on the call's arguments (a task's assignee, a supersede's replacement, a
    distill's sources) are answered for the object alone."""

    kind: str
    id: str
    allowed: list[str]
    denied: list[str]
    policy_epoch: str | None
    derived_roles: list[str] = Field(default_factory=list)
    refused: dict[str, Refusal] = Field(default_factory=dict)
    why: dict[str, str] = Field(default_factory=dict)


WorldRule = Callable[[WorldCore, str, str, dict[str, Any], int], None]
PolicyQuestion = Callable[[WorldCore, str, str, dict[str, Any]], Check | None]


@dataclass(frozen=True)
class KindRules:
    """The World's own checks on one kind's actions, in the order its calls make them, before the PDP:
    the ``lifecycle`` (for the actions it names, from the row's ``status_field``), then ``rule(world,
    actor, action, row, now)``, which raises the error the call would raise. ``question(world, actor,
    action, row)``: the check the call puts to the PDP when it is not the object's bare row (``None``:
    the bare row)."""

    lifecycle: Lifecycle | None = None
    rule: WorldRule | None = None
    status_field: str = "status"
    question: PolicyQuestion | None = None


def _world_as(world: WorldCore, cls: type[W]) -> W:
    if not isinstance(world, cls):
        raise TypeError(f"allowed_actions needs a World with {cls.__name__}")
    return world


def _task_rule(world: WorldCore, actor: str, action: str, row: dict[str, Any], now: int) -> None:
    check_task_parties(world, actor, action, Task.model_validate(row))


def _wake_rule(world: WorldCore, actor: str, action: str, row: dict[str, Any], now: int) -> None:
    check_wake_rules(actor, action, Wake.model_validate(row), now, world=world)


def _handoff_rule(world: WorldCore, actor: str, action: str, row: dict[str, Any], now: int) -> None:
    check_handoff_rules(world, actor, action, Handoff.model_validate(row))


def _delivery_rule(world: WorldCore, actor: str, action: str, row: dict[str, Any], now: int) -> None:
    # the calls' order (channels._delivery_action): visible to the actor, then the lifecycle, then the parties
    if action in DELIVERY_LIFECYCLE.actions:
        check_delivery_visible(world, actor, str(row["delivery_id"]), row)
        DELIVERY_LIFECYCLE.target(str(row["delivery_id"]), str(row["status"]), action)
    check_delivery_rules(world, actor, action, Delivery.model_validate(row))


def _artifact_rule(world: WorldCore, actor: str, action: str, row: dict[str, Any], now: int) -> None:
    check_artifact_rules(actor, action, Artifact.model_validate(row))


def _memory_rule(world: WorldCore, actor: str, action: str, row: dict[str, Any], now: int) -> None:
    # The checks are memory.py's own; which action takes which is bound in each of its calls (until
    # memory.py exports that binding as one table, this mirrors it; the property test compares the two).
    mem = Memory.model_validate(row)
    if action == "propose" or (action == "revoke" and mem.reviewer != actor):
        MemoryCalls._require_memory_owner(actor, mem, action)
    elif action in ("review", "promote", "reject"):
        MemoryCalls._require_reviewer(actor, mem, action)


def _room_rule(world: WorldCore, actor: str, action: str, row: dict[str, Any], now: int) -> None:
    # rooms.py's own checks, in the order its calls make them (leave checks membership only: a closed room
    # has no members); the blind-round checks mirror room_answers.py's plan until it exports them.
    rooms = _world_as(world, RoomCalls)
    rid = str(row["room_id"])
    if action in ("join", "close", "invite"):  # an invitation needs an open room, as joining does
        ROOM_LIFECYCLE.target(rid, str(row["status"]), "join" if action == "invite" else action)
    elif action in ("discuss", "distill", "answer"):
        rooms._open_room_of_member(actor, rid, action)
        if action == "answer":
            answers = rooms._store.read.rows("room_answers", {"room_id": rid})
            if any(a["agent_id"] == actor for a in answers):
                raise AlreadyExists("room_answer", f"{rid}/{actor}")
            if any(a["revealed"] for a in answers):
                raise IllegalTransition("room", rid, "answers_revealed", "answer")
    elif action == "leave":
        member = rooms._row("room_members", "room_member", f"{rid}/{actor}", room_id=rid, agent_id=actor)
        if not member["active"]:
            raise NotPermitted(actor, "leave", "room", rid, f"{actor} is not a member")


def _room_question(world: WorldCore, actor: str, action: str, row: dict[str, Any]) -> Check | None:
    # joining and leaving oneself are decided on one's membership, as join_room and leave_room ask
    if action == "join":
        member = world._store.read.get("room_members", room_id=row["room_id"], agent_id=actor)
        return membership_check("join", row, actor, membership_of(member))
    if action == "leave":
        return membership_check("leave", row, actor, "active")
    return None


#: Per kind, the World's own rules for its actions (kinds not named here are decided by the PDP alone).
WORLD_RULES: Mapping[str, KindRules] = {
    "task": KindRules(TASK_LIFECYCLE, _task_rule),
    "wake": KindRules(WAKE_LIFECYCLE, _wake_rule),
    "handoff": KindRules(HANDOFF_LIFECYCLE, _handoff_rule),
    "message": KindRules(None, _delivery_rule),  # its lifecycle after the visibility check, in the rule
    "memory": KindRules(MEMORY_LIFECYCLE, _memory_rule),
    "room": KindRules(None, _room_rule, question=_room_question),
    "approval": KindRules(APPROVAL_LIFECYCLE),
    "artifact": KindRules(None, _artifact_rule),
}


class Invoked(Model):
    """A permitted use of a capability, recorded in the log; ``policy_epoch`` names the deciding policy."""

    kind: str
    id: str
    side_effect: str
    policy_epoch: str | None
    approval_id: str | None = None


class PermissionCalls(ApprovalCalls):
    def _object_row(self, kind: str, ident: str) -> dict[str, Any] | None:
        if kind not in KINDS:
            raise InvalidInput("kind", f"{kind!r} is not one of: {', '.join(KINDS)}")
        if kind not in OBJECT_TABLES:
            return None  # topology, channel, tool: no row
        table, key = OBJECT_TABLES[kind]
        return self._row(table, kind, ident, **{key: ident})

    def _object_rows(self, objects: Sequence[tuple[str, str]]) -> list[tuple[str, str, dict[str, Any] | None]]:
        """The rows of many objects: one IN query per kind; ``NotFound`` for the first missing one, except
        for a sealed kind (:data:`SEALED_KINDS`), whose missing object is answered as one its asker may not
        see (``None`` row; see :meth:`allowed_actions_batch`)."""
        wanted: dict[str, set[str]] = {}
        for kind, ident in objects:
            if kind not in KINDS:
                raise InvalidInput("kind", f"{kind!r} is not one of: {', '.join(KINDS)}")
            if kind in OBJECT_TABLES:
                wanted.setdefault(kind, set()).add(ident)
        found: dict[tuple[str, str], dict[str, Any]] = {}
        for kind, idents in wanted.items():
            table, key = OBJECT_TABLES[kind]
            for row in self._store.read.rows(table, {key: sorted(idents)}):
                found[(kind, str(row[key]))] = row
        out: list[tuple[str, str, dict[str, Any] | None]] = []
        for kind, ident in objects:
            if kind in OBJECT_TABLES and kind not in SEALED_KINDS and (kind, ident) not in found:
                raise NotFound(kind, ident)
            out.append((kind, ident, found.get((kind, ident))))
        return out

    def allowed_actions(self, actor: str, kind: str, ident: str) -> AllowedActions:
        """Every action ``actor`` may or may not take on one object (one PDP call), with the reason for
        each refused one: the answer the calls will give. On an object of a sealed kind (memory) that
        ``actor`` may neither read nor break-glass, every action is refused as ``policy`` ("refused:
        policy"), with no reason of the World's own rules (owner, status) and the same answer whether or
        not the object exists (the policy allows such an asker no action on it but ``create``, which no
        call takes on an existing object)."""
        return self.allowed_actions_batch(actor, [(kind, ident)])[0]

    def allowed_actions_batch(self, actor: str, objects: Sequence[tuple[str, str]]) -> list[AllowedActions]:
        """``allowed_actions`` for many objects: one PDP request per principal context (objects of a task
        delegated to ``actor`` are decided with its attenuated authority) and per 500 objects; a wake's
        claim and ack are decided with its target agent's authority, as the calls decide them."""
        check_id("actor", actor)
        if len(objects) > 10_000:
            raise InvalidInput("objects", f"{len(objects)} objects; at most 10000 per call")
        loaded = self._object_rows([(kind, str(ident)) for kind, ident in objects])
        decisions = self._policy.decide_actions(actor, loaded)
        as_target = self._decided_as_targets(actor, loaded)
        now = self.clock.now_us()
        out = []
        for (kind, ident, row), d in zip(loaded, decisions, strict=True):
            hidden = kind in SEALED_KINDS and self._policy.external and not (
                d.allowed("read") or d.allowed("break_glass"))
            if row is None and kind in OBJECT_TABLES and not hidden:
                raise NotFound(kind, ident)  # (a sealed kind's missing object, to one who may see it)
            out.append(self._answer(actor, row, d, as_target.get(ident) if kind == "wake" else None, now,
                                    hidden=hidden))
        return out

    def _decided_as_targets(self, actor: str, loaded: Sequence[tuple[str, str, dict[str, Any] | None]]
                            ) -> dict[str, Decision]:
        """For wakes of other agents: the decision of their target (who claim and ack are decided as)."""
        by_target: dict[str, list[tuple[str, str, dict[str, Any] | None]]] = {}
        for kind, ident, row in loaded:
            if kind == "wake" and row is not None and row["target_agent"] != actor:
                by_target.setdefault(str(row["target_agent"]), []).append((kind, ident, row))
        out: dict[str, Decision] = {}
        for target, wakes in by_target.items():
            out.update((d.id, d) for d in self._policy.decide_actions(target, wakes))
        return out

    def _answer(self, actor: str, row: dict[str, Any] | None, decision: Decision, as_target: Decision | None,
                now: int, *, hidden: bool = False) -> AllowedActions:
        """The answer for one object; ``hidden``: ``actor`` may not see it (nor break-glass it), so every
        action is the policy's refusal and says nothing more (see :meth:`allowed_actions`)."""
        refused: dict[str, Refusal] = {}
        why: dict[str, str] = {}
        passed = []
        for action in ACTIONS[decision.kind]:
            if hidden:
                refused[action], why[action] = Refusal.POLICY, HIDDEN_REASON
                continue
            world_says = self._world_refusal(actor, decision.kind, action, row, now)
            if world_says is not None:
                refused[action], why[action] = world_says
            else:
                passed.append(action)
        for action, allowed, epoch in self._policy_answers(actor, decision, as_target, row, passed):
            if not allowed:
                refused[action] = Refusal.POLICY
                why[action] = f"denied by policy (epoch {epoch})"
        return AllowedActions(kind=decision.kind, id=decision.id,
                              allowed=sorted(a for a in ACTIONS[decision.kind] if a not in refused),
                              denied=sorted(refused), policy_epoch=decision.epoch,
                              derived_roles=[] if hidden else decision.derived_roles, refused=refused, why=why)

    def _policy_answers(self, actor: str, decision: Decision, as_target: Decision | None,
                        row: dict[str, Any] | None, actions: list[str]) -> list[tuple[str, bool, str | None]]:
        """The PDP's answer for each of ``actions``, to the question its call asks: the bare row's decision,
        the wake's target's (claim, ack), or a question of the kind's own (one more PDP call)."""
        rules = WORLD_RULES.get(decision.kind)
        asked = {a: q for a in actions if rules is not None and rules.question is not None and row is not None
                 and (q := rules.question(self, actor, a, row)) is not None}
        own = dict(zip(asked, self._policy.decide(actor, list(asked.values())), strict=True)) if asked else {}
        out = []
        for action in actions:
            d = own.get(action) or (as_target if as_target is not None and action in RUN_FOR_TARGET else decision)
            out.append((action, d.allowed(action), d.epoch))
        return out

    def _world_refusal(self, actor: str, kind: str, action: str, row: dict[str, Any] | None,
                       now: int) -> tuple[Refusal, str] | None:
        """Why the World's own rules refuse ``action`` (the first that fails, as the call checks), or
        ``None``: the lifecycle of the kind from the row's status, then the kind's rule."""
        rules = WORLD_RULES.get(kind)
        if rules is None or row is None:
            return None
        try:
            if rules.lifecycle is not None and action in rules.lifecycle.actions:
                rules.lifecycle.target(str(row[OBJECT_TABLES[kind][1]]), str(row[rules.status_field]), action)
            if rules.rule is not None:
                rules.rule(self, actor, action, row, now)
        except PMWError as error:
            reason = refusal_of(error)
            if reason is None:
                raise
            return reason, error.message
        return None

    def invoke(self, actor: str, kind: str, ident: str, *, side_effect: str = "S0",
               payload: dict[str, Any] | None = None, approval_id: str | None = None, op_id: str | None = None,
               cause: Cause | None = None) -> Invoked:
        """Ask the PDP before using a capability (a tool, or memory/state/artifact as an input) and record
        the use. ``S3`` needs an approval bound to exactly this invocation (see ``approvals``)."""
        req = build(Invoke, kind=kind, ident=ident, side_effect=side_effect, payload=payload or {},
                    approval_id=approval_id)  # kind: one of the kinds with an invoke action (INVOKABLE_KINDS)

        def plan(now: int) -> Plan:
            row = self._object_row(req.kind, req.ident)
            extra = [self._spend_approval(actor, req.approval_id, req.kind, req.ident, req.payload or {}, now)
                     ] if req.side_effect == "S3" else []
            result = Invoked(kind=req.kind, id=req.ident, side_effect=req.side_effect, policy_epoch=None,
                             approval_id=req.approval_id)
            return Plan("capability.invoked", req.kind, req.ident, result, extra,
                        payload={"side_effect": req.side_effect, "approval_id": req.approval_id},
                        checks=[Check(req.kind, req.ident, "invoke", row, req.side_effect)])
        done = self._write("invoke", actor, req, plan, Invoked, op_id=op_id, cause=cause)
        return done.model_copy(update={"policy_epoch": self._current_epoch_name()})

