"""Contracted actions: checked against their contract, recorded ``pending`` before the effect, settled after.

``begin_action`` validates the input against the action's contract (``engine.contracts``), asks the PDP
``tool:<action>`` ``invoke`` with the *contract's* side-effect class, spends an approval when the contract
requires one (S3, or ``confirmation: approval``; in addition to the PDP, never instead of it), and records
the attempt as ``pending``: only then may the caller try the external effect. ``settle_action`` records
``done`` (output checked against the contract, external effect reference) or ``failed``. ``action_status``
answers what is recorded under a key (``unknown``: nothing), which is what a retry after a timeout asks
before anything else (:mod:`engine.contracts.operator`).

Where the records live: in the operation ledger, under operation ids derived from the idempotency key
(``act-<sha256(key)[:32]>-b`` for the begin, ``-s`` for the settle). The gateway's unique operation id
makes "one begin, one settle per key" hold across processes, and a lookup by key is one indexed read; no
table of its own is needed. Keys are world-wide: an attempt may be continued (its status asked, settled)
by the agent that began it or, for an attempt that is a step of a task, by the agent holding the task now
(a handoff's receiver); anyone else is ``NotPermitted``.
"""

from __future__ import annotations

import hashlib
from typing import Any

from engine.commands.actions import BeginAction, SettleAction
from engine.contracts.attempt import ActionAttempt, AttemptStatus, receipt_hash
from engine.contracts.json_schema import violations
from engine.contracts.loader import ContractBook, load_contracts
from engine.contracts.model import ActionContract
from engine.errors import ActionSettled, InvalidInput, NotFound, NotPermitted, OperationConflict
from engine.models.tasks import Task
from engine.policy.enforcement import Check
from engine.validation import build, check_id
from engine.world.approvals import ApprovalCalls
from engine.world.core import Cause, Plan, request_hash_of

BEGIN_COMMAND = "begin_action"
SETTLE_COMMAND = "settle_action"


def attempt_op_ids(idempotency_key: str) -> tuple[str, str]:
    """The ledger's operation ids of the begin and the settle of the attempt under ``idempotency_key``."""
    digest = hashlib.sha256(idempotency_key.encode()).hexdigest()[:32]
    return f"act-{digest}-b", f"act-{digest}-s"


class ActionCalls(ApprovalCalls):
    def action_contract(self, actor: str, action: str) -> ActionContract:
        """The contract of ``action`` as this world enforces it (``NotFound``: none). Contracts are public
        data: any agent may read one (``actor`` is checked as an id)."""
        check_id("actor", actor)
        return self._contracts().contract(action)

    def _contracts(self) -> ContractBook:
        """The action contracts this world enforces (the repository's ``contracts/``, loaded once)."""
        book: ContractBook | None = getattr(self, "_contract_book", None)
        if book is None:
            book = load_contracts()
            self._contract_book = book
        return book

    def begin_action(self, actor: str, action: str, input: dict[str, Any] | None = None, *,
                     idempotency_key: str, approval_id: str | None = None, task_id: str | None = None,
                     step: str | None = None, cause: Cause | None = None) -> ActionAttempt:
        """Record ``action`` as pending under ``idempotency_key`` (see the module docstring). A key already
        recorded is answered with its record, ``resumed=True``, settled status included, and nothing is
        written; the same key for another action or input is ``InvalidInput``. Raises ``NotFound`` (no
        contract), ``InvalidInput`` (input against the schema), ``PolicyDenied``, ``ApprovalInvalid``."""
        req = build(BeginAction, action=action, input=input or {}, idempotency_key=idempotency_key,
                    approval_id=approval_id, task_id=task_id, step=step)
        contract = self._contracts().contract(req.action)
        _check_against(contract.input_schema, _input_of(req), "input")
        if (known := self.action_status(actor, req.idempotency_key)).status is not AttemptStatus.UNKNOWN:
            return self._same_attempt(known, req)
        begin_op, _ = attempt_op_ids(req.idempotency_key)
        planned: list[ActionAttempt] = []

        def plan(now: int) -> Plan:
            if req.task_id is not None:
                self._row("tasks", "task", req.task_id, task_id=req.task_id)
            attempt = self._new_attempt(actor, req, contract, now, cause)
            planned.append(attempt)
            extra = [self._spend_approval(actor, req.approval_id, "tool", req.action, _input_of(req), now)] \
                if contract.needs_approval else []
            p = Plan("action.pending", "tool", req.action, attempt, extra,
                     payload={"idempotency_key": req.idempotency_key, "side_effect": contract.side_effect.value,
                              "task_id": req.task_id, "step": req.step},
                     checks=[Check("tool", req.action, "invoke", None, contract.side_effect.value)])
            p.on_decided = lambda epoch: _set_epoch(p, epoch)
            return p
        try:
            done = self._write(BEGIN_COMMAND, actor, req, plan, ActionAttempt, op_id=begin_op, cause=cause)
        except OperationConflict:  # another agent began this key first: answer with its record
            return self._same_attempt(self.action_status(actor, req.idempotency_key), req)
        return done if planned and done.attempt_id == planned[-1].attempt_id else done.model_copy(
            update={"resumed": True})

    def settle_action(self, actor: str, idempotency_key: str, status: str, *, output: dict[str, Any] | None = None,
                      external_ref: str | None = None, reason: str | None = None,
                      cause: Cause | None = None) -> ActionAttempt:
        """Record the outcome of the pending attempt under ``idempotency_key``: ``done`` (``output`` checked
        against the contract's output schema) or ``failed``. The same settle again returns the record;
        a different one is ``ActionSettled``. ``NotFound`` for a key with no attempt."""
        req = build(SettleAction, idempotency_key=idempotency_key, status=status, output=output or {},
                    external_ref=external_ref, reason=reason)
        given = req.output or {}
        known = self.action_status(actor, req.idempotency_key)
        if known.status is AttemptStatus.UNKNOWN:
            raise NotFound("action", req.idempotency_key)
        if known.status is not AttemptStatus.PENDING:
            if known.status.value == req.status and (req.status == "failed" or known.output == given):
                return known
            raise ActionSettled(req.idempotency_key, known.status.value)
        contract = self._contracts().contract(known.action)
        if req.status == "done":
            _check_against(contract.output_schema, given, "output")
        _, settle_op = attempt_op_ids(req.idempotency_key)

        def plan(now: int) -> Plan:
            settled = known.model_copy(update={
                "status": AttemptStatus(req.status), "output": given if req.status == "done" else None,
                "external_ref": req.external_ref, "reason": req.reason, "settled_by": actor,
                "settled_at_us": now, "resumed": False})
            settled = settled.model_copy(update={"receipt_hash": receipt_hash(settled)})
            return Plan(f"action.{req.status}", "tool", known.action, settled,
                        payload={"idempotency_key": req.idempotency_key, "external_ref": req.external_ref,
                                 "attempt_id": known.attempt_id, "evidence": known.evidence.value},
                        checks=[Check("tool", known.action, "invoke", None, known.side_effect.value)])
        try:
            return self._write(SETTLE_COMMAND, actor, req, plan, ActionAttempt, op_id=settle_op, cause=cause)
        except OperationConflict:  # settled concurrently, by another request
            now_known = self.action_status(actor, req.idempotency_key)
            raise ActionSettled(req.idempotency_key, now_known.status.value) from None

    def action_status(self, actor: str, idempotency_key: str) -> ActionAttempt:
        """What is recorded under ``idempotency_key``: the settled record, else the pending one, else an
        ``unknown`` stand-in (``attempt_id`` ``none``). Only the agent that began it, or the holder of the
        task it is a step of, may ask (``NotPermitted``); the answer is read from the ledger."""
        check_id("actor", actor)
        key = check_id("idempotency_key", idempotency_key)
        begin_op, settle_op = attempt_op_ids(key)
        begun = self._ledger_attempt(begin_op, BEGIN_COMMAND, key)
        if begun is None:
            return _unknown(key, actor, self.clock.now_us())
        self._require_party(actor, begun)
        settled = self._ledger_attempt(settle_op, SETTLE_COMMAND, key)
        return (settled or begun).model_copy(update={"resumed": True})

    def compensation_of(self, actor: str, idempotency_key: str) -> tuple[str, dict[str, Any]]:
        """The declared inverse (action, input) of a done TRUE_ROLLBACK attempt: the inverse input is the
        contract's ``inverse_input`` with ``$input.<f>`` / ``$output.<f>`` taken from the record. Anything
        else (not done, another compensation kind) is ``InvalidInput`` naming the kind recorded."""
        attempt = self.action_status(actor, idempotency_key)
        contract = self._contracts().contract(attempt.action)
        if attempt.status is not AttemptStatus.DONE or contract.compensation.inverse is None:
            raise InvalidInput("idempotency_key", f"{attempt.action} is {attempt.status.value} with compensation "
                                                  f"{attempt.compensation.value}: no rollback to run")
        values = {"input": attempt.input, "output": attempt.output or {}}
        resolved = {name: _resolve(ref, values) for name, ref in contract.compensation.inverse_input.items()}
        return contract.compensation.inverse, resolved

    # -- records -----------------------------------------------------------------------------------

    def _new_attempt(self, actor: str, req: BeginAction, contract: ActionContract, now: int,
                     cause: Cause | None) -> ActionAttempt:
        trace = cause.correlation_id if cause is not None else None
        return ActionAttempt(
            attempt_id=self.ids.new("act"), idempotency_key=req.idempotency_key, action=req.action, actor=actor,
            capability=contract.required_authority.capability, status=AttemptStatus.PENDING,
            side_effect=contract.side_effect, evidence=contract.evidence, compensation=contract.compensation.kind,
            input=_input_of(req), input_hash=request_hash_of({"action": req.action, "input": _input_of(req)}),
            approval_id=req.approval_id, task_id=req.task_id, step=req.step, trace_id=trace, requested_at_us=now)

    def _ledger_attempt(self, op_id: str, command: str, key: str) -> ActionAttempt | None:
        stored = self._store.operation(op_id)
        if stored is None:
            return None
        if stored.command != command:
            raise InvalidInput("idempotency_key", f"{key!r} names an operation that is not an action's")
        return ActionAttempt.model_validate(stored.result)

    def _same_attempt(self, known: ActionAttempt, req: BeginAction) -> ActionAttempt:
        if known.action != req.action or known.input_hash != request_hash_of({"action": req.action,
                                                                              "input": _input_of(req)}):
            raise InvalidInput("idempotency_key", f"{req.idempotency_key!r} was used for another action or input")
        return known

    def _require_party(self, actor: str, attempt: ActionAttempt) -> None:
        if attempt.actor == actor:
            return
        if attempt.task_id is not None:
            row = self._store.read.get("tasks", task_id=attempt.task_id)
            if row is not None and Task.model_validate(row).assignee == actor:
                return
        raise NotPermitted(actor, "continue", "action", attempt.idempotency_key,
                           f"begun by {attempt.actor}; not the holder of its task")


def _input_of(req: BeginAction) -> dict[str, Any]:
    return dict(req.input or {})


def _set_epoch(p: Plan, epoch: str | None) -> None:
    assert isinstance(p.result, ActionAttempt)
    p.result = p.result.model_copy(update={"policy_epoch": epoch})


def _check_against(schema: dict[str, Any], value: dict[str, Any], field: str) -> None:
    for path, reason in violations(schema, value):
        raise InvalidInput(f"{field}.{path}" if path else field, reason)


def _unknown(key: str, actor: str, now: int) -> ActionAttempt:
    return ActionAttempt(attempt_id="none", idempotency_key=key, action="-", actor=actor, capability="-",
                         status=AttemptStatus.UNKNOWN, side_effect="S0", evidence="E0",
                         compensation="NO_COMPENSATION", input_hash="-", requested_at_us=now)


def _resolve(ref: Any, values: dict[str, dict[str, Any]]) -> Any:
    if isinstance(ref, str) and ref.startswith(("$input.", "$output.")):
        where, _, name = ref[1:].partition(".")
        if name not in values[where]:
            raise InvalidInput("compensation.inverse_input", f"{ref} is not in the recorded {where}")
        return values[where][name]
    return ref


__all__ = ["ActionCalls", "attempt_op_ids"]
