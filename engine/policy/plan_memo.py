"""Query plans remembered by exactly what decides them.

A Cerbos query plan (``PlanResources``) is a pure function of the policy set, the principal as sent
(id, roles, every attribute) and the resource kind and action: PMW's policies read no clock and no
request context (``policies/`` has no ``now()``), and the plan leaves every resource attribute open. The
key is therefore ``(policy epoch, the principal's canonical JSON, kind, action)``, with the principal built
afresh from the world's rows on every call as before. A grant, a revocation, a room joined or left, a
handoff accepted, a status change: each changes the principal, so the next call misses and asks the PDP.
A new policy set is a new epoch (the epoch is the set's digest), so it misses too; the runtime also clears
the memo when it reloads the PDP. Planning is the PDP's most expensive call (3-8 ms here, against about
1 ms for a check), and a worker's cycle asks for five plans.

Only plans are remembered: single checks (every write's decision) always go to the PDP.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

import orjson

from engine.policy.model import PlanFilter, PrincipalRef

DEFAULT_CAPACITY = 4096

Key = tuple[str, bytes, str, str]


class PlanMemo:
    """A bounded, thread-safe LRU of plans (see the module docstring)."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self._plans: OrderedDict[Key, PlanFilter] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def plans(self, epoch: str | None, principal: PrincipalRef, asked: Sequence[tuple[str, str]],
              fetch: Callable[[Sequence[tuple[str, str]]], list[PlanFilter]]) -> list[PlanFilter]:
        """The plans for ``asked``: remembered ones, and the rest from ``fetch`` (one call). Without a
        policy epoch nothing is remembered."""
        if epoch is None or self.capacity <= 0:
            return fetch(asked)
        who = orjson.dumps(principal.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS)
        keys = [(epoch, who, kind, action) for kind, action in asked]
        with self._lock:
            found = {k: self._plans[k] for k in keys if k in self._plans}
            for k in found:
                self._plans.move_to_end(k)
        missing = [(k[2], k[3]) for k in keys if k not in found]
        if missing:
            fresh = dict(zip([k for k in keys if k not in found], fetch(missing), strict=True))
            with self._lock:
                for k, plan in fresh.items():
                    self._plans[k] = plan
                while len(self._plans) > self.capacity:
                    self._plans.popitem(last=False)
                self.misses += len(fresh)
                self.hits += len(found)
            found.update(fresh)
        else:
            with self._lock:
                self.hits += len(found)
        return [found[k] for k in keys]

    def clear(self) -> None:
        with self._lock:
            self._plans.clear()


__all__ = ["DEFAULT_CAPACITY", "PlanMemo"]
