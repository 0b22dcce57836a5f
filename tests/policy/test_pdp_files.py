"""The runtime's PDP leaves nothing behind: its working directory (config with the admin password's hash,
log) is private, lives under the run directory it is given (never the system temp directory), goes on
stop and on a failed start, and a SIGKILLed owner's directory is swept by the next start."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.errors import PolicyUnavailable
from engine.policy.pdp_process import ManagedPdp, default_run_dir, sweep_orphans
from tests.procs.pids import kill_owner, start_pdp_owner, wait_dead


@pytest.fixture
def system_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private stand-in for the system temp directory (what ``tempfile`` hands out in this process), so
    that what the PDP puts there is visible without other processes' files."""
    path = tmp_path / "system-tmp"
    path.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(path))
    return path


@pytest.fixture
def pdps() -> Iterator[list[ManagedPdp]]:
    """PDPs a test starts; each stopped afterwards."""
    started: list[ManagedPdp] = []
    yield started
    for pdp in started:
        pdp.stop()


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_with_a_run_dir_the_files_are_private_and_nothing_goes_to_the_system_temp_dir(
        policy_deployment: Path, tmp_path: Path, system_tmp: Path, pdps: list[ManagedPdp]) -> None:
    run_dir = tmp_path / "data" / "run"
    pdp = ManagedPdp(policy_deployment, run_dir=run_dir)
    pdps.append(pdp)
    assert not pdp.workdir.exists(), "constructing a PDP creates nothing"
    address = pdp.start()
    work = pdp.workdir
    assert work.parent == run_dir.absolute()
    assert work.name.startswith(f"pdp-{os.getpid()}-")
    assert _mode(work) == 0o700
    config = work / "cerbos.yaml"
    assert _mode(config) == 0o600
    assert _mode(work / "pdp.log") == 0o600
    text = config.read_text()
    assert "passwordHash" in text and address.admin_password is not None
    assert address.admin_password not in text, "the config holds the password's hash, never the password"
    assert list(system_tmp.iterdir()) == [], "the PDP put something in the system temp directory"
    pid = pdp.pid
    assert pid is not None
    pdp.stop()
    assert wait_dead(pid, 10)
    assert not work.exists()
    assert list(run_dir.iterdir()) == []
    assert list(system_tmp.iterdir()) == []


def test_without_a_run_dir_it_falls_back_to_a_private_directory_in_the_system_temp_dir(
        policy_deployment: Path, system_tmp: Path, pdps: list[ManagedPdp]) -> None:
    pdp = ManagedPdp(policy_deployment)
    pdps.append(pdp)
    pdp.start()
    fallback = default_run_dir()
    assert fallback == system_tmp / f"pmw-pdp-{os.getuid()}"
    assert pdp.workdir.parent == fallback
    assert _mode(fallback) == 0o700 and _mode(pdp.workdir) == 0o700
    pdp.stop()
    assert not pdp.workdir.exists()
    assert list(fallback.iterdir()) == []


def test_a_fallback_directory_someone_else_planted_is_not_used(policy_deployment: Path, system_tmp: Path,
                                                               tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    default_run_dir().symlink_to(elsewhere)  # a symlink where the private directory should be
    pdp = ManagedPdp(policy_deployment)
    with pytest.raises(PolicyUnavailable, match="not a directory of this user"):
        pdp.start()
    assert pdp.proc is None
    assert list(elsewhere.iterdir()) == []


def test_a_failed_start_leaves_no_files(policy_deployment: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(policy_deployment, broken)
    (broken / "resources" / "state.yaml").write_text("resourcePolicy: [this is not a policy")
    run_dir = tmp_path / "run"
    pdp = ManagedPdp(broken, run_dir=run_dir)
    with pytest.raises(PolicyUnavailable, match="cerbos exited"):
        pdp.start(timeout=10)
    assert pdp.proc is None
    assert list(run_dir.iterdir()) == []


def test_a_sigkilled_owners_directory_is_swept_by_the_next_start(
        policy_deployment: Path, tmp_path: Path, pdps: list[ManagedPdp]) -> None:
    run_dir = tmp_path / "run"
    child, report = start_pdp_owner(policy_deployment, "--run-dir", str(run_dir))
    try:
        orphan = Path(str(report["workdir"]))
        pdp_pid = int(str(report["pdp_pid"]))
        assert orphan.is_dir() and orphan.name.startswith(f"pdp-{child.pid}-")
    finally:
        kill_owner(child)
    assert wait_dead(pdp_pid, 10), "the PDP outlived its SIGKILLed owner"
    assert orphan.is_dir() and (orphan / "cerbos.yaml").exists(), "a SIGKILLed owner cannot clean up"

    sibling = ManagedPdp(policy_deployment, run_dir=run_dir)  # a live owner's (this process's) directory
    pdps.append(sibling)
    sleeper = subprocess.Popen(["sleep", "60"])  # a live process of this user: its directory is kept
    try:
        live_foreign = run_dir / f"pdp-{sleeper.pid}-abc"
        live_foreign.mkdir()
        reused = run_dir / f"pdp-{os.getpid()}-reused"  # this PID, but another process recorded it
        reused.mkdir()
        (reused / "owner").write_text(f"{os.getpid()} 1\n")
        unrelated = run_dir / "server.pid"
        unrelated.write_text("not a PDP's")
        sibling.start()
        assert not orphan.exists(), "the dead owner's directory (with the password hash) was not swept"
        assert not reused.exists(), "a directory whose recorded owner is gone (PID reused) was not swept"
        assert live_foreign.is_dir() and unrelated.read_text() == "not a PDP's"
        assert sibling.workdir.is_dir()
        other = ManagedPdp(policy_deployment, run_dir=run_dir)  # a second PDP of the same live process
        pdps.append(other)
        other.start()
        assert sibling.workdir.is_dir(), "a live owner's directory was swept"
    finally:
        sleeper.kill()
        sleeper.wait(10)
    assert sweep_orphans(run_dir) == [live_foreign]

