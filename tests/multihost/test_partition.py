"""The multi-host harness: PostgreSQL on a hub namespace, two worker hosts (each its own namespace, its own
two PDP replicas) reaching it over veth links; a worker host's link is cut while it holds a wake's lease and
restored after the other host took the wake over. Then every wake ended in exactly one receipt, no effect was
applied twice, the log folds to the state, and the takeover time is reported. Without namespaces (not root)
the hosts share loopback and the cut is a SIGSTOP of the host's process (``tests/multihost/netns.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.policy.pdp_process import ManagedPdp
from engine.runtime import Runtime
from engine.settings import load_settings
from engine.world import World
from tests.conftest import REPO
from tests.multihost.hub import HubPostgres
from tests.multihost.netns import Hosts
from tests.multihost.support import seat_workers
from tests.pg_cluster import binaries_available

LEASE_S = 2.0
WORK_S = 0.3
WAKES = 8
AGENTS = ["a0", "a1"]
DEADLINE_S = 120.0


@pytest.fixture
def hub(managed_pdp: ManagedPdp) -> Iterator[tuple[Hosts, HubPostgres]]:
    if not binaries_available():
        pytest.fail("the multi-host harness needs the PostgreSQL server binaries")
    # PMW_MULTIHOST_LOOPBACK=1 runs the loopback fallback (hosts on loopback, a cut is a SIGSTOP) as root too
    with Hosts(2, "p", use_namespaces=False if os.environ.get("PMW_MULTIHOST_LOOPBACK") else None) as hosts:
        pg = HubPostgres(hosts)
        try:
            pg.start()
            yield hosts, pg
        finally:
            pg.stop()


def _wait(predicate: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_cut_worker_host_loses_its_wake_to_the_other_host_and_nothing_runs_twice(
        hub: tuple[Hosts, HubPostgres], managed_pdp: ManagedPdp, policy_deployment: Path, tmp_path: Path) -> None:
    hosts, pg = hub
    deploy_root = policy_deployment.parent
    assert managed_pdp.address is not None
    settings = load_settings(db_url=pg.local_url(), pdp_address=managed_pdp.address.grpc,
                             policy_deploy_root=deploy_root, artifact_dir=tmp_path / "artifacts",
                             policy_dir=REPO / "policies")
    children: list[subprocess.Popen[bytes]] = []
    stop = tmp_path / "stop"
    with Runtime.open(settings) as rt:
        rt.book.bootstrap_governor("gov", "Governor", "t-gov")
        world = rt.world
        world.activate_session("term:t-gov")
        seat_workers(world, AGENTS)
        try:
            for i in (1, 2):
                home = tmp_path / f"host{i}"
                home.mkdir()
                argv = [sys.executable, "-m", "tests.multihost.worker_child", pg.host_url(i), str(deploy_root),
                        f"w-h{i}", str(LEASE_S), str(WORK_S), "2", ",".join(AGENTS), str(stop),
                        str(home / "report.json")]
                with (home / "stderr").open("wb") as stderr:
                    child = subprocess.Popen(hosts.argv(i, argv), cwd=home, stdout=subprocess.DEVNULL, stderr=stderr,
                                             env={**os.environ, "PYTHONPATH": str(REPO)})
                children.append(child)
                hosts.adopt(i, child.pid)
            for i in (1, 2):
                _wait(lambda i=i: (tmp_path / f"host{i}" / "report.json.ready").exists(), 90, f"host {i} ready")
            wakes = [world.enqueue_wake("gov", AGENTS[n % 2], "mh", f"mh-{n}").wake for n in range(WAKES)]

            def held_by_h1() -> bool:
                return any(w.lease_owner == "w-h1" and w.status.value == "claimed"
                           for w in world.list_wakes(status="claimed", actor="gov"))
            _wait(held_by_h1, 60, "host 1 to hold a lease")
            hosts.cut(1)
            cut_at = time.monotonic()
            held = [w.wake_id for w in world.list_wakes(status="claimed", actor="gov") if w.lease_owner == "w-h1"]

            def all_receipted() -> bool:
                return all(_receipts(world, w.wake_id) >= 1 for w in wakes)
            _wait(lambda: all(_receipts(world, w) >= 1 for w in held), DEADLINE_S, "host 2 to take host 1's wakes")
            takeover_s = time.monotonic() - cut_at
            hosts.restore(1)
            _wait(all_receipted, DEADLINE_S, "every wake to end in a receipt")
            time.sleep(LEASE_S)  # host 1, back on the network, has had its chance to commit what it held
        finally:
            stop.touch()
            for child in children:
                try:
                    child.wait(60)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait(10)
        reports = [json.loads((tmp_path / f"host{i}" / "report.json").read_text()) for i in (1, 2)]
        print(f"takeover after a cut link: {takeover_s:.2f} s (lease {LEASE_S} s; namespaces: {hosts.namespaced}); "
              f"workers: {reports}")
        assert all(_receipts(world, w.wake_id) == 1 for w in wakes), reports
        for w in wakes:  # each wake's effect applied once: its key written once, at version 1
            assert world.get_state(f"n/{w.wake_id}", actor="gov").version == 1
        sets = [e for e in world.events(0, limit=100_000, actor="gov") if e.event_type == "state.set"]
        assert len(sets) == WAKES
        assert sum(r["cycles"] for r in reports) >= WAKES
        assert rt.book.rebuild_state(from_snapshot=False) == rt.book.state_image()
        assert takeover_s < LEASE_S + 10.0


def _receipts(world: World, wake_id: str) -> int:
    return sum(1 for a in AGENTS for r in world.list_receipts(agent_id=a, limit=1000, actor="gov")
               if r.wake_id == wake_id)
