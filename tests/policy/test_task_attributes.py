"""A task's ``sensitivity`` and ``priority``: ``pmw tasks create --sensitivity N --priority N`` puts them in
the task's ``constraints`` (merged with ``--constraints``), and the real PDP receives them as the task's
resource attributes (``pmw policy explain`` shows what it was asked on and which rule decided). Reading a
task above one's clearance is denied as before, whatever its priority. No deployed rule reads ``priority``
yet, but a candidate rule can (``explain --dir``). Bad values (out of range, not an integer, a flag that
contradicts the JSON) are ``invalid_input`` through every transport (the CLI flags, the World, ``pmw
exec``), and nothing is written."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.cli.tasks import LEVEL_FLAGS
from engine.commands.tasks import TASK_LEVELS
from engine.errors import InvalidInput, PolicyDenied
from engine.policy import governance
from engine.policy.pdp_process import ManagedPdp
from tests.cli_support import GOVERNOR, POLICY_DIR, Pdp, Pmw, counts, require_cerbos

# A candidate rule (never deployed here): only governors claim a task of priority 8 or more.
HIGH_PRIORITY_RULE = """
    - name: high-priority-claim
      actions: ["claim"]
      effect: EFFECT_DENY
      roles: ["*"]
      condition:
        match:
          all:
            of:
              - expr: '!("governor" in P.roles)'
              - expr: R.attr.priority >= 8
"""


@pytest.fixture(scope="module")
def pmw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pmw]:
    """A world whose own PDP serves the repository's policies deployed beside it (so ``policy explain`` finds
    the set): ``gov``; ``alice`` (task.create, task.work; clearance 0); ``bob`` (task.work; clearance 1);
    ``carol`` (task.work; clearance 3)."""
    require_cerbos()
    tmp = tmp_path_factory.mktemp("task-attrs")
    deployment = governance.deploy(POLICY_DIR, tmp / "policy-deploys")
    managed = ManagedPdp(tmp / "policy-deploys" / "current")
    address = managed.start()
    cli = Pmw(f"sqlite:///{tmp / 'world.db'}", Pdp(address=address, deploy_root=tmp / "policy-deploys",
                                                  epoch=deployment.epoch))
    cli.init()
    cli.agents("alice", caps=("task.create", "task.work"))
    cli.agents("bob", caps=("task.work",), clearance=1)
    cli.agents("carol", caps=("task.work",), clearance=3)
    yield cli
    managed.stop()


def explain(pmw: Pmw, principal: str, task_id: str, action: str, *extra: str) -> dict[str, Any]:
    found: dict[str, Any] = pmw.js("policy", "explain", "--principal", principal, "task", task_id, action, *extra,
                                   actor=GOVERNOR)
    return found


def test_the_cli_and_the_model_share_the_ranges() -> None:
    assert {key: top for key, (_flag, top) in LEVEL_FLAGS.items()} == TASK_LEVELS == {"sensitivity": 5,
                                                                                     "priority": 9}


def test_the_flags_land_in_constraints_and_in_what_the_pdp_sees(pmw: Pmw) -> None:
    task = pmw.js("tasks", "create", "Secret plan", "--id", "t-flags", "--sensitivity", "3", "--priority", "7",
                  "--constraints", '{"words": 500}', actor="alice")
    assert task["constraints"] == {"words": 500, "sensitivity": 3, "priority": 7}
    assert pmw.js("tasks", "show", "t-flags", actor="carol")["constraints"] == task["constraints"]
    seen = explain(pmw, "carol", "t-flags", "read")
    assert (seen["resource_attr"]["sensitivity"], seen["resource_attr"]["priority"]) == (3, 7)
    assert (seen["allowed"], seen["rule"], seen["policy_set"]) == (True, "read", "deployed")
    # the same value given by flag and JSON is no conflict
    same = pmw.js("tasks", "create", "Same", "--id", "t-same", "--priority", "2", "--constraints",
                  '{"priority": 2}', actor="alice")
    assert same["constraints"] == {"priority": 2}
    # no flag: priority 0 (the attribute is always there for a task), sensitivity 0
    plain = pmw.js("tasks", "create", "Plain", "--id", "t-plain", actor="alice")
    assert plain["constraints"] == {}
    attrs = explain(pmw, "bob", "t-plain", "read")["resource_attr"]
    assert (attrs["priority"], attrs["sensitivity"]) == (0, 0)
    # and other kinds do not carry it
    assert "priority" not in pmw.js("policy", "explain", "--principal", "bob", "agent", "bob", "read",
                                    actor=GOVERNOR)["resource_attr"]


def test_sensitivity_above_clearance_is_denied_whatever_the_priority(pmw: Pmw) -> None:
    pmw.ok("tasks", "create", "Top secret", "--id", "t-high", "--sensitivity", "3", "--priority", "9",
           actor="alice")
    denied = explain(pmw, "bob", "t-high", "read")  # clearance 1 < 3
    assert (denied["allowed"], denied["rule"]) == (False, "clearance-floor")
    assert pmw.fails(6, "tasks", "show", "t-high", actor="bob")["code"] == "policy_denied"
    assert pmw.js("tasks", "show", "t-high", actor="carol")["constraints"] == {"sensitivity": 3, "priority": 9}
    # the owner itself is held to its clearance (0) too
    assert pmw.fails(6, "tasks", "show", "t-high", actor="alice")["code"] == "policy_denied"
    with pmw.world() as world, pytest.raises(PolicyDenied):
        world.get_task("t-high", actor="bob")


def test_a_rule_can_read_priority(pmw: Pmw, tmp_path: Path) -> None:
    """No deployed rule reads ``priority`` (the claim is allowed at any priority); a candidate rule that
    does decides on it, through the real PDP, without being deployed."""
    pmw.ok("tasks", "create", "Urgent", "--id", "t-urgent", "--priority", "9", actor="alice")
    pmw.ok("tasks", "create", "Routine", "--id", "t-routine", "--priority", "7", actor="alice")
    assert explain(pmw, "bob", "t-urgent", "claim")["allowed"] is True  # deployed: priority decides nothing
    candidate = tmp_path / "candidate"
    shutil.copytree(POLICY_DIR, candidate)
    task_policy = candidate / "resources" / "task.yaml"
    text = task_policy.read_text()
    anchor = "    # ---- guardrails: a DENY wins over every ALLOW above"
    assert anchor in text
    task_policy.write_text(text.replace(anchor, HIGH_PRIORITY_RULE.strip("\n") + "\n\n" + anchor, 1))
    urgent = explain(pmw, "bob", "t-urgent", "claim", "--dir", str(candidate))
    assert (urgent["allowed"], urgent["rule"], urgent["policy_set"]) == (False, "high-priority-claim", "candidate")
    routine = explain(pmw, "bob", "t-routine", "claim", "--dir", str(candidate))
    assert (routine["allowed"], routine["resource_attr"]["priority"]) == (True, 7)
    what_if = explain(pmw, "bob", "t-routine", "claim", "--dir", str(candidate), "--resource-attr",
                      '{"priority": 8}')
    assert (what_if["allowed"], what_if["rule"], what_if["what_if"]) == (False, "high-priority-claim",
                                                                         ["resource.priority"])
    assert explain(pmw, GOVERNOR, "t-urgent", "claim", "--dir", str(candidate))["allowed"] is True
    # still nothing deployed: bob claims the urgent task under the deployed set
    assert pmw.js("tasks", "claim", "t-urgent", actor="bob")["status"] == "claimed"


@pytest.mark.parametrize(("args", "field"), [
    (("--priority", "10"), "--priority"),
    (("--priority", "-1"), "--priority"),
    (("--sensitivity", "6"), "--sensitivity"),
    (("--sensitivity", "-1"), "--sensitivity"),
    (("--priority", "3", "--constraints", '{"priority": 4}'), "--priority"),
    (("--sensitivity", "1", "--constraints", '{"sensitivity": 0, "priority": 2}'), "--sensitivity"),
    (("--constraints", '{"priority": 10}'), "constraints.priority"),
    (("--constraints", '{"priority": "3"}'), "constraints.priority"),
    (("--constraints", '{"priority": 2.0}'), "constraints.priority"),
    (("--constraints", '{"priority": true}'), "constraints.priority"),
    (("--constraints", '{"priority": null}'), "constraints.priority"),
    (("--constraints", '{"sensitivity": 6}'), "constraints.sensitivity"),
    (("--priority", "3", "--constraints", '{"sensitivity": 9}'), "constraints.sensitivity"),
])
def test_bad_values_from_the_cli_are_refused_and_nothing_is_written(pmw: Pmw, args: tuple[str, ...],
                                                                    field: str) -> None:
    before = counts(pmw.db_url)
    error = pmw.fails(3, "tasks", "create", "Bad", "--id", "t-bad", *args, actor="alice")
    assert (error["code"], error["field"]) == ("invalid_input", field)
    assert counts(pmw.db_url) == before
    assert pmw.fails(4, "tasks", "show", "t-bad", actor=GOVERNOR)["code"] == "not_found"


P, S = "constraints.priority", "constraints.sensitivity"


@pytest.mark.parametrize(("constraints", "field", "exec_field"), [
    ({"priority": 10}, P, P),
    ({"priority": -1}, P, P),
    ({"priority": "7"}, P, P),
    ({"priority": False}, P, P),
    ({"priority": 2**70}, P, "--json"),  # pmw exec: the JSON boundary already refuses integers beyond 64 bits
    ({"priority": [1]}, P, P),
    ({"sensitivity": 5.5}, S, S),
    ({"sensitivity": 6, "priority": 1}, S, S),
])
def test_bad_values_through_the_world_and_exec_are_refused_and_nothing_is_written(
        pmw: Pmw, constraints: dict[str, Any], field: str, exec_field: str) -> None:
    before = counts(pmw.db_url)
    with pmw.world() as world, pytest.raises(InvalidInput) as raised:
        world.create_task("alice", "bad", task_id="t-bad-w", constraints=constraints)
    assert (raised.value.code, raised.value.field) == ("invalid_input", field)
    body = json.dumps({"goal": "bad", "task_id": "t-bad-w", "constraints": constraints})
    error = pmw.fails(3, "exec", "create_task", "--json", body, actor="alice")
    assert (error["code"], error["field"]) == ("invalid_input", exec_field)
    assert counts(pmw.db_url) == before


def test_every_level_in_range_is_accepted_through_the_world(pmw: Pmw) -> None:
    with pmw.world() as world:
        for level in range(10):
            task = world.create_task("alice", f"level {level}", task_id=f"t-level-{level}",
                                     constraints={"priority": level, "sensitivity": min(level, 5)})
            assert task.constraints == {"priority": level, "sensitivity": min(level, 5)}
    assert explain(pmw, "carol", "t-level-9", "read")["resource_attr"]["priority"] == 9
