"""``allowed_actions`` gives the answer the call will give, and says why not (real PDP).

The cases issue 9 measured (it said yes, then the call failed): claiming a task someone else holds,
claiming a task assigned to another agent, aborting a completed task. Then every lifecycle walked by the
right parties and by the wrong ones, each step asked first and then called (``agree``).
"""

from __future__ import annotations

import pytest

from engine.errors import IllegalTransition, NotPermitted, PolicyDenied
from engine.world import World
from tests.answers.conftest import agree


def test_claiming_a_task_someone_else_holds_is_refused_as_the_call_refuses_it(team: World) -> None:
    task = team.create_task("alice", "write").task_id
    team.claim_task("bob", task)
    answer = team.allowed_actions("alice", "task", task)
    assert "claim" in answer.denied and answer.refused["claim"] == "illegal_transition"
    assert "claimed" in answer.why["claim"]
    with pytest.raises(IllegalTransition):
        team.claim_task("alice", task)


def test_claiming_a_task_assigned_to_another_agent_is_not_the_assignees(team: World) -> None:
    task = team.create_task("alice", "write").task_id
    team.assign_task("alice", task, "bob")
    answer = team.allowed_actions("alice", "task", task)
    assert answer.refused["claim"] == "not_assignee" and "assigned to bob" in answer.why["claim"]
    with pytest.raises(NotPermitted) as raised:
        team.claim_task("alice", task)
    assert not isinstance(raised.value, PolicyDenied)
    assert "claim" in team.allowed_actions("bob", "task", task).allowed


def test_aborting_a_completed_task_is_an_illegal_transition(team: World) -> None:
    task = team.create_task("alice", "write").task_id
    team.claim_task("alice", task)
    team.complete_task("alice", task, {"ok": True})
    answer = team.allowed_actions("alice", "task", task)
    assert {a: answer.refused[a] for a in ("abort", "claim", "complete", "release")} == dict.fromkeys(
        ("abort", "claim", "complete", "release"), "illegal_transition")
    assert answer.allowed == ["create", "read"]
    with pytest.raises(IllegalTransition):
        team.abort_task("alice", task, "too late")


def test_completing_a_task_you_do_not_hold_and_a_policy_denial(team: World) -> None:
    task = team.create_task("alice", "write").task_id
    team.claim_task("alice", task)
    assert agree(team, "bob", "task", task, "complete", lambda: team.complete_task("bob", task)) == "not_assignee"
    assert agree(team, "mallory", "task", task, "read", lambda: team.get_task(task, actor="mallory")) == "allowed"
    other = team.create_task("alice", "more").task_id
    assert agree(team, "mallory", "task", other, "claim", lambda: team.claim_task("mallory", other)) == "policy"
    assert team.allowed_actions("mallory", "task", other).why["claim"].startswith("denied by policy (epoch p-")


def test_the_task_lifecycle_walked(team: World) -> None:
    t = team.create_task("alice", "walk").task_id
    steps = [
        ("bob", "abort", lambda: team.abort_task("bob", t, "mine now"), "not_assignee"),
        ("alice", "release", lambda: team.release_task("alice", t), "illegal_transition"),
        ("alice", "assign", lambda: team.assign_task("alice", t, "bob"), "allowed"),
        ("alice", "claim", lambda: team.claim_task("alice", t), "not_assignee"),
        ("bob", "claim", lambda: team.claim_task("bob", t), "allowed"),
        ("alice", "fail", lambda: team.fail_task("alice", t, "no"), "not_assignee"),
        ("alice", "release", lambda: team.release_task("alice", t), "allowed"),  # the owner takes it back
        ("alice", "claim", lambda: team.claim_task("alice", t), "allowed"),
        ("alice", "complete", lambda: team.complete_task("alice", t, {"done": 1}), "allowed"),
        ("alice", "fail", lambda: team.fail_task("alice", t, "after all"), "illegal_transition"),
    ]
    assert [agree(team, actor, "task", t, action, call) for actor, action, call, _ in steps] == [
        want for *_, want in steps]


def test_the_memory_review_path_walked(team: World) -> None:
    m = team.store_memory("alice", "the sky is green", "hypothesis").memory_id
    steps = [
        # private memory is sealed from everyone but its owner: the policy answers first (no status, no owner)
        ("rita", "review", lambda: team.review_memory("rita", m), "policy"),
        ("bob", "propose", lambda: team.propose_memory("bob", m), "policy"),
        ("alice", "propose", lambda: team.propose_memory("alice", m), "allowed"),
        ("alice", "review", lambda: team.review_memory("alice", m), "not_assignee"),  # no self-review
        ("bob", "review", lambda: team.review_memory("bob", m), "policy"),  # not a reviewer
        ("rita", "review", lambda: team.review_memory("rita", m), "allowed"),
        ("rita", "promote", lambda: team.promote_memory("rita", m), "allowed"),
        ("rita", "reject", lambda: team.reject_memory("rita", m, "too late"), "illegal_transition"),
        ("alice", "archive", lambda: team.archive_memory("alice", m), "allowed"),
        ("alice", "reopen", lambda: team.reopen_memory("alice", m, "doubt"), "allowed"),
        ("bob", "revoke", lambda: team.revoke_memory("bob", m, "wrong"), "not_assignee"),
        ("alice", "revoke", lambda: team.revoke_memory("alice", m, "wrong"), "allowed"),
    ]
    assert [agree(team, actor, "memory", m, action, call) for actor, action, call, _ in steps] == [
        want for *_, want in steps]


def test_handoffs_wakes_messages_and_approvals_walked(team: World) -> None:
    t = team.create_task("alice", "hand me on").task_id
    h = team.create_handoff("alice", "bob", t, "finish it").handoff_id
    got = [
        agree(team, "alice", "handoff", h, "accept", lambda: team.accept_handoff("alice", h)),
        agree(team, "bob", "handoff", h, "complete", lambda: team.complete_handoff("bob", h)),
        agree(team, "bob", "handoff", h, "accept", lambda: team.accept_handoff("bob", h)),
        agree(team, "bob", "handoff", h, "reject", lambda: team.reject_handoff("bob", h, "no")),
    ]
    assert got == ["not_assignee", "illegal_transition", "allowed", "illegal_transition"]
    t2 = team.create_task("alice", "not transferable").task_id
    h2 = team.create_handoff("alice", "bob", t2, "take it").handoff_id
    team.abort_task("alice", t2, "cancelled")
    assert agree(team, "bob", "handoff", h2, "accept", lambda: team.accept_handoff("bob", h2)) == "illegal_transition"

    w = team.enqueue_wake("alice", "bob", "ping", "k-1").wake.wake_id  # claim_wake takes bob's one due wake
    got = [
        agree(team, "alice", "wake", w, "ack", lambda: team.ack_wake("alice", w)),  # not claimed
        agree(team, "alice", "wake", w, "claim", lambda: team.claim_wake("alice", agent_id="bob")),  # decided as bob
        agree(team, "bob", "wake", w, "ack", lambda: team.ack_wake("bob", w)),  # alice holds the lease
        agree(team, "alice", "wake", w, "ack", lambda: team.ack_wake("alice", w)),
        agree(team, "alice", "wake", w, "cancel", lambda: team.cancel_wake("alice", w, "done")),
    ]
    assert got == ["illegal_transition", "allowed", "not_assignee", "allowed", "illegal_transition"]
    assert team.allowed_actions("alice", "wake", w).refused["claim"] == "illegal_transition"

    sent = team.send_message("alice", "general", "agent", "hi bob", recipient="bob")
    d = sent.deliveries[0].delivery_id
    got = [
        agree(team, "mallory", "message", d, "claim", lambda: team.claim_message("mallory", d)),
        agree(team, "bob", "message", d, "ack", lambda: team.ack_message("bob", d)),
        agree(team, "bob", "message", d, "claim", lambda: team.claim_message("bob", d)),
        agree(team, "bob", "message", d, "ack", lambda: team.ack_message("bob", d)),
    ]
    assert got == ["not_assignee", "illegal_transition", "allowed", "allowed"]

    a = team.request_approval("alice", "tool", "deploy", payload={"v": 1}).approval_id
    got = [agree(team, "alice", "approval", a, "approve", lambda: team.approve("alice", a)),  # own request
           agree(team, "gov", "approval", a, "approve", lambda: team.approve("gov", a)),
           agree(team, "gov", "approval", a, "approve", lambda: team.approve("gov", a))]
    assert got == ["policy", "allowed", "illegal_transition"]


def test_rooms_walked(team: World) -> None:
    r = team.create_room("alice", "decide", members=["bob"]).room_id
    got = [
        agree(team, "mallory", "room", r, "join", lambda: team.join_room("mallory", r)),  # not invited
        agree(team, "mallory", "room", r, "leave", lambda: team.leave_room("mallory", r)),  # never a member
        agree(team, "mallory", "room", r, "discuss", lambda: team.discuss("mallory", r, "psst")),
        agree(team, "bob", "room", r, "discuss", lambda: team.discuss("bob", r, "hello")),
        agree(team, "bob", "room", r, "answer", lambda: team.commit_answer("bob", r, "yes")),
        agree(team, "bob", "room", r, "answer", lambda: team.commit_answer("bob", r, "again")),  # answered
        agree(team, "bob", "room", r, "leave", lambda: team.leave_room("bob", r)),
        agree(team, "bob", "room", r, "leave", lambda: team.leave_room("bob", r)),  # left already
        agree(team, "bob", "room", r, "join", lambda: team.join_room("bob", r)),  # leaving ended the invitation
        agree(team, "alice", "room", r, "close", lambda: team.close_room("alice", r)),
        agree(team, "alice", "room", r, "close", lambda: team.close_room("alice", r)),
        agree(team, "alice", "room", r, "discuss", lambda: team.discuss("alice", r, "anyone?")),
    ]
    assert got == ["policy", "not_assignee", "not_assignee", "allowed", "allowed", "illegal_transition", "allowed",
                   "not_assignee", "policy", "allowed", "illegal_transition", "illegal_transition"]
    assert agree(team, "alice", "room", r, "invite",
                 lambda: team.invite_to_room("alice", r, "mallory")) == "illegal_transition"  # closed


def test_a_retired_or_foreign_artifact_and_a_batch(team: World) -> None:
    art = team.register_artifact("alice", "note", b"v1").artifact_id
    assert agree(team, "alice", "artifact", art, "version",
                 lambda: team.new_artifact_version("alice", art, b"v2")) == "allowed"
    assert agree(team, "mallory", "artifact", art, "version",
                 lambda: team.new_artifact_version("mallory", art, b"v3")) == "policy"
    task = team.create_task("alice", "x").task_id
    team.claim_task("bob", task)
    batch = team.allowed_actions_batch("alice", [("task", task), ("artifact", art), ("tool", "deploy")])
    assert [b.kind for b in batch] == ["task", "artifact", "tool"]
    assert batch[0].refused["claim"] == "illegal_transition"
    assert batch[1].refused == {} or set(batch[1].refused) == set(batch[1].denied)
