"""Continuity checkpoints (seed 003 §3.5, §17-18): where a task stands, so that a receiver resumes it.

A task's plan is its ``constraints["steps"]``: a list of ``{"id", "action", "after"}`` (a step id, the
contracted action it performs, the steps it waits for). A step's attempt is the contracted action begun
under the key :func:`step_key` ``(task_id, step_id)`` (``engine.world.actions``). A checkpoint is computed
from the store when it is read, never taken from anyone's word: each step's status is its attempt's as the
ledger records it, so a receiver sees the frontier as it is now (an effect settled after the handoff
included):

* ``done``: settled done (never to be performed again: resuming one returns its record);
* ``running``: begun and not settled (outcome unknown: resume it with the same key, whose retry asks the
  status first);
* ``failed``: settled failed;
* ``ready``: not begun, every step it waits for done (the task frontier F_t of §17);
* ``blocked``: not begun, waiting for a step that is not done.

With them: the pending approvals of the task's holder for the plan's actions, the authority epoch (the
policy epoch now, and for a handoff the authority scope it hands over), the last confirmed external
effect (the latest done S2/S3 step) and the artifacts.

Who may read one: :meth:`handoff_checkpoint`: the handoff's source or target (the World's rule), as the
PDP allows them to read the handoff; :meth:`task_checkpoint` (a conversation replaced: the same agent in a
new session, or a governor): the task's owner or assignee or a live governor, as the PDP allows reading the
task. Anyone else is ``NotPermitted``; nothing is written by reading.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationError

from engine.contracts.attempt import ActionAttempt, AttemptStatus
from engine.errors import InvalidInput, NotPermitted
from engine.models.common import Id, Model
from engine.models.handoffs import Handoff
from engine.models.tasks import Task
from engine.policy.enforcement import Check
from engine.validation import check_id, invalid_from
from engine.world.actions import BEGIN_COMMAND, SETTLE_COMMAND, ActionCalls, attempt_op_ids

MAX_STEPS = 200
STEP_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,59}$"


def step_key(task_id: str, step_id: str) -> str:
    """The idempotency key of step ``step_id`` of task ``task_id``."""
    return f"{task_id}.{step_id}"


class PlanStep(Model):
    id: str = Field(pattern=STEP_ID_PATTERN)
    action: str = Field(pattern=r"^[a-z][a-z0-9_]{0,62}$")
    after: list[str] = Field(default_factory=list, max_length=MAX_STEPS)


class TaskPlan(Model):
    steps: list[PlanStep] = Field(max_length=MAX_STEPS)


class StepState(Model):
    step: str
    action: str
    status: str  # done | running | failed | ready | blocked
    idempotency_key: Id
    external_ref: str | None = None
    settled_at_us: int | None = None


class Frontier(Model):
    done: list[str]
    running: list[str]
    failed: list[str]
    ready: list[str]
    blocked: list[str]


class ConfirmedEffect(Model):
    step: str
    action: str
    idempotency_key: Id
    external_ref: str | None
    settled_at_us: int


class ContinuityCheckpoint(Model):
    """χ_t of §3.5 with the §18 handoff fields: what a receiver needs to resume the task."""

    task_id: Id
    handoff_id: Id | None = None
    state_ref: str
    holder: Id | None
    frontier: Frontier
    steps: list[StepState]
    pending_actions: list[Id]
    pending_approvals: list[Id]
    authority_epoch: str | None
    authority_scope: dict[str, Any] = Field(default_factory=dict)
    last_confirmed_effect: ConfirmedEffect | None = None
    artifact_refs: list[str] = Field(default_factory=list)
    read_at_us: int


class CheckpointCalls(ActionCalls):
    def handoff_checkpoint(self, actor: str, handoff_id: str) -> ContinuityCheckpoint:
        """The checkpoint of the handoff's task, for its source or target (see the module docstring)."""
        hid = check_id("handoff_id", handoff_id)
        handoff = self._get(Handoff, "handoffs", "handoff", hid, check_id("actor", actor), handoff_id=hid)
        if actor not in (handoff.source_agent, handoff.target_agent):
            raise NotPermitted(actor, "read checkpoint", "handoff", handoff_id, "not its source or target")
        task = self._load(Task, "tasks", "task", handoff.task_id, task_id=handoff.task_id)
        return self._checkpoint(task, handoff)

    def task_checkpoint(self, actor: str, task_id: str) -> ContinuityCheckpoint:
        """The checkpoint of a task, for its owner, its assignee or a live governor."""
        task = self._get(Task, "tasks", "task", check_id("task_id", task_id), check_id("actor", actor),
                         task_id=task_id)
        if actor not in (task.owner_agent, task.assignee) and not self._live_governor(actor):
            raise NotPermitted(actor, "read checkpoint", "task", task_id, "not its owner, assignee or a governor")
        return self._checkpoint(task, None)

    def _live_governor(self, actor: str) -> bool:
        row = self._store.read.get("agents", agent_id=actor)
        return row is not None and self._policy.decide(actor, [Check("agent", actor, "grant", row)])[0].allowed(
            "grant")

    def _checkpoint(self, task: Task, handoff: Handoff | None) -> ContinuityCheckpoint:
        plan = task_plan(task)
        attempts = {s.id: self._step_attempt(step_key(task.task_id, s.id)) for s in plan.steps}
        states = _step_states(task.task_id, plan, attempts)
        frontier = Frontier(**{name: [s.step for s in states if s.status == name]
                               for name in ("done", "running", "failed", "ready", "blocked")})
        holder = task.assignee or task.owner_agent
        return ContinuityCheckpoint(
            task_id=task.task_id, handoff_id=handoff.handoff_id if handoff else None,
            state_ref=f"task:{task.task_id}@{task.version}", holder=holder, frontier=frontier, steps=states,
            pending_actions=[s.idempotency_key for s in states if s.status == "running"],
            pending_approvals=self._pending_approvals(handoff.source_agent if handoff else holder, plan),
            authority_epoch=self._current_epoch_name(),
            authority_scope=dict(handoff.authority_scope) if handoff else {},
            last_confirmed_effect=_last_effect(plan, attempts),
            artifact_refs=sorted({*task.artifacts, *(handoff.artifact_refs if handoff else [])}),
            read_at_us=self.clock.now_us())

    def _step_attempt(self, key: str) -> ActionAttempt | None:
        begin_op, settle_op = attempt_op_ids(key)
        settled = self._ledger_attempt(settle_op, SETTLE_COMMAND, key)
        return settled or self._ledger_attempt(begin_op, BEGIN_COMMAND, key)

    def _pending_approvals(self, requester: str, plan: TaskPlan) -> list[str]:
        actions = sorted({s.action for s in plan.steps})
        if not actions:
            return []
        rows = self._store.read.rows("approvals", {"requested_by": requester, "kind": "tool", "object_id": actions,
                                                   "status": ["pending", "approved"]})
        return [str(r["approval_id"]) for r in rows]


def task_plan(task: Task) -> TaskPlan:
    """The plan in the task's ``constraints["steps"]`` (none: an empty plan); a malformed one, a step waiting
    for a step that is not in the plan, or two steps with one id, is ``InvalidInput``."""
    try:
        plan = TaskPlan.model_validate({"steps": task.constraints.get("steps", [])})
    except ValidationError as exc:
        raise invalid_from(exc, "constraints") from exc
    ids = [s.id for s in plan.steps]
    if len(set(ids)) != len(ids):
        raise InvalidInput("constraints.steps", "two steps with one id")
    for s in plan.steps:
        if missing := sorted(set(s.after) - set(ids)):
            raise InvalidInput("constraints.steps", f"step {s.id} waits for steps not in the plan: {missing}")
    return plan


def _step_states(task_id: str, plan: TaskPlan, attempts: dict[str, ActionAttempt | None]) -> list[StepState]:
    done = {sid for sid, a in attempts.items() if a is not None and a.status is AttemptStatus.DONE}
    out = []
    for s in plan.steps:
        a = attempts[s.id]
        if a is None:
            status = "ready" if set(s.after) <= done else "blocked"
        else:
            status = {AttemptStatus.DONE: "done", AttemptStatus.FAILED: "failed"}.get(a.status, "running")
        out.append(StepState(step=s.id, action=s.action, status=status, idempotency_key=step_key(task_id, s.id),
                             external_ref=a.external_ref if a else None, settled_at_us=a.settled_at_us if a else None))
    return out


def _last_effect(plan: TaskPlan, attempts: dict[str, ActionAttempt | None]) -> ConfirmedEffect | None:
    confirmed = [(a.settled_at_us or 0, s.id, a) for s in plan.steps if (a := attempts[s.id]) is not None
                 and a.status is AttemptStatus.DONE and a.side_effect.value in ("S2", "S3")]
    if not confirmed:
        return None
    at, sid, a = max(confirmed, key=lambda c: (c[0], c[1]))
    return ConfirmedEffect(step=sid, action=a.action, idempotency_key=a.idempotency_key, external_ref=a.external_ref,
                           settled_at_us=at)


__all__ = ["CheckpointCalls", "ContinuityCheckpoint", "Frontier", "StepState", "TaskPlan", "step_key", "task_plan"]
