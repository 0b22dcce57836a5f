"""Contracted actions through the World and the real PDP: the contract is checked before an action begins,
an S3 action needs an approval, and a retry after a timeout asks the status and never repeats a done effect
(DSR = 0 over 100 seeded trials, where a naive retry duplicates)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.commands.actions import BeginAction, SettleAction
from engine.contracts import AttemptStatus, compensate, evidence_completeness, run_action
from engine.contracts.operator import undo_key
from engine.errors import ActionSettled, ApprovalInvalid, InvalidInput, NotFound, NotPermitted, PolicyDenied
from engine.policy.cerbos_adapter import CerbosPdp
from engine.world import World
from tests.conftest import add_agent, close_world, open_pdp_world
from tests.contracts.effects import FlakyMailbox, NaiveOperator

MESSAGE = {"to": "carol@example.org", "body": "the report is ready"}
TRIALS = 100


@pytest.fixture(scope="module")
def aworld(tmp_path_factory: pytest.TempPathFactory, pdp_client: CerbosPdp) -> Iterator[World]:
    """One world for the module (keys are unique per test): ``ann`` holds the send/recall/publish tools,
    ``bob`` holds none."""
    root: Path = tmp_path_factory.mktemp("actions")
    world = open_pdp_world(f"sqlite:///{root / 'world.db'}", pdp_client, root / "artifacts")
    add_agent(world, "ann", ["tool:send_message", "tool:recall_message", "tool:publish_release",
                             "tool:label_thread"])
    add_agent(world, "bob", ["state.read"])
    yield world
    close_world(world)


def test_begin_records_pending_with_the_contracts_classes(aworld: World) -> None:
    attempt = aworld.begin_action("ann", "send_message", MESSAGE, idempotency_key="k-pending")
    assert attempt.status is AttemptStatus.PENDING and not attempt.resumed
    assert (attempt.side_effect.value, attempt.evidence.value, attempt.compensation.value) == (
        "S2", "E2", "TRUE_ROLLBACK")
    assert attempt.policy_epoch is not None
    again = aworld.begin_action("ann", "send_message", MESSAGE, idempotency_key="k-pending")
    assert again.resumed and again.attempt_id == attempt.attempt_id


def test_input_is_checked_against_the_contract(aworld: World) -> None:
    with pytest.raises(InvalidInput) as caught:
        aworld.begin_action("ann", "send_message", {"to": "x"}, idempotency_key="k-bad-input")
    assert caught.value.field == "input.body"
    with pytest.raises(InvalidInput):
        aworld.begin_action("ann", "send_message", {**MESSAGE, "bcc": "eve"}, idempotency_key="k-bad-input")
    assert aworld.action_status("ann", "k-bad-input").status is AttemptStatus.UNKNOWN


def test_an_action_without_a_contract_is_refused(aworld: World) -> None:
    with pytest.raises(NotFound):
        aworld.begin_action("ann", "wire_money", {}, idempotency_key="k-nocontract")


def test_the_pdp_still_decides(aworld: World) -> None:
    with pytest.raises(PolicyDenied):
        aworld.begin_action("bob", "send_message", MESSAGE, idempotency_key="k-bob")
    assert aworld.action_status("bob", "k-bob").status is AttemptStatus.UNKNOWN


def test_s3_needs_an_approval_for_exactly_this_input(aworld: World) -> None:
    release = {"title": "v1", "body": "notes"}
    with pytest.raises(ApprovalInvalid):
        aworld.begin_action("ann", "publish_release", release, idempotency_key="k-pub")
    approval = aworld.request_approval("ann", "tool", "publish_release", payload=release)
    aworld.approve("gov", approval.approval_id)
    with pytest.raises(ApprovalInvalid):
        aworld.begin_action("ann", "publish_release", {**release, "body": "other"}, idempotency_key="k-pub",
                            approval_id=approval.approval_id)
    begun = aworld.begin_action("ann", "publish_release", release, idempotency_key="k-pub",
                                approval_id=approval.approval_id)
    assert begun.approval_id == approval.approval_id and begun.side_effect.value == "S3"
    done = aworld.settle_action("ann", "k-pub", "done", output={"url": "https://example.org/v1"},
                                external_ref="site:v1")
    assert evidence_completeness(done) == (11, 11)  # E3: the approval ref and the receipt hash included


def test_a_key_is_one_effect(aworld: World) -> None:
    aworld.begin_action("ann", "send_message", MESSAGE, idempotency_key="k-one")
    with pytest.raises(InvalidInput):
        aworld.begin_action("ann", "send_message", {**MESSAGE, "body": "else"}, idempotency_key="k-one")
    done = aworld.settle_action("ann", "k-one", "done", output={"message_id": "m1"}, external_ref="smtp:m1")
    assert done.receipt_hash is not None
    again = aworld.settle_action("ann", "k-one", "done", output={"message_id": "m1"})
    assert again.resumed and again.model_copy(update={"resumed": False}) == done
    with pytest.raises(ActionSettled):
        aworld.settle_action("ann", "k-one", "failed", reason="changed my mind")
    assert aworld.begin_action("ann", "send_message", MESSAGE, idempotency_key="k-one").status is AttemptStatus.DONE


def test_another_agent_may_not_continue_an_attempt(aworld: World) -> None:
    aworld.begin_action("ann", "send_message", MESSAGE, idempotency_key="k-ann-only")
    with pytest.raises(NotPermitted):
        aworld.action_status("bob", "k-ann-only")
    with pytest.raises(NotPermitted):
        aworld.settle_action("bob", "k-ann-only", "failed")


def test_retry_after_timeouts_never_duplicates_an_effect(aworld: World) -> None:
    """DSR = 0 over 100 seeded trials: sends whose answers are lost (the effect happened), status queries
    that time out, and a crash after the begin (the operator runs again from the pending record)."""
    mailbox = FlakyMailbox(seed=16)
    outcomes: dict[str, AttemptStatus] = {}
    for trial in range(TRIALS):
        key = f"dsr-{trial}"
        attempt = run_action(aworld, "ann", "send_message", MESSAGE, key, mailbox)
        if trial % 3 == 0:  # the operator crashed and runs the same action again
            attempt = run_action(aworld, "ann", "send_message", MESSAGE, key, mailbox)
        outcomes[key] = attempt.status
        if attempt.status is AttemptStatus.DONE:
            assert attempt.external_ref == f"smtp:{key}"
    effects = sum(mailbox.effects.values())
    duplicates = sum(n - 1 for n in mailbox.effects.values() if n > 1)
    assert effects >= TRIALS * 0.8 and duplicates == 0  # DSR = duplicates / effects = 0
    assert all(outcomes[k] is AttemptStatus.DONE for k in mailbox.effects if outcomes[k] is not AttemptStatus.PENDING)
    assert sum(s is AttemptStatus.DONE for s in outcomes.values()) >= TRIALS * 0.8


def test_the_control_a_naive_retry_duplicates() -> None:
    """The same mailbox and seeds, retried on timeout without a status query: DSR > 0 (the DSR test can fail)."""
    mailbox = FlakyMailbox(seed=16)
    naive = NaiveOperator(mailbox, attempts=4)
    for trial in range(TRIALS):
        naive.send(f"dsr-{trial}", MESSAGE)
    assert sum(n - 1 for n in mailbox.effects.values() if n > 1) > 0


def test_true_rollback_runs_the_declared_inverse(aworld: World) -> None:
    mailbox = FlakyMailbox(seed=3, lose_answer=0.0, lose_status=0.0, fail_before=0.0)
    sent = run_action(aworld, "ann", "send_message", MESSAGE, "k-rollback", mailbox)
    assert sent.status is AttemptStatus.DONE
    undone = compensate(aworld, "ann", "k-rollback", mailbox)
    assert (undone.action, undone.status, undone.idempotency_key) == (
        "recall_message", AttemptStatus.DONE, undo_key("k-rollback"))
    assert mailbox.recalled == {"msg-k-rollback"}
    assert compensate(aworld, "ann", "k-rollback", mailbox).resumed  # twice: the recall is not repeated
    assert mailbox.effects[undo_key("k-rollback")] == 1


def test_no_rollback_for_other_compensation_kinds(aworld: World) -> None:
    mailbox = FlakyMailbox(seed=4, lose_answer=0.0, lose_status=0.0, fail_before=0.0)
    run_action(aworld, "ann", "label_thread", {"thread": "t1", "label": "done"}, "k-label", mailbox)
    with pytest.raises(InvalidInput):
        compensate(aworld, "ann", "k-label", mailbox)


def test_an_action_is_a_command_agents_can_name(aworld: World) -> None:
    begun = aworld.execute("ann", BeginAction(action="label_thread", input={"thread": "t9", "label": "x"},
                                              idempotency_key="k-exec"))
    settled = aworld.execute("ann", SettleAction(idempotency_key="k-exec", status="done"))
    assert (begun.status, settled.status) == (AttemptStatus.PENDING, AttemptStatus.DONE)


def test_retries_never_duplicate_on_postgresql(tmp_path: Path, pg_url: str, pdp_client: CerbosPdp) -> None:
    world = open_pdp_world(pg_url, pdp_client, tmp_path / "artifacts")
    try:
        add_agent(world, "ann", ["tool:send_message"])
        mailbox = FlakyMailbox(seed=5)
        for trial in range(20):
            run_action(world, "ann", "send_message", MESSAGE, f"pg-{trial}", mailbox)
            run_action(world, "ann", "send_message", MESSAGE, f"pg-{trial}", mailbox)
        assert sum(mailbox.effects.values()) >= 15 and max(mailbox.effects.values()) == 1
    finally:
        close_world(world)


def test_an_attempts_ledger_ids_cannot_be_taken_by_another_write(aworld: World) -> None:
    """``act-<digest>-b`` / ``-s`` are the begin and settle records of a key: another write (here a state
    compare-and-set by an agent that computed them) is refused them, so the key's attempt is not blocked."""
    from engine.world.actions import attempt_op_ids

    begin_op, settle_op = attempt_op_ids("k-squatted")
    for op_id in (begin_op, settle_op):
        with pytest.raises(InvalidInput) as refused:
            aworld.compare_and_set_state("ann", f"squat-{op_id[-1]}", 0, 1, op_id=op_id)
        assert refused.value.field == "op_id"
    begun = aworld.begin_action("ann", "send_message", MESSAGE, idempotency_key="k-squatted")
    assert begun.status is AttemptStatus.PENDING and not begun.resumed
