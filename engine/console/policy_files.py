"""A candidate policy set beside the deployed one: the file-by-file diff the policies page shows, and the
deployment directories a rollback may point at. Reads files only; deploying is ``GovernanceCalls.reload``.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

from engine.errors import InvalidInput
from engine.policy.governance import EPOCH_FILE, POLICY_SUFFIXES

MAX_FILES = 2000
MAX_FILE_BYTES = 512 * 1024
MAX_DIFF_LINES = 4000
EPOCH_NAME = re.compile(r"p-[0-9a-f]{16}")


@dataclass(frozen=True)
class FileDiff:
    """One policy file that differs: ``added``, ``removed`` or ``changed``, with its unified diff."""

    path: str
    change: str
    lines: list[str]


def policy_files(directory: Path) -> dict[str, Path]:
    """The policy files of ``directory`` by relative path (the epoch stamp left out), at most
    :data:`MAX_FILES` (``InvalidInput`` naming ``policy_dir`` beyond)."""
    found: dict[str, Path] = {}
    for path in sorted(directory.rglob("*")):
        if not path.is_file() or path.is_symlink() or path.suffix not in POLICY_SUFFIXES:
            continue
        rel = path.relative_to(directory)
        if rel == EPOCH_FILE:
            continue
        if len(found) >= MAX_FILES:
            raise InvalidInput("policy_dir", f"more than {MAX_FILES} policy files")
        found[rel.as_posix()] = path
    return found


def _lines(path: Path | None) -> list[str]:
    if path is None:
        return []
    raw = path.read_bytes()[:MAX_FILE_BYTES]
    return raw.decode("utf-8", errors="replace").splitlines()


def policy_diff(deployed: Path, candidate: Path) -> list[FileDiff]:
    """Every policy file that differs between the deployed set and ``candidate``, with a unified diff
    (at most :data:`MAX_DIFF_LINES` lines in all: the rest is cut, and the last line says so)."""
    old, new = policy_files(deployed), policy_files(candidate)
    out: list[FileDiff] = []
    budget = MAX_DIFF_LINES
    for rel in sorted(set(old) | set(new)):
        a, b = _lines(old.get(rel)), _lines(new.get(rel))
        if a == b:
            continue
        change = "added" if rel not in old else "removed" if rel not in new else "changed"
        lines = list(difflib.unified_diff(a, b, f"deployed/{rel}", f"candidate/{rel}", lineterm="", n=2))
        if len(lines) > budget:
            lines = [*lines[:max(budget, 0)], "... (diff cut here)"]
        budget -= len(lines)
        out.append(FileDiff(rel, change, lines))
    return out


def rollback_dir(deploy_root: Path, epoch: str, known: set[str]) -> Path:
    """The deployment directory of ``epoch`` (one the history shows, still on disk) to deploy again;
    ``InvalidInput`` naming ``epoch`` otherwise (no path of the request's is ever used)."""
    if not isinstance(epoch, str) or not EPOCH_NAME.fullmatch(epoch):
        raise InvalidInput("epoch", f"{str(epoch)[:40]!r} is not a policy epoch (p- and 16 hex digits)")
    if epoch not in known:
        raise InvalidInput("epoch", f"{epoch} is not in this world's policy history")
    target = deploy_root / epoch
    if not target.is_dir():
        raise InvalidInput("epoch", f"{epoch}'s deployment is no longer on disk")
    return target


__all__ = ["FileDiff", "policy_diff", "policy_files", "rollback_dir"]
