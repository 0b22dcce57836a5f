"""The attention broker as the controller's rule (issue 16 item 5, seed 003 §14-16): the real controller
(durable_rules, the repository's rules, the real PDP and SQLite) follows the log and, on every committed
event that notifies a human, records the broker's decision with its reasons. A governor in MEETING gets
BATCH_LATER for a low-risk wake the controller queued and FULL_ALERT for a high-risk (S2) approval; an S3
approval forces a review whatever the state (hard safety over the table); a crash between the decision and
the step's commit, a restart and a replay of the whole log decide nothing twice."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.attention.notices import attend
from engine.commands.attention import DECISION_EVENTS
from engine.contracts.loader import load_contracts
from engine.policy.cerbos_adapter import CerbosPdp
from engine.runloop.follower import ControllerLoop, ensure_controller_agent
from engine.world import CONTROLLER_AGENT, World
from tests.conftest import add_agent, book_of, close_world, open_pdp_world
from tests.controller.support import REPO_RULES

MESSAGE = {"to": "carol@example.org", "body": "the report is ready"}


@pytest.fixture
def world(tmp_path: Path, pdp_client: CerbosPdp) -> Iterator[World]:
    """``gov`` (a human governor, subscribed to ``plan``), ``ann`` (a worker with tools)."""
    w = open_pdp_world(f"sqlite:///{tmp_path / 'world.db'}", pdp_client, tmp_path / "artifacts")
    add_agent(w, "ann", ["state.write", "task.create", "handoff.create", "tool:send_message",
                         "tool:publish_release"])
    w.subscribe("gov", "plan")
    yield w
    close_world(w)


def loop_of(world: World) -> ControllerLoop:
    book = book_of(world)
    ensure_controller_agent(book, "gov")
    loop = ControllerLoop(book, REPO_RULES)
    loop.start()
    return loop


def decisions(world: World) -> list[dict[str, Any]]:
    """Every attention decision recorded, in log order."""
    rows = book_of(world).store.read.rows("events", {"event_type": list(DECISION_EVENTS)}, order_by=["seq"])
    return [dict(r["payload"]) for r in rows]


def test_a_meeting_batches_a_low_risk_wake_and_alerts_on_a_high_risk_approval(world: World) -> None:
    loop = loop_of(world)
    try:
        world.set_attention_state("gov", "gov", "MEETING")
        world.compare_and_set_state("ann", "plan", 0, {"step": 1})  # the controller wakes gov (subscriber)
        approval = world.request_approval("ann", "tool", "send_message", payload=MESSAGE)  # S2
        stats = loop.drain()
    finally:
        loop.close()
    got = decisions(world)  # the wake's step is committed after the approval: its notice comes second
    assert [(d["human"], d["notice"]["kind"], d["output"]) for d in got] == [
        ("gov", "approval_request", "FULL_ALERT"), ("gov", "wake", "BATCH_LATER")]
    high, low = got
    wake = book_of(world).store.read.get("wakes", wake_id=low["notice"]["subject_id"])
    assert wake is not None and (wake["target_agent"], wake["cause"]) == ("gov", "subscriber")
    assert low["reasons"] == ["MEETING, urgency normal, risk low: BATCH_LATER"]
    assert high["notice"]["subject_id"] == approval.approval_id
    assert (high["notice"]["risk"], high["notice"]["side_effect"]) == ("high", "S2")
    assert high["reasons"] == ["MEETING, urgency normal, risk high: FULL_ALERT"]
    assert all(d["decided_by"] == CONTROLLER_AGENT and d["state"] == "MEETING" for d in got)
    assert stats.attention == 2 and stats.failed_attention == []
    view = world.attention_of("gov", actor="gov")  # what the human sees, newest first
    assert [d.output.value for d in view.decisions] == ["BATCH_LATER", "FULL_ALERT"]


def test_an_s3_approval_forces_a_review_even_asleep_and_over_budget(world: World) -> None:
    loop = loop_of(world)
    try:
        world.set_attention_state("gov", "gov", "SLEEP", full_alerts=0)
        world.request_approval("ann", "tool", "publish_release", payload={"title": "v1", "body": "notes"})
        loop.drain()
    finally:
        loop.close()
    (forced,) = decisions(world)
    assert (forced["output"], forced["notice"]["side_effect"], forced["state"]) == ("FORCE_HUMAN_REVIEW", "S3",
                                                                                    "SLEEP")
    assert forced["reasons"][0].startswith("S3 side effect: a human reviews it before it runs")


def test_a_crash_a_restart_and_a_replay_of_the_log_decide_nothing_twice(world: World) -> None:
    book = book_of(world)
    world.set_attention_state("gov", "gov", "MEETING")
    task = world.create_task("ann", "ship the report")
    world.create_handoff("ann", "gov", task.task_id, "decide on the report")  # an escalation, and a step
    world.request_approval("ann", "tool", "send_message", payload=MESSAGE)
    loop = loop_of(world)
    real = book.commit_controller_step
    crashed: list[int] = []

    def crash_once(*args: Any, **kwargs: Any) -> Any:  # dies after attending the handoff, before its commit
        if not crashed and args[1].wakes:
            crashed.append(1)
            raise RuntimeError("crash before the step's commit")
        return real(*args, **kwargs)

    book.commit_controller_step = crash_once  # type: ignore[method-assign]
    try:
        with pytest.raises(RuntimeError):
            loop.drain()
        assert [(d["notice"]["kind"], d["output"]) for d in decisions(world)] == [("escalation", "FULL_ALERT")]
        loop.drain()  # the handoff observed again from the committed position: attended again
    finally:
        book.commit_controller_step = real  # type: ignore[method-assign]
        loop.close()
    first = decisions(world)
    assert crashed and [(d["notice"]["kind"], d["output"]) for d in first] == [
        ("escalation", "FULL_ALERT"), ("approval_request", "FULL_ALERT"), ("wake", "BATCH_LATER")]
    again = loop_of(world)  # a restart: rebuilt from SQL, reads from the committed position
    try:
        again.drain()
    finally:
        again.close()
    contracts = load_contracts()
    for row in book.store.read.events(0, 10_000):  # the whole log attended again, as a replay would
        attend(world, book.store.read, CONTROLLER_AGENT, row, contracts)
    assert decisions(world) == first
