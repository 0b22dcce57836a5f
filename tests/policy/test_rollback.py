"""Rolling back a policy change is an ordinary reload: A -> B -> A re-activates A, with its history."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine.runtime import Runtime, probe_epoch
from tests.conftest import REPO, add_agent

EXTRA_RULE = """
    # A governance change of this test: nobody may write the key "frozen".
    - name: frozen-key
      actions: ["write"]
      effect: EFFECT_DENY
      roles: ["*"]
      condition:
        match:
          expr: R.id == "frozen"
"""


def _set_b(tmp_path: Path) -> Path:
    b = tmp_path / "policies-b"
    shutil.copytree(REPO / "policies", b)
    policy = b / "resources" / "state.yaml"
    text = policy.read_text()
    marker = "    # ---- guardrails"
    assert marker in text
    policy.write_text(text.replace(marker, EXTRA_RULE + marker, 1))
    return b


def test_a_rollback_reactivates_the_old_epoch_and_keeps_the_history(runtime: Runtime, tmp_path: Path) -> None:
    world, book = runtime.world, runtime.book
    add_agent(world, "alice", ["state.write"])
    a_dir = runtime.settings.policy_dir
    epoch_a = probe_epoch(runtime.pdp)
    world.compare_and_set_state("alice", "frozen", 0, {"v": 1})

    to_b = runtime.reload_policies(_set_b(tmp_path))
    assert (to_b.previous_epoch, to_b.epoch != epoch_a) == (epoch_a, True)
    with pytest.raises(Exception, match="denied"):  # B's first decision is B's
        world.compare_and_set_state("alice", "frozen", 1, {"v": 2})

    back = runtime.reload_policies(a_dir)  # the set deployed first, deployed again
    assert (back.previous_epoch, back.epoch) == (to_b.epoch, epoch_a)
    assert probe_epoch(runtime.pdp) == book.current_policy_epoch().epoch == epoch_a  # type: ignore[union-attr]
    entry = world.compare_and_set_state("alice", "frozen", 1, {"v": 2})  # A allows it again
    assert entry.version == 2
    assert world.events(actor="gov", limit=1, newest=True)[0].policy_epoch == epoch_a

    history = book.policy_history()
    assert [(h.ordinal, h.epoch) for h in history] == [(1, epoch_a), (2, to_b.epoch), (3, epoch_a)]
    assert book.rebuild_state(from_snapshot=False) == book.state_image()  # activations fold like any write

