"""The world as one agent may see it: ``pi_i(W, task, permissions, budget)`` (seed 000 §47-49).

Visibility is the policy's: with a PDP every section is one query filtered by the PDP's plan for
``read`` on that kind (``store.plan_sql``), so an agent is never shown what a single check would deny.
Without a PDP (the store's own tests) the memory scopes apply: private to its owner, room to active
members, shared to all. Visible objects are then scored (relevance, recency, causality, authority, risk,
dependency) and the best ``budget`` of each section kept; the view widens when conflict or uncertainty
is visible. Candidate memory is never among the stable shared facts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
from engine.policy.attributes import GOVERNOR_ROLE
from engine.policy.model import PlanFilter
from engine.projection_score import Features, ProjectionWeights, top, widened_budget
from engine.validation import check_id, check_int64, invalid_from
from engine.world.core import WorldCore

DEFAULT_BUDGET = 200
MAX_BUDGET = 10_000
CANDIDATE_FACTOR = 4  # how many candidates per kept item each section reads, newest first
_UNCERTAIN = {EpistemicType.HYPOTHESIS, EpistemicType.OPEN_QUESTION}
_AUTHORITY = {MemoryStatus.SHARED: 1.0, MemoryStatus.IN_REVIEW: 0.5, MemoryStatus.CANDIDATE: 0.5,
              MemoryStatus.REOPENED: 0.4, MemoryStatus.ARCHIVED: 0.3, MemoryStatus.PRIVATE: 0.3}


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
        it (reading it takes ``break_glass_read``, which is recorded)."""
        check_id("agent_id", agent_id)
        budget = max(1, min(check_int64("budget", budget), MAX_BUDGET))  # clamped, as it always was
        w = _weights(weights)
        if widen is not None and not isinstance(widen, bool):
            raise InvalidInput("widen", f"must be true, false or None, not {type(widen).__name__}")
        read = self._store.read
        position, now = read.last_seq(), self.clock.now_us()
        agent = self._load(Agent, "agents", "agent", agent_id, agent_id=agent_id)
        self._may_view(actor or agent_id, agent_id)
        room_ids = read.active_rooms_of(agent_id)
        limit = budget * 2 * CANDIDATE_FACTOR
        kinds = ("memory", "task", "state", "handoff", "room", "artifact")
        plans = dict(zip(kinds, self._policy.plans(agent_id, [(k, "read") for k in kinds]), strict=True)) \
            if self._policy.external else None  # the read plans in one round trip (remembered: plan_memo)
        memory = self._visible_memory(agent_id, room_ids, now, limit, plans)
        if (actor or agent_id) != agent_id:  # sealed from every other viewer, governors included
            memory = [m for m in memory if m.scope is not MemoryScope.PRIVATE]
        tasks = self._list(Task, "tasks", "task", agent_id, {}, order_by=("updated_at_us",), descending=True,
                           limit=limit, plans=plans)
        conflicts = sum(m.status is MemoryStatus.REOPENED for m in memory)
        uncertain = sum(m.epistemic_type in _UNCERTAIN and m.status.value not in STABLE_SHARED for m in memory)
        size, widened = widened_budget(budget, conflicts, uncertain)
        if widen is not None:
            size, widened = (budget * 2, True) if widen else (budget, False)
        focus = self._focus(agent_id, tasks, task_id)
        deps = {d for t in tasks if t.task_id in focus for d in t.dependencies}
        scores: dict[str, float] = {}
        kept_tasks = self._keep(tasks, size, w, scores, lambda t: Features(
            relevance=1.0 if t.task_id in focus else 0.0, age_s=(now - t.updated_at_us) / 1e6,
            causality=1.0 if agent_id in (t.owner_agent, t.assignee) else 0.0,
            authority=1.0 if t.assignee == agent_id else 0.5, risk=0.0,
            dependency=1.0 if t.task_id in deps else 0.0), "task_id")
        kept_memory = self._keep(memory, size, w, scores, lambda m: Features(
            relevance=1.0 if focus & set(m.source_refs) else 0.0, age_s=(now - m.updated_at_us) / 1e6,
            causality=1.0 if m.owner == agent_id else (0.5 if m.room_id in room_ids else 0.0),
            authority=_AUTHORITY.get(m.status, 0.0), risk=min(1.0, _sensitivity(m.permission_scope) / 5),
            dependency=0.0), "memory_id")
        state = self._list(StateEntry, "state_entries", "state", agent_id, {}, order_by=("updated_at_us",),
                           descending=True, limit=limit, plans=plans)
        kept_state = self._keep(state, size, w, scores, lambda s: Features(
            relevance=1.0 if any(f in s.key for f in focus) else 0.0, age_s=(now - s.updated_at_us) / 1e6,
            causality=1.0 if s.updated_by == agent_id else 0.0, authority=0.5, risk=0.0, dependency=0.0), "key")
        handoffs = self._list(Handoff, "handoffs", "handoff", agent_id,
                              {"target_agent": agent_id, "status": ["pending", "accepted"]}, limit=size, plans=plans)
        rooms = self._list(Room, "rooms", "room", agent_id, {"room_id": room_ids}, limit=size,
                           plans=plans) if room_ids else []
        artifacts = self._list(Artifact, "artifacts", "artifact", agent_id, {"task_id": sorted(focus)},
                               order_by=("updated_at_us",), descending=True, limit=size,
                               plans=plans) if focus else []  # what the registry holds for the work at hand
        return WorldView(
            agent=agent, world_position=position, topology_version=read.topology_version(), budget=size,
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

    def _visible_memory(self, agent_id: str, room_ids: list[str], now: int, limit: int,
                        plans: Mapping[str, PlanFilter | None] | None = None) -> list[Memory]:
        live = ("revoked", "rejected")
        if not self._policy.external:
            return [Memory.model_validate(r) for r in self._store.read.visible_memory(agent_id, room_ids, now, limit)]
        rows = self._list(Memory, "memory", "memory", agent_id, {}, order_by=("updated_at_us",), descending=True,
                          limit=limit, plans=plans)
        return [m for m in rows if m.status.value not in live and (m.expires_at_us is None or m.expires_at_us > now)]

    def _focus(self, agent_id: str, tasks: list[Task], task_id: str | None) -> set[str]:
        if task_id is not None:
            return {check_id("task_id", task_id)}
        return {t.task_id for t in tasks if t.assignee == agent_id and t.status.value in ("assigned", "claimed")}

    @staticmethod
    def _keep(items: list[Any], size: int, w: ProjectionWeights, scores: dict[str, float],
              features: Any, key: str) -> list[Any]:
        by_id = {str(getattr(i, key)): i for i in items}
        best = top(((ident, features(i)) for ident, i in by_id.items()), size, w)
        scores.update({ident: round(s, 6) for ident, s in best})
        return [by_id[ident] for ident, _ in best]


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
