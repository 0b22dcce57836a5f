"""The task ledger: create, assign, claim (exactly one of N concurrent claimers wins), complete, fail,
release, abort. A task outlives its executor."""

from __future__ import annotations

from pydantic import Field

from engine.commands.base import Command
from engine.commands.fields import ExpectedVersion, Id, Payload, Reason, Refs, Text, TimeUs


class CreateTask(Command):
    """Create an open task owned by the caller. Dependencies must name existing tasks."""

    name = "create_task"
    events = ("task.created",)
    agent_effect = True
    ref_field = "task_id"

    goal: Text = Field(description="What the task is for.")
    task_id: Id | None = Field(default=None, description="Choose the task id (default: generated).")
    dependencies: Refs | None = Field(default=None, description="Existing tasks this one depends on.")
    constraints: Payload | None = None
    deadline_us: TimeUs | None = Field(default=None, description="Deadline, microseconds since the epoch.")


class AssignTask(Command):
    """Offer an open or assigned task to ``assignee`` (an existing agent); only the task's owner assigns.
    The assignee may then claim it."""

    name = "assign_task"
    events = ("task.assign",)
    agent_effect = True
    ref_field = "task_id"

    task_id: Id
    assignee: Id = Field(description="The agent the task is offered to.")
    expected_version: ExpectedVersion | None = None


class ClaimTask(Command):
    """Take an open task (or one assigned to the caller). Of N concurrent claimers exactly one wins; the
    others get ``illegal_transition`` (already claimed) or ``version_conflict``. The claimer must be a
    live agent (active or attached); a task assigned to another agent is ``not_permitted``."""

    name = "claim_task"
    events = ("task.claim",)
    agent_effect = True
    ref_field = "task_id"

    task_id: Id
    expected_version: ExpectedVersion | None = None


class CompleteTask(Command):
    """Finish a claimed task with ``result``; only its assignee may."""

    name = "complete_task"
    events = ("task.complete",)
    agent_effect = True
    ref_field = "task_id"

    task_id: Id
    result: Payload | None = Field(default=None, description="What the task produced (a JSON object).")
    expected_version: ExpectedVersion | None = None


class FailTask(Command):
    """Record that the assignee could not finish its claimed task, with the reason."""

    name = "fail_task"
    events = ("task.fail",)
    agent_effect = True
    ref_field = "task_id"

    task_id: Id
    reason: Reason
    expected_version: ExpectedVersion | None = None


class ReleaseTask(Command):
    """Give an assigned or claimed task back (open again); its assignee or its owner may."""

    name = "release_task"
    events = ("task.release",)
    agent_effect = True
    ref_field = "task_id"

    task_id: Id
    expected_version: ExpectedVersion | None = None


class AbortTask(Command):
    """Stop a live task for good, with the reason; only its owner may (a human decision is never
    overwritten by others)."""

    name = "abort_task"
    events = ("task.abort",)
    agent_effect = True
    ref_field = "task_id"

    task_id: Id
    reason: Reason
    expected_version: ExpectedVersion | None = None


__all__ = ["AbortTask", "AssignTask", "ClaimTask", "CompleteTask", "CreateTask", "FailTask", "ReleaseTask"]
