"""The projection read by its history-independent queries shows exactly what it showed before (issue 12, item 5).

:func:`reference_view` is ``project_world`` as it was before: the newest ``budget * 8`` rows of each scored
section read whole through ``World._list`` and validated, revoked/rejected/expired memory dropped after the
cut, every candidate scored. Random worlds (tasks, memory, state, rooms and handoffs in every status, built by
random calls through the real PDP, each at its own microsecond) are projected both ways, for random agents,
viewers, budgets (small enough that the candidate windows overflow), focus tasks, weights and widening, on
SQLite and on PostgreSQL; the two views must be equal field for field, scores included.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from engine.errors import PMWError
from engine.models.agents import Agent
from engine.models.artifacts import Artifact
from engine.models.handoffs import Handoff
from engine.models.memory import STABLE_SHARED, Memory, MemoryScope, MemoryStatus
from engine.models.rooms import Room
from engine.models.state import StateEntry
from engine.models.tasks import Task
from engine.policy.model import PlanFilter
from engine.projection_score import Features, ProjectionWeights, top, widened_budget
from engine.sources import ManualClock
from engine.world import World
from engine.world.projection import _AUTHORITY, _UNCERTAIN, CANDIDATE_FACTOR, WorldView, _sensitivity, _weights
from tests.conftest import add_agent, close_world, open_pdp_world
from tests.pg_cluster import PgCluster

AGENTS = ("alice", "bob", "rita")
CAPS = ["task.create", "task.assign", "task.work", "memory.write", "handoff.create", "room.open", "state.write",
        "memory.review", "artifact.write"]


# -- the oracle: project_world as it was before issue 12 (engine/world/projection.py at b2b1758) ---------------

def reference_view(world: World, agent_id: str, *, budget: int, task_id: str | None = None,
                   weights: Mapping[str, float] | None = None, widen: bool | None = None,
                   actor: str | None = None) -> WorldView:
    w = _weights(weights)
    read = world._store.read
    position, now = read.last_seq(), world.clock.now_us()
    agent = world._load(Agent, "agents", "agent", agent_id, agent_id=agent_id)
    world._may_view(actor or agent_id, agent_id)
    room_ids = read.active_rooms_of(agent_id)
    limit = budget * 2 * CANDIDATE_FACTOR
    kinds = ("memory", "task", "state", "handoff", "room", "artifact")
    plans = dict(zip(kinds, world._policy.plans(agent_id, [(k, "read") for k in kinds]), strict=True))
    memory = _ref_visible_memory(world, agent_id, now, limit, plans)
    if (actor or agent_id) != agent_id:
        memory = [m for m in memory if m.scope is not MemoryScope.PRIVATE]
    tasks = world._list(Task, "tasks", "task", agent_id, {}, order_by=("updated_at_us",), descending=True,
                        limit=limit, plans=plans)
    conflicts = sum(m.status is MemoryStatus.REOPENED for m in memory)
    uncertain = sum(m.epistemic_type.value in _UNCERTAIN and m.status.value not in STABLE_SHARED for m in memory)
    size, widened = widened_budget(budget, conflicts, uncertain)
    if widen is not None:
        size, widened = (budget * 2, True) if widen else (budget, False)
    focus = {task_id} if task_id is not None else {
        t.task_id for t in tasks if t.assignee == agent_id and t.status.value in ("assigned", "claimed")}
    deps = {d for t in tasks if t.task_id in focus for d in t.dependencies}
    scores: dict[str, float] = {}
    kept_tasks = _ref_keep(tasks, size, w, scores, lambda t: Features(
        relevance=1.0 if t.task_id in focus else 0.0, age_s=(now - t.updated_at_us) / 1e6,
        causality=1.0 if agent_id in (t.owner_agent, t.assignee) else 0.0,
        authority=1.0 if t.assignee == agent_id else 0.5, risk=0.0,
        dependency=1.0 if t.task_id in deps else 0.0), "task_id")
    kept_memory = _ref_keep(memory, size, w, scores, lambda m: Features(
        relevance=1.0 if focus & set(m.source_refs) else 0.0, age_s=(now - m.updated_at_us) / 1e6,
        causality=1.0 if m.owner == agent_id else (0.5 if m.room_id in room_ids else 0.0),
        authority=_AUTHORITY.get(m.status.value, 0.0), risk=min(1.0, _sensitivity(m.permission_scope) / 5),
        dependency=0.0), "memory_id")
    state = world._list(StateEntry, "state_entries", "state", agent_id, {}, order_by=("updated_at_us",),
                        descending=True, limit=limit, plans=plans)
    kept_state = _ref_keep(state, size, w, scores, lambda s: Features(
        relevance=1.0 if any(f in s.key for f in focus) else 0.0, age_s=(now - s.updated_at_us) / 1e6,
        causality=1.0 if s.updated_by == agent_id else 0.0, authority=0.5, risk=0.0, dependency=0.0), "key")
    handoffs = world._list(Handoff, "handoffs", "handoff", agent_id,
                           {"target_agent": agent_id, "status": ["pending", "accepted"]}, limit=size, plans=plans)
    rooms = world._list(Room, "rooms", "room", agent_id, {"room_id": room_ids}, limit=size,
                        plans=plans) if room_ids else []
    artifacts = world._list(Artifact, "artifacts", "artifact", agent_id, {"task_id": sorted(focus)},
                            order_by=("updated_at_us",), descending=True, limit=size, plans=plans) if focus else []
    return WorldView(
        agent=agent, world_position=position, topology_version=read.topology_version(), budget=size,
        widened=widened, tasks=kept_tasks, state=kept_state,
        shared_facts=[m for m in kept_memory if m.status.value in STABLE_SHARED],
        working_memory=[m for m in kept_memory if m.status.value not in STABLE_SHARED],
        handoffs=handoffs, rooms=rooms, artifacts=artifacts, scores=scores)


def _ref_visible_memory(world: World, agent_id: str, now: int, limit: int,
                        plans: Mapping[str, PlanFilter | None]) -> list[Memory]:
    rows = world._list(Memory, "memory", "memory", agent_id, {}, order_by=("updated_at_us",), descending=True,
                       limit=limit, plans=plans)
    return [m for m in rows if m.status.value not in ("revoked", "rejected")
            and (m.expires_at_us is None or m.expires_at_us > now)]


def _ref_keep(items: list[Any], size: int, w: ProjectionWeights, scores: dict[str, float],
              features: Callable[[Any], Features], key: str) -> list[Any]:
    by_id = {str(getattr(i, key)): i for i in items}
    best = top(((ident, features(i)) for ident, i in by_id.items()), size, w)
    scores.update({ident: round(s, 6) for ident, s in best})
    return [by_id[ident] for ident, _ in best]


# -- random worlds ---------------------------------------------------------------------------------------------

class Made:
    """What the steps created so far (ids by kind), to aim later steps at."""

    def __init__(self) -> None:
        self.tasks: list[str] = []
        self.memory: list[str] = []
        self.rooms: list[str] = []
        self.handoffs: list[str] = []
        self.artifacts: list[str] = []


def _pick(ids: list[str], n: int) -> str | None:
    return ids[n % len(ids)] if ids else None


def _step(w: World, made: Made, what: str, who: int, other: int, n: int) -> None:
    """One random call; a call the world refuses (policy, lifecycle, lease) changes nothing and is skipped."""
    actor, peer = AGENTS[who % 3], AGENTS[other % 3]
    task, mem, room, handoff = (_pick(made.tasks, n), _pick(made.memory, n), _pick(made.rooms, n),
                                _pick(made.handoffs, n))
    row = w._store.read.get("tasks", task_id=task) if task and n % 3 else None
    if row is not None and row["assignee"] and what in ("claim", "complete", "fail"):
        actor = row["assignee"]  # most finishing calls by the one who may make them: every status is reached
    try:
        if what == "task":
            deps = [d for d in (_pick(made.tasks, n), _pick(made.tasks, n + 3)) if d is not None]
            made.tasks.append(w.create_task(actor, f"goal {n}", dependencies=sorted(set(deps)),
                                            constraints={"sensitivity": n % 3}).task_id)
        elif what == "assign" and task:
            w.assign_task(actor, task, peer)
        elif what == "claim" and task:
            w.claim_task(actor, task)
        elif what == "complete" and task:
            w.complete_task(actor, task, {"n": n})
        elif what == "fail" and task:
            w.fail_task(actor, task, "broken")
        elif what == "abort" and task:
            w.abort_task(actor, task, "cancelled")
        elif what == "memory":
            etype = ("observation", "hypothesis", "open_question", "decision")[n % 4]
            refs = [task] if task and n % 2 else []
            in_room = room if n % 3 == 0 else None
            made.memory.append(w.store_memory(
                actor, f"note {n}", etype, scope="room" if in_room else "private", room_id=in_room,
                source_refs=refs, permission_scope={"sensitivity": n % 7} if n % 5 else {},
                ttl_seconds=(n % 4) + 1 if n % 6 == 0 else None).memory_id)
        elif what in ("propose", "review", "promote", "archive", "supersede") and mem:
            if what == "supersede":
                repl = _pick(made.memory, n + 1)
                if repl and repl != mem:
                    w.supersede_memory(actor, mem, repl)
            else:
                getattr(w, f"{what}_memory")(actor, mem)
        elif what in ("reject", "reopen", "revoke") and mem:
            getattr(w, f"{what}_memory")("gov" if n % 2 else actor, mem, "because")
        elif what == "state":
            key = (f"progress/{task}" if task and n % 2 else f"note/{n % 5}")
            current = w._store.read.get("state_entries", key=key)
            w.compare_and_set_state(actor, key, current["version"] if current else 0, {"n": n})
        elif what == "room":
            made.rooms.append(w.create_room(actor, f"room {n}", members=sorted({actor, peer})).room_id)
        elif what == "close_room" and room:
            w.close_room(actor, room)
        elif what == "leave" and room:
            w.leave_room(actor, room)
        elif what == "handoff" and task and actor != peer:
            made.handoffs.append(w.create_handoff(actor, peer, task, f"take {n}").handoff_id)
        elif what == "artifact" and task:
            made.artifacts.append(w.register_artifact(actor, "doc", f"bytes {n}".encode(),
                                                      task_id=task).artifact_id)
        elif what == "artifact_version" and (art := _pick(made.artifacts, n)):
            w.new_artifact_version(actor, art, f"more {n}".encode())
        elif what == "accept" and handoff:
            w.accept_handoff(actor, handoff)
        elif what == "reject_handoff" and handoff:
            w.reject_handoff(actor, handoff, "no")
        elif what == "complete_handoff" and handoff:
            w.complete_handoff(actor, handoff, {"n": n})
    except PMWError:
        pass


STEPS = ("task",) * 7 + ("assign", "claim", "claim", "claim", "complete", "complete", "fail", "abort") \
    + ("memory",) * 6 + ("propose", "review", "promote", "archive", "supersede", "reject", "reopen", "revoke") \
    + ("state",) * 5 + ("room", "close_room", "leave", "handoff", "accept", "reject_handoff", "complete_handoff") \
    + ("artifact", "artifact", "artifact_version")
STEP = st.tuples(st.sampled_from(STEPS), st.integers(0, 2), st.integers(0, 2), st.integers(0, 50),
                 st.integers(1, 3_000_000))
VIEW = st.tuples(st.integers(0, 2), st.booleans(), st.integers(1, 4), st.integers(-1, 20),
                 st.sampled_from([None, True, False]),
                 st.sampled_from([None, {"recency": 0.0}, {"half_life_s": 1.0, "authority": 0.0},
                                  {"relevance": 0.0, "causality": 0.0, "dependency": 0.0, "recency": 2.0}]))
_WORLDS = itertools.count()


def _build(w: World, clock: ManualClock, steps: list[tuple[str, int, int, int, int]]) -> None:
    for agent in AGENTS:
        add_agent(w, agent, CAPS)
    w.grant("gov", "rita", role_id="reviewer")
    made = Made()
    for what, who, other, n, gap_us in steps:
        clock.advance(gap_us / 1e6)  # every call at its own microsecond: the windows' order has no ties
        _step(w, made, what, who, other, n)
    clock.advance(2.0)


def _compare(w: World, views: list[tuple[int, bool, int, int, bool | None, dict[str, float] | None]]) -> int:
    tasks = [t["task_id"] for t in w._store.read.rows("tasks")]
    for who, by_gov, budget, focus_n, widen, weights in views:
        agent = AGENTS[who]
        task_id = tasks[focus_n % len(tasks)] if tasks and focus_n >= 0 else None
        actor = "gov" if by_gov else None
        new = w.project_world(agent, budget=budget, task_id=task_id, weights=weights, widen=widen, actor=actor)
        old = reference_view(w, agent, budget=budget, task_id=task_id, weights=weights, widen=widen, actor=actor)
        assert new.model_dump() == old.model_dump(), (agent, actor, budget, task_id, widen, weights)
    return len(views)


@pytest.fixture(scope="module")
def worlds_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("projection-worlds")


@settings(max_examples=25, deadline=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])
@given(steps=st.lists(STEP, min_size=40, max_size=160), views=st.lists(VIEW, min_size=3, max_size=6))
def test_the_projection_shows_what_the_reference_showed_on_sqlite(
        pdp_client: Any, worlds_dir: Path, steps: list[tuple[str, int, int, int, int]],
        views: list[tuple[int, bool, int, int, bool | None, dict[str, float] | None]]) -> None:
    root = worlds_dir / f"w{next(_WORLDS)}"
    clock = ManualClock()
    w = open_pdp_world(f"sqlite:///{root}.db", pdp_client, root / "artifacts", clock=clock)
    try:
        _build(w, clock, steps)
        assert _compare(w, views) == len(views)
    finally:
        close_world(w)


def _busy_steps(seed: int = 6, count: int = 260) -> list[tuple[str, int, int, int, int]]:
    """A fixed random history: every kind of object, in every status, far more of each than small budgets read."""
    rng = random.Random(seed)
    return [(rng.choice(STEPS), rng.randrange(3), rng.randrange(3), rng.randrange(51), rng.randrange(1, 400_000))
            for _ in range(count)]


BUSY_VIEWS = [(who, by_gov, budget, focus, widen, weights) for who in range(3) for by_gov in (False, True)
              for budget, focus, widen, weights in ((1, -1, None, None), (2, 3, False, {"recency": 0.0}),
                                                    (3, -1, True, None))]


@pytest.fixture
def pg_world(pg_cluster: PgCluster, pdp_client: Any, tmp_path: Path) -> Iterator[tuple[World, ManualClock]]:
    clock = ManualClock()
    w = open_pdp_world(pg_cluster.create_database(), pdp_client, tmp_path / "artifacts", clock=clock)
    yield w, clock
    close_world(w)


def test_the_projection_shows_what_the_reference_showed_on_postgresql(pg_world: tuple[World, ManualClock]) -> None:
    """One fixed busy world on PostgreSQL (the compiled SQL is the dialect's): windows overflow on every
    section, terminal objects of every kind are among the newest."""
    w, clock = pg_world
    _build(w, clock, _busy_steps())
    assert _compare(w, BUSY_VIEWS) == len(BUSY_VIEWS)


def test_the_windows_overflow_and_terminal_objects_are_among_the_newest(pdp_client: Any, tmp_path: Path) -> None:
    """The property above is not vacuous: in a world like its examples, the reference's windows are full
    (more candidates than ``budget * 8``) and hold finished tasks and revoked memory, yet both views agree."""
    clock = ManualClock()
    w = open_pdp_world(f"sqlite:///{tmp_path / 'w.db'}", pdp_client, tmp_path / "artifacts", clock=clock)
    try:
        _build(w, clock, _busy_steps())
        tasks = w._store.read.rows("tasks")
        memory = w._store.read.rows("memory")
        assert len(tasks) > 8 and {"completed", "failed", "aborted"} & {t["status"] for t in tasks}
        assert any(m["status"] in ("revoked", "rejected") for m in memory)
        handoffs = {h["status"] for h in w._store.read.rows("handoffs")}
        assert w._store.read.rows("artifacts") and {"pending", "accepted"} & handoffs and {
            "completed", "rejected"} & handoffs
        assert _compare(w, BUSY_VIEWS) == len(BUSY_VIEWS)
    finally:
        close_world(w)
