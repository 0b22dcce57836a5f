"""Shadow mode: a changed rule set over recorded events, reporting what would be decided differently."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.controller import Observation, RuleFileError, Suppress, WakeTarget, format_diffs
from tests.controller.conftest import MakeController
from tests.controller.support import SECOND, T0, copy_rules, handoff, set_constants

STORM = [handoff(1, "A", "B", depth=0, now=T0), handoff(2, "B", "C", depth=1, now=T0 + SECOND),
         handoff(3, "C", "A", depth=2, now=T0 + 2 * SECOND), handoff(4, "A", "B", depth=3, now=T0 + 3 * SECOND)]


def test_shadow_reports_the_decisions_that_would_differ(make_controller: MakeController, tmp_path: Path) -> None:
    ctl = make_controller()
    candidate = copy_rules(tmp_path / "candidate")
    set_constants(candidate, "wake_storm", max_depth=2)
    diff, detail_only = ctl.shadow(STORM, candidate)
    assert (diff.position, diff.event_type) == (3, "handoff.created")
    assert detail_only.position == 4  # suppressed by both, but the receipt's reason would read differently
    assert [d.detail for d in detail_only.only_current + detail_only.only_candidate] == [  # type: ignore[union-attr]
        "cascade depth 3 reached the limit of 3", "cascade depth 3 reached the limit of 2"]
    [(current)] = diff.only_current
    [(proposed)] = diff.only_candidate
    assert isinstance(current, WakeTarget) and current.agent == "A"
    assert isinstance(proposed, Suppress) and proposed.detail == "cascade depth 2 reached the limit of 2"
    text = format_diffs([diff])
    assert text.splitlines() == [
        "@3 handoff.created",
        "  - wake A (handoff_target, depth 2, chain ch1)  [wake_storm/allow_new_window]",
        "  + suppress wake of A: depth (cascade depth 2 reached the limit of 2)  [wake_storm/storm_depth]",
    ]


def test_shadow_commits_nothing(make_controller: MakeController, tmp_path: Path) -> None:
    ctl = make_controller()
    ctl.observe(handoff(1, "X", "Y", chain="live", now=T0))
    host, facts, position = ctl._host, ctl.facts(), ctl.position
    candidate = copy_rules(tmp_path / "candidate")
    set_constants(candidate, "wake_storm", cooldown_us=0)
    ctl.shadow([handoff(1, "A", "B", now=T0), handoff(2, "D", "B", chain="c2", now=T0 + SECOND)], candidate)
    assert (ctl._host, ctl.facts(), ctl.position) == (host, facts, position)


def test_identical_rules_have_no_differences(make_controller: MakeController, rule_dir: Path) -> None:
    ctl = make_controller()
    assert ctl.shadow(STORM, rule_dir) == []
    assert format_diffs([]) == "no decision differs"


def test_a_renamed_rule_deciding_the_same_is_no_difference(make_controller: MakeController, tmp_path: Path) -> None:
    ctl = make_controller()
    candidate = copy_rules(tmp_path / "candidate")
    path = candidate / "wake_storm.yaml"
    path.write_text(path.read_text().replace("name: storm_depth", "name: cascade_too_deep"))
    assert ctl.shadow(STORM, candidate) == []


def test_shadow_replays_world_fact_changes_and_starting_facts(make_controller: MakeController,
                                                             tmp_path: Path) -> None:
    ctl = make_controller()
    candidate = copy_rules(tmp_path / "candidate")
    path = candidate / "wake_targeting.yaml"
    path.write_text(path.read_text().replace("cause: task_owner", "cause: owner_of_task"))
    task = {"id": "task:t1", "kind": "task", "key": "t1", "owner": "B"}
    ev = {**handoff(1, "A", "Z"), "event_type": "task.assign", "subject_kind": "task", "subject_id": "t1"}
    [diff] = ctl.shadow([Observation(ev, upserts=[task])], candidate)
    [ours], [theirs] = diff.only_current, diff.only_candidate
    assert isinstance(ours, WakeTarget) and isinstance(theirs, WakeTarget)
    assert (ours.cause, theirs.cause) == ("task_owner", "owner_of_task")
    assert len(ctl.shadow([ev], candidate, facts=[task])) == 1


def test_shadow_with_broken_candidate_rules_raises(make_controller: MakeController, tmp_path: Path) -> None:
    ctl = make_controller()
    candidate = copy_rules(tmp_path / "candidate")
    (candidate / "bad.yaml").write_text("version: 1\nrules: []\n")
    with pytest.raises(RuleFileError, match=r"bad\.yaml"):
        ctl.shadow(STORM, candidate)
