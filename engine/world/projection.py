"""The world as one agent may see it: ``pi_i(W, task, permissions, budget)``.

Scope rules only (the policy issue makes it PDP-driven): private memory to its owner, room memory to the
room's active members, shared memory to everyone. Candidate memory is visible where its scope allows but
is never among the stable shared facts.
"""

from __future__ import annotations

from pydantic import Field

from engine.models.agents import Agent
from engine.models.common import Model
from engine.models.handoffs import Handoff
from engine.models.memory import STABLE_SHARED, Memory
from engine.models.rooms import Room
from engine.models.state import StateEntry
from engine.models.tasks import Task
from engine.validation import check_id
from engine.world.core import WorldCore

DEFAULT_BUDGET = 200


class WorldView(Model):
    agent: Agent
    world_position: int = Field(description="the last event seq this view reflects")
    topology_version: int
    tasks: list[Task]
    state: list[StateEntry]
    shared_facts: list[Memory]
    working_memory: list[Memory] = Field(description="visible memory that is not a stable shared fact")
    handoffs: list[Handoff]
    rooms: list[Room]

    def memory_ids(self) -> set[str]:
        return {m.memory_id for m in (*self.shared_facts, *self.working_memory)}


class ProjectionCalls(WorldCore):
    def project_world(self, agent_id: str, *, budget: int = DEFAULT_BUDGET) -> WorldView:
        """What ``agent_id`` may see now, at most ``budget`` items per section."""
        check_id("agent_id", agent_id)
        budget = max(1, min(int(budget), 10_000))
        read = self.store.read
        position = read.last_seq()
        agent = self._load(Agent, "agents", "agent", agent_id, agent_id=agent_id)
        rooms = read.active_rooms_of(agent_id)
        memory = [Memory.model_validate(r) for r in read.visible_memory(agent_id, rooms, self.clock.now_us(),
                                                                          budget * 2)]
        tasks = read.rows("tasks", {"assignee": agent_id}, limit=budget)
        tasks += read.rows("tasks", {"status": "open"}, limit=budget)
        handoffs = read.rows("handoffs", {"target_agent": agent_id, "status": ["pending", "accepted"]},
                             limit=budget)
        return WorldView(
            agent=agent, world_position=position, topology_version=read.topology_version(),
            tasks=[Task.model_validate(t) for t in {t["task_id"]: t for t in tasks}.values()][:budget],
            state=[StateEntry.model_validate(r) for r in read.rows("state_entries", limit=budget)],
            shared_facts=[m for m in memory if m.status.value in STABLE_SHARED][:budget],
            working_memory=[m for m in memory if m.status.value not in STABLE_SHARED][:budget],
            handoffs=[Handoff.model_validate(h) for h in handoffs],
            rooms=[Room.model_validate(r) for r in read.rows("rooms", {"room_id": rooms}, limit=budget)])
