"""The world as one agent may see it: ``pi_i(W, task, permissions, budget)`` (seed 000 §47-49).

Visibility is the policy's: with a PDP every section is one query filtered by the PDP's plan for
``read`` on that kind (``store.plan_sql``), so an agent is never shown what a single check would deny.
Without a PDP (the store's own tests) the memory scopes apply: private to its owner, room to active
members, shared to all. Visible objects are then scored (relevance, recency, causality, authority, risk,
dependency) and the best ``budget`` of each section kept; the view widens when conflict or uncertainty
is visible. Candidate memory is never among the stable shared facts.

The reads of one projection run in one read transaction (``Reader.snapshot``: one consistent view), on the
driver cursor with SQL compiled once per form of the plan (``store.reads``). Rows come from the world's own
store, where every value was validated on its way in (the write gateway takes validated models only): the
rows kept are built into models by :func:`trusted` (each field converted exactly as validation converts it:
enums, floats), not validated a second time; a row that does not fit (a column the model lacks, a value
its enum does not know) is validated, so it fails exactly as it did.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import Field, ValidationError

from engine.errors import InvalidInput, NotPermitted
from engine.models.agents import Agent
from engine.models.artifacts import Artifact
from engine.models.common import Model
from engine.models.handoffs import Handoff
from engine.models.memory import STABLE_SHARED, EpistemicType, Memory, MemoryScope, MemoryStatus
from engine.models.rooms import Room
from engine.models.state import StateEntry
from engine.models.tasks import Task
from engine.models.trusted import trusted
from engine.policy.attributes import GOVERNOR_ROLE
from engine.policy.model import PlanFilter
from engine.projection_score import Features, ProjectionWeights, score, top, widened_budget
from engine.validation import check_id, check_int64, invalid_from
from engine.world.core import WorldCore
from store import STATE_TABLE_KEYS
from store.plan_sql import UntranslatablePlan
from store.reads import Near, Reader, Row

R = TypeVar("R", bound=Model)

DEFAULT_BUDGET = 200
MAX_BUDGET = 10_000
CANDIDATE_FACTOR = 4  # how many candidates per kept item each section reads, newest first
_UNCERTAIN = {EpistemicType.HYPOTHESIS.value, EpistemicType.OPEN_QUESTION.value}
_AUTHORITY = {MemoryStatus.SHARED.value: 1.0, MemoryStatus.IN_REVIEW.value: 0.5, MemoryStatus.CANDIDATE.value: 0.5,
              MemoryStatus.REOPENED.value: 0.4, MemoryStatus.ARCHIVED.value: 0.3, MemoryStatus.PRIVATE.value: 0.3}


class WorldView(Model):
    agent: Agent
    world_position: int = Field(description="the last event seq this view reflects")
    topology_version: int
    budget: int
    widened: bool = Field(description="conflict or uncertainty was visible, so the budget doubled")
    tasks: list[Task]
    state: list[StateEntry]
    shared_facts: list[Memory]
    working_memory: list[Memory] = Field(description="visible memory that is not a stable shared fact")
    handoffs: list[Handoff]
    rooms: list[Room]
    artifacts: list[Artifact] = Field(default_factory=list, description="registry entries (id, current version, "
                                      "checksum) of the focus tasks' artifacts; contents are read through the "
                                      "registry")
    scores: dict[str, float] = Field(default_factory=dict)

    def memory_ids(self) -> set[str]:
        return {m.memory_id for m in (*self.shared_facts, *self.working_memory)}


class ProjectionCalls(WorldCore):
    def project_world(self, agent_id: str, *, budget: int = DEFAULT_BUDGET, task_id: str | None = None,
                      weights: ProjectionWeights | Mapping[str, float] | None = None, widen: bool | None = None,
                      actor: str | None = None) -> WorldView:
        """What ``agent_id`` may see now, scored and cut to ``budget`` items per section (``task_id``:
        the task it works on, for relevance; ``widen``: force or forbid widening). ``actor`` (default: the
        agent itself) must be the agent or a governor. Only the agent itself sees its private memory (an
        unrevealed blind answer included) in its view: a governor's view of another agent shows none of
        it (reading it takes ``break_glass_read``, which is recorded).

        Each scored section (tasks, state, memory) keeps the best of its candidate window: the newest
        ``budget * 2 * CANDIDATE_FACTOR`` objects the plan allows. Its cost does not grow with history: the
        window's floor is one indexed query; memory no view shows (revoked, rejected, expired) is never
        read; for tasks and state only the objects the agent is near (its own, its focus, their
        dependencies, keys naming the focus) are read whole, and the rest newest first, only until no
        unread object can still be kept (their scores differ only by recency); only kept rows are
        validated as models."""
        check_id("agent_id", agent_id)
        budget = max(1, min(check_int64("budget", budget), MAX_BUDGET))  # clamped, as it always was
        w = _weights(weights)
        if widen is not None and not isinstance(widen, bool):
            raise InvalidInput("widen", f"must be true, false or None, not {type(widen).__name__}")
        with self._store.read.snapshot():  # every read below in one read transaction
            return self._project(agent_id, budget, task_id, w, widen, actor)

    def _project(self, agent_id: str, budget: int, task_id: str | None, w: ProjectionWeights, widen: bool | None,
                 actor: str | None) -> WorldView:
        read = self._store.read
        position, now = read.last_seq(), self.clock.now_us()
        agent = trusted(Agent)(self._row("agents", "agent", agent_id, agent_id=agent_id))
        self._may_view(actor or agent_id, agent_id)
        room_ids = read.active_rooms_of(agent_id)
        limit = budget * 2 * CANDIDATE_FACTOR
        kinds = ("memory", "task", "state", "handoff", "room", "artifact")
        plans = dict(zip(kinds, self._policy.plans(agent_id, [(k, "read") for k in kinds]), strict=True)) \
            if self._policy.external else None  # the read plans in one round trip (remembered: plan_memo)
        memory = self._visible_memory_rows(agent_id, room_ids, now, limit, plans)
        if (actor or agent_id) != agent_id:  # sealed from every other viewer, governors included
            memory = [m for m in memory if m["scope"] != MemoryScope.PRIVATE.value]
        conflicts = sum(m["status"] == MemoryStatus.REOPENED.value for m in memory)
        uncertain = sum(m["epistemic_type"] in _UNCERTAIN and m["status"] not in STABLE_SHARED for m in memory)
        size, widened = widened_budget(budget, conflicts, uncertain)
        if widen is not None:
            size, widened = (budget * 2, True) if widen else (budget, False)
        scores: dict[str, float] = {}

        tasks = self._window("task", "tasks", agent_id, limit, plans)
        near_tasks = tasks.near(Near(agent=agent_id, ids=(check_id("task_id", task_id),) if task_id else ()))
        focus = self._focus(agent_id, near_tasks, task_id)
        deps = {d for t in near_tasks if t["task_id"] in focus for d in t["dependencies"]}
        seen = {t["task_id"] for t in near_tasks}
        if extra := sorted((focus | deps) - seen):
            near_tasks += tasks.near(Near(ids=tuple(extra)))

        def task_features(t: Row) -> Features:
            return Features(relevance=1.0 if t["task_id"] in focus else 0.0, age_s=(now - t["updated_at_us"]) / 1e6,
                            causality=1.0 if agent_id in (t["owner_agent"], t["assignee"]) else 0.0,
                            authority=1.0 if t["assignee"] == agent_id else 0.5, risk=0.0,
                            dependency=1.0 if t["task_id"] in deps else 0.0)
        far_task = _FarFeatures(relevance=0.0, causality=0.0, authority=0.5, risk=0.0, dependency=0.0)
        task_rows = near_tasks + tasks.rest(Near(agent=agent_id), {t["task_id"] for t in near_tasks}, size, w,
                                            task_features, far_task.at(now))
        task_model, memory_model, state_model = trusted(Task), trusted(Memory), trusted(StateEntry)
        kept_tasks = [task_model(r) for r in self._keep(task_rows, size, w, scores, task_features, "task_id")]
        kept_memory = [memory_model(r) for r in self._keep(memory, size, w, scores, lambda m: Features(
            relevance=1.0 if focus & set(m["source_refs"]) else 0.0, age_s=(now - m["updated_at_us"]) / 1e6,
            causality=1.0 if m["owner"] == agent_id else (0.5 if m["room_id"] in room_ids else 0.0),
            authority=_AUTHORITY.get(m["status"], 0.0), risk=min(1.0, _sensitivity(m["permission_scope"]) / 5),
            dependency=0.0), "memory_id")]

        state = self._window("state", "state_entries", agent_id, limit, plans)
        state_near = Near(agent=agent_id, key_contains=tuple(sorted(focus)))

        def state_features(s: Row) -> Features:
            return Features(relevance=1.0 if any(f in s["key"] for f in focus) else 0.0,
                            age_s=(now - s["updated_at_us"]) / 1e6,
                            causality=1.0 if s["updated_by"] == agent_id else 0.0, authority=0.5, risk=0.0,
                            dependency=0.0)
        near_state = state.near(state_near)
        far_state = _FarFeatures(relevance=0.0, causality=0.0, authority=0.5, risk=0.0, dependency=0.0)
        state_rows = near_state + state.rest(state_near, {s["key"] for s in near_state}, size, w, state_features,
                                             far_state.at(now))
        kept_state = [state_model(r) for r in self._keep(state_rows, size, w, scores, state_features, "key")]
        handoffs = self._listed(Handoff, "handoffs", "handoff", agent_id, {"target_agent": agent_id, "status": [
            "pending", "accepted"]}, ("handoff_id",), False, size, plans)
        rooms = self._listed(Room, "rooms", "room", agent_id, {"room_id": room_ids}, ("room_id",), False, size,
                             plans) if room_ids else []
        artifacts = self._listed(Artifact, "artifacts", "artifact", agent_id, {"task_id": sorted(focus)},
                                 ("updated_at_us",), True, size, plans) if focus else []  # the work at hand's
        # every part is a model built above or a plain value: constructed, not validated again
        return WorldView.model_construct(
            agent=agent, world_position=int(position), topology_version=int(read.topology_version()), budget=size,
            widened=widened, tasks=kept_tasks, state=kept_state,
            shared_facts=[m for m in kept_memory if m.status.value in STABLE_SHARED],
            working_memory=[m for m in kept_memory if m.status.value not in STABLE_SHARED],
            handoffs=handoffs, rooms=rooms, artifacts=artifacts, scores=scores)

    def _may_view(self, actor: str, agent_id: str) -> None:
        check_id("actor", actor)
        if actor == agent_id:
            return
        row = self._store.read.get("agents", agent_id=actor)
        if row is None or row["role_id"] != GOVERNOR_ROLE:
            raise NotPermitted(actor, "view", "agent", agent_id, "only the agent itself or a governor sees its view")

    def _listed(self, model: type[R], table: str, kind: str, agent_id: str, where: dict[str, Any],
                order_by: tuple[str, ...], descending: bool, limit: int,
                plans: Mapping[str, PlanFilter | None] | None) -> list[R]:
        """What ``World._list`` answers for an unscored section (every row it reads is shown), read with
        the projection's compiled SQL; ``World._list`` itself where the plan cannot be SQL."""
        if not self._policy.external:
            plan: PlanFilter | None = _ALL
        else:
            plan = plans[kind] if plans is not None and kind in plans else self._policy.plan(agent_id, kind, "read")
        if plan is None:
            return []
        try:
            rows = self._store.read.section_rows(kind, plan, where, order_by=order_by, descending=descending,
                                                 limit=limit)
        except UntranslatablePlan:
            return self._list(model, table, kind, agent_id, where, order_by=order_by if descending else (),
                              descending=descending, limit=limit, plans=plans)
        build = trusted(model)
        return [build(r) for r in rows]

    def _window(self, kind: str, table: str, agent_id: str, limit: int,
                plans: Mapping[str, PlanFilter | None] | None) -> _Window:
        """The candidate window of one scored section: the newest ``limit`` rows of ``kind`` that the read
        plan allows (all rows without a PDP). Where the plan cannot be SQL, the rows the reference read
        (the whole table, checked one by one) are held instead."""
        if not self._policy.external:
            plan: PlanFilter | None = _ALL
        else:
            plan = plans[kind] if plans is not None and kind in plans else self._policy.plan(agent_id, kind, "read")
        if plan is None:
            return _Window(self._store.read, kind, None, None, [])
        try:
            return _Window(self._store.read, kind, plan, self._store.read.section_floor(kind, plan, limit), None)
        except UntranslatablePlan:
            rows = self._store.read.rows(table, {}, order_by=("updated_at_us",), descending=True)
            key = next(iter(STATE_TABLE_KEYS[table]))
            return _Window(self._store.read, kind, plan, None, self._readable(agent_id, kind, rows, key)[:limit])

    def _visible_memory_rows(self, agent_id: str, room_ids: list[str], now: int, limit: int,
                             plans: Mapping[str, PlanFilter | None] | None = None) -> list[Row]:
        """The memory candidates: the live rows (not revoked, rejected or expired) of the window (with a
        PDP: the newest ``limit`` memories the read plan allows; without: the newest ``limit`` live ones the
        memory scopes show), as rows."""
        if not self._policy.external:
            return self._store.read.visible_memory(agent_id, room_ids, now, limit)
        window = self._window("memory", "memory", agent_id, limit, plans)
        return window.live(now, limit)

    def _focus(self, agent_id: str, tasks: list[Row], task_id: str | None) -> set[str]:
        if task_id is not None:
            return {check_id("task_id", task_id)}
        return {t["task_id"] for t in tasks if t["assignee"] == agent_id and t["status"] in ("assigned", "claimed")}

    @staticmethod
    def _keep(items: list[Row], size: int, w: ProjectionWeights, scores: dict[str, float],
              features: Callable[[Row], Features], key: str) -> list[Row]:
        by_id = {str(i[key]): i for i in items}
        best = top(((ident, features(i)) for ident, i in by_id.items()), size, w)
        scores.update({ident: round(s, 6) for ident, s in best})
        return [by_id[ident] for ident, _ in best]


_ALL = PlanFilter(kind="always_allowed")  # no PDP: every row is a candidate, as the store's reads return them

@dataclass(frozen=True)
class _FarFeatures:
    """The features every object outside a section's :class:`Near` shares: only its age differs."""

    relevance: float
    causality: float
    authority: float
    risk: float
    dependency: float

    def at(self, now: int) -> Callable[[Row], Features]:
        return lambda row: Features(relevance=self.relevance, age_s=(now - row["updated_at_us"]) / 1e6,
                                    causality=self.causality, authority=self.authority, risk=self.risk,
                                    dependency=self.dependency)


class _Window:
    """One scored section's candidate window: rows of ``kind`` the plan allows, at least as new as
    ``floor`` (SQL, read on demand), or the reference's checked rows (``held``) where the plan is not SQL.
    ``plan`` None: the policy allows none."""

    def __init__(self, read: Reader, kind: str, plan: PlanFilter | None, floor: int | None,
                 held: list[Row] | None) -> None:
        self.read, self.kind, self.plan, self.floor, self.held = read, kind, plan, floor, held

    def near(self, near: Near) -> list[Row]:
        """The window's rows inside ``near`` (all of them: the window bounds them)."""
        if self.held is not None:
            return [r for r in self.held if _is_near(self.kind, r, near)]
        if self.plan is None:
            return []
        return self.read.section_rows(self.kind, self.plan, since_us=self.floor, near=near, limit=_ROW_CAP)

    def live(self, now: int, limit: int) -> list[Row]:
        """The window's memory that is neither revoked, rejected nor expired at ``now``, newest first."""
        if self.held is not None:
            return [m for m in self.held if m["status"] not in _DEAD_MEMORY
                    and (m["expires_at_us"] is None or m["expires_at_us"] > now)]
        if self.plan is None:
            return []
        return self.read.section_rows(self.kind, self.plan, since_us=self.floor, live_at_us=now, limit=limit)

    def rest(self, far: Near, skip: set[str], size: int, w: ProjectionWeights, features: Callable[[Row], Features],
             far_features: Callable[[Row], Features]) -> list[Row]:
        """The window's rows outside ``far`` (less those in ``skip``), newest first, read page by page only
        while an unread one could still be among the ``size`` best: every such row scores at most what
        ``far_features`` gives the last row read, so once ``size`` rows read score strictly more, the rest
        cannot be kept. Ties (rows as new as the last one read, which score the same) are broken by id:
        where the store orders keys as Python does (SQLite: by code point) the unread rows of the last
        row's age come after it in id order too, so a row read that scores the same and whose id is not
        greater than the last row's also comes before every unread one, provided a row one microsecond
        older already scores strictly less (else, and on PostgreSQL, ties are read on)."""
        if self.held is not None:
            return [r for r in self.held if not _is_near(self.kind, r, far) and _key(self.kind, r) not in skip]
        if self.plan is None:
            return []
        got: list[tuple[float, Row]] = []
        offset, page = 0, size + 1
        while True:
            rows = self.read.section_rows(self.kind, self.plan, since_us=self.floor, far=far, limit=page,
                                          offset=offset)
            got += [(score(features(r), w), r) for r in rows if _key(self.kind, r) not in skip]
            offset += len(rows)
            if len(rows) < page:
                break
            last = rows[-1]
            bound = score(far_features(last), w)
            if sum(s > bound for s, _ in got) >= size:
                break
            if self.read.keys_in_code_point_order and score(far_features(
                    {**last, "updated_at_us": last["updated_at_us"] - 1}), w) < bound:
                edge = _key(self.kind, last)
                if sum(s > bound or (s == bound and _key(self.kind, r) <= edge) for s, r in got) >= size:
                    break
            page = min(page * 2, _ROW_CAP)
        return [r for _, r in got]


_ROW_CAP = 1_000_000  # a bound the window (its floor) always meets first
_DEAD_MEMORY = ("revoked", "rejected")
_KEYS = {"task": "task_id", "state": "key", "memory": "memory_id"}
_NEAR_AGENT = {"task": ("owner_agent", "assignee"), "state": ("updated_by",), "memory": ()}


def _key(kind: str, row: Row) -> str:
    return str(row[_KEYS[kind]])


def _is_near(kind: str, row: Row, near: Near) -> bool:
    """:class:`Near` in Python, for rows held in memory (exact substring match for ``key_contains``)."""
    if near.agent is not None and any((row[c] or "") == near.agent for c in _NEAR_AGENT[kind]):
        return True
    if _key(kind, row) in near.ids:
        return True
    return any(f in row["key"] for f in near.key_contains)


def _weights(weights: object) -> ProjectionWeights:
    """The scoring weights: ``None`` (the defaults), a :class:`ProjectionWeights` (validated again: it may
    have been built without validation) or a mapping of its fields; anything else is ``InvalidInput``."""
    if weights is None:
        return ProjectionWeights()
    if isinstance(weights, ProjectionWeights):
        weights = {name: getattr(weights, name, None) for name in ProjectionWeights.model_fields}
    if not isinstance(weights, Mapping):
        fields = ", ".join(ProjectionWeights.model_fields)
        raise InvalidInput("weights", f"must be projection weights (a mapping of {fields}), "
                                      f"not {type(weights).__name__}")
    try:
        return ProjectionWeights.model_validate(dict(weights))
    except ValidationError as exc:
        raise invalid_from(exc, "weights") from exc


def _sensitivity(scope: dict[str, Any]) -> int:
    value = scope.get("sensitivity", 0)
    return value if isinstance(value, int) else 0
