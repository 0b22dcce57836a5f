"""A scripted agent that answers each wake with the next envelope of a list, and a runner without the
controller (the wake queue is filled by hand) or with it (a handoff wakes its target)."""

from __future__ import annotations

from typing import Any

from engine.models.agents import Agent
from engine.models.wakes import Wake
from engine.runloop import InProcessRunner
from engine.world import World
from engine.world.projection import WorldView
from tests.conftest import book_of

#: a draft envelope: release notes as a draft memory, publishing asked of a governor
PAYLOAD = {"env": "prod", "release": "1.2"}
DRAFT: dict[str, Any] = {
    "outcome": "draft", "reason": "release notes drafted; publishing needs a governor",
    "actions": [{"effect": "store_memory", "content": "draft: release 1.2 notes", "epistemic_type": "hypothesis"}],
    "approval": {"kind": "tool", "object_id": "publish", "payload": PAYLOAD},
}


class Scripted:
    """Answers its n-th wake with ``answers[n]`` (JSON: an envelope or today's decision); records what it saw."""

    def __init__(self, *answers: dict[str, Any]) -> None:
        self.answers = list(answers)
        self.seen: list[Wake] = []

    def run(self, agent_state: Agent, world_view: WorldView, event: Wake) -> Any:
        self.seen.append(event)
        return self.answers[min(len(self.seen), len(self.answers)) - 1]


def runner(world: World, adapters: dict[str, Any], *, controller: bool = False) -> InProcessRunner:
    r = InProcessRunner(book_of(world), adapters=adapters, controller=controller)
    r.start()
    return r


def wake(world: World, target: str, key: str, **payload: Any) -> str:
    """Queue a wake for ``target`` by the governor (its payload ``payload``); its id."""
    return world.enqueue_wake("gov", target, "test", key, payload=payload).wake.wake_id


def counts(world: World) -> dict[str, int]:
    """Rows per table, events aside (a denial's audit record is an event)."""
    return {k: v for k, v in book_of(world).store.read.counts_and_versions().items() if k != "events"}


#: What a wake's ack alone changes: the wake, its receipt and trace, the receipt's provenance edge.
ACK_ONLY = frozenset({"wakes", "receipts", "traces", "provenance_edges"})


def changed_tables(before: dict[str, int], after: dict[str, int]) -> set[str]:
    """The tables whose row count or version sum differs."""
    return {k.split(".")[0] for k in after if after[k] != before.get(k)}
