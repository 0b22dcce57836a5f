"""Hosts as network namespaces for multi-host tests, with a loopback-only fallback.

:class:`Hosts` makes a hub namespace (the "network": PostgreSQL listens there) and ``n`` host namespaces,
each linked to the hub by its own veth pair on a private /30 (``10.231.<i>.1`` hub side, ``10.231.<i>.2``
host side). Every name carries the test's tag and PID (``pmw<pid><tag>-hub``, ``...-h<i>``), so
:meth:`Hosts.close` removes exactly what it made (deleting a namespace deletes its veth ends), even after a
failure. A process is run on a host with :meth:`Hosts.argv` (``ip netns exec NAME ...``) and is stopped by
the test by its own PID before the namespaces go.

Namespaces need root and iproute2. Where they are unavailable (:func:`namespaces_available` is False) the
hosts are all this machine's loopback: :meth:`cut` then stands for a partition by SIGSTOPping the host's
processes (the store sees a host that stopped answering, the lease runs out all the same) and
:meth:`restore` SIGCONTs them. Tests never skip for want of namespaces.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Sequence

SUBNET = "10.231"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=check)


def namespaces_available() -> bool:
    """Can this process make network namespaces (root, iproute2, and a trial one made and removed)?"""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return False
    probe = f"pmw{os.getpid()}probe"
    if _ip("netns", "add", probe, check=False).returncode != 0:
        return False
    _ip("netns", "del", probe, check=False)
    return True


class Hosts:
    """``n`` hosts and a hub (see the module docstring). Use as a context manager."""

    def __init__(self, n: int, tag: str, *, use_namespaces: bool | None = None) -> None:
        self.n = n
        self.namespaced = namespaces_available() if use_namespaces is None else use_namespaces
        self.prefix = f"pmw{os.getpid()}{tag}"[:12]
        self.hub = f"{self.prefix}-hub"
        self.names = [f"{self.prefix}-h{i}" for i in range(1, n + 1)]
        self._made: list[str] = []
        self._pids: dict[int, list[int]] = {i: [] for i in range(1, n + 1)}

    def __enter__(self) -> Hosts:
        try:
            if self.namespaced:
                self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _create(self) -> None:
        for name in (self.hub, *self.names):
            _ip("netns", "add", name)
            self._made.append(name)
            _ip("-n", name, "link", "set", "lo", "up")
        for i, name in enumerate(self.names, start=1):
            hub_end, host_end = f"vh{i}", f"vp{i}"
            _ip("-n", self.hub, "link", "add", hub_end, "type", "veth", "peer", "name", host_end, "netns", name)
            _ip("-n", self.hub, "addr", "add", f"{SUBNET}.{i}.1/30", "dev", hub_end)
            _ip("-n", name, "addr", "add", f"{SUBNET}.{i}.2/30", "dev", host_end)
            _ip("-n", self.hub, "link", "set", hub_end, "up")
            _ip("-n", name, "link", "set", host_end, "up")

    def hub_address(self, host: int) -> str:
        """The hub's address as host ``host`` (1-based) reaches it."""
        return f"{SUBNET}.{host}.1" if self.namespaced else "127.0.0.1"

    def hub_addresses(self) -> list[str]:
        return [self.hub_address(i) for i in range(1, self.n + 1)]

    def argv(self, host: int | None, argv: Sequence[str]) -> list[str]:
        """``argv`` run on host ``host`` (None: the hub)."""
        if not self.namespaced:
            return list(argv)
        return ["ip", "netns", "exec", self.hub if host is None else self.names[host - 1], *argv]

    def adopt(self, host: int, pid: int) -> None:
        """Record a process of host ``host`` (what the loopback fallback's :meth:`cut` pauses)."""
        self._pids[host].append(pid)

    def cut(self, host: int) -> None:
        """Cut host ``host`` off the network (its link down; loopback fallback: its processes paused)."""
        if self.namespaced:
            _ip("-n", self.hub, "link", "set", f"vh{host}", "down")
        else:
            self._signal(host, signal.SIGSTOP)

    def restore(self, host: int) -> None:
        if self.namespaced:
            _ip("-n", self.hub, "link", "set", f"vh{host}", "up")
        else:
            self._signal(host, signal.SIGCONT)

    def _signal(self, host: int, sig: signal.Signals) -> None:
        for pid in self._pids[host]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def close(self) -> None:
        """Resume any paused process (its owner stops it by PID), then delete every namespace made here."""
        for host in self._pids:
            self._signal(host, signal.SIGCONT)
        for name in reversed(self._made):
            _ip("netns", "del", name, check=False)
        self._made.clear()


__all__ = ["SUBNET", "Hosts", "namespaces_available"]
