"""Conformance: the task ledger and its lifecycle."""

from __future__ import annotations

import pytest

from engine.errors import IllegalTransition, NotFound, NotPermitted, VersionConflict
from engine.models.tasks import TaskStatus
from engine.world import World
from tests.conftest import book_of


@pytest.fixture
def team(world: World) -> World:
    for name in ("owner", "w1", "w2"):
        world.register_agent(name, name.title(), "worker", f"t-{name}")
    return world


def test_claim_complete(team: World) -> None:
    task = team.create_task("owner", "write the report")
    claimed = team.claim_task("w1", task.task_id)
    assert (claimed.status, claimed.assignee, claimed.version) == (TaskStatus.CLAIMED, "w1", 2)
    done = team.complete_task("w1", task.task_id, {"summary": "ok"})
    assert (done.status, done.result) == (TaskStatus.COMPLETED, {"summary": "ok"})


def test_second_claimer_loses(team: World) -> None:
    task = team.create_task("owner", "one winner")
    team.claim_task("w1", task.task_id)
    with pytest.raises(IllegalTransition):
        team.claim_task("w2", task.task_id)
    assert team.get_task(task.task_id).assignee == "w1"


def test_assigned_task_is_claimable_only_by_its_assignee(team: World) -> None:
    task = team.create_task("owner", "for w2")
    team.assign_task("owner", task.task_id, "w2")
    with pytest.raises(NotPermitted):
        team.claim_task("w1", task.task_id)
    assert team.claim_task("w2", task.task_id).assignee == "w2"


def test_only_the_owner_assigns_and_aborts(team: World) -> None:
    task = team.create_task("owner", "mine")
    with pytest.raises(NotPermitted):
        team.assign_task("w1", task.task_id, "w1")
    with pytest.raises(NotPermitted):
        team.abort_task("w1", task.task_id, "no")
    assert team.abort_task("owner", task.task_id, "stop").status is TaskStatus.ABORTED


def test_release_reopens_and_a_task_outlives_its_executor(team: World) -> None:
    task = team.create_task("owner", "long")
    team.claim_task("w1", task.task_id)
    team.release_task("w1", task.task_id)
    again = team.claim_task("w2", task.task_id)
    assert (again.task_id, again.assignee) == (task.task_id, "w2")


def test_illegal_transitions_change_nothing(team: World) -> None:
    task = team.create_task("owner", "x")
    image = book_of(team).state_image()
    for call in (lambda: team.complete_task("w1", task.task_id),
                 lambda: team.fail_task("w1", task.task_id, "r"),
                 lambda: team.release_task("owner", task.task_id)):
        with pytest.raises(IllegalTransition):
            call()
    assert book_of(team).state_image() == image


def test_expected_version_guards_every_transition(team: World) -> None:
    task = team.create_task("owner", "x")
    with pytest.raises(VersionConflict) as err:
        team.claim_task("w1", task.task_id, expected_version=5)
    assert err.value.current == 1


def test_offline_agents_cannot_claim(team: World) -> None:
    task = team.create_task("owner", "x")
    team.unregister_agent("agent:w1")
    with pytest.raises(NotPermitted):
        team.claim_task("w1", task.task_id)


def test_dependencies_must_exist(team: World) -> None:
    with pytest.raises(NotFound):
        team.create_task("owner", "x", dependencies=["tsk_missing"])
    dep = team.create_task("owner", "first")
    assert team.create_task("owner", "second", dependencies=[dep.task_id]).dependencies == [dep.task_id]
