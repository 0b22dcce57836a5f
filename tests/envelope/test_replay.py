"""A replayed envelope writes what its first attempt wrote: the worker lowers a recorded envelope at the time
it was recorded, so a deferral ``delay_s`` from then, retried after its worker died between its writes and
its ack, answers the first attempt's continuation wake (its operation id) instead of conflicting with it."""

from __future__ import annotations

import pytest

from engine.protocol.worker import SimulatedCrash
from engine.runloop.worker import EnvelopeWorker
from engine.world import World
from tests.conftest import add_agent, book_of
from tests.envelope.support import Scripted, wake


def test_a_deferral_replayed_after_its_worker_died_before_the_ack_is_the_first_attempt_s(pworld: World) -> None:
    add_agent(pworld, "writer", ["wake.enqueue"])
    agent = Scripted({"outcome": "defer", "defer": {"reason": "later", "delay_s": 3600}})
    worker = EnvelopeWorker(book_of(pworld), "worker-1", {"writer": agent}, lease_seconds=5)
    w = wake(pworld, "writer", "k1")
    start = pworld.clock.now_us()
    worker.crash_before_ack = 1
    with pytest.raises(SimulatedCrash):
        worker.run_until_idle()
    pworld.clock.advance(6)  # type: ignore[attr-defined]
    worker.run_until_idle()  # the lease ran out: the wake is claimed again and its recorded envelope replayed
    receipt = pworld.receipt_for_wake(w, actor="gov")
    assert receipt.outcome.value == "deferred" and len(agent.seen) == 1
    assert receipt.payload["envelope"]["defer"]["until_us"] == start + 3_600_000_000
    later = pworld.get_wake(receipt.next_wake or "", actor="gov")
    assert later.not_before_us == start + 3_600_000_000
    assert [x.wake_id for x in pworld.list_wakes(target_agent="writer", actor="gov")].count(later.wake_id) == 1


def test_an_envelope_of_an_agent_asked_again_is_decided_again_after_a_crash_before_its_commit(pworld: World) -> None:
    """At once (``record_first = False``): the envelope's record commits with its writes and receipt, so a crash
    before that commit leaves no record and no continuation wake; the retry asks the agent again and lowers
    its answer at the retry's time: one receipt, one continuation wake."""
    add_agent(pworld, "writer", ["wake.enqueue"])
    agent = Scripted({"outcome": "defer", "defer": {"reason": "later", "delay_s": 3600}})
    agent.record_first = False  # type: ignore[attr-defined]
    worker = EnvelopeWorker(book_of(pworld), "worker-1", {"writer": agent}, lease_seconds=5)
    w = wake(pworld, "writer", "k2")
    worker.crash_before_commit = 1
    with pytest.raises(SimulatedCrash):
        worker.run_until_idle()
    assert book_of(pworld).recorded_decision(w) is None
    assert [x.wake_id for x in pworld.list_wakes(target_agent="writer", actor="gov")] == [w]
    pworld.clock.advance(6)  # type: ignore[attr-defined]
    retried = pworld.clock.now_us()
    worker.run_until_idle()
    receipt = pworld.receipt_for_wake(w, actor="gov")
    assert receipt.outcome.value == "deferred" and len(agent.seen) == 2
    assert receipt.payload["envelope"]["defer"]["until_us"] == retried + 3_600_000_000
    recorded = book_of(pworld).recorded_decision(w)
    assert recorded is not None and recorded.decision["outcome"] == "defer"
    later = [x for x in pworld.list_wakes(target_agent="writer", actor="gov") if x.wake_id != w]
    assert len(later) == 1 and later[0].wake_id == receipt.next_wake
