"""Check decisions remembered by exactly what decides them, unless the policy set reads the clock.

A Cerbos ``CheckResources`` answer is a pure function of the policy set and the request: the principal
(id, roles, every attribute), the resource (kind, id, every attribute) and the actions asked. PMW sends no
auxiliary data and no policy version or scope, so when the served set reads no clock the key below is
everything the answer depends on:

    canonical JSON of [policy epoch, principal, resource, actions]   (sorted keys, orjson)

The principal and the resource are built afresh from the world's rows on every call (as before), so a
grant, a revocation, a handoff accepted, a room joined or left, a memory or task transition: each changes
the key and the next call asks the PDP. The epoch is the policy set's digest, read from the store on every
call; the memo forgets everything when it sees an epoch other than the last one (and on :meth:`clear`, which
the runtime calls when it reloads its PDP). A decision is remembered only if the PDP answered under the
epoch it is keyed by, so a PDP that moved ahead of (or lags behind) the store's epoch is never remembered.

**Policies that read time are never memoized.** Cerbos' clock functions are :data:`CLOCK_FUNCTIONS`
(``now()``, and ``timeSince()``, which is ``now()`` minus a timestamp); the timestamp and duration
constructors and getters (``timestamp()``, ``duration()``, ``getHours()``, ...) read only their argument.
When the memo first sees an epoch it scans that policy set (the deployed files under
``<deploy root>/<epoch>``; test suites left out, as Cerbos serves none) for the clock functions; if any is
found, or if there is no deployment to scan, the memo is off for that epoch: every check goes to the PDP
(counted as ``bypassed``), :attr:`DecisionMemo.status` says why (with each file, line and function found)
and a log line (``pmw.policy``) says so once per epoch (a deployment not found is looked for again after
:data:`RESCAN_AFTER_S`). The scan is textual: a comment naming ``now()`` also turns the memo off (a false
positive costs round trips, never a stale answer).

**Keys without the resource id where no policy reads it.** The same scan finds, for each resource kind, whether
the policies that may decide it (its resource policies, and every derived-role, principal, role, variable and
constant file, which may apply to any kind) read the resource's id (``R.id``, ``request.resource.id``). For a
kind whose policies never do, the answer cannot depend on the id, so the key leaves it out: a wake's claim, or
its ack, is the same check for every wake of the same agent in the same state, answered once. A remembered
decision is handed back with the asked resource's id. If any served file names ``R`` or ``request.resource``
other than through ``.attr``, ``.id``, ``.kind``, ``.scope`` or ``.policyVersion`` (the resource as a whole:
the scan cannot tell what is read), or cannot be parsed, every key keeps its id.

Counters: ``hits`` (checks answered from memory), ``misses`` (checks sent to the PDP with the memo on),
``round_trips_saved`` (check requests answered wholly from memory), ``bypassed`` (checks sent to the PDP
with the memo off).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path

import orjson
import yaml
from pydantic import Field

from engine.models.common import Model
from engine.policy.governance import POLICY_SUFFIXES
from engine.policy.model import Decision, PrincipalRef, ResourceRef

log = logging.getLogger("pmw.policy")

DEFAULT_CAPACITY = 16384
#: The Cerbos CEL functions that read the clock (the PDP's evaluation time).
CLOCK_FUNCTIONS = ("now", "timeSince")
_CLOCK_CALL = re.compile(r"\b(" + "|".join(CLOCK_FUNCTIONS) + r")\s*\(")
#: Seconds before an epoch whose deployment was not found is looked for again.
RESCAN_AFTER_S = 5.0

Asked = Sequence[tuple[ResourceRef, Sequence[str]]]
Fetch = Callable[[Asked], list[Decision]]


class ClockRead(Model):
    """One use of a clock function in a policy set."""

    file: str
    line: int
    function: str
    text: str


class EpochScan(Model):
    """Whether the memo serves a policy epoch, and why."""

    epoch: str | None  # None: the memo is off whatever the epoch
    memoized: bool
    reason: str
    source: str  # what was scanned: a deployment directory (or "none")
    clock_reads: list[ClockRead]
    final: bool = True  # False: no deployment found (yet); looked for again after RESCAN_AFTER_S
    #: resource kinds whose decisions cannot depend on the resource id (keyed without it)
    id_free_kinds: list[str] = Field(default_factory=list)


class MemoCounters(Model):
    hits: int
    misses: int
    bypassed: int
    round_trips_saved: int  # check requests answered wholly from memory
    size: int
    capacity: int
    epoch: str | None
    memoized: bool | None  # None: no epoch seen yet


def _is_test_file(path: Path) -> bool:
    """Files Cerbos' disk store does not serve: test suites (``*_test.yaml``) and ``testdata`` folders."""
    return path.stem.endswith("_test") or "testdata" in path.parts


def clock_reads_in_text(name: str, text: str) -> list[ClockRead]:
    """Every clock function call in ``text`` (``name``: the file it came from)."""
    found: list[ClockRead] = []
    for n, line in enumerate(text.splitlines(), start=1):
        for match in _CLOCK_CALL.finditer(line):
            found.append(ClockRead(file=name, line=n, function=match.group(1), text=line.strip()[:200]))
    return found


def clock_reads_in_dir(policy_dir: Path) -> list[ClockRead]:
    """Every clock function call in the policy files under ``policy_dir`` (test suites left out)."""
    found: list[ClockRead] = []
    for path in sorted(p for p in policy_dir.rglob("*") if p.is_file() and p.suffix in POLICY_SUFFIXES):
        rel = path.relative_to(policy_dir)
        if not _is_test_file(rel):
            found += clock_reads_in_text(rel.as_posix(), path.read_text(errors="replace"))
    return found


#: the resource's id read by a policy
_ID_READ = re.compile(r"\b(?:R|request\.resource)\.id\b")
#: the resource named other than through one of its fields: what is read of it cannot be told
_WHOLE_RESOURCE = re.compile(r"\bR\b(?!\.(?:attr|id|kind|scope|policyVersion)\b)"
                             r"|\brequest\.resource\b(?!\.(?:attr|id|kind|scope|policyVersion)\b)")


def id_free_kinds_in_dir(policy_dir: Path) -> list[str]:
    """The resource kinds of the policy files under ``policy_dir`` (test suites left out) whose decisions
    cannot depend on the resource id (see the module docstring); empty when the scan cannot tell."""
    reads_id: dict[str, bool] = {}
    for path in sorted(p for p in policy_dir.rglob("*") if p.is_file() and p.suffix in POLICY_SUFFIXES):
        if _is_test_file(path.relative_to(policy_dir)):
            continue
        text = path.read_text(errors="replace")
        if _WHOLE_RESOURCE.search(text):
            return []
        try:
            documents = [d for d in yaml.safe_load_all(text) if d is not None]
        except yaml.YAMLError:
            return []
        kinds = [d["resourcePolicy"].get("resource") for d in documents
                 if isinstance(d, dict) and isinstance(d.get("resourcePolicy"), dict)]
        if any(not isinstance(k, str) or not k for k in kinds):
            return []
        uses_id = bool(_ID_READ.search(text))
        if uses_id and len(kinds) < len(documents):  # read by a file that may decide any kind
            return []
        for kind in kinds:
            reads_id[kind] = reads_id.get(kind, False) or uses_id
    return sorted(kind for kind, uses in reads_id.items() if not uses)


def scan_deployment(epoch: str, deployment: Path) -> EpochScan:
    """The scan of the deployed set ``deployment`` (the directory of ``epoch``)."""
    scanned = _verdict(epoch, f"deployment {deployment}", clock_reads_in_dir(deployment))
    if not scanned.memoized:
        return scanned
    return scanned.model_copy(update={"id_free_kinds": id_free_kinds_in_dir(deployment)})


def _verdict(epoch: str, source: str, reads: list[ClockRead]) -> EpochScan:
    if reads:
        names = sorted({f"{r.function}()" for r in reads})
        where = sorted({r.file for r in reads})
        return EpochScan(epoch=epoch, memoized=False, source=source, clock_reads=reads,
                         reason=f"the policy set reads the clock ({', '.join(names)} in {', '.join(where)})")
    return EpochScan(epoch=epoch, memoized=True, source=source, clock_reads=[],
                     reason=f"no clock function ({', '.join(f'{f}()' for f in CLOCK_FUNCTIONS)}) in the set")


def unscannable(epoch: str | None, why: str, *, final: bool = True) -> EpochScan:
    """The memo is off for ``epoch`` because its set cannot be scanned (fail safe). ``final=False``: maybe
    a passing condition; the set is looked for again after :data:`RESCAN_AFTER_S`."""
    return EpochScan(epoch=epoch, memoized=False, source="none", clock_reads=[], final=final,
                     reason=f"cannot tell whether the policy set reads the clock: {why}")


Scanner = Callable[[str], EpochScan]


def epoch_scanner(deploy_root: Path) -> Scanner:
    """The scan of an epoch's deployed set, ``deploy_root/<epoch>`` (what the governance workflow deploys
    and the runtime's PDP serves); no deployment of the epoch there (yet): off, looked for again after
    :data:`RESCAN_AFTER_S`."""
    def scan(epoch: str) -> EpochScan:
        deployment = deploy_root / epoch
        if not deployment.is_dir():
            return unscannable(epoch, f"no deployment of it under {deploy_root}", final=False)
        return scan_deployment(epoch, deployment)
    return scan


class DecisionMemo:
    """A bounded, thread-safe LRU of check decisions (see the module docstring). ``scan`` tells, per epoch,
    whether it may be memoized; without one, or with ``capacity`` <= 0, the memo is off (:attr:`active`
    false, every check bypassed, :attr:`status` says why)."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY, *, scan: Scanner | None = None) -> None:
        self.capacity = capacity
        self._scan = scan
        #: False: the memo never serves (no scanner, or no capacity); callers need not read the epoch.
        self.active = scan is not None and capacity > 0
        self._decisions: OrderedDict[bytes, Decision] = OrderedDict()
        self._lock = threading.Lock()
        self._scan_lock = threading.Lock()
        self._epoch: str | None = None
        self._status: EpochScan | None = None if self.active else self._off()
        self._id_free: frozenset[str] = frozenset()  # the kinds keyed without their id (the epoch's scan)
        self._rescan_at = 0.0
        self._generation = 0
        self.hits = 0
        self.misses = 0
        self.bypassed = 0
        self.round_trips_saved = 0

    def _off(self) -> EpochScan:
        why = "its size is 0" if self.capacity <= 0 else "no deployment directory to scan for clock functions"
        return EpochScan(epoch=None, memoized=False, source="none", clock_reads=[], reason=f"memo off: {why}")

    @property
    def status(self) -> EpochScan | None:
        """Whether the last epoch seen is memoized, and why (None: no epoch seen, or not scanned yet)."""
        return self._status

    def counters(self) -> MemoCounters:
        with self._lock:
            return MemoCounters(hits=self.hits, misses=self.misses, bypassed=self.bypassed,
                                round_trips_saved=self.round_trips_saved, size=len(self._decisions),
                                capacity=self.capacity, epoch=self._epoch,
                                memoized=self._status.memoized if self._status is not None else None)

    def clear(self) -> None:
        """Forget every decision and the epoch's scan (the next call scans again)."""
        with self._lock:
            self._forget(None)
            if not self.active:
                self._status = self._off()

    def _forget(self, epoch: str | None) -> None:
        self._decisions.clear()
        self._epoch = epoch
        self._status = None
        self._id_free = frozenset()
        self._generation += 1

    def _current(self, epoch: str) -> tuple[bool, int] | None:
        """(memoized, generation) if ``epoch`` is the one seen and its scan stands (caller holds the lock)."""
        if self._epoch == epoch and self._status is not None and (
                self._status.final or time.monotonic() < self._rescan_at):
            return self._status.memoized, self._generation
        return None

    def _enabled(self, epoch: str) -> tuple[bool, int]:
        """Whether ``epoch`` is memoized, and the generation the answer belongs to. A new epoch forgets
        everything first and is scanned once (a passing failure to scan: again after RESCAN_AFTER_S)."""
        with self._lock:
            if self._epoch != epoch:
                self._forget(epoch)
            known = self._current(epoch)
            if known is not None:
                return known
        with self._scan_lock:
            with self._lock:
                known = self._current(epoch)
                if known is not None:
                    return known
            assert self._scan is not None  # active
            status = self._scan(epoch)
            with self._lock:
                if self._epoch != epoch:  # another epoch arrived meanwhile: this call bypasses
                    return False, -1
                self._status = status
                self._id_free = frozenset(status.id_free_kinds) if status.memoized else frozenset()
                self._rescan_at = time.monotonic() + RESCAN_AFTER_S
                generation = self._generation
        if status.memoized:
            log.info("decision memo on for policy epoch %s: %s", epoch, status.reason)
        else:
            log.warning("decision memo OFF for policy epoch %s: %s", epoch, status.reason)
        return status.memoized, generation

    def check(self, epoch: str | None, principal: PrincipalRef, asked: Asked, fetch: Fetch) -> list[Decision]:
        """The decisions for ``asked`` (resources with their actions) of ``principal`` under ``epoch`` (the
        store's current one): remembered ones, and the rest from ``fetch`` (one call, in order). Without an
        epoch, with the memo off, or for an epoch whose set reads the clock, everything comes from
        ``fetch``."""
        if epoch is None or not self.active:
            return self._bypass(asked, fetch)
        enabled, generation = self._enabled(epoch)
        if not enabled:
            return self._bypass(asked, fetch)
        id_free = self._id_free  # the kinds keyed without their id under the epoch seen (its scan's)
        head = b"[" + orjson.dumps(epoch) + b"," + orjson.dumps(principal.model_dump(mode="json"),
                                                               option=orjson.OPT_SORT_KEYS) + b","
        keys = [head + orjson.dumps(r.model_dump(mode="json", exclude={"id"} if r.kind in id_free else None),
                                    option=orjson.OPT_SORT_KEYS) + b"," + orjson.dumps(list(actions)) + b"]"
                for r, actions in asked]
        out: list[Decision | None] = [None] * len(keys)
        with self._lock:
            for n, key in enumerate(keys):
                found = self._decisions.get(key)
                if found is not None:
                    self._decisions.move_to_end(key)
                    wanted = asked[n][0].id
                    out[n] = found if found.id == wanted else found.model_copy(update={"id": wanted})
            self.hits += sum(d is not None for d in out)
            missing = [n for n, d in enumerate(out) if d is None]
            self.round_trips_saved += not missing
        if missing:
            fresh = fetch([asked[n] for n in missing])
            with self._lock:
                self.misses += len(missing)
                keep = self._generation == generation and self._epoch == epoch
                for n, decision in zip(missing, fresh, strict=True):
                    out[n] = decision
                    if keep and decision.epoch == epoch:  # answered under the epoch it is keyed by
                        self._decisions[keys[n]] = decision
                while len(self._decisions) > self.capacity:
                    self._decisions.popitem(last=False)
        return [d for d in out if d is not None]

    def _bypass(self, asked: Asked, fetch: Fetch) -> list[Decision]:
        decisions = fetch(asked)
        with self._lock:
            self.bypassed += len(asked)
        return decisions


__all__ = ["CLOCK_FUNCTIONS", "DEFAULT_CAPACITY", "RESCAN_AFTER_S", "ClockRead", "DecisionMemo", "EpochScan",
           "MemoCounters", "Scanner", "clock_reads_in_dir", "clock_reads_in_text", "epoch_scanner",
           "id_free_kinds_in_dir", "scan_deployment", "unscannable"]
