"""The attention broker through the World and the real PDP: a human's state set by that human or a governor
(others refused, unknown states refused with nothing changed), each notice decided and recorded on the human
with its reasons, the budget spent and refilled over time, S3 forcing a review in any state, and the
notices of what the world asks of its humans (``engine.attention.notices``), replay-safe."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.attention import AttentionOutput
from engine.attention.notices import attend
from engine.errors import InvalidInput, PolicyDenied
from engine.policy.cerbos_adapter import CerbosPdp
from engine.sources import ManualClock
from engine.world import World
from store import Reader
from tests.conftest import add_agent, book_of, close_world, open_pdp_world

MESSAGE = {"to": "carol@example.org", "body": "the report is ready"}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def aworld(tmp_path: Path, pdp_client: CerbosPdp, clock: ManualClock) -> Iterator[World]:
    """``gov`` (a human governor), ``rita`` (a human reviewer), ``ann`` (a worker with tools), ``ctl`` (the
    notifier the run loop would be: it holds state.write), ``wes`` (holds nothing)."""
    world = open_pdp_world(f"sqlite:///{tmp_path / 'world.db'}", pdp_client, tmp_path / "artifacts", clock=clock)
    add_agent(world, "ann", ["state.write", "tool:send_message", "tool:publish_release"])
    add_agent(world, "rita", role="reviewer")
    add_agent(world, "ctl", ["state.write"])
    add_agent(world, "wes", ["state.read"])
    yield world
    close_world(world)


def reader(world: World) -> Reader:
    return book_of(world).store.read


def newest(world: World, event_type: str) -> dict[str, Any]:
    return reader(world).rows("events", {"event_type": event_type}, order_by=["seq"], descending=True, limit=1)[0]


def review(world: World, human: str, urgency: str = "low", risk: str = "low", subject: str = "mem-1") -> str:
    return world.notify_human("ctl", human, "review", "memory", subject, urgency=urgency, risk=risk).output.value


def test_a_human_sets_their_own_state_and_a_governor_may_too(aworld: World) -> None:
    mine = aworld.set_attention_state("rita", "rita", "MEETING")
    assert (mine.state.value, mine.set_by, mine.budget.full_alerts) == ("MEETING", "rita", 3)
    theirs = aworld.set_attention_state("gov", "rita", "FOCUSED", full_alerts=5, window_s=600)
    assert aworld.attention_of("rita", actor="rita").state == theirs
    assert (theirs.state.value, theirs.set_by, theirs.budget.full_alerts, theirs.budget.window_s) == (
        "FOCUSED", "gov", 5, 600)
    kept = aworld.set_attention_state("rita", "rita", "FREE")
    assert kept.budget == theirs.budget  # a budget not given stays as it was


def test_another_agent_may_not_set_a_humans_state(aworld: World) -> None:
    before = reader(aworld).counts_and_versions()
    with pytest.raises(PolicyDenied):
        aworld.set_attention_state("ann", "rita", "SLEEP")
    assert newest(aworld, "policy.denied")["actor_id"] == "ann"
    assert reader(aworld).counts_and_versions() == {**before, "events": before["events"] + 1}
    assert aworld.attention_of("rita", actor="gov").state.state.value == "UNKNOWN"


@pytest.mark.parametrize("state", ["DANCING", "free", "", "SLEEP "])
def test_an_unknown_state_is_refused_and_nothing_changes(aworld: World, state: str) -> None:
    before = reader(aworld).counts_and_versions()
    with pytest.raises(InvalidInput) as caught:
        aworld.set_attention_state("rita", "rita", state)
    assert caught.value.field == "state"
    assert reader(aworld).counts_and_versions() == before


def test_bad_notices_and_non_humans_are_refused_with_nothing_changed(aworld: World) -> None:
    before = reader(aworld).counts_and_versions()
    with pytest.raises(InvalidInput) as caught:
        review(aworld, "ann")  # a worker is woken as before, never brokered
    assert caught.value.field == "human"
    with pytest.raises(InvalidInput) as caught:
        review(aworld, "rita", urgency="whenever")
    assert caught.value.field == "urgency"
    with pytest.raises(InvalidInput):
        aworld.notify_human("ctl", "rita", "gossip", "memory", "mem-1")
    assert reader(aworld).counts_and_versions() == before


def test_in_a_meeting_low_risk_is_batched_and_a_high_risk_approval_alerts(aworld: World) -> None:
    aworld.set_attention_state("gov", "gov", "MEETING")
    aworld.set_attention_state("rita", "rita", "MEETING")
    assert review(aworld, "rita") == "BATCH_LATER"
    approval = aworld.request_approval("ann", "tool", "send_message", payload=MESSAGE)  # an S2 external effect
    (decided,) = attend(aworld, reader(aworld), "ctl", newest(aworld, "approval.requested"))
    assert (decided.human, decided.output, decided.notice.subject_id) == ("gov", AttentionOutput.FULL_ALERT,
                                                                          approval.approval_id)
    assert (decided.notice.risk.value, decided.notice.side_effect) == ("high", "S2")
    assert decided.reasons == ["MEETING, urgency normal, risk high: FULL_ALERT"]
    recorded = newest(aworld, "attention.full_alert")
    assert (recorded["subject_kind"], recorded["subject_id"], recorded["payload"]["reasons"]) == (
        "agent", "gov", decided.reasons)
    view = aworld.attention_of("gov", actor="gov")  # what the human sees
    assert [d.decision_id for d in view.decisions] == [decided.decision_id]
    held = aworld.attention_of("rita", actor="rita").decisions
    assert [(d.output.value, d.notice.kind.value) for d in held] == [("BATCH_LATER", "review")]


def test_the_budget_is_spent_then_refills_after_its_window(aworld: World, clock: ManualClock) -> None:
    aworld.set_attention_state("gov", "rita", "FREE", full_alerts=2, window_s=600)
    assert [review(aworld, "rita", "high", "medium", f"m{n}") for n in range(3)] == [
        "FULL_ALERT", "FULL_ALERT", "BATCH_LATER"]
    assert review(aworld, "rita", "high", "high", "m3") == "FORCE_HUMAN_REVIEW"
    held = aworld.attention_of("rita", actor="rita").decisions[1]
    assert held.full_alerts_in_window == 2 and "attention budget spent: 2 of 2 full alerts in the last 600 s" in \
        held.reasons
    clock.advance(601)
    assert review(aworld, "rita", "high", "medium", "m4") == "FULL_ALERT"


def test_s3_forces_a_human_review_even_asleep(aworld: World) -> None:
    aworld.set_attention_state("gov", "gov", "SLEEP", full_alerts=0)
    release = {"title": "v1", "body": "notes"}
    aworld.request_approval("ann", "tool", "publish_release", payload=release)
    (decided,) = attend(aworld, reader(aworld), "ctl", newest(aworld, "approval.requested"))
    assert decided.output is AttentionOutput.FORCE_HUMAN_REVIEW and decided.state.value == "SLEEP"
    assert decided.notice.side_effect == "S3"


def test_a_replayed_event_records_its_decisions_once(aworld: World) -> None:
    aworld.request_approval("ann", "tool", "send_message", payload=MESSAGE)
    event = newest(aworld, "approval.requested")
    first = attend(aworld, reader(aworld), "ctl", event)
    count = reader(aworld).count("events")
    assert attend(aworld, reader(aworld), "ctl", event) == first
    assert reader(aworld).count("events") == count


def test_who_may_notify_and_who_may_read_the_view(aworld: World) -> None:
    with pytest.raises(PolicyDenied):
        aworld.notify_human("wes", "rita", "wake", "wake", "w-1")  # no state.write: may not append the record
    with pytest.raises(PolicyDenied):
        aworld.attention_of("rita", actor="ann")
    assert aworld.attention_of("rita", actor="gov").decisions == []
