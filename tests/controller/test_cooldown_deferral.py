"""The cooldown defers a wake instead of dropping it: to the cooldown's end, once per cooldown (later candidates
join the deferred wake), bounded in a row, counted against the budget once; the other guards unchanged."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from engine.controller import DeferWake, RuleFileError, Suppress, SuppressReason, load_rule_dir
from tests.controller.conftest import MakeController
from tests.controller.support import SECOND, T0, brief, handoff, set_constants


def test_a_candidate_inside_the_cooldown_is_deferred_to_its_end(make_controller: MakeController) -> None:
    ctl = make_controller()
    ctl.observe(handoff(1, "A", "B", chain="c1", now=T0))
    step = ctl.observe_step(handoff(2, "D", "B", chain="c2", depth=1, now=T0 + SECOND // 2, origin=T0 - 7))
    [d] = step.decisions
    assert isinstance(d, DeferWake)
    assert (d.agent, d.cause, d.chain, d.depth, d.origin_us, d.source) == ("B", "handoff_target", "c2", 1, T0 - 7, "D")
    assert (d.reason, d.not_before_us, d.deferrals, d.joins) == (SuppressReason.COOLDOWN, T0 + 2 * SECOND, 1, None)
    assert d.detail == f"deferred by cooldown until {T0 + 2 * SECOND}"
    assert (d.idempotency_key, d.rule) == ("ctl:w1:2:B", "wake_storm/storm_cooldown")
    facts = {f["id"]: f for f in step.changes.upserted}
    assert set(facts) == {"woken:c2:B", "cooldown:B", "budget:B"}
    # the cooldown now follows the deferred wake: it runs at T0+2s, the agent cools down until T0+4s
    cool = facts["cooldown:B"]
    assert (cool["until"], cool["wake_at"], cool["deferrals"], cool["wake_key"]) == (
        T0 + 4 * SECOND, T0 + 2 * SECOND, 1, "ctl:w1:2:B")
    assert facts["budget:B"]["used"] == 2  # the direct wake and the deferred one


def test_two_candidates_inside_one_cooldown_make_one_deferred_wake(make_controller: MakeController) -> None:
    ctl = make_controller()
    ctl.observe(handoff(1, "A", "B", chain="c1", now=T0))
    [first] = ctl.observe(handoff(2, "D", "B", chain="c2", now=T0 + SECOND // 2))
    step = ctl.observe_step(handoff(3, "E", "B", chain="c3", now=T0 + SECOND))
    [second] = step.decisions
    assert isinstance(first, DeferWake) and isinstance(second, DeferWake)
    assert first.joins is None and second.joins == first.idempotency_key
    assert second.not_before_us == first.not_before_us == T0 + 2 * SECOND
    assert second.detail == f"joins the wake of B deferred by cooldown until {T0 + 2 * SECOND}"
    assert second.rule == "wake_storm/storm_cooldown_join"
    # joining spends no budget and leaves the cooldown as the deferral set it; the chain counts as served
    assert [f["id"] for f in step.changes.upserted] == ["woken:c3:B"]
    facts = {f["id"]: f for f in ctl.facts()}
    assert facts["budget:B"]["used"] == 2
    assert brief(ctl.observe(handoff(4, "F", "B", chain="c3", now=T0 + SECOND + 1))) == [("suppress", "B", "dedupe")]


def test_deferrals_in_a_row_are_bounded_then_suppressed_with_reason_cooldown(make_controller: MakeController,
                                                                           rule_dir: Path) -> None:
    set_constants(rule_dir, "wake_storm", max_deferrals=2)
    ctl = make_controller()
    half = SECOND // 2
    decided = [brief(ctl.observe(handoff(seq, "A", "B", chain=f"c{seq}", now=now))) for seq, now in enumerate([
        T0,                      # woken: cools down until T0+2s
        T0 + half,               # deferred to T0+2s (1 in a row); cools down until T0+4s
        T0 + 2 * SECOND + half,  # the deferred wake ran: deferred to T0+4s (2 in a row); until T0+6s
        T0 + 4 * SECOND + half,  # a third in a row: suppressed
        T0 + 6 * SECOND,         # the cooldown lapsed: woken directly, the count starts again
        T0 + 6 * SECOND + half,  # deferred to T0+8s (1 in a row)
    ], start=1)]
    assert decided == [[("wake", "B")], [("defer", "B", str(T0 + 2 * SECOND))], [("defer", "B", str(T0 + 4 * SECOND))],
                       [("suppress", "B", "cooldown")], [("wake", "B")], [("defer", "B", str(T0 + 8 * SECOND))]]
    [stop] = ctl.observe(handoff(7, "A", "B", chain="c7", now=T0 + 6 * SECOND + 2 * half))
    assert isinstance(stop, DeferWake) and stop.joins == "ctl:w1:6:B"  # a pending deferred wake is always joined


def test_the_limit_message_names_the_cooldown_and_the_count(make_controller: MakeController, rule_dir: Path) -> None:
    set_constants(rule_dir, "wake_storm", max_deferrals=1)
    ctl = make_controller()
    ctl.observe(handoff(1, "A", "B", chain="c1", now=T0))
    ctl.observe(handoff(2, "A", "B", chain="c2", now=T0 + 1))
    [stop] = ctl.observe(handoff(3, "A", "B", chain="c3", now=T0 + 3 * SECOND))
    assert isinstance(stop, Suppress) and stop.reason is SuppressReason.COOLDOWN
    assert stop.detail == f"B cools down until {T0 + 4 * SECOND} after 1 deferred wakes in a row (the limit is 1)"
    assert stop.rule == "wake_storm/storm_cooldown"


def test_the_other_guards_still_suppress_inside_a_cooldown(make_controller: MakeController, rule_dir: Path) -> None:
    set_constants(rule_dir, "wake_storm", budget=2)
    ctl = make_controller()
    ctl.observe(handoff(1, "A", "B", chain="c1", now=T0))
    now = T0 + SECOND // 2
    assert brief(ctl.observe(handoff(2, "A", "B", chain="c2", now=now, origin=now - 601 * SECOND))) == [
        ("suppress", "B", "ttl")]
    assert brief(ctl.observe(handoff(3, "A", "B", chain="c3", depth=3, now=now))) == [("suppress", "B", "depth")]
    assert brief(ctl.observe(handoff(4, "A", "B", chain="c1", now=now))) == [("suppress", "B", "dedupe")]
    assert brief(ctl.observe(handoff(5, "A", "B", chain="c5", now=now))) == [("defer", "B", str(T0 + 2 * SECOND))]
    # the budget (2) is spent by the direct and the deferred wake: after that wake ran, a candidate inside
    # the next cooldown is stopped by the budget too, so it is not deferred
    [over] = ctl.observe(handoff(6, "A", "B", chain="c6", now=T0 + 3 * SECOND))
    assert isinstance(over, Suppress) and over.reason is SuppressReason.BUDGET


def test_no_cooldown_means_nothing_is_deferred(make_controller: MakeController, rule_dir: Path) -> None:
    set_constants(rule_dir, "wake_storm", cooldown_us=0)
    ctl = make_controller()
    assert brief(ctl.observe(handoff(1, "A", "B", chain="c1", now=T0))) == [("wake", "B")]
    assert brief(ctl.observe(handoff(2, "A", "B", chain="c2", now=T0 + 1))) == [("wake", "B")]


def test_a_controller_rebuilt_from_the_stored_facts_decides_as_the_one_that_followed(
        make_controller: MakeController) -> None:
    first = make_controller()
    for seq, now in enumerate([T0, T0 + 1, T0 + 2], start=1):
        first.observe(handoff(seq, "A", "B", chain=f"c{seq}", now=now))
    second = make_controller()
    second.rebuild(first.facts(), position=first.position)  # what SQL holds: the facts as committed
    assert sorted(second.facts(), key=lambda f: f["id"]) == sorted(first.facts(), key=lambda f: f["id"])
    nxt = [handoff(4, "D", "B", chain="c4", now=T0 + SECOND), handoff(5, "D", "B", chain="c5", now=T0 + 3 * SECOND)]
    for ev in nxt:
        assert first.observe(ev) == second.observe(ev)
    assert [d.kind for d in first.observe(handoff(6, "D", "C", chain="c6", now=T0 + 3 * SECOND))] == ["wake"]


def test_a_cooldown_fact_stored_before_deferrals_existed_still_reads(make_controller: MakeController) -> None:
    ctl = make_controller()
    ctl.rebuild([{"id": "cooldown:B", "kind": "cooldown", "key": "B", "agent": "B", "until": T0 + 5 * SECOND}])
    assert {k: v for k, v in ctl.facts()[0].items() if k in ("wake_at", "deferrals")} == {"wake_at": 0, "deferrals": 0}
    [d] = ctl.observe(handoff(1, "A", "B", now=T0))
    assert isinstance(d, DeferWake) and (d.not_before_us, d.deferrals, d.joins) == (T0 + 5 * SECOND, 1, None)


# -- the rule files -----------------------------------------------------------------------------------------------

DEFER_RULE = """\
    version: 1
    rules:
      - name: cool_down
        when:
          wake: {kind: wake_candidate}
          cool: {kind: cooldown, agent: "@wake.target"}
        action: defer_wake
        params: {max_deferrals: 2, cooldown_us: 1, budget_window_us: 1, dedupe_us: 1}
    """


def _error(rule_dir: Path, text: str) -> RuleFileError:
    path = rule_dir / "zz_defer.yaml"
    path.write_text(textwrap.dedent(text))
    with pytest.raises(RuleFileError) as info:
        load_rule_dir(rule_dir)
    assert info.value.file == str(path) and info.value.rule == "cool_down"
    return info.value


def test_a_good_deferral_rule_loads(rule_dir: Path) -> None:
    (rule_dir / "zz_defer.yaml").write_text(textwrap.dedent(DEFER_RULE))
    assert "zz_defer/cool_down" in load_rule_dir(rule_dir).bindings


@pytest.mark.parametrize(("old", "new", "reason"), [
    ("max_deferrals: 2", "max_deferrals: 0", "max_deferrals: Input should be greater than or equal to 1"),
    ("max_deferrals: 2, ", "", "missing field 'max_deferrals'"),
    ("cooldown_us: 1", "cooldown_us: -1", "cooldown_us: Input should be greater than or equal to 0"),
    ("dedupe_us: 1}", "dedupe_us: 1, extra: 1}", "unknown field 'extra'"),
    ("cool: {kind: cooldown", "cool: {kind: budget",
     "needs alias 'cool' to match kind 'cooldown'; it matches 'budget'"),
    ("max_deferrals: 2", "max_deferrals: 2, cooldown: chill", "names alias 'chill', which is not in 'when'"),
])
def test_bad_deferral_rules_are_refused_with_the_file_rule_and_reason(rule_dir: Path, old: str, new: str,
                                                                      reason: str) -> None:
    assert old in DEFER_RULE
    err = _error(rule_dir, DEFER_RULE.replace(old, new))
    assert reason in err.reason
    assert err.line is not None


def test_a_bad_max_deferrals_constant_in_the_shipped_file_is_refused(rule_dir: Path) -> None:
    set_constants(rule_dir, "wake_storm", max_deferrals=0)
    with pytest.raises(RuleFileError) as info:
        load_rule_dir(rule_dir)
    assert info.value.file.endswith("wake_storm.yaml") and info.value.rule == "storm_cooldown_join"
