"""A policy change (new epoch) through the runtime: validated, observed, and queued work re-decided."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import PolicyRejected
from engine.runtime import Runtime
from tests.conftest import add_agent

CONTRACTOR_RULES = """
    # Contractors may no longer take queued work (added by a governance change in this test).
    - name: no-contractors
      actions: ["{action}"]
      effect: EFFECT_DENY
      roles: ["*"]
      condition:
        match:
          expr: P.attr.role == "contractor"
"""


def _add_rule(policy: Path, action: str) -> None:
    text = policy.read_text()
    marker = "    # ---- guardrails"
    assert marker in text
    policy.write_text(text.replace(marker, CONTRACTOR_RULES.format(action=action) + marker, 1))


def test_a_new_epoch_revokes_queued_work_it_no_longer_allows(runtime: Runtime) -> None:
    world = runtime.world
    add_agent(world, "boss", ["wake.enqueue", "task.create", "task.work", "handoff.create"])
    add_agent(world, "kim", [], role="contractor")
    add_agent(world, "lee", [])
    for target in ("kim", "lee"):
        world.enqueue_wake("boss", target, "please look", f"k-{target}")
    task = world.create_task("boss", "x")
    world.claim_task("boss", task.task_id)
    handoff = world.create_handoff("boss", "kim", task.task_id, "yours")
    before = world.current_policy_epoch()
    source = runtime.settings.policy_dir
    _add_rule(source / "resources" / "wake.yaml", "claim")
    _add_rule(source / "resources" / "handoff.yaml", "accept")

    report = runtime.reload_policies()

    assert before is not None and report.previous_epoch == before.epoch != report.epoch
    assert world.current_policy_epoch().epoch == report.epoch  # type: ignore[union-attr]
    kim_wake = world.list_wakes(target_agent="kim", actor="gov")[0]
    assert report.revoked.wakes_revoked == [kim_wake.wake_id]
    assert report.revoked.handoffs_revoked == [handoff.handoff_id]
    receipt = world.receipt_for_wake(kim_wake.wake_id, actor="gov")
    assert (receipt.outcome.value, receipt.policy_epoch) == ("denied", report.epoch)
    assert world.get_handoff(handoff.handoff_id, actor="gov").status.value == "rejected"
    assert world.list_wakes(target_agent="lee", actor="gov")[0].status.value == "pending"
    assert report.revocation_seconds < 5


def test_a_broken_edit_is_refused_and_the_last_good_set_stays(runtime: Runtime) -> None:
    world = runtime.world
    add_agent(world, "boss", ["state.write"])
    before = world.current_policy_epoch()
    (runtime.settings.policy_dir / "resources" / "state.yaml").write_text("resourcePolicy: [broken")
    with pytest.raises(PolicyRejected):
        runtime.reload_policies()
    assert world.current_policy_epoch() == before
    assert world.compare_and_set_state("boss", "still", 0, "works").version == 1


def test_decisions_are_audited_to_a_local_file(runtime: Runtime) -> None:
    add_agent(runtime.world, "boss", ["state.write"])
    runtime.world.compare_and_set_state("boss", "k", 0, 1)
    log = runtime.settings.resolved_data_dir() / "audit" / "decisions.log"
    assert log.is_file() and '"decision"' in log.read_text()


def test_explain_names_the_derived_roles(runtime: Runtime) -> None:
    add_agent(runtime.world, "boss", ["task.create", "task.assign"])
    task = runtime.world.create_task("boss", "x")
    add_agent(runtime.world, "lee", [])
    why = runtime.explain("boss", "task", task.task_id, "assign")
    current = runtime.world.current_policy_epoch()
    assert current is not None
    assert (why.allowed, why.policy_epoch) == (True, current.epoch)
    assert "owner" in why.derived_roles
    refused = runtime.explain("lee", "task", task.task_id, "claim")  # lee holds no task.work
    assert not refused.allowed
    assert refused.principal_attr["capabilities"] == []
