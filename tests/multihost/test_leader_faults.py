"""Leader faults with two ``--role controller`` processes on one PostgreSQL world: SIGKILL the leader, and
SIGSTOP it past its lease then SIGCONT it. The standby takes over within the lease plus a poll (takeover time
printed), with a higher generation; the resumed old leader stands by (its lease lost), so there is never
more than one leader of one generation."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.policy.pdp_process import ManagedPdp
from engine.runtime import Runtime
from engine.settings import load_settings
from tests.conftest import REPO
from tests.multihost.support import controller_status

LEASE_S = 1.5


class Controllers:
    def __init__(self, url: str, pdp: str, tmp: Path) -> None:
        self.url, self.pdp, self.tmp = url, pdp, tmp
        self.stop_file = tmp / "stop"
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, n: int) -> None:
        for i in range(len(self.procs), len(self.procs) + n):
            argv = [sys.executable, "-m", "tests.multihost.controller_child", self.url, self.pdp, str(LEASE_S),
                    str(self.status_path(i)), str(self.stop_file)]
            with (self.tmp / f"ctl{i}.stderr").open("wb") as stderr:
                self.procs.append(subprocess.Popen(argv, cwd=self.tmp, stdout=subprocess.DEVNULL, stderr=stderr,
                                                   env={**os.environ, "PYTHONPATH": str(REPO)}))

    def status_path(self, i: int) -> Path:
        return self.tmp / f"ctl{i}.json"

    def status(self, i: int) -> dict[str, Any]:
        return controller_status(self.status_path(i))

    def leader(self, among: list[int], timeout_s: float = 60.0) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            leading = [i for i in among if self.status(i)["leader"] == "leader"
                       and time.time() - self.status(i)["at"] < 0.5]  # a fresh report, not a paused one
            if leading:
                assert len(leading) == 1, [self.status(i) for i in among]
                return leading[0]
            time.sleep(0.02)
        raise AssertionError([self.status(i) for i in among])

    def stop(self) -> None:
        self.stop_file.touch()
        for p in self.procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGCONT)
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)


@pytest.fixture
def controllers(pg_url: str, managed_pdp: ManagedPdp, tmp_path: Path) -> Iterator[Controllers]:
    assert managed_pdp.address is not None
    settings = load_settings(db_url=pg_url, pdp_address=managed_pdp.address.grpc, policy_dir=REPO / "policies",
                             artifact_dir=tmp_path / "artifacts")
    with Runtime.open(settings) as rt:
        rt.book.bootstrap_governor("gov", "Governor", "t-gov")
        rt.world.activate_session("term:t-gov")
    c = Controllers(pg_url, managed_pdp.address.grpc, tmp_path)
    try:
        c.start(2)
        yield c
    finally:
        c.stop()


def test_a_killed_leader_is_replaced_and_a_paused_one_stands_down(controllers: Controllers) -> None:
    first = controllers.leader([0, 1])
    second = 1 - first
    generation = controllers.status(first)["generation"]
    killed_at = time.monotonic()
    os.kill(controllers.procs[first].pid, signal.SIGKILL)
    controllers.procs[first].wait(10)
    assert controllers.leader([second]) == second
    takeover_kill = time.monotonic() - killed_at
    assert controllers.status(second)["generation"] > generation
    assert takeover_kill < LEASE_S + 3.0

    controllers.start(1)  # a new standby (index 2), then the leader is paused past its lease
    deadline = time.monotonic() + 60
    while controllers.status(2)["leader"] != "standby":
        assert time.monotonic() < deadline, controllers.status(2)
        time.sleep(0.02)
    generation = controllers.status(second)["generation"]
    paused_at = time.monotonic()
    os.kill(controllers.procs[second].pid, signal.SIGSTOP)
    assert controllers.leader([2]) == 2
    takeover_pause = time.monotonic() - paused_at
    assert controllers.status(2)["generation"] > generation
    os.kill(controllers.procs[second].pid, signal.SIGCONT)
    deadline = time.monotonic() + 10
    while controllers.status(second)["leader"] != "standby" or time.time() - controllers.status(second)["at"] > 0.5:
        assert time.monotonic() < deadline, controllers.status(second)
        time.sleep(0.02)
    assert controllers.leader([second, 2]) == 2  # one leader, the successor
    print(f"takeover: after SIGKILL {takeover_kill:.2f} s, after SIGSTOP {takeover_pause:.2f} s (lease {LEASE_S} s)")
