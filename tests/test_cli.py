"""The ``pmw`` command line: happy paths of every command group, ``--json`` output, exit codes, the demo.

Every test uses a real SQLite file under ``tmp_path`` and the session's Cerbos PDP (``tests/cli_support.py``):
the world's governor is bootstrapped with ``pmw init --governor`` and grants the agents the capabilities the
commands need; reads pass ``--as`` too. Most tests invoke the Typer app in-process (``CliRunner``), a few run
``python -m engine.cli`` as a subprocess.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import typer.main

import engine.cli
from engine.cli import app
from engine.errors import (
    AlreadyExists,
    ApprovalInvalid,
    ArtifactCorrupted,
    IllegalTransition,
    InvalidInput,
    NotFound,
    NotPermitted,
    PMWError,
    PolicyDenied,
    PolicyEpochChanged,
    PolicyInvalidRequest,
    PolicyRejected,
    PolicyUnavailable,
    StoreUnavailable,
    VersionConflict,
)
from store import LATEST
from tests.cli_support import (
    GOVERNOR,
    Pdp,
    Pmw,
    assert_clean_failure,
    assert_one_denial,
    counts,
    invoke,
    pdp_fixture,  # noqa: F401 - the session's PDP (fixture ``pdp``)
    pmw_fixture,  # noqa: F401 - a migrated world (fixture ``pmw``)
    sqlite_db_url_fixture,  # noqa: F401 - a SQLite world file (fixture ``db_url``)
)


def register(pmw: Pmw, *agents: str, **roles: str) -> None:
    """Register and activate ``agents`` (each on ``term-<agent>``, role ``tester`` unless ``roles`` names
    another), and have the governor grant them every capability the commands need."""
    pmw.agents(*agents, roles=roles)


# -- root, init, exit codes ---------------------------------------------------------------------------


def test_help_documents_every_exit_code() -> None:
    result = invoke(None, "--help")
    assert result.exit_code == 0
    for cls in (InvalidInput, NotFound, VersionConflict, IllegalTransition, ArtifactCorrupted, StoreUnavailable,
                PolicyUnavailable):
        assert f"  {cls.exit_code}  " in result.stdout
    for code in (0, 1, 2):
        assert f"  {code}  " in result.stdout
    assert "policy unavailable" in result.stdout
    assert "Exit codes" in (engine.cli.__doc__ or "")
    assert "    9  policy unavailable" in (engine.cli.__doc__ or "")


def test_no_arguments_shows_help_as_a_usage_error() -> None:
    result = invoke(None)
    assert result.exit_code == 2
    assert "Usage" in result.output


def test_init_twice_is_idempotent(db_url: str, tmp_path: Path) -> None:
    first = invoke(db_url, "init", as_json=True)  # no PDP anywhere: plain init only migrates
    assert first.exit_code == 0, first.stderr
    assert json.loads(first.stdout) == {"applied": list(range(1, LATEST + 1)), "schema_version": LATEST}
    before = counts(db_url)
    second = invoke(db_url, "init", as_json=True)
    assert json.loads(second.stdout) == {"applied": [], "schema_version": LATEST}
    assert counts(db_url) == before
    human = invoke(db_url, "init")
    assert f"schema_version: {LATEST}" in human.stdout
    assert not (tmp_path / "policy-deploys").exists()


def test_init_bootstraps_the_first_governor_once(db_url: str, pdp: Pdp) -> None:
    cli = Pmw(db_url, pdp)
    first = cli.js("init", "--governor", "root", "--name", "Root", "--term", "term-root")
    assert (first["applied"], first["schema_version"]) == (list(range(1, LATEST + 1)), LATEST)
    assert (first["governor"]["agent"]["agent_id"], first["governor"]["agent"]["role_id"]) == ("root", "governor")
    assert first["governor"]["session"]["term_key"] == "term-root"
    before = counts(db_url)
    again = cli.fails(6, "init", "--governor", "other", "--name", "Other", "--term", "term-other")
    assert (again["code"], again["reason"]) == ("not_permitted", "a governor already exists")
    assert counts(db_url) == before
    assert cli.js("agents", "show", "root", actor="root")["role_id"] == "governor"


def test_db_url_comes_from_the_environment(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'env.db'}"
    result = invoke(None, "init", as_json=True, env={"PMW_DB_URL": url})
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "env.db").exists()


def test_actor_comes_from_pmw_actor(pmw: Pmw) -> None:
    register(pmw, "alice")
    result = invoke(pmw.db_url, "tasks", "create", "from the environment", as_json=True,
                    env={**pmw.pdp.env, "PMW_ACTOR": "alice"})
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["owner_agent"] == "alice"


@pytest.mark.parametrize("args", [("tasks", "create", "nobody acts"), ("tasks", "list"), ("state", "get", "k")])
def test_missing_actor_names_the_option(pmw: Pmw, args: tuple[str, ...]) -> None:
    result = pmw.run(*args)  # writes and (decided by the policy too) reads
    assert_clean_failure(result, InvalidInput.exit_code)
    assert "--as" in result.stderr
    assert "PMW_ACTOR" in result.stderr


def test_errors_print_their_to_dict_as_json(pmw: Pmw) -> None:
    error = pmw.fails(4, "tasks", "show", "ghost", actor=GOVERNOR)
    assert error == NotFound("task", "ghost").to_dict()


def test_human_errors_are_one_line(pmw: Pmw) -> None:
    result = pmw.run("tasks", "show", "ghost", actor=GOVERNOR)
    assert_clean_failure(result, 4)
    assert result.stderr.strip() == "error: task 'ghost' not found (not_found)"


def test_a_policy_denial_exits_6_and_is_recorded(pmw: Pmw) -> None:
    pmw.agents("mallory", caps=())  # registered, active, no capability at all
    before = counts(pmw.db_url)
    error = pmw.fails(6, "tasks", "create", "not allowed", actor="mallory")
    assert (error["code"], error["actor"], error["action"], error["kind"]) == (
        "policy_denied", "mallory", "create", "task")
    assert error["policy_epoch"] == pmw.pdp.epoch
    assert_one_denial(before, pmw.db_url, "mallory")
    human = pmw.run("state", "set", "k", "1", "--expect-version", "0", actor="mallory")
    assert_clean_failure(human, 6)
    assert "denied by policy" in human.stderr
    assert "(policy_denied)" in human.stderr


# -- agents -------------------------------------------------------------------------------------------


def test_agents_lifecycle(pmw: Pmw) -> None:
    # Only a governor may set a profile at registration (authority is granted, never self-taken).
    denied = pmw.fails(6, "agents", "register", "alice", "--name", "Alice", "--role", "writer", "--term", "t1",
                       "--capabilities", '{"lang": ["en"]}')
    assert (denied["code"], denied["action"]) == ("policy_denied", "grant")
    reg = pmw.js("agents", "register", "alice", "--name", "Alice", "--role", "writer", "--term", "t1",
                 "--session-id", "s-alice", "--capabilities", '{"lang": ["en"]}', actor=GOVERNOR)
    assert reg["agent"]["agent_id"] == "alice"
    assert reg["agent"]["capability_profile"] == {"lang": ["en"]}
    assert reg["session"] == {**reg["session"], "session_id": "s-alice", "status": "attached", "term_key": "t1"}
    assert pmw.js("agents", "activate", "term:t1")["status"] == "active"
    assert [a["agent_id"] for a in pmw.js("agents", "list", "--status", "active", actor="alice")] == ["alice"]
    assert pmw.js("agents", "show", "alice", actor="alice")["status"] == "active"
    assert [s["session_id"] for s in pmw.js("agents", "sessions", "agent:alice", actor="alice")] == ["s-alice"]
    assert pmw.js("agents", "relinquish", "session:s-alice")["status"] == "attached"
    assert pmw.js("agents", "detach", "session:s-alice")["status"] == "offline"
    # An offline agent cannot recover itself (offline-read-only; see the report): the governor re-registers
    # it, passing its profile again (re-registering replaces the profiles).
    pmw.ok("agents", "register", "alice", "--name", "Alice", "--role", "writer", "--term", "t2",
           "--capabilities", '{"lang": ["en"]}', actor=GOVERNOR)
    gone = pmw.js("agents", "unregister", "agent:alice")
    assert [s["status"] for s in gone] == ["offline"]
    assert pmw.js("agents", "show", "alice", actor=GOVERNOR)["status"] == "offline"
    table = pmw.ok("agents", "list", actor=GOVERNOR)
    assert table.splitlines()[0].split() == ["AGENT_ID", "STATUS", "ROLE_ID", "DISPLAY_NAME"]
    assert "alice" in table


def test_agents_grant(pmw: Pmw) -> None:
    pmw.ok("agents", "register", "bob", "--name", "Bob", "--role", "worker", "--term", "t-bob")
    assert pmw.fails(6, "tasks", "create", "before the grant", actor="bob")["code"] == "policy_denied"
    agent = pmw.js("agents", "grant", "bob", "--capability", "task.create", "--capability", "state.write",
                   "--clearance", "2", actor=GOVERNOR)
    assert agent["capability_profile"] == {"capabilities": ["state.write", "task.create"]}
    assert agent["permission_profile"] == {"clearance": 2}
    assert pmw.js("tasks", "create", "after the grant", actor="bob")["owner_agent"] == "bob"
    # Nobody grants itself authority, and only governors grant at all.
    error = pmw.fails(6, "agents", "grant", "bob", "--capability", "topology.write", actor="bob")
    assert (error["code"], error["action"], error["kind"]) == ("policy_denied", "grant", "agent")
    only_clearance = pmw.js("agents", "grant", "bob", "--clearance", "0", actor=GOVERNOR)
    assert only_clearance["capability_profile"] == {"capabilities": ["state.write", "task.create"]}
    none = pmw.js("agents", "grant", "bob", "--no-capabilities", actor=GOVERNOR)
    assert none["capability_profile"] == {"capabilities": []}
    assert pmw.fails(6, "tasks", "create", "revoked", actor="bob")["code"] == "policy_denied"
    assert "capability_profile:" in pmw.ok("agents", "grant", "bob", "--capability", "task.create", actor=GOVERNOR)


def test_terminal_has_one_active_agent(pmw: Pmw) -> None:
    register(pmw, "alice")
    pmw.ok("agents", "register", "bob", "--name", "Bob", "--role", "r", "--term", "term-alice")
    error = pmw.fails(5, "agents", "activate", "agent:bob")
    assert error["code"] == "terminal_owned"


# -- state --------------------------------------------------------------------------------------------


def test_state_compare_and_set(pmw: Pmw) -> None:
    register(pmw, "alice", "bob")
    created = pmw.js("state", "set", "plan/phase", '{"phase": 1}', "--expect-version", "0", actor="alice")
    assert (created["version"], created["value"]) == (1, {"phase": 1})
    updated = pmw.js("state", "set", "plan/phase", '"two"', "--expect-version", "1", actor="alice")
    assert (updated["version"], updated["value"]) == (2, "two")
    stale = pmw.fails(5, "state", "set", "plan/phase", "3", "--expect-version", "1", actor="bob")
    assert (stale["code"], stale["expected"], stale["current"]) == ("version_conflict", 1, 2)
    assert pmw.js("state", "get", "plan/phase", actor="bob")["value"] == "two"
    pmw.ok("state", "set", "other", "null", "--expect-version", "0", actor="bob")
    assert [e["key"] for e in pmw.js("state", "list", "--prefix", "plan/", actor="bob")] == ["plan/phase"]
    assert "value:" in pmw.ok("state", "get", "other", actor="alice")


def test_op_id_makes_a_write_idempotent(pmw: Pmw) -> None:
    register(pmw, "alice")
    first = pmw.js("tasks", "create", "once", "--op-id", "op-1", actor="alice")
    events = counts(pmw.db_url)["events"]
    again = pmw.js("tasks", "create", "once", "--op-id", "op-1", actor="alice")
    assert again == first
    assert counts(pmw.db_url)["events"] == events
    other = pmw.fails(5, "tasks", "create", "something else", "--op-id", "op-1", actor="alice")
    assert other["code"] == "operation_conflict"


# -- tasks --------------------------------------------------------------------------------------------


def test_task_lifecycle(pmw: Pmw) -> None:
    register(pmw, "owner", "doer")
    task = pmw.js("tasks", "create", "Write it", "--id", "t1", "--constraints", '{"words": 500}', actor="owner")
    assert (task["status"], task["owner_agent"], task["constraints"]) == ("open", "owner", {"words": 500})
    assert pmw.js("tasks", "assign", "t1", "doer", "--expect-version", "1", actor="owner")["status"] == "assigned"
    assert pmw.js("tasks", "claim", "t1", actor="doer")["assignee"] == "doer"
    done = pmw.js("tasks", "complete", "t1", "--result", '{"ok": true}', "--expect-version", "3", actor="doer")
    assert (done["status"], done["result"]) == ("completed", {"ok": True})
    pmw.ok("tasks", "create", "Second", "--id", "t2", "--depends-on", "t1", actor="owner")
    assert pmw.js("tasks", "claim", "t2", actor="doer")["status"] == "claimed"
    assert pmw.js("tasks", "release", "t2", actor="doer")["status"] == "open"
    pmw.ok("tasks", "claim", "t2", actor="doer")
    assert pmw.js("tasks", "fail", "t2", "--reason", "blocked", actor="doer")["status"] == "failed"
    pmw.ok("tasks", "create", "Third", "--id", "t3", actor="owner")
    assert pmw.js("tasks", "abort", "t3", "--reason", "not needed", actor="owner")["status"] == "aborted"
    assert [t["task_id"] for t in pmw.js("tasks", "list", "--status", "completed", actor="doer")] == ["t1"]
    assert {t["task_id"] for t in pmw.js("tasks", "list", "--assignee", "doer", actor="owner")} == {"t1", "t2"}
    assert pmw.js("tasks", "show", "t2", actor="doer")["dependencies"] == ["t1"]
    assert "status:        failed" in pmw.ok("tasks", "show", "t2", actor="owner")


def test_reads_are_decided_by_the_policy(pmw: Pmw) -> None:
    register(pmw, "owner", "low")
    pmw.agents("high", clearance=3)
    pmw.ok("tasks", "create", "Open to all", "--id", "t-open", actor="owner")
    pmw.ok("tasks", "create", "Secret", "--id", "t-secret", "--constraints", '{"sensitivity": 3}', actor="owner")
    assert {t["task_id"] for t in pmw.js("tasks", "list", actor="high")} == {"t-open", "t-secret"}
    assert [t["task_id"] for t in pmw.js("tasks", "list", actor="low")] == ["t-open"]  # filtered, not an error
    before = counts(pmw.db_url)
    error = pmw.fails(6, "tasks", "show", "t-secret", actor="low")
    assert (error["code"], error["action"]) == ("policy_denied", "read")
    assert_one_denial(before, pmw.db_url, "low")
    assert pmw.js("tasks", "show", "t-secret", actor="high")["goal"] == "Secret"


# -- memory -------------------------------------------------------------------------------------------


def test_memory_review_path(pmw: Pmw) -> None:
    register(pmw, "owner", "reviewer", reviewer="reviewer")
    mem = pmw.js("memory", "store", "The sky is blue", "--type", "observation", "--id", "m1",
                 "--confidence", "0.9", "--source", "obs-1", actor="owner")
    assert (mem["status"], mem["scope"], mem["source_refs"]) == ("private", "private", ["obs-1"])
    assert pmw.fails(6, "memory", "show", "m1", actor="reviewer")["code"] == "policy_denied"
    assert [m["memory_id"] for m in pmw.js("memory", "list", actor="owner")] == ["m1"]
    assert pmw.js("memory", "list", actor="reviewer") == []
    assert pmw.js("memory", "propose", "m1", actor="owner")["status"] == "candidate"
    assert pmw.js("memory", "review", "m1", actor="reviewer")["status"] == "in_review"
    shared = pmw.js("memory", "promote", "m1", actor="reviewer")
    assert (shared["status"], shared["scope"]) == ("shared", "shared")
    assert pmw.js("memory", "show", "m1", actor="reviewer")["memory_id"] == "m1"
    assert pmw.js("memory", "archive", "m1", actor="owner")["status"] == "archived"
    assert pmw.js("memory", "reopen", "m1", "--reason", "new data", actor="reviewer")["status"] == "reopened"
    pmw.ok("memory", "store", "The sky is grey", "--type", "observation", "--id", "m2", actor="owner")
    pmw.ok("memory", "propose", "m2", actor="owner")
    pmw.ok("memory", "promote", "m2", actor="reviewer")
    assert pmw.fails(6, "memory", "supersede", "m1", "m2", actor="reviewer")["code"] == "policy_denied"
    superseded = pmw.js("memory", "supersede", "m1", "m2", actor="owner")
    assert (superseded["status"], superseded["superseded_by"]) == ("superseded", "m2")
    pmw.ok("memory", "store", "A guess", "--type", "hypothesis", "--id", "m3", actor="owner")
    pmw.ok("memory", "propose", "m3", actor="owner")
    assert pmw.js("memory", "reject", "m3", "--reason", "unfounded", actor="reviewer")["status"] == "rejected"
    assert pmw.js("memory", "revoke", "m2", "--reason", "wrong", actor="owner")["status"] == "revoked"


# -- wakes and receipts -------------------------------------------------------------------------------


def test_wakes_and_receipts(pmw: Pmw) -> None:
    register(pmw, "boss", "worker")
    first = pmw.js("wakes", "enqueue", "worker", "--cause", "task.created", "--key", "k1",
                   "--payload", '{"task": "t1"}', "--priority", "5", actor="boss")
    assert first["created"] is True
    again = pmw.js("wakes", "enqueue", "worker", "--cause", "task.created", "--key", "k1", actor="boss")
    assert (again["created"], again["wake"]["wake_id"]) == (False, first["wake"]["wake_id"])
    wake_id = first["wake"]["wake_id"]
    assert [w["wake_id"] for w in pmw.js("wakes", "list", "--status", "pending", actor="worker")] == [wake_id]
    assert pmw.js("wakes", "list", actor="boss") == []  # a wake is its target's (and governors') to read
    claimed = pmw.js("wakes", "claim", "--agent", "worker", "--lease-seconds", "60", actor="worker")
    assert (claimed["wake_id"], claimed["lease_owner"]) == (wake_id, "worker")
    receipt = pmw.js("wakes", "ack", wake_id, "--decision", "no_action", "--reason", "nothing to do",
                     actor="worker")
    assert (receipt["wake_id"], receipt["decision"], receipt["outcome"]) == (wake_id, "no_action", "no_action")
    assert pmw.js("wakes", "show", wake_id, actor="worker")["status"] == "acked"
    assert pmw.js("wakes", "claim", actor="worker") is None
    assert pmw.ok("wakes", "claim", actor="worker").strip() == "(nothing)"
    assert pmw.js("receipts", "show", receipt["receipt_id"], actor="worker") == receipt
    assert pmw.js("receipts", "for-wake", wake_id, actor=GOVERNOR) == receipt
    other = pmw.js("wakes", "enqueue", "worker", "--cause", "ping", "--key", "k2", actor="boss")["wake"]
    cancelled = pmw.js("wakes", "cancel", other["wake_id"], "--reason", "obsolete", actor="boss")
    assert (cancelled["outcome"], cancelled["reason"]) == ("suppressed", "obsolete")
    assert len(pmw.js("receipts", "list", "--agent", "worker", actor="worker")) == 2
    assert "RECEIPT_ID" in pmw.ok("receipts", "list", actor="worker")


# -- handoffs -----------------------------------------------------------------------------------------


def test_handoffs(pmw: Pmw) -> None:
    register(pmw, "src", "dst")
    pmw.ok("tasks", "create", "Hand me off", "--id", "t1", actor="src")
    pmw.ok("tasks", "claim", "t1", actor="src")
    h = pmw.js("handoffs", "create", "dst", "t1", "Finish it", "--evidence", "e1", "--constraints", '{"by": "fri"}',
               "--expected-output", "a summary", "--return-route", "src", actor="src")
    assert (h["status"], h["source_agent"], h["evidence_refs"]) == ("pending", "src", ["e1"])
    assert pmw.js("handoffs", "accept", h["handoff_id"], actor="dst")["status"] == "accepted"
    assert pmw.js("tasks", "show", "t1", actor="src")["assignee"] == "dst"
    done = pmw.js("handoffs", "complete", h["handoff_id"], "--result", '{"summary": "done"}', actor="dst")
    assert (done["status"], done["result"]) == ("completed", {"summary": "done"})
    h2 = pmw.js("handoffs", "create", "src", "t1", "Back to you", actor="dst")
    rejected = pmw.js("handoffs", "reject", h2["handoff_id"], "--reason", "busy", actor="src")
    assert (rejected["status"], rejected["reason"]) == ("rejected", "busy")
    completed = pmw.js("handoffs", "list", "--status", "completed", actor=GOVERNOR)
    assert [x["handoff_id"] for x in completed] == [h["handoff_id"]]
    assert pmw.js("handoffs", "list", "--target", "src", actor="src")[0]["handoff_id"] == h2["handoff_id"]
    assert pmw.js("handoffs", "show", h["handoff_id"], actor="dst")["task_id"] == "t1"


# -- events -------------------------------------------------------------------------------------------


def test_events_tail_and_append(pmw: Pmw) -> None:
    register(pmw, "alice")
    ref = pmw.js("events", "append", "note.posted", "--payload", '{"text": "hi"}', actor="alice")
    assert ref["event_type"] == "note.posted"
    everything = pmw.js("events", "tail", "--limit", "100", actor="alice")
    assert [e["seq"] for e in everything] == list(range(1, len(everything) + 1))
    assert everything[-1]["payload"] == {"text": "hi"}
    assert everything[0]["event_type"] == "policy.activated"
    assert {e["policy_epoch"] for e in everything if e["event_type"] == "agent.granted"} == {pmw.pdp.epoch}
    last_two = pmw.js("events", "tail", "--limit", "2", actor="alice")
    assert last_two == everything[-2:]
    after = pmw.js("events", "tail", "--after", "1", "--limit", "1", actor="alice")
    assert [e["seq"] for e in after] == [2]
    assert "note.posted" in pmw.ok("events", "tail", actor="alice")


# -- artifacts ----------------------------------------------------------------------------------------


def test_artifacts(pmw: Pmw, tmp_path: Path) -> None:
    register(pmw, "alice")
    v1, v2 = tmp_path / "v1.txt", tmp_path / "v2.bin"
    v1.write_bytes(b"first draft\n")
    v2.write_bytes(bytes(range(256)))
    art = pmw.js("artifacts", "register", str(v1), "--type", "report", "--id", "a1", actor="alice")
    assert (art["version"], art["checksum"]) == (1, hashlib.sha256(b"first draft\n").hexdigest())
    art = pmw.js("artifacts", "version", "a1", str(v2), "--expect-version", "1", actor="alice")
    assert art["version"] == 2
    assert pmw.js("artifacts", "show", "a1", actor="alice")["checksum"] == hashlib.sha256(bytes(range(256))).hexdigest()
    assert [v["version"] for v in pmw.js("artifacts", "versions", "a1", actor="alice")] == [1, 2]
    out = tmp_path / "out.bin"
    meta = pmw.js("artifacts", "get", "a1", "--out", str(out), actor="alice")
    assert (meta["version"], out.read_bytes()) == (2, bytes(range(256)))
    raw = pmw.run("artifacts", "get", "a1", "--version", "1", actor="alice")
    assert raw.exit_code == 0
    assert raw.stdout_bytes == b"first draft\n"
    got = pmw.js("artifacts", "get", "a1", actor="alice")
    assert base64.b64decode(got["content_base64"]) == bytes(range(256))


def test_corrupted_artifact_exits_7(pmw: Pmw, tmp_path: Path) -> None:
    register(pmw, "alice")
    src = tmp_path / "doc.txt"
    src.write_text("precious")
    art = pmw.js("artifacts", "register", str(src), "--type", "doc", actor="alice")
    (tmp_path / "artifacts" / art["location"]).write_text("tampered")
    error = pmw.fails(7, "artifacts", "get", art["artifact_id"], actor="alice")
    assert error["code"] == "artifact_corrupted"


# -- topology, projection, snapshot -------------------------------------------------------------------


def test_topology(pmw: Pmw) -> None:
    register(pmw, "a", "b")
    edge = pmw.js("topology", "set", "a", "b", "info", "--weight", "2", "--reason", "chat", actor="a")
    assert (edge["edge_type"], edge["topology_version"], edge["active"]) == ("info", 1, True)
    pmw.ok("topology", "set", "a", "b", "control", "--expect-version", "1", actor="a")
    assert pmw.fails(5, "topology", "set", "b", "a", "info", "--expect-version", "1", actor="a")["current"] == 2
    pmw.ok("topology", "set", "a", "b", "info", "--inactive", actor="a")
    topo = pmw.js("topology", "show", actor="b")
    assert (topo["version"], [e["edge_type"] for e in topo["edges"]]) == (3, ["control"])
    assert len(pmw.js("topology", "show", "--all", actor="b")["edges"]) == 2
    assert "edges (1):" in pmw.ok("topology", "show", actor="a")


def test_project_hides_private_memory(pmw: Pmw) -> None:
    register(pmw, "alice", "bob")
    pmw.ok("memory", "store", "alice's secret", "--type", "hypothesis", "--id", "secret", actor="alice")
    pmw.ok("tasks", "create", "Open work", actor="alice")
    alice, bob = pmw.js("project", "alice"), pmw.js("project", "bob")
    assert [m["memory_id"] for m in alice["working_memory"]] == ["secret"]
    assert bob["working_memory"] == []
    assert bob["shared_facts"] == []
    assert [t["goal"] for t in bob["tasks"]] == ["Open work"]
    human = pmw.ok("project", "bob", "--budget", "5")
    assert "agent.agent_id:" in human
    assert "working_memory (0):" in human


def test_snapshot(pmw: Pmw) -> None:
    register(pmw, "alice")
    before = counts(pmw.db_url)["events"]
    snap = pmw.js("snapshot", actor=GOVERNOR)  # a governance command: the governor's
    assert snap["at_seq"] == before
    assert counts(pmw.db_url)["snapshots"] == 1
    assert snap["snapshot_id"].startswith("snap_")
    refused = pmw.fails(6, "snapshot", actor="alice")  # any other agent: denied (and recorded), nothing taken
    assert refused["code"] == "policy_denied"
    assert counts(pmw.db_url)["snapshots"] == 1


# -- demo ---------------------------------------------------------------------------------------------


def test_demo_runs_and_can_be_rerun(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pdp: Pdp) -> None:
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        result = invoke(None, "demo", env=pdp.env)
        assert result.exit_code == 0, (result.stdout, result.stderr)
        assert "fold == state: True" in result.stdout
        assert "version_conflict" in result.stdout
        assert "policy_denied" in result.stdout
        assert "(policy.denied)" in result.stdout
        assert "asked what it may do" in result.stdout
    assert (tmp_path / "pmw-demo" / "world.db").exists()


def test_demo_json_summary(tmp_path: Path, pdp: Pdp) -> None:
    result = invoke(None, "demo", "--out", str(tmp_path / "d"), as_json=True, env=pdp.env)
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["ok"] is True
    assert summary["fold_equals_state"] is True
    assert (summary["tasks"], summary["wakes"], summary["receipts"]) == (1, 1, 1)
    assert all(summary["checks"].values())
    assert summary["checks"]["a write without the capability is denied and recorded"] is True
    assert summary["checks"]["the assignee may complete but not abort the task"] is True
    assert "[ 1]" in result.stderr  # the narration goes to stderr in --json mode
    url = f"sqlite:///{tmp_path / 'd' / 'world.db'}"
    world = invoke(url, "tasks", "show", "demo-task", actor="planner", as_json=True, env=pdp.env)
    assert json.loads(world.stdout)["status"] == "completed"
    granted = invoke(url, "agents", "show", "worker", actor="governor", as_json=True, env=pdp.env)
    assert "task.work" in json.loads(granted.stdout)["capability_profile"]["capabilities"]


def test_demo_is_deterministic(tmp_path: Path, pdp: Pdp) -> None:
    a = invoke(None, "demo", "--out", str(tmp_path / "a"), env=pdp.env)
    b = invoke(None, "demo", "--out", str(tmp_path / "b"), env=pdp.env)
    assert a.exit_code == b.exit_code == 0
    assert a.stdout == b.stdout


# -- as a process -------------------------------------------------------------------------------------


def run_process(args: Sequence[str], cwd: Path, env: dict[str, str | None] | None = None
                ) -> subprocess.CompletedProcess[str]:
    base = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "CERBOS_NO_TELEMETRY": "1"}
    full = {**base, **{k: v for k, v in (env or {}).items() if v is not None}}
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=120, check=False)


def test_module_entry_point(tmp_path: Path, pdp: Pdp) -> None:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    init = run_process(["--db", url, "--json", "init"], tmp_path)
    assert init.returncode == 0, init.stderr
    assert json.loads(init.stdout)["schema_version"] == LATEST
    missing = run_process(["--db", url, "--as", "someone", "tasks", "show", "ghost"], tmp_path, pdp.env)
    assert missing.returncode == 4, missing.stderr
    assert "not found" in missing.stderr
    assert "Traceback" not in missing.stderr
    usage = run_process(["--db", url, "tasks", "frobnicate"], tmp_path)
    assert usage.returncode == 2


def test_demo_as_a_process(tmp_path: Path, pdp: Pdp) -> None:
    result = run_process(["demo"], tmp_path, pdp.env)
    assert result.returncode == 0, result.stderr
    assert "fold == state: True" in result.stdout


def test_exit_codes_match_the_error_tree() -> None:
    expected = {InvalidInput: 3, PolicyInvalidRequest: 3, PolicyRejected: 3, NotFound: 4, VersionConflict: 5,
                AlreadyExists: 5, PolicyEpochChanged: 5, IllegalTransition: 6, NotPermitted: 6, PolicyDenied: 6,
                ApprovalInvalid: 6, ArtifactCorrupted: 7, StoreUnavailable: 8, PolicyUnavailable: 9}
    for cls, code in expected.items():
        assert issubclass(cls, PMWError)
        assert cls.exit_code == code


# -- every write takes --op-id ------------------------------------------------------------------------

READS = {"project", "demo", "agents list", "agents show", "agents sessions", "state get", "state list",
         "tasks list", "tasks show", "memory list", "memory show", "wakes list", "wakes show", "handoffs list",
         "handoffs show", "receipts list", "receipts show", "receipts for-wake", "events tail", "artifacts show",
         "artifacts versions", "artifacts get", "topology show", "allowed", "approvals show", "policy test",
         "policy reload", "policy explain", "policy history", "trace", "rules check", "rules shadow", "worker",
         "simulate", "rooms show", "rooms members", "rooms discussion", "rooms answers", "commands",
         "policy shadow", "audit", "tokens list", "serve", "login", "mcp",  # mcp: a server; its tools take op ids
         "contracts check", "contracts list",  # files only: no world opened
         "metrics"}  # a read of the whole world (decided by the PDP)
# The World calls take no operation id (init: bootstrapping a governor is allowed once anyway).
NO_OP_ID = {"init", "wakes claim", "snapshot", "rooms close-stale", "backup", "pull", "decide",
            "retention sweep"}  # a sweep: each object it expires is a write of its own


def leaf_commands() -> dict[str, Any]:
    """Every leaf command of the app by its full name (``group command`` or ``command``)."""
    out: dict[str, Any] = {}
    for name, cmd in getattr(typer.main.get_command(app), "commands", {}).items():
        subs = getattr(cmd, "commands", None)
        out.update({f"{name} {s}": c for s, c in subs.items()} if subs else {name: cmd})
    return out


def test_every_write_command_takes_an_op_id() -> None:
    commands = leaf_commands()
    assert set(commands) >= READS | NO_OP_ID
    for name, cmd in commands.items():
        options = {opt for p in cmd.params for opt in p.opts}
        assert ("--op-id" in options) == (name not in READS | NO_OP_ID), name
