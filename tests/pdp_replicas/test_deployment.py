"""A policy deployment with PDP replicas: activated only once every replica that answers decides under the
new epoch; a replica that missed it (down during the deployment, back on its old policies) is never used
until it serves the activated epoch, so no decision is ever handed out under two epochs.

The replicas are external PDPs (``PMW_PDP_ADDRESSES``) sharing one admin password: replica A serves the
world's deployment directory, replica B a copy of its own (another host's disk), so B comes back on the
old epoch after the deployment and catches up only once its directory holds the new set."""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.policy.governance import current_deployment, deploy
from engine.policy.pdp_process import ManagedPdp
from engine.runtime import Runtime, probe_epoch
from engine.settings import load_settings
from tests.conftest import REPO, add_agent

PASSWORD = "replica-admin-password-for-tests"


class Replicas:
    def __init__(self, tmp: Path) -> None:
        self.root = tmp / "deploys"
        self.first = deploy(REPO / "policies", self.root)
        self.b_dir = tmp / "replica-b"
        shutil.copytree(self.first.path, self.b_dir)
        self.a = ManagedPdp(self.root / "current", run_dir=tmp / "run", admin_password=PASSWORD)
        self.b = ManagedPdp(self.b_dir, run_dir=tmp / "run", admin_password=PASSWORD)

    def start(self) -> list[str]:
        return [self.a.start().grpc, self.b.start().grpc]

    def stop(self) -> None:
        self.a.stop()
        self.b.stop()


@pytest.fixture
def replicas(tmp_path: Path, policy_deployment: Path) -> Iterator[Replicas]:  # policy_deployment: needs Cerbos
    r = Replicas(tmp_path)
    yield r
    r.stop()


def _changed_source(tmp: Path) -> Path:
    source = tmp / "policies-b"
    shutil.copytree(REPO / "policies", source)
    state = source / "resources" / "state.yaml"
    state.write_text(state.read_text() + "# a second policy set: same rules, another digest\n")
    return source


def _wait(rt: Runtime, address: str, state: str, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while next(s.state for s in rt.pdp_replicas() if s.address == address) != state:
        assert time.monotonic() < deadline, rt.pdp_replicas()
        time.sleep(0.05)


def test_a_deployment_with_one_replica_down_is_activated_on_the_reachable_set_only(
        replicas: Replicas, tmp_path: Path) -> None:
    a, b = replicas.start()
    settings = load_settings(db_url=f"sqlite:///{tmp_path / 'w.db'}", pdp_addresses=f"{a},{b}",
                             pdp_admin_user="pmw", pdp_admin_password=PASSWORD, policy_deploy_root=replicas.root,
                             pdp_timeout_s=15.0)  # a busy CI machine: no replica is taken for down by a slow answer
    with Runtime.open(settings) as rt:
        rt.book.bootstrap_governor("gov", "Governor", "t-gov")
        rt.world.activate_session("term:t-gov")
        add_agent(rt.world, "alice", ["state.write"])
        old = replicas.first.epoch
        assert {s.epoch for s in rt.pdp_replicas()} == {old}
        assert replicas.b.proc is not None
        os.kill(replicas.b.proc.pid, signal.SIGKILL)  # B is down for the whole deployment
        replicas.b.proc.wait(5)

        report = rt.reload_policies(_changed_source(tmp_path))

        new = report.epoch
        assert new != old and rt.book.current_policy_epoch().epoch == new  # type: ignore[union-attr]
        statuses = {s.address: (s.state, s.epoch) for s in rt.pdp_replicas()}
        assert statuses[a] == ("up", new) and statuses[b][0] == "down"

        replicas.b.start()  # back on its own disk: still the old set
        _wait(rt, b, "stale")
        calls_b = next(s.calls for s in rt.pdp_replicas() if s.address == b)
        for i in range(20):
            assert probe_epoch(rt.pdp) == new  # every decision under the activated epoch, none from B
            rt.world.compare_and_set_state("alice", f"k{i}", 0, {"i": i})
        assert next(s.calls for s in rt.pdp_replicas() if s.address == b) == calls_b
        epochs = {e["policy_epoch"] for e in rt.store.read.events(0, limit=1000)
                  if e["event_type"] == "state.set"}
        assert epochs == {new}

        current = current_deployment(replicas.root)
        assert current is not None
        shutil.rmtree(replicas.b_dir)
        shutil.copytree(current.path, replicas.b_dir)  # B's disk gets the new set: the pool reloads it
        _wait(rt, b, "up")
        for _ in range(10):
            assert probe_epoch(rt.pdp) == new
        assert next(s.calls for s in rt.pdp_replicas() if s.address == b) > calls_b
