"""The runtime's own PDP: loopback only, and never an orphan, even when the runtime is SIGKILLed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from engine.policy.pdp_process import ManagedPdp

REPO = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")


def test_a_killed_runtime_leaves_no_pdp_behind(policy_deployment: Path) -> None:
    child = subprocess.Popen([sys.executable, "-m", "tests.procs.pdp_owner", str(policy_deployment)],
                             cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        pdp_pid = json.loads(line)["pdp_pid"]
        assert _alive(pdp_pid)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        deadline = time.monotonic() + 10
        while _alive(pdp_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pdp_pid), "the PDP outlived the process that started it"
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(10)
        if child.stdout is not None:
            child.stdout.close()


def test_the_pdp_listens_on_loopback_only(managed_pdp: ManagedPdp) -> None:
    assert managed_pdp.address is not None
    assert managed_pdp.address.grpc.startswith("127.0.0.1:")
    assert managed_pdp.address.http.startswith("http://127.0.0.1:")


def test_stop_is_by_pid_and_idempotent(policy_deployment: Path) -> None:
    pdp = ManagedPdp(policy_deployment)
    pdp.start()
    pid = pdp.pid
    assert pid is not None and _alive(pid)
    pdp.stop()
    pdp.stop()
    assert not _alive(pid)
