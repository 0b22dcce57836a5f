"""The trust boundary: what the agent-facing World can and cannot reach (issue 9, item 2).

The World agents, CLIs and transports hold decides every write with the PDP and writes through the store's
decided door; the runtime's bookkeeping is on the RuntimeBook, which holds the only runtime door. These
tests attack that split from the World's side: each would fail if the World regained a bookkeeping call,
a public path to a door or a connection, or if the gateway let an undecided write through.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.errors import PolicyEpochChanged, UndecidedWrite
from engine.policy.cerbos_adapter import CerbosPdp
from engine.world import World
from engine.world.book import RuntimeBook
from store import Door, Insert, Store, WriteRequest
from store.database import Database
from tests.conftest import add_agent, book_of, close_world, open_pdp_world

BOOKKEEPING = ("bootstrap_governor", "activate_policy_epoch", "record_decision", "recorded_decision",
               "commit_controller_step", "controller_position", "controller_facts", "recheck_queued_work",
               "record_denial", "state_image", "rebuild_state", "close")


@pytest.fixture
def governed(tmp_path: Path, pdp_client: CerbosPdp) -> Iterator[World]:
    world = open_pdp_world(f"sqlite:///{tmp_path / 'world.db'}", pdp_client, tmp_path / "artifacts")
    add_agent(world, "alice", ["state.write", "task.create", "task.work"])
    yield world
    close_world(world)


def _public_reach(root: object, depth: int = 4) -> Iterator[tuple[str, object]]:
    """Every object reachable from ``root`` through public attributes (no leading underscore), bounded."""
    seen: set[int] = set()
    frontier: list[tuple[str, object]] = [("world", root)]
    for _ in range(depth):
        nxt: list[tuple[str, object]] = []
        for path, obj in frontier:
            if id(obj) in seen or isinstance(obj, str | bytes | int | float | bool | type(None)):
                continue
            seen.add(id(obj))
            yield path, obj
            attrs: dict[str, Any] = {}
            if hasattr(obj, "__dict__"):
                attrs.update({k: v for k, v in vars(obj).items() if not k.startswith("_")})
            for name in dir(type(obj)):
                if name.startswith("_"):
                    continue
                prop = getattr(type(obj), name, None)
                if isinstance(prop, property):
                    try:
                        attrs[name] = getattr(obj, name)
                    except Exception:  # noqa: BLE001 - a property that cannot be read leads nowhere
                        continue
            nxt.extend((f"{path}.{k}", v) for k, v in attrs.items())
        frontier = nxt


def test_the_world_offers_none_of_the_runtimes_bookkeeping(governed: World) -> None:
    offered = [name for name in BOOKKEEPING if hasattr(governed, name)]
    assert offered == []
    book = book_of(governed)
    assert all(hasattr(book, name) for name in BOOKKEEPING)  # they exist, on the object the runtime keeps


def test_no_public_path_leads_from_the_world_to_a_door_a_connection_or_the_store(governed: World) -> None:
    """Nor to the raw reader (reads past the PDP), the PDP client or its admin credentials."""
    from engine.policy.cerbos_adapter import CerbosPdp
    from engine.policy.enforcement import PdpAuthorizer
    from engine.policy.pdp_process import PdpAddress
    from store import Reader

    forbidden = (Door, Store, Database, RuntimeBook, Reader, CerbosPdp, PdpAuthorizer, PdpAddress)
    found = [(path, type(obj).__name__) for path, obj in _public_reach(governed)
             if isinstance(obj, forbidden) or callable(getattr(obj, "commit", None))
             or callable(getattr(obj, "write_cursor", None))]
    assert found == []


def _forged(book: RuntimeBook, *, epoch: str | None, op: str) -> WriteRequest:
    """A grant written straight at the gateway, attributed to the governor: what an attacker would send."""
    row = book.store.read.get("agents", agent_id="alice")
    assert row is not None
    return WriteRequest(
        op_id=op, command="grant", request_hash="x" * 64, actor_id="gov", event_id=f"evt-{op}",
        event_type="agent.granted", subject_kind="agent", subject_id="alice", created_at_us=1, result={},
        changes=[Insert("state_entries", {"key": f"forged-{op}", "value": {"admin": True}, "version": 1,
                                          "updated_by": "gov", "updated_at_us": 1}, "state", "forged")],
        policy_epoch=epoch)


def test_the_gateway_refuses_an_undecided_write_through_the_decided_door(governed: World) -> None:
    book = book_of(governed)
    before = book.store.read.count("events")
    with pytest.raises(UndecidedWrite) as refused:
        book.store.decided_door().commit(_forged(book, epoch=None, op="forged-1"))
    current = book.current_policy_epoch()
    assert current is not None
    assert refused.value.details() == {"command": "grant", "current_epoch": current.epoch}
    with pytest.raises(PolicyEpochChanged):  # a made-up decision is no decision either
        book.store.decided_door().commit(_forged(book, epoch="p-made-up", op="forged-2"))
    assert book.store.read.count("events") == before
    assert book.store.read.get("state_entries", key="forged-forged-1") is None


def test_the_runtime_door_is_handed_out_once_and_it_alone_writes_undecided(governed: World) -> None:
    book = book_of(governed)
    with pytest.raises(RuntimeError):
        book.store.runtime_door()  # the book took it when the world was opened
    book._door.commit(_forged(book, epoch=None, op="bookkeeping-1"))  # the runtime's own door: accepted
    assert book.store.read.get("state_entries", key="forged-bookkeeping-1") is not None


def test_a_world_no_epoch_governs_accepts_undecided_writes_until_one_does(tmp_path: Path) -> None:
    """With no PDP (the store's own tests, single-user embedded use) writes carry no decision; once a policy
    epoch governs the world, the same undecided write is refused."""
    from engine.policy.enforcement import LocalScopeRules
    from engine.world.book import open_world

    book = open_world(f"sqlite:///{tmp_path / 'local.db'}", policy=LocalScopeRules(), artifact_dir=tmp_path / "a")
    try:
        book.world.register_agent("alice", "Alice", "worker", "t-alice")
        book.store.decided_door().commit(_forged(book, epoch=None, op="local-1"))
        book.activate_policy_epoch("p-governed", "tests")
        with pytest.raises(UndecidedWrite):
            book.store.decided_door().commit(_forged(book, epoch=None, op="local-2"))
        with pytest.raises(UndecidedWrite):  # and the World's own calls, undecided under LocalScopeRules, too
            book.world.compare_and_set_state("alice", "plan", 0, {"step": 1})
    finally:
        book.close()


@pytest.mark.parametrize("op_id", ["wak_0123:decide", "ctl:main:12", "revoke-p-1-wak_1", "ctl:main:12:0"])
def test_the_runtimes_operation_ids_are_refused_from_the_world(governed: World, op_id: str) -> None:
    """An agent who took a recorded decision's (or a controller step's) operation id first would block the
    runtime's write, or have its own result replayed as the runtime's: the World refuses those ids."""
    from engine.errors import InvalidInput

    book = book_of(governed)
    before = book.store.read.count("events")
    with pytest.raises(InvalidInput) as refused:
        governed.append_event("alice", "note.taken", {"n": 1}, op_id=op_id)
    assert refused.value.field == "op_id"
    assert book.store.read.count("events") == before


def test_a_wakes_effect_and_ack_ids_are_refused_from_anyone_but_its_target_and_holder(governed: World) -> None:
    """The worker's operation ids are ``<wake>:<n>`` (effects) and ``<wake>:ack``; an agent who took one first
    would turn the target's effect into a conflict or crash the run at the ack."""
    from engine.errors import InvalidInput

    add_agent(governed, "boss", ["wake.enqueue"])
    add_agent(governed, "mallory", ["state.write"])
    wake = governed.enqueue_wake("boss", "alice", "look", "k-1").wake
    book = book_of(governed)
    before = book.store.read.count("events")
    for op in (f"{wake.wake_id}:ack", f"{wake.wake_id}:0"):
        with pytest.raises(InvalidInput) as refused:
            governed.append_event("mallory", "note.taken", {}, op_id=op)
        assert refused.value.field == "op_id"
    assert book.store.read.count("events") == before
    governed.append_event("alice", "note.taken", {}, op_id=f"{wake.wake_id}:0")  # its target may


def test_the_controllers_operation_ids_are_refused_from_other_agents(governed: World) -> None:
    from engine.errors import InvalidInput

    with pytest.raises(InvalidInput):
        governed.append_event("alice", "note.taken", {}, op_id="ctl:main:12:0.open")


def test_a_cause_is_validated_whatever_the_caller_passes(governed: World) -> None:
    from engine.errors import InvalidInput
    from engine.world import Cause

    before = book_of(governed).store.read.count("events")
    for bad in ({"causation_id": {}}, "evt_1", Cause.model_construct(causation_id={"x": 1}),
                Cause.model_construct(correlation_id="c" * 5_000_000)):
        with pytest.raises(InvalidInput) as refused:
            governed.compare_and_set_state("alice", "plan", 0, {"v": 1}, cause=bad)  # type: ignore[arg-type]
        assert refused.value.field.startswith("cause")
    assert book_of(governed).store.read.count("events") == before


def test_the_worlds_clock_ids_and_artifact_dir_cannot_be_swapped(governed: World) -> None:
    for name in ("clock", "ids", "artifact_dir"):
        with pytest.raises(AttributeError):
            setattr(governed, name, None)
