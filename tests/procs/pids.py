"""Parent-side checks on processes by PID (Linux ``/proc``), for the PDP lifetime and supervision tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.procs import REPO_ROOT


def alive(pid: int) -> bool:
    """Is ``pid`` a running process (a zombie, dead but not yet reaped, is not)?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")


def wait_dead(pid: int, timeout: float) -> bool:
    """Poll (bounded) until ``pid`` is gone; True if it is."""
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def uptime_s() -> float:
    """Seconds since boot (``/proc/uptime``), the clock a process's start time in /proc counts on."""
    return float(Path("/proc/uptime").read_text().split()[0])


def started_after_boot_s(pid: int) -> float:
    """When process ``pid`` started, in seconds since boot (field 22 of /proc/<pid>/stat, clock ticks): with
    :func:`uptime_s` read at an event, how long after it the kernel started the process, whatever the
    process then took to boot."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[19]) / os.sysconf("SC_CLK_TCK")


def started_at_us(pid: int) -> int:
    """When process ``pid`` started (µs since the epoch), from /proc (clock ticks since boot)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[19])  # field 22 of stat: starttime
    boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                if line.startswith("btime "))
    return (boot * 1_000_000) + ticks * 1_000_000 // os.sysconf("SC_CLK_TCK")


def processes_mentioning(text: str) -> list[int]:
    """PIDs of the running processes whose command line contains ``text`` (e.g. a PDP's config path)."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def start_pdp_owner(policy_dir: Path, *args: str) -> tuple[subprocess.Popen[bytes], dict[str, object]]:
    """Start ``tests.procs.pdp_owner`` and return it with its report (``pdp_pid``, ``workdir``). The caller
    SIGKILLs it (and must in a ``finally``)."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}  # PMW_CERBOS_BIN, if set, is kept
    child = subprocess.Popen([sys.executable, "-m", "tests.procs.pdp_owner", str(policy_dir), *args],
                             cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert child.stdout is not None
    line = child.stdout.readline()
    if not line:
        child.kill()
        child.wait(10)
        raise AssertionError(f"pdp_owner exited with {child.poll()} before reporting")
    return child, dict(json.loads(line))


def kill_owner(child: subprocess.Popen[bytes]) -> None:
    """SIGKILL a :func:`start_pdp_owner` child by its PID and reap it."""
    if child.poll() is None:
        os.kill(child.pid, 9)
    child.wait(10)
    if child.stdout is not None:
        child.stdout.close()
