"""One owned policy deployment on a running server whose worker processes wakes: reload A -> B -> A
(a rollback) while wakes flow. The server never exits, every committed write carries the epoch in force at
its commit, the first decision under B is B's, ``pmw policy history`` shows the three activations, and a
working-tree edit that nobody reloads changes nothing served."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.client.http import RemoteError, ServerClient
from tests.cli_support import POLICY_DIR
from tests.service.support import Served, wait_until

#: B: the same set, and one more guardrail: the agent ``relay`` may no longer write state.
FREEZE_RELAY = """
    - name: test-freeze-relay
      actions: ["write"]
      effect: EFFECT_DENY
      roles: ["*"]
      condition:
        match:
          expr: P.id == "relay"
"""


def policy_copy(root: Path, name: str, *, freeze: bool = False) -> Path:
    target = root / name
    shutil.copytree(POLICY_DIR, target)
    if freeze:
        state = target / "resources" / "state.yaml"
        state.write_text(state.read_text() + FREEZE_RELAY)
    return target


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("serve-policy")
    source = policy_copy(root, "policies-a")
    server = Served(root, serve_args=["--agent", "relay=tests.runloop.cli_agents:bob", "--poll-seconds", "0.1"],
                    env={"PMW_POLICY_DIR": str(source)})
    with server:
        yield server


def wake_and_receipt(boss: ServerClient, gov: ServerClient, n: int) -> Any:
    """Queue a wake for ``relay`` (as ``boss``) and wait for its receipt (bounded)."""
    wake = boss.call("world", "enqueue_wake", (), {"target_agent": "relay", "cause": "count",
                                                   "idempotency_key": f"k-{n}", "actor": "boss"}).wake
    found: list[Any] = []

    def receipted() -> bool:
        try:
            found.append(gov.call("world", "receipt_for_wake", (wake.wake_id,), {"actor": "gov"}))
        except RemoteError as exc:
            if exc.code != "not_found":
                raise
            return False
        return found[-1] is not None
    wait_until(receipted, 60, f"the receipt of wake {n}")
    return found[-1]


def epoch_of(served: Served) -> str:
    return str(served.health()["policy_epoch"])


def test_reload_a_b_a_while_the_worker_runs(served: Served) -> None:
    boss_token = served.add_agent("boss", ["wake.enqueue"])
    served.add_agent("relay", ["state.write"])
    gov, boss = served.client(served.governor_token), served.client(boss_token)
    epoch_a = epoch_of(served)
    assert wake_and_receipt(boss, gov, 1).outcome.value == "acted"

    b_dir = policy_copy(served.root, "policies-b", freeze=True)
    to_b = served.cli(served.governor_token, "--json", "policy", "reload", "--dir", str(b_dir))
    assert to_b.returncode == 0, to_b.stderr
    report_b = json.loads(to_b.stdout)
    epoch_b = report_b["epoch"]
    assert (report_b["previous_epoch"], epoch_of(served)) == (epoch_a, epoch_b) and epoch_b != epoch_a
    under_b = wake_and_receipt(boss, gov, 2)
    assert under_b.outcome.value == "denied"  # B's guardrail decided it

    back = served.cli(served.governor_token, "--json", "policy", "reload", "--dir",
                      str(served.root / "policies-a"))
    assert back.returncode == 0, back.stderr
    assert json.loads(back.stdout)["epoch"] == epoch_a
    assert wake_and_receipt(boss, gov, 3).outcome.value == "acted"
    assert served.proc is not None and served.proc.poll() is None  # the server (and its worker) never exited
    assert served.health()["runner"] == "running"

    history = served.cli(served.governor_token, "--json", "policy", "history")
    assert history.returncode == 0, history.stderr
    assert [h["epoch"] for h in json.loads(history.stdout)] == [epoch_a, epoch_b, epoch_a]
    assert [h["activated_by"] for h in json.loads(history.stdout)][1:] == ["gov", "gov"]

    in_force: str | None = None  # every decided write carries the epoch in force at its commit
    decided = 0
    for event in gov.call("world", "events", (), {"limit": 10_000, "actor": "gov"}):
        if event.event_type == "policy.activated":
            in_force = event.subject_id
        elif event.policy_epoch is not None:
            assert event.policy_epoch == in_force, (event.seq, event.command, event.policy_epoch, in_force)
            decided += 1
    assert decided > 10
    first_under_b = next(e for e in gov.call("world", "events", (), {"limit": 10_000, "actor": "gov"})
                         if e.policy_epoch == epoch_b)
    assert first_under_b.seq > next(e.seq for e in gov.call("world", "events", (), {"limit": 10_000, "actor": "gov"})
                                    if e.event_type == "policy.activated" and e.subject_id == epoch_b)


def test_a_working_tree_edit_without_a_reload_changes_nothing_served(served: Served) -> None:
    source = served.root / "policies-a"
    before = epoch_of(served)
    state = source / "resources" / "state.yaml"
    state.write_text(state.read_text() + FREEZE_RELAY)  # the edit nobody reloads
    (source / "resources" / "task.yaml").write_text("this: is: not: yaml: [")  # and a broken file
    boss = served.client(served.issue("boss"))
    gov = served.client(served.governor_token)
    assert wake_and_receipt(boss, gov, 4).outcome.value == "acted"  # A still decides
    read = served.cli(served.governor_token, "--json", "agents", "show", "relay")  # and any command still works
    assert read.returncode == 0, read.stderr
    assert epoch_of(served) == before
    history = json.loads(served.cli(served.governor_token, "--json", "policy", "history").stdout)
    assert len(history) == 3
