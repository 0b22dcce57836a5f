"""Conformance: handoffs (pointers, not transcripts) and the artifact registry."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import ArtifactCorrupted, IllegalTransition, NotPermitted, VersionConflict
from engine.models.handoffs import HandoffStatus
from engine.models.tasks import TaskStatus
from engine.policy.enforcement import LocalScopeRules
from engine.sources import SeededIds
from engine.world import World
from engine.world.book import open_world
from tests.conftest import close_world, kept


@pytest.fixture
def team(world: World) -> World:
    for name in ("a", "b", "c"):
        world.register_agent(name, name.upper(), "worker", f"t-{name}")
    return world


def test_handoff_moves_the_task_and_keeps_its_id(team: World) -> None:
    task = team.create_task("a", "draft and finish")
    team.claim_task("a", task.task_id)
    art = team.register_artifact("a", "draft", b"half done", task_id=task.task_id)
    h = team.create_handoff("a", "b", task.task_id, "finish the draft", artifact_refs=[art.artifact_id],
                            current_state_ref="state:draft", expected_output="final text", return_route="a")
    accepted = team.accept_handoff("b", h.handoff_id)
    assert accepted.status is HandoffStatus.ACCEPTED
    moved = team.get_task(task.task_id)
    assert (moved.status, moved.assignee) == (TaskStatus.CLAIMED, "b")
    done = team.complete_handoff("b", h.handoff_id, {"artifact": art.artifact_id})
    assert done.status is HandoffStatus.COMPLETED


def test_only_the_holder_hands_off_and_only_the_target_accepts(team: World) -> None:
    task = team.create_task("a", "x")
    team.claim_task("a", task.task_id)
    with pytest.raises(NotPermitted):
        team.create_handoff("b", "c", task.task_id, "steal")
    h = team.create_handoff("a", "b", task.task_id, "yours")
    with pytest.raises(NotPermitted):
        team.accept_handoff("c", h.handoff_id)


def test_rejected_handoff_leaves_the_task_with_the_source(team: World) -> None:
    task = team.create_task("a", "x")
    team.claim_task("a", task.task_id)
    h = team.create_handoff("a", "b", task.task_id, "yours")
    assert team.reject_handoff("b", h.handoff_id, "busy").status is HandoffStatus.REJECTED
    assert team.get_task(task.task_id).assignee == "a"
    with pytest.raises(IllegalTransition):
        team.accept_handoff("b", h.handoff_id)


@pytest.mark.parametrize("backend", ["sqlite-file", "postgres"], indirect=True)  # memory dies with its process
def test_artifact_recovery_from_the_registry_alone(db_url: str, tmp_path: Path) -> None:
    """MVP test 13: a new process, knowing only the artifact id, finds the right version and revises it."""
    first = kept(open_world(db_url, policy=LocalScopeRules(), artifact_dir=tmp_path / "art", ids=SeededIds(1)))
    first.register_agent("a", "A", "worker", "t")
    art = first.register_artifact("a", "report", b"v1")
    first.new_artifact_version("a", art.artifact_id, b"v2")
    close_world(first)
    later = kept(open_world(db_url, policy=LocalScopeRules(), artifact_dir=tmp_path / "art", ids=SeededIds(2)))
    found = later.get_artifact(art.artifact_id)
    assert (found.version, later.read_artifact(art.artifact_id).content) == (2, b"v2")
    assert later.read_artifact(art.artifact_id, 1).content == b"v1"
    v3 = later.new_artifact_version("b", art.artifact_id, b"v3", expected_version=2)
    assert v3.version == 3
    with pytest.raises(VersionConflict):
        later.new_artifact_version("b", art.artifact_id, b"stale", expected_version=2)
    close_world(later)


def test_corrupted_artifact_content_is_detected(team: World) -> None:
    art = team.register_artifact("a", "report", b"original")
    assert team.artifact_dir is not None
    (team.artifact_dir / art.location).write_bytes(b"tampered")
    with pytest.raises(ArtifactCorrupted) as err:
        team.read_artifact(art.artifact_id)
    assert err.value.expected == art.checksum
