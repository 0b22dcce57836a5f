"""Handoffs: the source hands a task to a target with pointers and a delta, never the transcript.

PENDING -> ACCEPTED -> COMPLETED, or PENDING -> REJECTED. Accepting moves the task itself to the target
in the same transaction (the task id stays; the task outlives its executor).
"""

from __future__ import annotations

from typing import Any

from engine.commands.handoffs import AcceptHandoff, CompleteHandoff, CreateHandoff, RejectHandoff
from engine.errors import InvalidInput, NotPermitted
from engine.models.handoffs import HANDOFF_LIFECYCLE, Handoff, HandoffStatus
from engine.models.tasks import TASK_LIFECYCLE, Task
from engine.policy.attributes import capabilities_of, delegations
from engine.policy.enforcement import Check
from engine.validation import build, check_id, parse_enum
from engine.world.core import Cause, Plan, WorldCore
from engine.world.list_limits import MAX_LISTED, check_limit
from store import Insert, Update


class HandoffCalls(WorldCore):
    def create_handoff(self, actor: str, target_agent: str, task_id: str, goal: str, *,
                       current_state_ref: str | None = None,
                       evidence_refs: list[str] = [],  # noqa: B006 - never mutated: validated into a copy
                       artifact_refs: list[str] = [],  # noqa: B006
                       constraints: dict[str, Any] = {},  # noqa: B006
                       authority_scope: dict[str, Any] = {},  # noqa: B006
                       expected_output: str | None = None, return_route: str | None = None,
                       op_id: str | None = None, cause: Cause | None = None) -> Handoff:
        """Offer ``task_id`` to ``target_agent`` with a packet of pointers and a delta, never a transcript.
        The source (``actor``) must hold the task (its assignee, or its owner while nobody holds it).
        ``authority_scope.capabilities``: what is handed over, a subset of the source's own (default: all)."""
        req = build(CreateHandoff, target_agent=target_agent, task_id=task_id, goal=goal,
                    current_state_ref=current_state_ref, evidence_refs=evidence_refs, artifact_refs=artifact_refs,
                    constraints=constraints, authority_scope=authority_scope, expected_output=expected_output,
                    return_route=return_route)
        return self._write("create_handoff", actor, req, lambda now: self._plan_create_handoff(actor, req, now),
                           Handoff, op_id=op_id, cause=cause)

    def _plan_create_handoff(self, actor: str, req: CreateHandoff, now: int) -> Plan:
        task = self._load(Task, "tasks", "task", req.task_id, task_id=req.task_id)
        holder = task.assignee or task.owner_agent
        if holder != actor:
            raise NotPermitted(actor, "hand off", "task", task.task_id, f"held by {holder}")
        if not TASK_LIFECYCLE.allows(task.status.value, "transfer"):
            raise NotPermitted(actor, "hand off", "task", task.task_id, f"task is {task.status.value}")
        self._row("agents", "agent", req.target_agent, agent_id=req.target_agent)
        scope = {**req.authority_scope, "capabilities": self._attenuated_scope(actor, req)}
        hid = self.ids.new("hnd")
        handoff = Handoff(handoff_id=hid, source_agent=actor, status=HandoffStatus.PENDING, created_at_us=now,
                          updated_at_us=now, version=1, **{**req.model_dump(), "authority_scope": scope})
        refs = [("artifact", a, "handoff", hid, "carries") for a in req.artifact_refs]
        refs += [("ref", e, "handoff", hid, "evidence") for e in req.evidence_refs]
        return Plan("handoff.created", "handoff", hid, handoff,
                    checks=[Check("handoff", hid, "create", handoff.model_dump(mode="json"))],
                    changes=[Insert("handoffs", handoff.model_dump(mode="json"), "handoff", hid)],
                    payload={"task_id": req.task_id, "target_agent": req.target_agent},
                    provenance=[("task", req.task_id, "handoff", hid, "handed_off"), *refs], resulting_version=1)

    def _attenuated_scope(self, actor: str, req: CreateHandoff) -> list[str]:
        """The capabilities a handoff hands over: a subset of the source's own effective authority on the
        task (itself attenuated if the source got the task by a handoff); by default all of it. A handoff
        never escalates: asking for more is refused. The target then acts on the task with this scope
        intersected with its own maximum."""
        source = self._row("agents", "agent", actor, agent_id=actor)
        held = capabilities_of(source["capability_profile"])
        inherited = delegations(self._store.read, actor).get(req.task_id)
        if inherited is not None:
            held &= inherited
        if "capabilities" not in req.authority_scope:
            return sorted(held)
        wanted = req.authority_scope["capabilities"]
        if not isinstance(wanted, list) or not all(isinstance(c, str) for c in wanted):
            raise InvalidInput("authority_scope.capabilities", "a list of capability names")
        if extra := sorted(set(wanted) - held):
            raise NotPermitted(actor, "hand off", "task", req.task_id,
                               f"the handoff scope exceeds the source's authority: {', '.join(extra)}")
        return sorted(set(wanted))

    def accept_handoff(self, actor: str, handoff_id: str, *, op_id: str | None = None,
                       cause: Cause | None = None) -> Handoff:
        """The target accepts: the handoff is ACCEPTED and the task is now claimed by the target."""
        req = build(AcceptHandoff, handoff_id=handoff_id)

        def plan(now: int) -> Plan:
            h = self._load(Handoff, "handoffs", "handoff", req.handoff_id, handoff_id=req.handoff_id)
            task = self._load(Task, "tasks", "task", h.task_id, task_id=h.task_id)
            move = Update("tasks", {"task_id": task.task_id}, task.version,
                          {"status": "claimed", "assignee": actor, "updated_at_us": now}, "task", task.task_id)
            return self._handoff_plan(h, actor, "accept", now, extra=[move], task=task)
        return self._write("accept_handoff", actor, req, plan, Handoff, op_id=op_id, cause=cause)

    def complete_handoff(self, actor: str, handoff_id: str, result: dict[str, Any] | None = None, *,
                         op_id: str | None = None, cause: Cause | None = None) -> Handoff:
        """The target reports the expected output back (to ``return_route``)."""
        req = build(CompleteHandoff, handoff_id=handoff_id, result=result or {})

        def plan(now: int) -> Plan:
            h = self._load(Handoff, "handoffs", "handoff", req.handoff_id, handoff_id=req.handoff_id)
            return self._handoff_plan(h, actor, "complete", now, values={"result": req.result})
        return self._write("complete_handoff", actor, req, plan, Handoff, op_id=op_id, cause=cause)

    def reject_handoff(self, actor: str, handoff_id: str, reason: str, *, op_id: str | None = None,
                       cause: Cause | None = None) -> Handoff:
        """The target declines; the task stays with the source."""
        req = build(RejectHandoff, handoff_id=handoff_id, reason=reason)

        def plan(now: int) -> Plan:
            h = self._load(Handoff, "handoffs", "handoff", req.handoff_id, handoff_id=req.handoff_id)
            return self._handoff_plan(h, actor, "reject", now, values={"reason": req.reason})
        return self._write("reject_handoff", actor, req, plan, Handoff, op_id=op_id, cause=cause)

    def _handoff_plan(self, h: Handoff, actor: str, action: str, now: int, *,
                      values: dict[str, Any] | None = None, extra: list[Update] | None = None,
                      task: Task | None = None) -> Plan:
        """The transition ``action``: the handoff's lifecycle, then :func:`check_handoff_rules`, then the
        policy."""
        plan, _ = self._transition(Handoff, "handoffs", "handoff", h.handoff_id, HANDOFF_LIFECYCLE, action, now,
                                   values=values, check=lambda x: check_handoff_rules(self, actor, action, x, task),
                                   extra=extra or (), payload={"task_id": h.task_id, "source_agent": h.source_agent})
        return plan

    def get_handoff(self, handoff_id: str, *, actor: str | None = None) -> Handoff:
        check_id("handoff_id", handoff_id)
        return self._get(Handoff, "handoffs", "handoff", handoff_id, actor, handoff_id=handoff_id)

    def list_handoffs(self, *, status: str | None = None, target_agent: str | None = None,
                      limit: int = 1000, actor: str | None = None) -> list[Handoff]:
        where: dict[str, Any] = {}
        if status is not None:
            where["status"] = parse_enum("status", HandoffStatus, status).value
        if target_agent is not None:
            where["target_agent"] = check_id("target_agent", target_agent)
        return self._list(Handoff, "handoffs", "handoff", actor, where, limit=check_limit(limit, MAX_LISTED))


def check_handoff_rules(world: WorldCore, actor: str, action: str, handoff: Handoff, task: Task | None = None) -> None:
    """The World's own rules for ``action`` on ``handoff`` (after its lifecycle, before the policy): only
    its target answers it (``NotPermitted``); accepting also moves the task, which its lifecycle must allow
    (``IllegalTransition`` on the task). ``task``: the handoff's task if the caller has read it already."""
    if handoff.target_agent != actor:
        raise NotPermitted(actor, action, "handoff", handoff.handoff_id, f"addressed to {handoff.target_agent}")
    if action == "accept":
        if task is None:
            task = world._load(Task, "tasks", "task", handoff.task_id, task_id=handoff.task_id)
        TASK_LIFECYCLE.target(task.task_id, task.status.value, "transfer")
