"""The Operator (seed 003 §3.3, §12): run a contracted action so that a retry never repeats a done effect.

A :class:`Connector` is the process's own adapter to the outside (a mail server, a booking system): it
performs an effect under an idempotency key, and answers a status query for a key. It is registered in
Python by whoever runs actions; a contract only names the action, so a contract file can never make the
runtime run code. The connector honours the contract's ``timeout_s`` and raises :class:`EffectTimeout` when
it gets no answer in time: the effect may or may not have happened.

:func:`run_action` is the protocol:

1. ``begin_action`` records the attempt ``pending`` (or answers an earlier record: a ``done`` or ``failed``
   one is returned as it is, and nothing is tried);
2. when the outcome of an earlier try is unknown (a resumed pending record, or a timeout just now), the
   connector's status is asked first: an effect found is settled ``done`` with its reference, never
   performed again. A contract whose idempotency policy is ``none`` has no status query: its unknown
   outcome stays ``pending`` (for a human to resolve), never retried;
3. otherwise the effect is performed, at most ``retry.max_attempts`` times in all;
4. an answer settles the attempt ``done`` (or ``failed`` for :class:`EffectFailed`, which means the effect
   certainly did not happen). An attempt whose outcome is still unknown after the attempts stays ``pending``.

:func:`compensate` runs the declared inverse of a done ``TRUE_ROLLBACK`` action the same way, under a key of
its own derived from the original's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from engine.contracts.attempt import ActionAttempt, AttemptStatus
from engine.contracts.model import ActionContract, IdempotencyPolicy


class EffectTimeout(Exception):
    """No answer within the contract's timeout: the effect's outcome is unknown."""


class EffectFailed(Exception):
    """The external system refused: the effect certainly did not happen (``reason``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class EffectOutcome:
    """What the external system answered for an effect: its output and its own reference to it."""

    output: dict[str, Any]
    external_ref: str


class Connector(Protocol):
    """The adapter to the outside that performs contracted actions (see the module docstring)."""

    def perform(self, action: str, key: str, input: dict[str, Any], timeout_s: float) -> EffectOutcome:
        """Perform ``action`` under ``key``; raises ``EffectTimeout`` or ``EffectFailed``."""
        ...

    def status(self, action: str, key: str, timeout_s: float) -> EffectOutcome | None:
        """The effect done under ``key`` (``None``: none was); raises ``EffectTimeout``."""
        ...


class ActionWorld(Protocol):
    """The World calls the Operator uses (``engine.world.World`` has them)."""

    def action_contract(self, actor: str, action: str) -> ActionContract: ...

    def begin_action(self, actor: str, action: str, input: dict[str, Any] | None = None, *,
                     idempotency_key: str, approval_id: str | None = None, task_id: str | None = None,
                     step: str | None = None) -> ActionAttempt: ...

    def settle_action(self, actor: str, idempotency_key: str, status: str, *,
                      output: dict[str, Any] | None = None, external_ref: str | None = None,
                      reason: str | None = None) -> ActionAttempt: ...

    def compensation_of(self, actor: str, idempotency_key: str) -> tuple[str, dict[str, Any]]: ...


def run_action(world: ActionWorld, actor: str, action: str, input: dict[str, Any], key: str,
               connector: Connector, *, approval_id: str | None = None, task_id: str | None = None,
               step: str | None = None, sleep: Callable[[float], None] | None = None) -> ActionAttempt:
    """Run ``action`` under ``key`` by the protocol of the module docstring; returns the attempt as recorded
    last (``pending`` when its outcome is still unknown). ``sleep``: the backoff between attempts (default:
    none; a simulation passes its clock's). Errors of the World calls are raised unchanged."""
    attempt = world.begin_action(actor, action, input, idempotency_key=key, approval_id=approval_id,
                                 task_id=task_id, step=step)
    if attempt.status is not AttemptStatus.PENDING:
        return attempt
    contract = world.action_contract(actor, action)
    unknown = attempt.resumed  # an earlier try may have reached the outside
    for n in range(contract.retry.max_attempts):
        if n and sleep is not None and contract.retry.backoff_s:
            sleep(contract.retry.backoff_s)
        if unknown:
            if contract.idempotency.policy is IdempotencyPolicy.NONE:
                return attempt  # no way to learn the outcome: never repeat, leave it for a human
            try:
                found = connector.status(action, key, contract.timeout_s)
            except EffectTimeout:
                continue
            if found is not None:
                return _settle_done(world, actor, key, found)
        try:
            outcome = connector.perform(action, key, input, contract.timeout_s)
        except EffectTimeout:
            unknown = True
            continue
        except EffectFailed as failed:
            return world.settle_action(actor, key, "failed", reason=failed.reason[:4000])
        return _settle_done(world, actor, key, outcome)
    return attempt


def compensate(world: ActionWorld, actor: str, key: str, connector: Connector, *,
               approval_id: str | None = None) -> ActionAttempt:
    """Run the declared inverse of the done ``TRUE_ROLLBACK`` action under ``key`` (``InvalidInput`` for any
    other), under the key :func:`undo_key` ``(key)``."""
    inverse, inverse_input = world.compensation_of(actor, key)
    return run_action(world, actor, inverse, inverse_input, undo_key(key), connector, approval_id=approval_id)


def undo_key(key: str) -> str:
    """The idempotency key of the compensation of the action under ``key``."""
    return f"undo-{hashlib.sha256(key.encode()).hexdigest()[:40]}"


def _settle_done(world: ActionWorld, actor: str, key: str, outcome: EffectOutcome) -> ActionAttempt:
    return world.settle_action(actor, key, "done", output=outcome.output, external_ref=outcome.external_ref[:300])


__all__ = ["ActionWorld", "Connector", "EffectFailed", "EffectOutcome", "EffectTimeout", "compensate", "run_action",
           "undo_key"]
