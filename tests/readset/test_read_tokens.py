"""Read-set tokens through the World (seed 004; issue 16 item 6): a read's token refuses a write whose read set
moved on, even when the write's ``expected_version`` was patched to the current one; a token edited to pass
is refused as not issued here; no token is today's behaviour. On every backend (SQLite in memory and in a
file, PostgreSQL)."""

from __future__ import annotations

import base64
import threading

import orjson
import pytest

from engine.errors import InvalidInput, VersionConflict
from engine.world import World
from engine.world.read_set import StaleRead, fenced, issue, token_of
from tests.conftest import book_of


def test_a_stale_proposal_resent_with_a_patched_version_is_refused_with_its_token(world: World) -> None:
    world.compare_and_set_state("alice", "plan", 0, {"steps": 1})
    read = world.get_state("plan", actor="alice")
    world.compare_and_set_state("bob", "plan", read.version, {"steps": 2})  # bob moves the key on
    with pytest.raises(VersionConflict) as conflict:  # the stale write, and the version it is told about
        world.compare_and_set_state("alice", "plan", read.version, {"steps": 10})
    with pytest.raises(StaleRead) as stale:  # alice copies the current version in and resends: refused
        world.compare_and_set_state("alice", "plan", conflict.value.current, {"steps": 10},
                                    read_token=read.read_token)
    assert stale.value.code == "stale_read"
    assert stale.value.details() == {"changed": [{"key": "plan", "read_version": 1, "current_version": 2}]}
    assert (world.get_state("plan").value, world.get_state("plan").version) == ({"steps": 2}, 2)
    fresh = world.get_state("plan", actor="alice")  # re-read and recompute: passes
    done = world.compare_and_set_state("alice", "plan", fresh.version, {"steps": 3}, read_token=fresh.read_token)
    assert (done.version, world.get_state("plan").value) == (3, {"steps": 3})
    # no token: today's behaviour, the patched resend overwrites (what the token exists to refuse)
    assert world.compare_and_set_state("alice", "plan", 3, {"steps": 10}).version == 4


def test_a_change_to_another_key_of_the_read_set_refuses_the_write(world: World) -> None:
    world.compare_and_set_state("alice", "budget", 0, 100)
    world.compare_and_set_state("alice", "spend", 0, 40)
    budget, spend = world.get_state("budget"), world.get_state("spend")
    token = issue([(budget.key, budget.version), (spend.key, spend.version), ("limit", 0)])  # a projection's
    world.compare_and_set_state("bob", "budget", 1, 50)
    with pytest.raises(StaleRead) as stale:  # writes only spend, at its right version: budget moved on
        world.compare_and_set_state("alice", "spend", spend.version, 90, read_token=token)
    assert stale.value.changed == [{"key": "budget", "read_version": 1, "current_version": 2}]
    assert world.get_state("spend").version == 1
    world.compare_and_set_state("bob", "limit", 0, 7)  # a key read absent that exists now is a change too
    with pytest.raises(StaleRead) as again:
        world.compare_and_set_state("alice", "spend", 1, 90, read_token=issue([("limit", 0), ("spend", 1)]))
    assert again.value.changed == [{"key": "limit", "read_version": 0, "current_version": 1}]
    assert world.get_state("spend").value == 40


def test_a_token_edited_to_pass_is_refused_and_nothing_is_written(world: World) -> None:
    world.compare_and_set_state("alice", "plan", 0, "a")
    read = world.get_state("plan")
    world.compare_and_set_state("bob", "plan", 1, "b")
    prefix, payload, mac = read.read_token.split(".")
    pairs = orjson.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert pairs == [["plan", 1]]
    forged_payload = base64.urlsafe_b64encode(orjson.dumps([["plan", 2]])).rstrip(b"=").decode()
    for forged in (f"{prefix}.{forged_payload}.{mac}", f"{prefix}.{forged_payload}", "rs1..", "x" * 40):
        with pytest.raises(InvalidInput) as refused:
            world.compare_and_set_state("alice", "plan", 2, "c", read_token=forged)
        assert refused.value.field == "read_token", forged
    assert (world.get_state("plan").value, world.get_state("plan").version) == ("b", 2)



def _skew_round(world: World, value: int) -> dict[str, str]:
    """x writes b, y writes a, at once, both passing the token of one read of a and b: who got through."""
    a, b = world.get_state("a"), world.get_state("b")
    token = issue([(a.key, a.version), (b.key, b.version)])
    start = threading.Barrier(2, timeout=60)
    outcomes: dict[str, str] = {}

    def write(name: str, key: str, version: int) -> None:
        start.wait()
        try:
            world.compare_and_set_state(name, key, version, value, read_token=token)
            outcomes[name] = "ok"
        except StaleRead:
            outcomes[name] = "stale"

    threads = [threading.Thread(target=write, args=("x", "b", b.version)),
               threading.Thread(target=write, args=("y", "a", a.version))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    return outcomes


def test_write_skew_on_a_shared_read_set_lets_one_writer_through(world: World) -> None:
    """x and y both read a and b, then x writes b and y writes a (disjoint keys, both at their right version):
    the write skew of two writers each resting on the other's key. The read-set check runs in each write's
    transaction (rows locked in key order on PostgreSQL), so in every round exactly one commits and the other
    is ``stale_read``; a check made before the transaction would let both through now and then."""
    world.compare_and_set_state("alice", "a", 0, 0)
    world.compare_and_set_state("alice", "b", 0, 0)
    for round_ in range(12):
        assert sorted(_skew_round(world, round_).values()) == ["ok", "stale"], round_


def test_a_planned_batch_commits_only_under_its_read_set(world: World) -> None:
    """What the run loop does with the projection's token: the wake's effects are planned, then committed
    inside ``read_set.fenced``; a token on a single planned effect is refused (it would commit unchecked)."""
    world.compare_and_set_state("alice", "inbox", 0, "question")
    token = token_of([world.get_state("inbox")])
    assert token is not None and token_of([]) is None
    with world.planning() as batch, pytest.raises(InvalidInput) as planned:
        world.compare_and_set_state("alice", "answer", 0, "late", read_token=token)
    assert planned.value.field == "read_token" and len(batch) == 0
    with world.planning() as batch:
        world.compare_and_set_state("alice", "answer", 0, "for the question")
    world.compare_and_set_state("bob", "inbox", 1, "another question")
    store = book_of(world).store
    with pytest.raises(StaleRead) as refused, fenced(store, token):
        world.commit_planned(batch)
    assert refused.value.changed == [{"key": "inbox", "read_version": 1, "current_version": 2}]
    assert [e.key for e in world.list_state("answer")] == []
    with world.planning() as batch:
        world.compare_and_set_state("alice", "answer", 0, "for the new question")
    with fenced(store, token_of([world.get_state("inbox")])):
        world.commit_planned(batch)
    assert world.get_state("answer").value == "for the new question"
