"""Rule files: every error names the file, the line and the rule, and changes nothing."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from engine.controller import Controller, RuleFileError, load_rule_dir
from engine.controller.actions import ACTIONS, SuppressWake
from engine.controller.decisions import SuppressReason
from engine.controller.durable_host import Binding, DurableHost, RuleSet
from tests.controller.conftest import MakeController
from tests.controller.support import REPO_RULES, SECOND, T0, brief, copy_rules, handoff

GOOD_RULE = """\
version: 1
rules:
  - name: extra_rule
    when:
      ev: {kind: event, type: custom.thing}
    action: force_refresh
    params: {agent: ev.actor, reason: custom}
"""


def write(rule_dir: Path, text: str, name: str = "extra.yaml") -> Path:
    path = rule_dir / name
    path.write_text(textwrap.dedent(text))
    return path


def load_error(rule_dir: Path) -> RuleFileError:
    with pytest.raises(RuleFileError) as info:
        load_rule_dir(rule_dir)
    return info.value


def test_the_repository_rules_load() -> None:
    rules = load_rule_dir(REPO_RULES)
    files = {b.file.rpartition("/")[2] for b in rules.bindings.values()}
    assert files == {"conflicts.yaml", "epistemic_lease.yaml", "memory_review.yaml", "topology.yaml",
                     "wake_signals.yaml", "wake_storm.yaml", "wake_targeting.yaml"}
    assert rules.bindings["wake_storm/storm_depth"].line is not None


def test_yaml_syntax_error_names_file_and_line(rule_dir: Path) -> None:
    path = write(rule_dir, "version: 1\nrules:\n  - name: x\n    when: {ev: {kind: event}\n    action: y\n")
    err = load_error(rule_dir)
    assert (err.file, err.code) == (str(path), "rule_file_invalid")
    assert err.line == 5 and "YAML syntax error" in err.reason
    assert str(err).startswith(f"{path}:5: ")


def test_unknown_action_names_the_rule_and_line(rule_dir: Path) -> None:
    path = write(rule_dir, GOOD_RULE.replace("action: force_refresh", "action: wake_everyone"))
    err = load_error(rule_dir)
    assert (err.file, err.rule, err.line) == (str(path), "extra_rule", 6)
    assert err.reason.startswith("unknown action 'wake_everyone' (known: allow_wake, close_conflict_room")


@pytest.mark.parametrize(("old", "new", "line", "reason"), [
    ("type: custom.thing", "typ: custom.thing", 5, "fact kind 'event' has no field 'typ'"),
    ("ev: {kind: event, type: custom.thing}", "ev: {kind: evnt}", 5, "unknown fact kind 'evnt'"),
    ("ev: {kind: event, type: custom.thing}", "ev: {type: custom.thing}", 5, "every pattern needs a literal 'kind'"),
    ("type: custom.thing", "id: ev:1", 5, "field 'id' is reserved by durable_rules"),
    ("type: custom.thing", "type: {like: custom}", 5, "unknown operator 'like'"),
    ("type: custom.thing", "depth: {gte: $max_depth}", 5, "unknown constant '$max_depth'"),
    ("type: custom.thing", "actor: '@task.owner'", 5, "names unknown alias 'task'"),
    ("type: custom.thing", "payload.x: [1, 2]", 5, "expected a scalar value"),
    ("params: {agent: ev.actor, reason: custom}", "params: {agent: ev.actr, reason: custom}", 7,
     "fact kind 'event' has no field 'actr'"),
    ("params: {agent: ev.actor, reason: custom}", "params: {agent: ev.actor}", 7,
     "bad parameter for action 'force_refresh': missing field 'reason'"),
    ("params: {agent: ev.actor, reason: custom}", "params: {agent: ev.actor, reason: x, urgent: true}", 7,
     "unknown field 'urgent'"),
    ("    action: force_refresh", "    priorty: 3\n    action: force_refresh", 6, "unknown field 'priorty'"),
])
def test_bad_field_names_file_rule_and_line(rule_dir: Path, old: str, new: str, line: int, reason: str) -> None:
    assert old in GOOD_RULE
    path = write(rule_dir, GOOD_RULE.replace(old, new))
    err = load_error(rule_dir)
    assert (err.file, err.rule, err.line) == (str(path), "extra_rule", line)
    assert reason in err.reason


def test_alias_parameter_must_match_the_actions_fact_kind(rule_dir: Path) -> None:
    write(rule_dir, """\
        version: 1
        rules:
          - name: wrong_alias
            when:
              wake: {kind: event}
            action: allow_wake
            params: {cooldown_us: 1, budget_window_us: 1, dedupe_us: 1}
        """)
    err = load_error(rule_dir)
    assert err.rule == "wrong_alias"
    assert "needs alias 'wake' to match kind 'wake_candidate'; it matches 'event'" in err.reason


def test_reference_to_a_later_alias_is_an_error(rule_dir: Path) -> None:
    write(rule_dir, """\
        version: 1
        rules:
          - name: forward_ref
            when:
              ev: {kind: event, actor: "@task.owner"}
              task: {kind: task}
            action: force_refresh
            params: {agent: ev.actor, reason: x}
        """)
    assert "names unknown alias 'task' (known here: none)" in load_error(rule_dir).reason


def test_rule_names_are_unique_across_files(rule_dir: Path) -> None:
    path = write(rule_dir, GOOD_RULE.replace("extra_rule", "storm_depth"), name="zz_dup.yaml")
    err = load_error(rule_dir)
    assert (err.file, err.rule) == (str(path), "storm_depth")
    assert "already defined in" in err.reason and "wake_storm.yaml" in err.reason


def test_duplicate_yaml_keys_are_errors(rule_dir: Path) -> None:
    write(rule_dir, GOOD_RULE.replace("    action: force_refresh", "    action: force_refresh\n    action: x"))
    err = load_error(rule_dir)
    assert (err.line, err.reason) == (7, "duplicate key 'action'")


def test_wrong_version_and_empty_files_are_errors(rule_dir: Path) -> None:
    write(rule_dir, GOOD_RULE.replace("version: 1", "version: 2"))
    assert "version" in load_error(rule_dir).reason
    write(rule_dir, "")
    assert load_error(rule_dir).reason == "the file is empty"


def test_a_directory_without_rule_files_is_an_error(tmp_path: Path) -> None:
    assert load_error(tmp_path).reason == "no rule files (*.yaml) in this directory"


def test_a_rule_durable_rules_cannot_compile_is_blamed_by_name(tmp_path: Path) -> None:
    bad = {"all": [{"m": {"$lt": 5}}], "pri": 0, "run": "f/bad"}  # durable_rules: error code 102
    good = {"all": [{"m": {"kind": "event"}}], "pri": 0, "run": "f/good"}
    params = SuppressWake(reason=SuppressReason.TTL)
    spec = ACTIONS["suppress_wake"]
    bindings = {name: Binding(name, spec.name, spec.handler, params, "f.yaml", 3) for name in ("f/good", "f/bad")}
    with pytest.raises(RuleFileError) as info:
        DurableHost(RuleSet("pmw", {"f/good": good, "f/bad": bad}, bindings))
    assert (info.value.file, info.value.rule, info.value.line) == ("f.yaml", "bad", 3)
    assert "durable_rules cannot compile the rule" in info.value.reason


@pytest.mark.parametrize("breakage", [
    "version: 1\nrules: [\n",  # syntax
    GOOD_RULE.replace("action: force_refresh", "action: nope"),  # unknown action
    GOOD_RULE.replace("type: custom.thing", "typo: custom.thing"),  # bad field
])
def test_a_bad_rule_file_leaves_the_previous_rules_in_force(make_controller: MakeController, rule_dir: Path,
                                                           breakage: str) -> None:
    ctl = make_controller()
    before = ctl.rules
    host = ctl._host
    assert brief(ctl.observe(handoff(1, "A", "B"))) == [("wake", "B")]
    write(rule_dir, breakage)
    with pytest.raises(RuleFileError):
        ctl.reload()
    assert ctl.rules is before and ctl._host is host
    assert brief(ctl.observe(handoff(2, "A", "B", chain="ch2"))) == [("defer", "B", str(T0 + 3 * SECOND))]


def test_a_controller_that_never_loaded_reports_it(tmp_path: Path) -> None:
    ctl = Controller("w1", copy_rules(tmp_path / "r"))
    with pytest.raises(Exception, match="has no rules loaded"):
        ctl.observe(handoff(1, "A", "B"))
