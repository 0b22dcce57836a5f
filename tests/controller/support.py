"""Helpers for the controller tests: World-shaped events, rule directories, id collisions."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

from engine.controller import AnyDecision, DeferWake, Suppress, WakeTarget
from engine.controller.facts import fact_hash

REPO_RULES = Path(__file__).resolve().parents[2] / "rules"
T0 = 1_700_000_000_000_000  # logical microseconds
SECOND = 1_000_000


def event(seq: int, actor: str, *, event_type: str = "state.set", subject: str = "s1",
          subject_kind: str = "state", payload: dict[str, Any] | None = None, chain: str | None = None,
          depth: int = 0, now: int | None = None, origin: int | None = None) -> dict[str, Any]:
    """A World event as the run loop hands it to the controller (``cascade_depth``/``chain_origin_us``
    added). Without ``now`` events are one second apart."""
    ev: dict[str, Any] = {
        "seq": seq, "event_id": f"evt_{seq}", "event_type": event_type, "actor_id": actor,
        "subject_kind": subject_kind, "subject_id": subject, "payload": payload or {},
        "correlation_id": chain, "created_at_us": T0 + seq * SECOND if now is None else now,
        "cascade_depth": depth, "op_id": f"op_{seq}", "command": "test", "request_hash": "x",
    }
    if origin is not None:
        ev["chain_origin_us"] = origin
    return ev


def handoff(seq: int, actor: str, target: str, *, chain: str = "ch1", depth: int = 0, now: int | None = None,
            origin: int | None = None) -> dict[str, Any]:
    """``actor`` hands work to ``target``: the wake-targeting rules propose waking ``target``."""
    return event(seq, actor, event_type="handoff.created", subject=f"hof_{seq}", subject_kind="handoff",
                 payload={"target_agent": target, "task_id": "t1"}, chain=chain, depth=depth, now=now,
                 origin=origin)


def copy_rules(dest: Path, *, only: tuple[str, ...] | None = None) -> Path:
    """A private copy of the repository's rules (optionally only some files)."""
    dest.mkdir(parents=True, exist_ok=True)
    for path in sorted(REPO_RULES.glob("*.yaml")):
        if only is None or path.stem in only:
            shutil.copy(path, dest / path.name)
    return dest


def set_constants(rule_dir: Path, file: str, **constants: Any) -> None:
    """Change constants of one rule file (the file is rewritten without comments)."""
    path = rule_dir / f"{file}.yaml"
    data = yaml.safe_load(path.read_text())
    data["constants"].update(constants)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def brief(decisions: list[AnyDecision]) -> list[tuple[str, ...]]:
    """(kind, agent, reason) for wakes and suppressions; ("defer", agent, due) for a deferred wake and
    ("join", agent, due) for a candidate joining one; (kind,) otherwise."""
    out: list[tuple[str, ...]] = []
    for d in decisions:
        if isinstance(d, WakeTarget):
            out.append(("wake", d.agent))
        elif isinstance(d, Suppress):
            out.append(("suppress", d.agent, d.reason.value))
        elif isinstance(d, DeferWake):
            out.append(("join" if d.joins else "defer", d.agent, str(d.not_before_us)))
        else:
            out.append((d.kind,))
    return out


_PRIME = 0x01000193
_INVERSE = pow(_PRIME, -1, 2**32)
_ALPHABET = [ord(c) for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_."]


def colliding_id(target: str, prefix: str) -> str:
    """An id ``prefix`` + 6 characters with the same 32-bit FNV-1a hash as ``target`` (meet in the
    middle: 3 characters forward from the prefix, 3 backward from the target's hash)."""
    goal = fact_hash(target)
    backward: dict[int, bytes] = {}
    for c6 in _ALPHABET:
        h6 = ((goal * _INVERSE) & 0xFFFFFFFF) ^ c6
        for c5 in _ALPHABET:
            h5 = ((h6 * _INVERSE) & 0xFFFFFFFF) ^ c5
            for c4 in _ALPHABET:
                backward[((h5 * _INVERSE) & 0xFFFFFFFF) ^ c4] = bytes((c4, c5, c6))
    start = fact_hash(prefix)
    for c1 in _ALPHABET:
        h1 = ((start ^ c1) * _PRIME) & 0xFFFFFFFF
        for c2 in _ALPHABET:
            h2 = ((h1 ^ c2) * _PRIME) & 0xFFFFFFFF
            for c3 in _ALPHABET:
                tail = backward.get(((h2 ^ c3) * _PRIME) & 0xFFFFFFFF)
                if tail is not None:
                    found = prefix + bytes((c1, c2, c3)).decode() + tail.decode()
                    if found != target:
                        return found
    raise AssertionError(f"no id with prefix {prefix!r} collides with {target!r}")
