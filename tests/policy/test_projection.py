"""The projection: permission-aware, scored, within a budget, widening when conflict or uncertainty rises."""

from __future__ import annotations

from engine.projection_score import Features, ProjectionWeights, score, top, widened_budget
from engine.world import World
from tests.conftest import add_agent


def test_scores_rank_relevant_recent_authoritative_objects_first() -> None:
    w = ProjectionWeights()
    relevant = Features(relevance=1, age_s=0, causality=0, authority=1, risk=0, dependency=0)
    stale = Features(relevance=0, age_s=86_400, causality=0, authority=0.3, risk=0, dependency=0)
    assert score(relevant, w) > score(stale, w)
    assert [i for i, _ in top([("b", stale), ("a", relevant)], 1, w)] == ["a"]


def test_widening_doubles_the_budget_so_the_wide_view_contains_the_narrow_one() -> None:
    assert widened_budget(10, 0, 0) == (10, False)
    assert widened_budget(10, 1, 0) == (20, True)
    w = ProjectionWeights()
    items = [(f"x{i}", Features(relevance=0, age_s=i, causality=0, authority=0, risk=0, dependency=0))
             for i in range(30)]
    narrow = {i for i, _ in top(items, 10, w)}
    wide = {i for i, _ in top(items, 20, w)}
    assert narrow <= wide and len(wide) == 20


def test_projection_keeps_the_budget_and_prefers_the_agents_task(pworld: World) -> None:
    add_agent(pworld, "alice", ["memory.write", "task.create", "task.work"])
    task = pworld.create_task("alice", "focus")
    pworld.claim_task("alice", task.task_id)
    for i in range(6):
        pworld.store_memory("alice", f"note {i}", "observation")
    related = pworld.store_memory("alice", "about the task", "observation", source_refs=[task.task_id])
    for i in range(4):
        pworld.create_task("alice", f"other {i}")
    view = pworld.project_world("alice", budget=3, widen=False)
    assert len(view.tasks) <= 3 and len(view.working_memory) <= 3
    assert view.tasks[0].task_id == task.task_id
    assert view.working_memory[0].memory_id == related.memory_id


def test_uncertainty_widens_the_view(pworld: World) -> None:
    add_agent(pworld, "alice", ["memory.write"])
    for i in range(4):
        pworld.store_memory("alice", f"fact {i}", "observation")
    assert not pworld.project_world("alice", budget=2).widened
    pworld.store_memory("alice", "is x true?", "open_question")
    view = pworld.project_world("alice", budget=2)
    assert view.widened and view.budget == 4 and len(view.working_memory) == 4


def test_the_view_shows_the_registry_entries_of_the_agents_tasks_it_may_read(pworld: World) -> None:
    """MVP 13's precondition: an agent that knows only its task finds the task's artifacts (id, current
    version, checksum) in its view; artifacts of other tasks, or ones it may not read, are not there."""
    add_agent(pworld, "a", ["task.create", "task.work", "artifact.write"])
    add_agent(pworld, "b", ["task.create", "task.work", "artifact.write"])
    pworld.create_task("a", "the report", task_id="t-rep")
    pworld.claim_task("a", "t-rep")
    pworld.create_task("b", "other work", task_id="t-other")
    pworld.register_artifact("a", "doc", b"draft one", artifact_id="art-rep", task_id="t-rep")
    pworld.new_artifact_version("a", "art-rep", b"draft two")
    pworld.register_artifact("b", "doc", b"unrelated", artifact_id="art-other", task_id="t-other")
    view = pworld.project_world("a")
    assert [(x.artifact_id, x.version) for x in view.artifacts] == [("art-rep", 2)]
    assert pworld.project_world("b").artifacts == []        # b has no focus task with artifacts
