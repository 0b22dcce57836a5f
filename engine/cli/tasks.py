"""``pmw tasks``: the task ledger (create, assign, claim, complete, fail, release, abort)."""

from typing import Annotated, Any

import typer

from engine.cli.options import ExpectVersion, Limit, OpId, Reason
from engine.cli.runtime import choices, invocation, json_object, listed
from engine.errors import InvalidInput
from engine.models.enums import TaskStatus

# The ranges the CreateTask model enforces (engine/commands/tasks.py TASK_LEVELS; a test keeps them equal),
# repeated here so that loading the command line imports no pydantic.
LEVEL_FLAGS: dict[str, tuple[str, int]] = {"sensitivity": ("--sensitivity", 5), "priority": ("--priority", 9)}

group = typer.Typer(help="Create tasks and move them through their lifecycle.", no_args_is_help=True)

TaskId = Annotated[str, typer.Argument(metavar="TASK_ID", help="The task id.")]


def with_levels(constraints: dict[str, Any] | None, levels: dict[str, int | None]) -> dict[str, Any] | None:
    """``constraints`` (the ``--constraints`` JSON) with each level flag given (``levels``: ``sensitivity``,
    ``priority`` -> the flag's value or None) set in it. A value outside the flag's range, or one the JSON
    already sets to something else, is ``InvalidInput`` naming the flag (nothing is sent)."""
    merged = dict(constraints) if constraints is not None else None
    for key, value in levels.items():
        if value is None:
            continue
        flag, top = LEVEL_FLAGS[key]
        if not 0 <= value <= top:
            raise InvalidInput(flag, f"must be an integer 0..{top}, not {value}")
        if merged is not None and key in merged and merged[key] != value:
            raise InvalidInput(flag, f"{flag} {value} conflicts with {key!r}: {merged[key]!r} in --constraints")
        merged = {**(merged or {}), key: value}
    return merged


@group.command("create")
def create(
    ctx: typer.Context,
    goal: Annotated[str, typer.Argument(metavar="GOAL", help="What the task is for.")],
    task_id: Annotated[str | None, typer.Option("--id", help="Choose the task id.")] = None,
    depends_on: Annotated[list[str] | None, typer.Option(
        "--depends-on", help="An existing task this one depends on (repeatable).")] = None,
    constraints: Annotated[str | None, typer.Option("--constraints", help="JSON object.")] = None,
    sensitivity: Annotated[int | None, typer.Option(
        "--sensitivity", help="0..5: reading the task needs this clearance (sets constraints.sensitivity).")] = None,
    priority: Annotated[int | None, typer.Option(
        "--priority", help="0..9: the task's priority, a policy attribute (sets constraints.priority).")] = None,
    deadline_us: Annotated[int | None, typer.Option("--deadline-us", help="Microseconds since epoch.")] = None,
    op_id: OpId = None,
) -> None:
    """Create an open task owned by the acting agent (--sensitivity and --priority merge into --constraints;
    a flag that contradicts the JSON is refused)."""
    with invocation(ctx, acting=True) as run:
        parsed = with_levels(json_object("--constraints", constraints),
                             {"sensitivity": sensitivity, "priority": priority})
        run.show(run.world.create_task(run.actor, goal, task_id=task_id, dependencies=listed(depends_on),
                                       constraints=parsed, deadline_us=deadline_us, op_id=op_id))


@group.command("list")
def list_(
    ctx: typer.Context,
    status: Annotated[str | None, typer.Option("--status", help=choices(TaskStatus))] = None,
    assignee: Annotated[str | None, typer.Option("--assignee")] = None,
    limit: Limit = 1000,
) -> None:
    """List tasks, optionally by status or assignee."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.list_tasks(status=status, assignee=assignee, limit=limit, actor=run.actor))


@group.command("show")
def show(ctx: typer.Context, task_id: TaskId) -> None:
    """Show one task."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.get_task(task_id, actor=run.actor))


@group.command("assign")
def assign(ctx: typer.Context, task_id: TaskId,
           assignee: Annotated[str, typer.Argument(metavar="ASSIGNEE", help="The agent to offer the task to.")],
           expect_version: ExpectVersion = None, op_id: OpId = None) -> None:
    """Offer the task to an agent (only its owner may)."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.assign_task(run.actor, task_id, assignee, expected_version=expect_version,
                                       op_id=op_id))


@group.command("claim")
def claim(ctx: typer.Context, task_id: TaskId, expect_version: ExpectVersion = None, op_id: OpId = None) -> None:
    """Take the task (one of many concurrent claimers wins; the others exit 5 or 6)."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.claim_task(run.actor, task_id, expected_version=expect_version, op_id=op_id))


@group.command("complete")
def complete(
    ctx: typer.Context,
    task_id: TaskId,
    result: Annotated[str | None, typer.Option("--result", help="JSON object.")] = None,
    expect_version: ExpectVersion = None,
    op_id: OpId = None,
) -> None:
    """Finish a claimed task (only its assignee may)."""
    with invocation(ctx, acting=True) as run:
        parsed = json_object("--result", result)
        run.show(run.world.complete_task(run.actor, task_id, parsed, expected_version=expect_version,
                                         op_id=op_id))


@group.command("fail")
def fail(ctx: typer.Context, task_id: TaskId, reason: Reason, expect_version: ExpectVersion = None,
         op_id: OpId = None) -> None:
    """Record that the assignee could not finish the task."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.fail_task(run.actor, task_id, reason, expected_version=expect_version, op_id=op_id))


@group.command("release")
def release(ctx: typer.Context, task_id: TaskId, expect_version: ExpectVersion = None,
            op_id: OpId = None) -> None:
    """Give the task back (open again); its assignee or owner may."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.release_task(run.actor, task_id, expected_version=expect_version, op_id=op_id))


@group.command("abort")
def abort(ctx: typer.Context, task_id: TaskId, reason: Reason, expect_version: ExpectVersion = None,
          op_id: OpId = None) -> None:
    """Stop the task for good (only its owner may)."""
    with invocation(ctx, acting=True) as run:
        run.show(run.world.abort_task(run.actor, task_id, reason, expected_version=expect_version,
                                      op_id=op_id))
