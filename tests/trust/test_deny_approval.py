"""A governor denies a pending S3 approval (``World.deny_approval``): decided by the real PDP as the
approval's ``approve`` right, written through the gateway, rejected for good; the requester's invocation
then fails with ``ApprovalInvalid``."""

from __future__ import annotations

import pytest

from engine.errors import ApprovalInvalid, IllegalTransition, PolicyDenied
from engine.models.approvals import ApprovalStatus
from engine.world import World
from tests.conftest import add_agent, book_of

PAYLOAD = {"env": "prod"}


@pytest.fixture
def team(pworld: World) -> World:
    add_agent(pworld, "alice", ["tool:deploy"], clearance=3)
    add_agent(pworld, "mallory")  # live, granted nothing
    return pworld


def test_a_denied_approval_can_be_neither_approved_nor_spent(team: World) -> None:
    approval = team.request_approval("alice", "tool", "deploy", payload=PAYLOAD)
    denied = team.deny_approval("gov", approval.approval_id)
    epoch = team.current_policy_epoch()
    assert epoch is not None
    assert (denied.status, denied.approver, denied.policy_epoch, denied.expires_at_us) == (
        ApprovalStatus.REJECTED, "gov", epoch.epoch, None)
    assert team.get_approval(approval.approval_id, actor="alice").status is ApprovalStatus.REJECTED
    events = [e for e in team.events(limit=1000, actor="gov") if e.subject_id == approval.approval_id]
    assert [(e.event_type, e.actor_id, e.command) for e in events] == [
        ("approval.requested", "alice", "request_approval"), ("approval.reject", "gov", "deny_approval")]
    with pytest.raises(IllegalTransition):
        team.approve("gov", approval.approval_id)
    with pytest.raises(IllegalTransition):
        team.deny_approval("gov", approval.approval_id)
    with pytest.raises(ApprovalInvalid, match="approval is rejected") as refused:
        team.invoke("alice", "tool", "deploy", side_effect="S3", payload=PAYLOAD, approval_id=approval.approval_id)
    assert refused.value.code == "approval_invalid" and refused.value.approval_id == approval.approval_id


@pytest.mark.parametrize("who", ["alice", "mallory"])
def test_only_a_governor_denies_and_nobody_its_own_request(team: World, who: str) -> None:
    approval = team.request_approval("alice", "tool", "deploy", payload=PAYLOAD)
    before = book_of(team).store.read.counts_and_versions()
    with pytest.raises(PolicyDenied):
        team.deny_approval(who, approval.approval_id)
    after = book_of(team).store.read.counts_and_versions()
    assert {**after, "events": 0} == {**before, "events": 0}  # only the denial's audit record is added
    audit = team.events(actor="gov", newest=True, limit=1)[0]
    assert (audit.event_type, audit.actor_id, audit.changes) == ("policy.denied", who, [])
    assert team.get_approval(approval.approval_id, actor="alice").status is ApprovalStatus.PENDING


def test_an_approved_request_can_no_longer_be_denied(team: World) -> None:
    approval = team.request_approval("alice", "tool", "deploy", payload=PAYLOAD)
    team.approve("gov", approval.approval_id, ttl_seconds=60)
    with pytest.raises(IllegalTransition):
        team.deny_approval("gov", approval.approval_id)
    done = team.invoke("alice", "tool", "deploy", side_effect="S3", payload=PAYLOAD, approval_id=approval.approval_id)
    assert done.approval_id == approval.approval_id


def test_a_repeated_deny_with_its_op_id_answers_the_first_result(team: World) -> None:
    approval = team.request_approval("alice", "tool", "deploy", payload=PAYLOAD)
    first = team.deny_approval("gov", approval.approval_id, op_id="op-deny-1")
    assert team.deny_approval("gov", approval.approval_id, op_id="op-deny-1") == first
