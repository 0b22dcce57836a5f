"""The ``pmw`` command line: happy paths of every command group, ``--json`` output, exit codes, the demo.

Every test uses a real SQLite file under ``tmp_path``; most invoke the Typer app in-process
(``CliRunner``), a few run ``python -m engine.cli`` as a subprocess.
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
from typer.testing import CliRunner, Result

import engine.cli
from engine.cli import app
from engine.errors import (
    AlreadyExists,
    ArtifactCorrupted,
    IllegalTransition,
    InvalidInput,
    NotFound,
    NotPermitted,
    PMWError,
    StoreUnavailable,
    VersionConflict,
)
from engine.settings import load_settings
from engine.world import World

RUNNER = CliRunner()
CLEAN_ENV: dict[str, str | None] = {"PMW_ACTOR": None, "PMW_DB_URL": None, "PMW_ARTIFACT_DIR": None}


def invoke(db_url: str | None, *args: str, actor: str | None = None, as_json: bool = False,
           env: dict[str, str | None] | None = None) -> Result:
    """Run ``pmw [--db URL] [--as ACTOR] [--json] ARGS`` in-process with a clean PMW_ environment."""
    argv: list[str] = []
    if db_url is not None:
        argv += ["--db", db_url]
    if actor is not None:
        argv += ["--as", actor]
    if as_json:
        argv.append("--json")
    return RUNNER.invoke(app, [*argv, *args], env={**CLEAN_ENV, **(env or {})})


def counts(db_url: str) -> dict[str, Any]:
    """Row counts and version sums of every table (``counts_and_versions``) of the world at ``db_url``."""
    world = World.from_settings(load_settings(db_url=db_url), init=False)
    try:
        return world.store.read.counts_and_versions()
    finally:
        world.close()


def assert_clean_failure(result: Result, code: int) -> None:
    """Exit ``code``, a message on stderr, no traceback and no unexpected exception."""
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.stderr.strip(), "expected a message on stderr"
    assert "Traceback" not in result.output


class Pmw:
    """A CLI bound to one database: ``ok`` expects exit 0, ``js`` also parses the JSON output."""

    def __init__(self, db_url: str) -> None:
        self.db_url = db_url

    def run(self, *args: str, actor: str | None = None, as_json: bool = False) -> Result:
        return invoke(self.db_url, *args, actor=actor, as_json=as_json)

    def ok(self, *args: str, actor: str | None = None) -> str:
        result = self.run(*args, actor=actor)
        assert result.exit_code == 0, (result.stdout, result.stderr)
        return result.stdout

    def js(self, *args: str, actor: str | None = None) -> Any:
        result = self.run(*args, actor=actor, as_json=True)
        assert result.exit_code == 0, (result.stdout, result.stderr)
        return json.loads(result.stdout)

    def fails(self, code: int, *args: str, actor: str | None = None) -> dict[str, Any]:
        """Expect exit ``code`` with a JSON error on stderr; returns it."""
        result = self.run(*args, actor=actor, as_json=True)
        assert_clean_failure(result, code)
        error: dict[str, Any] = json.loads(result.stderr)
        return error


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'world.db'}"


@pytest.fixture
def pmw(db_url: str) -> Pmw:
    cli = Pmw(db_url)
    cli.ok("init")
    return cli


def register(pmw: Pmw, *agents: str) -> None:
    """Register and activate ``agents``, each on its own terminal ``term-<agent>``."""
    for agent in agents:
        pmw.ok("agents", "register", agent, "--name", agent.title(), "--role", "tester", "--term", f"term-{agent}")
        pmw.ok("agents", "activate", f"agent:{agent}")


# -- root, init, exit codes ---------------------------------------------------------------------------


def test_help_documents_every_exit_code() -> None:
    result = invoke(None, "--help")
    assert result.exit_code == 0
    for cls in (InvalidInput, NotFound, VersionConflict, IllegalTransition, ArtifactCorrupted, StoreUnavailable):
        assert f"  {cls.exit_code}  " in result.stdout
    for code in (0, 1, 2):
        assert f"  {code}  " in result.stdout
    assert "Exit codes" in (engine.cli.__doc__ or "")


def test_no_arguments_shows_help_as_a_usage_error() -> None:
    result = invoke(None)
    assert result.exit_code == 2
    assert "Usage" in result.output


def test_init_twice_is_idempotent(db_url: str) -> None:
    first = invoke(db_url, "init", as_json=True)
    assert first.exit_code == 0, first.stderr
    assert json.loads(first.stdout) == {"applied": [1], "schema_version": 1}
    before = counts(db_url)
    second = invoke(db_url, "init", as_json=True)
    assert json.loads(second.stdout) == {"applied": [], "schema_version": 1}
    assert counts(db_url) == before
    human = invoke(db_url, "init")
    assert "schema_version: 1" in human.stdout


def test_db_url_comes_from_the_environment(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'env.db'}"
    result = invoke(None, "init", as_json=True, env={"PMW_DB_URL": url})
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "env.db").exists()


def test_actor_comes_from_pmw_actor(pmw: Pmw) -> None:
    register(pmw, "alice")
    result = invoke(pmw.db_url, "tasks", "create", "from the environment", as_json=True,
                    env={"PMW_ACTOR": "alice"})
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["owner_agent"] == "alice"


def test_missing_actor_names_the_option(pmw: Pmw) -> None:
    result = pmw.run("tasks", "create", "nobody acts")
    assert_clean_failure(result, InvalidInput.exit_code)
    assert "--as" in result.stderr
    assert "PMW_ACTOR" in result.stderr


def test_errors_print_their_to_dict_as_json(pmw: Pmw) -> None:
    error = pmw.fails(4, "tasks", "show", "ghost")
    assert error == NotFound("task", "ghost").to_dict()


def test_human_errors_are_one_line(pmw: Pmw) -> None:
    result = pmw.run("tasks", "show", "ghost")
    assert_clean_failure(result, 4)
    assert result.stderr.strip() == "error: task 'ghost' not found (not_found)"


# -- agents -------------------------------------------------------------------------------------------


def test_agents_lifecycle(pmw: Pmw) -> None:
    reg = pmw.js("agents", "register", "alice", "--name", "Alice", "--role", "writer", "--term", "t1",
                 "--session-id", "s-alice", "--capabilities", '{"lang": ["en"]}')
    assert reg["agent"]["agent_id"] == "alice"
    assert reg["agent"]["capability_profile"] == {"lang": ["en"]}
    assert reg["session"] == {**reg["session"], "session_id": "s-alice", "status": "attached", "term_key": "t1"}
    assert pmw.js("agents", "activate", "term:t1")["status"] == "active"
    assert [a["agent_id"] for a in pmw.js("agents", "list", "--status", "active")] == ["alice"]
    assert pmw.js("agents", "show", "alice")["status"] == "active"
    assert [s["session_id"] for s in pmw.js("agents", "sessions", "agent:alice")] == ["s-alice"]
    assert pmw.js("agents", "relinquish", "session:s-alice")["status"] == "attached"
    assert pmw.js("agents", "detach", "session:s-alice")["status"] == "offline"
    pmw.ok("agents", "register", "alice", "--name", "Alice", "--role", "writer", "--term", "t2")
    gone = pmw.js("agents", "unregister", "agent:alice")
    assert [s["status"] for s in gone] == ["offline"]
    assert pmw.js("agents", "show", "alice")["status"] == "offline"
    table = pmw.ok("agents", "list")
    assert table.splitlines()[0].split() == ["AGENT_ID", "STATUS", "ROLE_ID", "DISPLAY_NAME"]
    assert "alice" in table


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
    assert pmw.js("state", "get", "plan/phase")["value"] == "two"
    pmw.ok("state", "set", "other", "null", "--expect-version", "0", actor="bob")
    assert [e["key"] for e in pmw.js("state", "list", "--prefix", "plan/")] == ["plan/phase"]
    assert "value:" in pmw.ok("state", "get", "other")


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
    assert [t["task_id"] for t in pmw.js("tasks", "list", "--status", "completed")] == ["t1"]
    assert {t["task_id"] for t in pmw.js("tasks", "list", "--assignee", "doer")} == {"t1", "t2"}
    assert pmw.js("tasks", "show", "t2")["dependencies"] == ["t1"]
    assert "status:        failed" in pmw.ok("tasks", "show", "t2")


# -- memory -------------------------------------------------------------------------------------------


def test_memory_review_path(pmw: Pmw) -> None:
    register(pmw, "owner", "reviewer")
    mem = pmw.js("memory", "store", "The sky is blue", "--type", "observation", "--id", "m1",
                 "--confidence", "0.9", "--source", "obs-1", actor="owner")
    assert (mem["status"], mem["scope"], mem["source_refs"]) == ("private", "private", ["obs-1"])
    assert pmw.fails(6, "memory", "show", "m1", actor="reviewer")["code"] == "not_permitted"
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
    superseded = pmw.js("memory", "supersede", "m1", "m2", actor="reviewer")
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
    assert [w["wake_id"] for w in pmw.js("wakes", "list", "--status", "pending")] == [wake_id]
    claimed = pmw.js("wakes", "claim", "--agent", "worker", "--lease-seconds", "60", actor="worker")
    assert (claimed["wake_id"], claimed["lease_owner"]) == (wake_id, "worker")
    receipt = pmw.js("wakes", "ack", wake_id, "--decision", "no_action", "--reason", "nothing to do",
                     actor="worker")
    assert (receipt["wake_id"], receipt["decision"], receipt["outcome"]) == (wake_id, "no_action", "no_action")
    assert pmw.js("wakes", "show", wake_id)["status"] == "acked"
    assert pmw.js("wakes", "claim", actor="worker") is None
    assert pmw.ok("wakes", "claim", actor="worker").strip() == "(nothing)"
    assert pmw.js("receipts", "show", receipt["receipt_id"]) == receipt
    assert pmw.js("receipts", "for-wake", wake_id) == receipt
    other = pmw.js("wakes", "enqueue", "worker", "--cause", "ping", "--key", "k2", actor="boss")["wake"]
    cancelled = pmw.js("wakes", "cancel", other["wake_id"], "--reason", "obsolete", actor="boss")
    assert (cancelled["outcome"], cancelled["reason"]) == ("suppressed", "obsolete")
    assert len(pmw.js("receipts", "list", "--agent", "worker")) == 2
    assert "RECEIPT_ID" in pmw.ok("receipts", "list")


# -- handoffs -----------------------------------------------------------------------------------------


def test_handoffs(pmw: Pmw) -> None:
    register(pmw, "src", "dst")
    pmw.ok("tasks", "create", "Hand me off", "--id", "t1", actor="src")
    pmw.ok("tasks", "claim", "t1", actor="src")
    h = pmw.js("handoffs", "create", "dst", "t1", "Finish it", "--evidence", "e1", "--constraints", '{"by": "fri"}',
               "--expected-output", "a summary", "--return-route", "src", actor="src")
    assert (h["status"], h["source_agent"], h["evidence_refs"]) == ("pending", "src", ["e1"])
    assert pmw.js("handoffs", "accept", h["handoff_id"], actor="dst")["status"] == "accepted"
    assert pmw.js("tasks", "show", "t1")["assignee"] == "dst"
    done = pmw.js("handoffs", "complete", h["handoff_id"], "--result", '{"summary": "done"}', actor="dst")
    assert (done["status"], done["result"]) == ("completed", {"summary": "done"})
    h2 = pmw.js("handoffs", "create", "src", "t1", "Back to you", actor="dst")
    rejected = pmw.js("handoffs", "reject", h2["handoff_id"], "--reason", "busy", actor="src")
    assert (rejected["status"], rejected["reason"]) == ("rejected", "busy")
    assert [x["handoff_id"] for x in pmw.js("handoffs", "list", "--status", "completed")] == [h["handoff_id"]]
    assert pmw.js("handoffs", "list", "--target", "src")[0]["handoff_id"] == h2["handoff_id"]
    assert pmw.js("handoffs", "show", h["handoff_id"])["task_id"] == "t1"


# -- events -------------------------------------------------------------------------------------------


def test_events_tail_and_append(pmw: Pmw) -> None:
    register(pmw, "alice")
    ref = pmw.js("events", "append", "note.posted", "--payload", '{"text": "hi"}', actor="alice")
    assert ref["event_type"] == "note.posted"
    everything = pmw.js("events", "tail", "--limit", "100")
    assert [e["seq"] for e in everything] == list(range(1, len(everything) + 1))
    assert everything[-1]["payload"] == {"text": "hi"}
    last_two = pmw.js("events", "tail", "--limit", "2")
    assert last_two == everything[-2:]
    after = pmw.js("events", "tail", "--after", "1", "--limit", "1")
    assert [e["seq"] for e in after] == [2]
    assert "note.posted" in pmw.ok("events", "tail")


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
    assert pmw.js("artifacts", "show", "a1")["checksum"] == hashlib.sha256(bytes(range(256))).hexdigest()
    assert [v["version"] for v in pmw.js("artifacts", "versions", "a1")] == [1, 2]
    out = tmp_path / "out.bin"
    meta = pmw.js("artifacts", "get", "a1", "--out", str(out))
    assert (meta["version"], out.read_bytes()) == (2, bytes(range(256)))
    raw = pmw.run("artifacts", "get", "a1", "--version", "1")
    assert raw.exit_code == 0
    assert raw.stdout_bytes == b"first draft\n"
    got = pmw.js("artifacts", "get", "a1")
    assert base64.b64decode(got["content_base64"]) == bytes(range(256))


def test_corrupted_artifact_exits_7(pmw: Pmw, tmp_path: Path) -> None:
    register(pmw, "alice")
    src = tmp_path / "doc.txt"
    src.write_text("precious")
    art = pmw.js("artifacts", "register", str(src), "--type", "doc", actor="alice")
    (tmp_path / "artifacts" / art["location"]).write_text("tampered")
    error = pmw.fails(7, "artifacts", "get", art["artifact_id"])
    assert error["code"] == "artifact_corrupted"


# -- topology, projection, snapshot -------------------------------------------------------------------


def test_topology(pmw: Pmw) -> None:
    register(pmw, "a", "b")
    edge = pmw.js("topology", "set", "a", "b", "info", "--weight", "2", "--reason", "chat", actor="a")
    assert (edge["edge_type"], edge["topology_version"], edge["active"]) == ("info", 1, True)
    pmw.ok("topology", "set", "a", "b", "control", "--expect-version", "1", actor="a")
    assert pmw.fails(5, "topology", "set", "b", "a", "info", "--expect-version", "1", actor="a")["current"] == 2
    pmw.ok("topology", "set", "a", "b", "info", "--inactive", actor="a")
    topo = pmw.js("topology", "show")
    assert (topo["version"], [e["edge_type"] for e in topo["edges"]]) == (3, ["control"])
    assert len(pmw.js("topology", "show", "--all")["edges"]) == 2
    assert "edges (1):" in pmw.ok("topology", "show")


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
    snap = pmw.js("snapshot", actor="alice")
    assert snap["at_seq"] == before
    assert counts(pmw.db_url)["snapshots"] == 1
    assert snap["snapshot_id"].startswith("snap_")


# -- demo ---------------------------------------------------------------------------------------------


def test_demo_runs_and_can_be_rerun(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        result = invoke(None, "demo")
        assert result.exit_code == 0, (result.stdout, result.stderr)
        assert "fold == state: True" in result.stdout
        assert "version_conflict" in result.stdout
    assert (tmp_path / "pmw-demo" / "world.db").exists()


def test_demo_json_summary(tmp_path: Path) -> None:
    result = invoke(None, "demo", "--out", str(tmp_path / "d"), as_json=True)
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["ok"] is True
    assert summary["fold_equals_state"] is True
    assert (summary["tasks"], summary["wakes"], summary["receipts"]) == (1, 1, 1)
    assert all(summary["checks"].values())
    assert "[ 1]" in result.stderr  # the narration goes to stderr in --json mode
    world = invoke(f"sqlite:///{tmp_path / 'd' / 'world.db'}", "tasks", "show", "demo-task", as_json=True)
    assert json.loads(world.stdout)["status"] == "completed"


def test_demo_is_deterministic(tmp_path: Path) -> None:
    a = invoke(None, "demo", "--out", str(tmp_path / "a"))
    b = invoke(None, "demo", "--out", str(tmp_path / "b"))
    assert a.exit_code == b.exit_code == 0
    assert a.stdout == b.stdout


# -- as a process -------------------------------------------------------------------------------------


def run_process(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd)}
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120, check=False)


def test_module_entry_point(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    init = run_process(["--db", url, "--json", "init"], tmp_path)
    assert init.returncode == 0, init.stderr
    assert json.loads(init.stdout)["schema_version"] == 1
    missing = run_process(["--db", url, "tasks", "show", "ghost"], tmp_path)
    assert missing.returncode == 4
    assert "not found" in missing.stderr
    assert "Traceback" not in missing.stderr
    usage = run_process(["--db", url, "tasks", "frobnicate"], tmp_path)
    assert usage.returncode == 2


def test_demo_as_a_process(tmp_path: Path) -> None:
    result = run_process(["demo"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert "fold == state: True" in result.stdout


def test_exit_codes_match_the_error_tree() -> None:
    expected = {InvalidInput: 3, NotFound: 4, VersionConflict: 5, AlreadyExists: 5, IllegalTransition: 6,
                NotPermitted: 6, ArtifactCorrupted: 7, StoreUnavailable: 8}
    for cls, code in expected.items():
        assert issubclass(cls, PMWError)
        assert cls.exit_code == code


# -- every write takes --op-id ------------------------------------------------------------------------

READS = {"init", "project", "demo", "agents list", "agents show", "agents sessions", "state get", "state list",
         "tasks list", "tasks show", "memory list", "memory show", "wakes list", "wakes show", "handoffs list",
         "handoffs show", "receipts list", "receipts show", "receipts for-wake", "events tail", "artifacts show",
         "artifacts versions", "artifacts get", "topology show"}
NO_OP_ID = {"wakes claim", "snapshot"}  # the World calls take no operation id


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
