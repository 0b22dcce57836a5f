"""``benchmarks.controller_batch``: a log batch posted to the controller together.

- ``observe_batch`` == ``observe_step`` one at a time, on random logs over the shipped rules (handoffs, task
  updates that move owners, subscribed state changes, room messages, claims, risky calls, subscriptions
  dropped; time gaps across the cooldown, budget window and TTL so facts expire; random batch cuts): the
  same steps (decisions in order with their indexes, every field; fact changes), the same facts and the same
  position afterwards.
- ``post_together`` (durable_rules' own batch) is NOT one at a time: a task's new owner, upserted by a later
  event of the batch, is woken by an earlier event; the same comparison that passes for ``observe_batch``
  catches it (so the property above can fail).
- Bad input anywhere in a batch (a malformed event, a bad fact, a position out of order) raises the typed
  error and observes nothing, for both entry points.
- An event that fails mid-batch (a fact id colliding with a live one) ends ``observe_batch`` with the steps
  before it and the error; the controller then stands where one at a time would.
- ``benchmarks/controller_bench.py --ci`` runs, prints the four contenders, and its JSON says
  ``observe_batch`` was exactly one at a time in both scenarios.
"""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.controller_batch import observe_batch, post_together
from engine.controller import Controller, FactIdCollision, Observation, StaleEvent, Step, Suppress
from engine.errors import InvalidInput
from tests.controller.support import SECOND, T0, colliding_id, copy_rules, event, handoff, set_constants

REPO = Path(__file__).resolve().parents[1]
AGENTS = "ABCDE"
SMALL = {"max_depth": 3, "ttl_us": 30 * SECOND, "cooldown_us": 2 * SECOND, "budget": 3,
         "budget_window_us": 20 * SECOND}
WORLD_FACTS: list[dict[str, Any]] = [
    {"id": "task:t1", "kind": "task", "key": "t1", "owner": "A", "status": "open"},
    {"id": "task:t2", "kind": "task", "key": "t2", "owner": "B", "status": "open"},
    {"id": "sub:s1:B", "kind": "subscription", "key": "s1", "agent": "B"},
    {"id": "sub:s1:C", "kind": "subscription", "key": "s1", "agent": "C"},
    {"id": "sub:t1:D", "kind": "subscription", "key": "t1", "agent": "D"},
    {"id": "member:r1:A", "kind": "member", "key": "r1", "agent": "A"},
    {"id": "member:r1:C", "kind": "member", "key": "r1", "agent": "C"},
    {"id": "member:r1:E", "kind": "member", "key": "r1", "agent": "E"},
    {"id": "room:r1", "kind": "room", "key": "r1", "status": "open", "topic": "t"},
    {"id": "claim:k:A", "kind": "claim", "key": "k", "agent": "A", "value": -1, "claim": "st_0"},
    {"id": "context:A", "kind": "context", "key": "A", "agent": "A", "valid_until": T0 + 40 * SECOND},
    {"id": "reviewer:R", "kind": "reviewer", "key": "R", "agent": "R", "scope": "memory"},
]


def steps_of(steps: list[Step] | tuple[Step, ...]) -> list[tuple[Any, ...]]:
    """Every field of every step: decisions in order (with indexes), fact changes in order."""
    return [(s.world, s.position, [d.model_dump(mode="json") for d in s.decisions],
             list(s.changes.upserted), list(s.changes.retracted)) for s in steps]


def facts_of(ctl: Controller) -> list[dict[str, Any]]:
    return sorted(ctl.facts(), key=lambda f: f["id"])


def log_from(ops: list[tuple[Any, ...]]) -> list[Observation]:
    """The observations for drawn operations (kind, actor, other agent, chain, depth, gap). Chain ``c1``
    began at the start of the log (it goes stale after the TTL); the others begin at each event."""
    out: list[Observation] = []
    now = T0
    for seq, (kind, actor, other, chain, depth, gap) in enumerate(ops, start=1):
        now += gap
        common: dict[str, Any] = {"chain": chain, "depth": depth, "now": now, "origin": T0 if chain == "c1" else None}
        if kind == "handoff":
            out.append(Observation(handoff(seq, actor, other, **common)))
        elif kind == "task":  # the task's owner moves to `other`, in the same step as the event
            task = {"id": "task:t1", "kind": "task", "key": "t1", "owner": other, "status": "active"}
            out.append(Observation(event(seq, actor, event_type="task.updated", subject="t1", subject_kind="task",
                                         payload={"status": "active"}, **common), upserts=(task,)))
        elif kind == "state":
            out.append(Observation(event(seq, actor, subject="s1", payload={"relevance": 0.5}, **common)))
        elif kind == "room":
            out.append(Observation(event(seq, actor, event_type="room.message", subject="r1", subject_kind="room",
                                         payload={"text": "hi"}, **common)))
        elif kind == "claim":
            out.append(Observation(event(seq, actor, event_type="claim.asserted", subject="k",
                                         payload={"term": "k", "value": seq, "claim": f"st_{seq}"}, now=now)))
        elif kind == "risky":
            out.append(Observation(event(seq, actor, event_type="capability.invoked",
                                         payload={"risk": "high"}, **common)))
        else:  # a subscriber leaves, or comes back
            sub = {"id": f"sub:s1:{other}", "kind": "subscription", "key": "s1", "agent": other}
            ev = event(seq, actor, event_type="subscription.changed", subject="s1", payload={}, **common)
            out.append(Observation(ev, retracts=(sub["id"],)) if seq % 2 else Observation(ev, upserts=(sub,)))
    return out


def run_one_at_a_time(ctl: Controller, log: list[Observation]) -> list[Step]:
    return [ctl.observe_step(o.event, upserts=o.upserts, retracts=o.retracts) for o in log]


def run_batched(ctl: Controller, log: list[Observation], cuts: list[int]) -> list[Step]:
    steps: list[Step] = []
    bounds = sorted({0, len(log), *(c % (len(log) + 1) for c in cuts)})
    for a, b in itertools.pairwise(bounds):
        result = observe_batch(ctl, log[a:b])
        assert result.error is None, result.error
        assert [s.position for s in result.steps] == [o.event["seq"] for o in log[a:b]]
        steps.extend(result.steps)
    return steps


ops = st.lists(st.tuples(
    st.sampled_from(["handoff", "handoff", "task", "state", "room", "claim", "risky", "subscription"]),
    st.sampled_from(AGENTS), st.sampled_from(AGENTS), st.sampled_from(["c1", "c2", "c3", "c4", "c5"]),
    st.integers(0, 4),
    st.sampled_from([0, SECOND // 2, SECOND, 3 * SECOND, 25 * SECOND]),
), min_size=1, max_size=40)


@pytest.fixture(scope="module")
def small_rules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rules = copy_rules(tmp_path_factory.mktemp("rules"))
    set_constants(rules, "wake_storm", **SMALL)
    return rules


def loaded(rules: Path, facts: list[dict[str, Any]] = WORLD_FACTS) -> Controller:
    ctl = Controller("w1", rules)
    ctl.load()
    ctl.rebuild(facts)
    return ctl


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=ops, cuts=st.lists(st.integers(0, 40), max_size=6))
def test_observe_batch_is_one_at_a_time_on_random_logs(small_rules: Path, drawn: list[tuple[Any, ...]],
                                                      cuts: list[int]) -> None:
    log = log_from(drawn)
    one, batched = loaded(small_rules), loaded(small_rules)
    try:
        expected = run_one_at_a_time(one, log)
        got = run_batched(batched, log, cuts)
        assert steps_of(got) == steps_of(expected)
        assert facts_of(batched) == facts_of(one)
        assert batched.position == one.position == log[-1].event["seq"]
    finally:
        one.close()
        batched.close()


def test_the_random_logs_reach_every_ladder_guard(small_rules: Path) -> None:
    """The property above is not vacuous: a log its strategy can draw wakes, suppresses by TTL, depth, dedupe
    and budget, forces a refresh, expires facts and changes world facts, batched across cuts."""
    drawn: list[tuple[Any, ...]] = [
        ("handoff", "A", "B", "c2", 0, 0), ("handoff", "A", "B", "c2", 0, SECOND),  # wake B, then dedupe
        ("handoff", "C", "B", "c3", 0, SECOND // 2),  # inside B's cooldown
        ("handoff", "C", "B", "c4", 0, 3 * SECOND), ("handoff", "D", "B", "c5", 0, 3 * SECOND),
        ("handoff", "E", "B", "c1", 0, 3 * SECOND),  # B's budget of 3 is spent
        ("handoff", "A", "C", "c1", 0, 25 * SECOND),  # c1 began 35.5 s ago: stale
        ("handoff", "A", "D", "c2", 3, 0),  # too deep
        ("risky", "B", "A", "c3", 0, SECOND), ("task", "B", "C", "c4", 0, SECOND), ("state", "A", "B", "c5", 0, 0),
        ("subscription", "A", "B", "c2", 0, 3 * SECOND), ("room", "C", "A", "c3", 0, 25 * SECOND),
        ("claim", "B", "A", "c2", 0, 0),
    ]
    ctl = loaded(small_rules)
    try:
        steps = run_batched(ctl, log_from(drawn), [2, 5, 6, 11])
    finally:
        ctl.close()
    kinds = {d.kind for s in steps for d in s.decisions}
    reasons = {d.reason.value for s in steps for d in s.decisions if isinstance(d, Suppress)}
    assert {"wake", "suppress", "force_refresh"} <= kinds
    assert reasons >= {"ttl", "depth", "dedupe", "budget"}
    assert any(s.changes.retracted for s in steps) and any(s.changes.upserted for s in steps)


def test_the_engine_batch_is_not_one_at_a_time(small_rules: Path) -> None:
    """durable_rules' batch applies the whole batch's world-fact changes before any event fires: the update
    of event 2 (t1 now owned by C) is seen by event 1, which wakes C instead of t1's owner A."""
    log = [Observation(event(1, "B", event_type="task.updated", subject="t1", subject_kind="task", chain="x")),
           Observation(event(2, "B", event_type="task.updated", subject="t1", subject_kind="task", chain="y"),
                       upserts=({"id": "task:t1", "kind": "task", "key": "t1", "owner": "C", "status": "open"},))]
    one, together, batched = loaded(small_rules), loaded(small_rules), loaded(small_rules)
    try:
        expected = run_one_at_a_time(one, log)
        engine = post_together(together, log).steps
        exact = observe_batch(batched, log).steps
    finally:
        for ctl in (one, together, batched):
            ctl.close()
    woken = [[getattr(d, "agent", None) for d in s.decisions if d.kind == "wake"] for s in expected]
    assert woken[0][:1] == ["A"] or "A" in woken[0]
    assert "C" not in woken[0]
    assert "C" in [getattr(d, "agent", None) for d in engine[0].decisions]
    assert steps_of(engine) != steps_of(expected)
    assert steps_of(exact) == steps_of(expected)


@pytest.mark.parametrize("entry", [observe_batch, post_together], ids=["observe_batch", "post_together"])
@pytest.mark.parametrize("bad", ["event", "fact", "order", "stale"])
def test_bad_input_anywhere_observes_nothing(small_rules: Path, entry: Any, bad: str) -> None:
    ctl = loaded(small_rules)
    try:
        ctl.observe_step(handoff(1, "A", "B"))
        before, position = facts_of(ctl), ctl.position
        log = [Observation(handoff(2, "A", "C")), Observation(handoff(3, "B", "D")), Observation(handoff(4, "C", "E"))]
        if bad == "event":
            log[2] = Observation({**log[2].event, "actor_id": "not an id!"})
            error: type[Exception] = InvalidInput
        elif bad == "fact":
            log[2] = Observation(log[2].event, upserts=({"id": "task:t9", "kind": "task"},))  # no key
            error = InvalidInput
        elif bad == "order":
            log[1], log[2] = log[2], log[1]
            error = StaleEvent
        else:
            log[0] = Observation(handoff(1, "A", "C"))
            error = StaleEvent
        with pytest.raises(error):
            entry(ctl, log)
        assert ctl.position == position
        assert facts_of(ctl) == before
        assert observe_batch(ctl, [Observation(handoff(5, "D", "A"))]).error is None  # still usable
    finally:
        ctl.close()


def test_a_failure_mid_batch_returns_the_steps_before_it(small_rules: Path) -> None:
    clash = {"id": colliding_id("sub:s1:B", "sub:"), "kind": "subscription", "key": "s9", "agent": "E"}
    log = [Observation(handoff(1, "A", "B")), Observation(event(2, "C", subject="s1")),
           Observation(event(3, "D", subject="s1"), upserts=(clash,)), Observation(handoff(4, "A", "C"))]
    one, batched = loaded(small_rules), loaded(small_rules)
    try:
        expected = run_one_at_a_time(one, log[:2])
        with pytest.raises(FactIdCollision):
            one.observe_step(log[2].event, upserts=log[2].upserts)
        result = observe_batch(batched, log)
        assert isinstance(result.error, FactIdCollision)
        assert steps_of(result.steps) == steps_of(expected)
        assert batched.position == one.position == 2
        assert facts_of(batched) == facts_of(one)
        rest = observe_batch(batched, log[3:])
        assert rest.error is None
        assert steps_of(rest.steps) == steps_of([one.observe_step(log[3].event)])
    finally:
        one.close()
        batched.close()


def test_ci_sized_benchmark_prints_the_contenders_and_observe_batch_is_exact(tmp_path: Path) -> None:
    out = tmp_path / "controller.json"
    done = subprocess.run([sys.executable, "-m", "benchmarks.controller_bench", "--ci", "--json", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    figures = json.loads(out.read_text())
    for scenario in ("ladder", "full"):
        sc = figures[scenario]
        assert sc["batched"]["identical"] is True, sc["batched"]["first_difference"]
        assert sc["batch_size"] == 64 and sc["events"] == 300
        for name in ("controller", "batched", "engine_batch", "plain"):
            assert math.isfinite(sc[name]["cpu_rate"]) and sc[name]["cpu_rate"] > 0
        assert isinstance(sc["engine_batch"]["identical"], bool)
    # exit 1 exactly when the one-at-a-time controller and the plain baseline disagree somewhere
    agree = all(figures[s]["same_decisions"] for s in ("ladder", "full"))
    assert done.returncode == (0 if agree else 1), done.stderr[-3000:]
    for label in ("one at a time: decisions/s", "batched (observe_batch): decisions/s",
                  "engine batch (post_together): decisions/s", "plain: decisions/s",
                  "batched (observe_batch) == one at a time"):
        assert label in done.stdout
