"""The task ledger: create, assign, claim (exactly one of N concurrent claimers wins), complete,
release, abort, fail. A task outlives its executor."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.commands.tasks import AbortTask, AssignTask, ClaimTask, CompleteTask, CreateTask, FailTask, ReleaseTask
from engine.errors import IllegalTransition, NotPermitted, VersionConflict
from engine.models.tasks import TASK_LIFECYCLE, Task, TaskStatus
from engine.policy.enforcement import Check
from engine.validation import build, check_id, parse_enum
from engine.world.core import Cause, Plan, WorldCore
from engine.world.list_limits import MAX_LISTED, check_limit
from store import Insert

_LIVE_PRESENCE = ("active", "attached")


class TaskCalls(WorldCore):
    def create_task(self, actor: str, goal: str, *, task_id: str | None = None,
                    dependencies: list[str] | None = None, constraints: dict[str, Any] | None = None,
                    deadline_us: int | None = None, op_id: str | None = None,
                    cause: Cause | None = None) -> Task:
        """Create an open task owned by ``actor``. Dependencies must name existing tasks."""
        req = build(CreateTask, goal=goal, task_id=task_id, dependencies=dependencies or [],
                    constraints=constraints or {}, deadline_us=deadline_us)
        return self._write("create_task", actor, req, lambda now: self._plan_create_task(actor, req, now), Task,
                           op_id=op_id, cause=cause)

    def _plan_create_task(self, actor: str, req: CreateTask, now: int) -> Plan:
        dependencies = req.dependencies or []
        for dep in dependencies:
            self._row("tasks", "task", dep, task_id=dep)
        tid = req.task_id or self.ids.new("tsk")
        task = Task(task_id=tid, goal=req.goal, owner_agent=actor, status=TaskStatus.OPEN,
                    dependencies=dependencies, constraints=req.constraints or {}, deadline_us=req.deadline_us,
                    created_at_us=now, updated_at_us=now, version=1)
        row = task.model_dump(mode="json")
        return Plan("task.created", "task", tid, task, [Insert("tasks", row, "task", tid)],
                    checks=[Check("task", tid, "create", row)],
                    payload={"goal": req.goal}, provenance=[("task", d, "task", tid, "depends_on")
                                                            for d in dependencies],
                    resulting_version=1)

    def get_task(self, task_id: str, *, actor: str | None = None) -> Task:
        check_id("task_id", task_id)
        return self._get(Task, "tasks", "task", task_id, actor, task_id=task_id)

    def list_tasks(self, *, status: str | None = None, assignee: str | None = None,
                   limit: int = 1000, actor: str | None = None) -> list[Task]:
        where: dict[str, Any] = {}
        if status is not None:
            where["status"] = parse_enum("status", TaskStatus, status).value
        if assignee is not None:
            where["assignee"] = check_id("assignee", assignee)
        return self._list(Task, "tasks", "task", actor, where, limit=check_limit(limit, MAX_LISTED))

    def assign_task(self, actor: str, task_id: str, assignee: str, *, expected_version: int | None = None,
                    op_id: str | None = None, cause: Cause | None = None) -> Task:
        """Offer the task to ``assignee`` (an existing agent). Only the owner assigns."""
        req = build(AssignTask, task_id=task_id, assignee=assignee, expected_version=expected_version)

        def plan(now: int) -> Plan:
            self._row("agents", "agent", req.assignee, agent_id=req.assignee)
            return self._task_plan("assign", req.task_id, req.expected_version, actor, now,
                                   values={"assignee": req.assignee}, agent=req.assignee)
        return self._write("assign_task", actor, req, plan, Task, op_id=op_id, cause=cause)

    def claim_task(self, actor: str, task_id: str, *, expected_version: int | None = None,
                   op_id: str | None = None, cause: Cause | None = None) -> Task:
        """Take the task. Of N concurrent claimers exactly one wins; the others get
        ``IllegalTransition`` (already claimed) or ``VersionConflict``. The claimer must be a live agent
        (active or attached); an assigned task can only be claimed by its assignee."""
        req = build(ClaimTask, task_id=task_id, expected_version=expected_version)
        try:
            return self._write("claim_task", actor, req, lambda now: self._task_plan(
                "claim", req.task_id, req.expected_version, actor, now, values={"assignee": actor}), Task,
                op_id=op_id, cause=cause)
        except VersionConflict:
            if req.expected_version is None:
                current = self._load(Task, "tasks", "task", req.task_id, task_id=req.task_id)
                if not TASK_LIFECYCLE.allows(current.status.value, "claim"):
                    raise IllegalTransition("task", req.task_id, current.status.value, "claim") from None
            raise

    def complete_task(self, actor: str, task_id: str, result: dict[str, Any] | None = None, *,
                      expected_version: int | None = None, op_id: str | None = None,
                      cause: Cause | None = None) -> Task:
        """Finish a claimed task with ``result``; only its assignee may."""
        req = build(CompleteTask, task_id=task_id, result=result or {}, expected_version=expected_version)
        return self._write("complete_task", actor, req, lambda now: self._task_plan(
            "complete", req.task_id, req.expected_version, actor, now, values={"result": req.result}), Task,
            op_id=op_id, cause=cause)

    def fail_task(self, actor: str, task_id: str, reason: str, *, expected_version: int | None = None,
                  op_id: str | None = None, cause: Cause | None = None) -> Task:
        """Record that the assignee could not finish the task."""
        req = build(FailTask, task_id=task_id, reason=reason, expected_version=expected_version)
        return self._write("fail_task", actor, req, lambda now: self._task_plan(
            "fail", req.task_id, req.expected_version, actor, now, values={"result": {"reason": req.reason}},
            reason=req.reason), Task, op_id=op_id, cause=cause)

    def release_task(self, actor: str, task_id: str, *, expected_version: int | None = None,
                     op_id: str | None = None, cause: Cause | None = None) -> Task:
        """Give the task back (open again); the assignee or the owner may."""
        req = build(ReleaseTask, task_id=task_id, expected_version=expected_version)
        return self._write("release_task", actor, req, lambda now: self._task_plan(
            "release", req.task_id, req.expected_version, actor, now, values={"assignee": None}), Task,
            op_id=op_id, cause=cause)

    def abort_task(self, actor: str, task_id: str, reason: str, *, expected_version: int | None = None,
                   op_id: str | None = None, cause: Cause | None = None) -> Task:
        """Stop the task for good; only its owner may (a human decision is never overwritten by others)."""
        req = build(AbortTask, task_id=task_id, reason=reason, expected_version=expected_version)
        return self._write("abort_task", actor, req, lambda now: self._task_plan(
            "abort", req.task_id, req.expected_version, actor, now, values={"result": {"aborted": req.reason}},
            reason=req.reason), Task, op_id=op_id, cause=cause)

    def _task_plan(self, action: str, task_id: str, expected_version: int | None, actor: str, now: int, *,
                   values: dict[str, Any], agent: str | None = None, reason: str | None = None) -> Plan:
        """The transition ``action``: the lifecycle, then :func:`check_task_parties`, then the policy."""
        plan, _ = self._transition(Task, "tasks", "task", task_id, TASK_LIFECYCLE, action, now,
                                   expected_version=expected_version, values=values,
                                   check=lambda t: check_task_parties(self, actor, action, t),
                                   payload={"agent": agent or actor, "reason": reason})
        return plan


def _live_claimer(world: WorldCore, actor: str, task: Task) -> None:
    agent = world._row("agents", "agent", actor, agent_id=actor)
    if agent["status"] not in _LIVE_PRESENCE:
        raise NotPermitted(actor, "claim", "task", task.task_id, f"agent is {agent['status']}")
    if task.status is TaskStatus.ASSIGNED and task.assignee != actor:
        raise NotPermitted(actor, "claim", "task", task.task_id, f"assigned to {task.assignee}")


def _owner(actor: str, task: Task, action: str) -> None:
    if task.owner_agent != actor:
        raise NotPermitted(actor, action, "task", task.task_id, f"owned by {task.owner_agent}")


def _holder(actor: str, task: Task, action: str) -> None:
    if task.assignee != actor:
        raise NotPermitted(actor, action, "task", task.task_id, f"claimed by {task.assignee}")


def _assignee_or_owner(actor: str, task: Task, action: str) -> None:
    if actor not in (task.assignee, task.owner_agent):
        raise NotPermitted(actor, action, "task", task.task_id, "neither assignee nor owner")


# Who may take each task transition (beyond the lifecycle and the policy): the one table the calls and
# ``allowed_actions`` both use.
_PARTIES: dict[str, Callable[[str, Task, str], None]] = {
    "assign": _owner, "abort": _owner, "complete": _holder, "fail": _holder, "release": _assignee_or_owner}


def check_task_parties(world: WorldCore, actor: str, action: str, task: Task) -> None:
    """The World's own party rule for ``action`` on ``task`` (checked after its lifecycle, before the
    policy): ``NotPermitted`` unless ``actor`` is the party the action needs. Claim: a live agent, and the
    assignee of an assigned task; assign and abort: the owner; complete and fail: the assignee; release:
    the assignee or the owner."""
    if action == "claim":
        _live_claimer(world, actor, task)
    elif (rule := _PARTIES.get(action)) is not None:
        rule(actor, task, action)
