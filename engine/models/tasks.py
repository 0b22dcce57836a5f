"""The task ledger: explicit ownership that outlives any one executor."""

from __future__ import annotations

from pydantic import Field

from engine.models.common import Id, Model, Payload, Refs, Text, TimeUs, Version
from engine.models.enums import TaskStatus
from engine.models.lifecycle import Lifecycle

_LIVE = {TaskStatus.OPEN, TaskStatus.ASSIGNED, TaskStatus.CLAIMED}

TASK_LIFECYCLE = Lifecycle("task", {
    "assign": ({TaskStatus.OPEN, TaskStatus.ASSIGNED}, TaskStatus.ASSIGNED),
    "claim": ({TaskStatus.OPEN, TaskStatus.ASSIGNED}, TaskStatus.CLAIMED),
    "complete": ({TaskStatus.CLAIMED}, TaskStatus.COMPLETED),
    "fail": ({TaskStatus.CLAIMED}, TaskStatus.FAILED),
    "release": ({TaskStatus.ASSIGNED, TaskStatus.CLAIMED}, TaskStatus.OPEN),
    "abort": (_LIVE, TaskStatus.ABORTED),
    "transfer": (_LIVE, TaskStatus.CLAIMED),  # an accepted handoff: same task id, new executor
})


class Task(Model):
    task_id: Id
    goal: Text
    owner_agent: Id
    assignee: Id | None = None
    status: TaskStatus
    dependencies: Refs = Field(default_factory=list)
    constraints: Payload = Field(default_factory=dict)
    artifacts: Refs = Field(default_factory=list)
    result: Payload | None = None
    deadline_us: TimeUs | None = None
    created_at_us: TimeUs
    updated_at_us: TimeUs
    version: Version


__all__ = ["TASK_LIFECYCLE", "Task", "TaskStatus"]
