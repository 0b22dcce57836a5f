"""What the input-hardening tests share: bad values of every kind, a world seeded with something of each
kind, and the "refused, and nothing changed" check (fixtures are in ``conftest.py``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.errors import PMWError, StoreUnavailable
from engine.world import World
from tests.conftest import add_agent, book_of

HARDENING_BACKENDS = ("sqlite-file", "postgres")

# -- bad values ---------------------------------------------------------------------------------------------

DEEP = 10_000  # far past any limit, and past Python's recursion limit


def deep_list(depth: int, leaf: Any = 1) -> Any:
    """``[[[...leaf...]]]`` ``depth`` lists deep, built without recursion."""
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def deep_dict(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = {"k": value}
    return value


BAD_STRINGS: dict[str, str] = {
    "nul": "a\x00b",
    "nul-only": "\x00",
    "surrogate": "x\ud800y",
    "argv-byte": "id\udcff",  # how Python decodes an invalid UTF-8 byte of argv
    "oversize": "y" * (70 * 1024),
}
BAD_JSON: dict[str, Any] = {
    "deep-list": {"v": deep_list(DEEP)},
    "deep-dict": deep_dict(DEEP),
    "just-too-deep": {"v": deep_list(70)},
    "big-int": {"n": 2**64},
    "big-negative": {"n": [1, {"m": -(2**63) - 1}]},
    "huge-int": {"n": 10**30},
    "nul-value": {"s": "a\x00"},
    "nul-key": {"a\x00": 1},
    "surrogate-value": {"s": "\udcff"},
    "surrogate-key": {"\ud800": 1},
    "oversize": {"blob": "x" * (65 * 1024)},
    "not-finite": {"f": float("inf")},
}


# -- the world ------------------------------------------------------------------------------------------------


@dataclass
class Seeded:
    """A world with one object of each kind, and what the tests name them by."""

    world: World
    ids: dict[str, str]


def seed(world: World) -> dict[str, str]:
    """Agents ``alice`` and ``bob`` (workers, every capability); a task of each status that matters,
    state, memory, a room, a wake, a handoff, an approval, an artifact, a message, a subscription, an edge."""
    caps = ["artifact.invoke", "artifact.write", "handoff.create", "memory.invoke", "memory.review", "memory.write",
            "message.send", "room.open", "state.write", "task.assign", "task.create", "task.work",
            "topology.write", "wake.enqueue"]
    add_agent(world, "alice", caps)
    add_agent(world, "bob", caps)
    ids: dict[str, str] = {}
    ids["task"] = world.create_task("alice", "open work", task_id="t1").task_id
    ids["claimed_task"] = world.create_task("alice", "claimed work", task_id="t2").task_id
    world.claim_task("alice", "t2")
    world.compare_and_set_state("alice", "k", 0, {"v": 1})
    ids["memory"] = world.store_memory("alice", "a thought", "hypothesis", memory_id="m1").memory_id
    ids["memory2"] = world.store_memory("alice", "another", "inference", memory_id="m2").memory_id
    ids["room"] = world.create_room("alice", "discuss", members=["alice", "bob"], room_id="r1").room_id
    ids["wake"] = world.enqueue_wake("alice", "bob", "ping", "k-1").wake.wake_id
    ids["handoff"] = world.create_handoff("alice", "bob", "t2", "take over").handoff_id
    ids["approval"] = world.request_approval("alice", "tool", "search").approval_id
    ids["artifact"] = world.register_artifact("alice", "doc", b"content", artifact_id="art1").artifact_id
    sent = world.send_message("alice", "general", "agent", "hello", recipient="bob")
    ids["delivery"] = sent.deliveries[0].delivery_id
    world.subscribe("alice", "progress:t1")
    world.set_topology_edge("alice", "alice", "bob", "info")
    return ids


# -- refused, and nothing changed -------------------------------------------------------------------------------


def snapshot(world: World) -> dict[str, Any]:
    """Row counts and version sums of every table."""
    return book_of(world).store.read.counts_and_versions()


def newest_event_type(world: World) -> str:
    return str(book_of(world).store.read.events(0, 1, newest=True)[0]["event_type"])


@dataclass(frozen=True)
class Outcome:
    """What one call with a bad value did: the error it raised (``None``: it returned), whether the PDP
    refused first (one ``policy.denied`` audit event was appended), and the store's counts after it."""

    error: BaseException | None
    denied: bool
    after: dict[str, Any]


def call_refused(world: World, call: Callable[[], Any], label: str, before: dict[str, Any] | None = None) -> Outcome:
    """Run ``call``; fail unless it raised a PMWError other than StoreUnavailable (or returned without
    writing) and every table is as ``before`` (default: counted now), except that a policy denial appends
    its one audit event. A sequence of refusals passes each ``Outcome.after`` on as the next ``before``."""
    before = before if before is not None else snapshot(world)
    error: BaseException | None = None
    try:
        call()
    except PMWError as exc:
        error = exc
    except BaseException as exc:
        raise AssertionError(f"{label}: {type(exc).__name__} escaped (not a PMWError): {exc!r}"[:2000]) from exc
    assert not isinstance(error, StoreUnavailable), f"{label}: bad input answered as store_unavailable: {error}"
    after = snapshot(world)
    denied = isinstance(error, PMWError) and error.code == "policy_denied"
    compared = after
    if denied:
        assert after["events"] == before["events"] + 1, label
        assert newest_event_type(world) == "policy.denied", label
        compared = {**after, "events": before["events"]}
    assert _changed(before, compared) == {}, \
        f"{label}: the store changed ({type(error).__name__ if error else 'ok'}): {_changed(before, compared)}"
    return Outcome(error, denied, after)


def _changed(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    return {k: (before.get(k), after.get(k)) for k in {*before, *after} if before.get(k) != after.get(k)}


__all__ = [
    "BAD_JSON",
    "BAD_STRINGS",
    "DEEP",
    "HARDENING_BACKENDS",
    "Outcome",
    "Seeded",
    "call_refused",
    "deep_dict",
    "deep_list",
    "seed",
    "snapshot",
]
