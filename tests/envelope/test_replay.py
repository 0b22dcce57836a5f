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
