"""The task ledger: create, assign, claim (exactly one of N concurrent claimers wins), complete, fail,
release, abort. A task outlives its executor."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from engine.commands.base import Command
from engine.commands.fields import ExpectedVersion, Id, Payload, Reason, Refs, Text, TimeUs

MAX_SENSITIVITY = 5
MAX_PRIORITY = 9
# The task constraints the PDP receives as resource attributes (engine/policy/attributes.py), each an
# integer from 0 to its maximum; any other key of ``constraints`` is the task's own business.
TASK_LEVELS: dict[str, int] = {"sensitivity": MAX_SENSITIVITY, "priority": MAX_PRIORITY}


def _shown(value: object) -> str:
    """A refused value, short and printable whatever it is (a huge integer has no ``repr`` to speak of)."""
    if value is None:
        return "null"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"<{value.bit_length()}-bit integer>"
    return repr(value)[:40] if isinstance(value, int | float | str) else type(value).__name__


def check_task_levels(constraints: dict[str, Any] | None) -> dict[str, Any] | None:
    """``constraints`` unchanged if each of its :data:`TASK_LEVELS` keys present holds an integer (not a
    bool) from 0 to that key's maximum; otherwise a ``task_level`` error naming the key (``ctx["field"]``,
    so the boundary reports ``constraints.<key>``)."""
    for key, top in TASK_LEVELS.items():
        if constraints is None or key not in constraints:
            continue
        value = constraints[key]
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
            shown = _shown(value)
            raise PydanticCustomError("task_level", "{field} must be an integer 0..{top}, not {shown}",
                                      {"field": key, "top": top, "shown": shown})
    return constraints


class CreateTask(Command):
    """Create an open task owned by the caller. Dependencies must name existing tasks. ``constraints``
    may hold ``sensitivity`` (integer 0..5: reading the task needs that clearance) and ``priority`` (integer
    0..9); both reach the PDP as the task's resource attributes, and any other value for them is refused."""

    name = "create_task"
    events = ("task.created",)
    agent_effect = True
    ref_field = "task_id"

    goal: Text = Field(description="What the task is for.")
    task_id: Id | None = Field(default=None, description="Choose the task id (default: generated).")
    dependencies: Refs | None = Field(default=None, description="Existing tasks this one depends on.")
    constraints: Payload | None = Field(default=None, description=(
        "A JSON object; `sensitivity` (integer 0..5) and `priority` (integer 0..9) in it are the task's "
        "policy attributes."))
    deadline_us: TimeUs | None = Field(default=None, description="Deadline, microseconds since the epoch.")

    @field_validator("constraints")
    @classmethod
    def _task_levels(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return check_task_levels(value)


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


__all__ = ["MAX_PRIORITY", "MAX_SENSITIVITY", "TASK_LEVELS", "AbortTask", "AssignTask", "ClaimTask", "CompleteTask",
           "CreateTask", "FailTask", "ReleaseTask", "check_task_levels"]
