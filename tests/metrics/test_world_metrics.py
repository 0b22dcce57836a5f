"""The §31 metrics over a whole world (``engine.metrics``): a world where the test makes known counts and
each metric equals the value computed by hand; ``n/a`` (never 0) on an empty world; a reader the policy
refuses is refused, with its denial recorded and nothing else written; actions no PDP decided are
unauthorized."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.attention.notices import attend
from engine.contracts.attempt import ActionAttempt, AttemptStatus
from engine.errors import PolicyDenied
from engine.metrics import NOT_APPLICABLE, MetricsCalls, WorldMetrics, WorldRecords, metrics_of, records_of
from engine.metrics.fold import Alert, ApprovalRecord
from engine.policy.cerbos_adapter import CerbosPdp
from engine.world import World
from tests.conftest import add_agent, book_of, close_world, open_local_world, open_pdp_world

TOOLS = ["tool:send_message", "tool:publish_release", "tool:search", "task.create", "task.work", "handoff.create"]


def metrics_for(world: World, pdp: CerbosPdp, actor: str = "gov") -> WorldMetrics:
    book = book_of(world)
    return MetricsCalls(book.store.read, pdp, book.clock, book.record_denial).world_metrics(actor)


def ratios(found: WorldMetrics) -> dict[str, tuple[int, int]]:
    return {m.name: (m.numerator, m.denominator) for m in found.metrics}


def send(world: World, key: str, body: str, status: str = "done") -> None:
    world.begin_action("ann", "send_message", {"to": "carol@example.org", "body": body}, idempotency_key=key)
    if status == "done":
        world.settle_action("ann", key, "done", output={"message_id": f"m-{key}"}, external_ref=f"smtp:{key}")
    else:
        world.settle_action("ann", key, "failed", reason="connection refused before sending")


@pytest.fixture
def mworld(tmp_path: Path, pdp_client: CerbosPdp) -> Iterator[World]:
    world = open_pdp_world(f"sqlite:///{tmp_path / 'world.db'}", pdp_client, tmp_path / "artifacts")
    add_agent(world, "ann", TOOLS)
    add_agent(world, "bob", TOOLS)
    add_agent(world, "rita", role="reviewer")
    add_agent(world, "wes", ["state.read"])
    add_agent(world, "ctl", ["state.write"])  # the notifier the run loop would be
    yield world
    close_world(world)


def test_each_metric_equals_its_hand_count(mworld: World, pdp_client: CerbosPdp) -> None:
    for n in range(6):  # 7 distinct effects: d0..d5 here, d6 after a failed try below
        send(mworld, f"k-d{n}", f"d{n}")
    for n in range(3):  # 3 duplicates: d0, d1, d2 sent again under other keys
        send(mworld, f"k-dup{n}", f"d{n}")
    send(mworld, "k-f6", "d6", "failed")  # a failure recovered: d6 done later under another key
    send(mworld, "k-d6", "d6")
    send(mworld, "k-fx", "never again", "failed")  # a failure never recovered
    for _ in range(2):
        mworld.invoke("ann", "tool", "search", side_effect="S0")
    tasks = [mworld.create_task("ann", f"intent {n}") for n in range(4)]
    for task in tasks[:2]:
        mworld.claim_task("ann", task.task_id)
        mworld.complete_task("ann", task.task_id, {"ok": True})
    mworld.abort_task("ann", tasks[2].task_id, "withdrawn")  # tasks[3] stays open
    handed = [mworld.create_task("ann", f"handed {n}") for n in range(3)]
    offers = []
    for task in handed:
        mworld.claim_task("ann", task.task_id)
        offers.append(mworld.create_handoff("ann", "bob", task.task_id, "take it over"))
    mworld.accept_handoff("bob", offers[0].handoff_id)
    mworld.complete_handoff("bob", offers[0].handoff_id, {"done": True})
    mworld.reject_handoff("bob", offers[1].handoff_id, "busy")  # offers[2] stays pending

    found = metrics_for(mworld, pdp_client)
    assert ratios(found) == {
        "ICR": (2, 6),  # 2 completed of the 6 tasks not aborted (one open, the three handed ones claimed)
        "UAR": (0, 12),  # 10 done attempts + 2 uses, every one decided by the PDP
        "DSR": (3, 10),  # 3 duplicates of 10 done S2 effects
        "HCS": (1, 2),  # 1 completed of the 2 handoffs answered (one pending)
        "AP": (0, 0),  # the broker interrupted nobody
        "RSR": (1, 2),  # d6 recovered, the other failure not
        "EC": (120, 120),  # 12 settled E2 attempts x 10 required receipt fields, all present
    }
    assert found.metric("DSR").value == pytest.approx(0.3) and found.metric("DSR").shown == "0.3000"
    assert found.metric("UAR").value == 0.0 and found.metric("UAR").shown == "0.0000"
    assert found.last_seq == book_of(mworld).store.read.last_seq()


def test_attention_precision_counts_the_alerts_the_human_acted_on(mworld: World, pdp_client: CerbosPdp) -> None:
    mworld.set_attention_state("gov", "gov", "FREE")
    read = book_of(mworld).store.read
    asked = [mworld.request_approval("ann", "tool", "send_message", payload={"to": "x@example.org", "body": b})
             for b in ("one", "two")]  # S2: FULL_ALERT
    asked.append(mworld.request_approval("ann", "tool", "publish_release", payload={"title": "v1", "body": "n"}))
    for event in read.rows("events", {"event_type": "approval.requested"}, order_by=["seq"]):
        attend(mworld, read, "ctl", event)
    mworld.approve("gov", asked[0].approval_id)
    mworld.deny_approval("gov", asked[2].approval_id)  # the S3 one, forced to review: decided too
    ap = metrics_for(mworld, pdp_client).metric("AP")
    assert (ap.numerator, ap.denominator) == (2, 3)  # the second alert was never answered


def test_an_empty_world_is_not_applicable_never_zero(mworld: World, pdp_client: CerbosPdp) -> None:
    found = metrics_for(mworld, pdp_client)
    assert [m.name for m in found.metrics] == ["ICR", "UAR", "DSR", "HCS", "AP", "RSR", "EC"]
    for m in found.metrics:
        assert (m.numerator, m.denominator, m.value, m.shown) == (0, 0, None, NOT_APPLICABLE), m


def test_a_reader_the_policy_refuses_is_refused_and_only_its_denial_is_written(
        mworld: World, pdp_client: CerbosPdp) -> None:
    read = book_of(mworld).store.read
    before = read.counts_and_versions()
    last = read.last_seq()
    with pytest.raises(PolicyDenied) as caught:
        metrics_for(mworld, pdp_client, "wes")
    assert (caught.value.action, caught.value.kind) == ("metrics", "governance")
    new = read.events(after_seq=last)
    assert [(e["event_type"], e["actor_id"]) for e in new] == [("policy.denied", "wes")]
    after = read.counts_and_versions()
    assert after == {**before, "events": before["events"] + 1}
    assert metrics_for(mworld, pdp_client, "rita").reader == "rita"  # a reviewer reads them


def test_actions_no_pdp_decided_are_unauthorized(tmp_path: Path) -> None:
    world = open_local_world(f"sqlite:///{tmp_path / 'local.db'}", tmp_path / "artifacts")
    try:
        world.register_agent("ann", "Ann", "worker", "t-ann")
        for _ in range(2):
            world.invoke("ann", "tool", "search", side_effect="S0")
        records, _ = records_of(book_of(world).store.read)
        uar = next(m for m in metrics_of(records) if m.name == "UAR")
        assert (uar.numerator, uar.denominator) == (2, 2)
    finally:
        close_world(world)


def _attempt(key: str, approval_id: str | None) -> ActionAttempt:
    return ActionAttempt(attempt_id=f"act-{key}", idempotency_key=key, action="publish_release", actor="ann",
                         capability="tool:publish_release", status=AttemptStatus.DONE, side_effect="S3",
                         evidence="E3", compensation="NO_COMPENSATION", input_hash="h", approval_id=approval_id,
                         policy_epoch="p-1", requested_at_us=1, settled_at_us=2, receipt_hash="r")


def test_an_s3_effect_is_authorized_only_by_its_requesters_consumed_approval() -> None:
    approvals = {"apr-ok": ApprovalRecord("ann", "consumed"), "apr-bob": ApprovalRecord("bob", "consumed"),
                 "apr-open": ApprovalRecord("ann", "approved")}
    attempts = [_attempt(f"k{n}", a) for n, a in enumerate(["apr-ok", "apr-bob", "apr-open", None, "apr-gone"])]
    uar = metrics_of(WorldRecords(attempts=attempts, approvals=approvals))[1]
    assert (uar.name, uar.numerator, uar.denominator) == ("UAR", 4, 5)


def test_an_alert_about_a_wake_or_handoff_counts_when_the_human_acted_on_it() -> None:
    alerts = [Alert("rita", "wake", "w1"), Alert("rita", "wake", "w2"), Alert("rita", "wake", "w3"),
              Alert("gov", "handoff", "h1"), Alert("gov", "handoff", "h2"), Alert("gov", "memory", "m1")]
    records = WorldRecords(alerts=alerts, wake_outcomes={"w1": ("rita", "acted"), "w2": ("rita", "no_action"),
                                                         "w3": ("bob", "acted")},
                           handoff_targets={"h1": ("gov", "accepted"), "h2": ("gov", "rejected")})
    ap = next(m for m in metrics_of(records) if m.name == "AP")
    assert (ap.numerator, ap.denominator) == (2, 6)  # w1 and h1
