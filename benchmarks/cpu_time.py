"""CPU seconds a process tree has used, from Linux ``/proc``: what a benchmark needs to say whether the CPU
bounds it (a 2-core machine running workers, PostgreSQL and the PDPs is full at 2 CPU seconds per second).

:func:`tree_cpu_s` counts a process, the children it has reaped (``cutime``/``cstime``: a PostgreSQL
postmaster reaps its backends) and the descendants still alive. A descendant that ends during the one pass
over ``/proc`` of a sample (its parent read before it was reaped, itself gone when read) is counted in neither:
an error of one short-lived process's time, small beside a round of a benchmark. Not available off Linux:
:func:`available` says so."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

_PROC = Path("/proc")
_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01


def available() -> bool:
    return (_PROC / "self" / "stat").is_file()


def _stat(pid: int) -> tuple[int, float, float] | None:
    """``(ppid, own seconds, reaped children's seconds)`` of ``pid``, or None if it is gone."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) ": the name may hold spaces
    ppid = int(fields[1])
    utime, stime, cutime, cstime = (int(f) for f in fields[11:15])
    return ppid, (utime + stime) * _TICK_S, (cutime + cstime) * _TICK_S


def _every_stat() -> dict[int, tuple[int, float, float]]:
    """:func:`_stat` of every process, in one pass over ``/proc``."""
    found: dict[int, tuple[int, float, float]] = {}
    for entry in _PROC.iterdir():
        if entry.name.isdigit() and (st := _stat(int(entry.name))) is not None:
            found[int(entry.name)] = st
    return found


def tree_cpu_s(roots: Iterable[int]) -> float:
    """CPU seconds (user + system) used so far by each root, its reaped children and its live descendants."""
    stats = _every_stat()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _own, _reaped) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo, seen = 0.0, list(roots), set[int]()
    while todo:  # bounded: each pid once, and /proc lists finitely many
        pid = todo.pop()
        if pid in seen or pid not in stats:
            continue
        seen.add(pid)
        _ppid, own, reaped = stats[pid]
        total += own + reaped
        todo.extend(children.get(pid, ()))
    return total


__all__ = ["available", "tree_cpu_s"]
