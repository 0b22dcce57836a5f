"""The policy commands of ``pmw``: ``init --governor``, ``allowed``, ``invoke``, ``approvals``, ``policy test``,
``policy reload``, ``policy explain``; and the CLI's own PDP (started and stopped by one command, no process
left behind).

Most tests run against the session's PDP (``tests/cli_support.py``). The reload tests that change the
PDP's policies get a PDP of their own, serving the deployments beside their database (where the runtime
deploys: ``<data dir>/policy-deploys``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.policy import governance
from engine.policy.pdp_process import ManagedPdp
from tests.cli_support import (
    GOVERNOR,
    POLICY_DIR,
    Pdp,
    Pmw,
    assert_clean_failure,
    assert_one_denial,
    counts,
    invoke,
    pdp_fixture,  # noqa: F401 - the session's PDP (fixture ``pdp``)
    require_cerbos,
    start_pdp,
)


@pytest.fixture
def pmw(tmp_path: Path, pdp: Pdp) -> Pmw:
    """A world with its governor ``gov`` and ``alice`` (a worker holding the usual capabilities plus the
    tool ``deploy``) and ``bob`` (no capability at all)."""
    cli = Pmw(f"sqlite:///{tmp_path / 'world.db'}", pdp)
    cli.init()
    cli.agents("alice", caps=("task.create", "task.work", "state.write", "tool:deploy"))
    cli.agents("bob", caps=())
    return cli


def copy_policies(tmp_path: Path, name: str = "policies") -> Path:
    target = tmp_path / name
    shutil.copytree(POLICY_DIR, target)
    return target


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


# -- init --governor ----------------------------------------------------------------------------------


def test_init_with_a_governor_for_humans(tmp_path: Path, pdp: Pdp) -> None:
    cli = Pmw(f"sqlite:///{tmp_path / 'w.db'}", pdp)
    out = cli.ok("init", "--governor", "root", "--name", "Root", "--term", "t-root")
    assert "governor.agent.role_id:" in out
    assert "governor" in out.split("governor.agent.role_id:")[1].splitlines()[0]
    again = cli.run("init", "--governor", "root2", "--name", "Root", "--term", "t-root2")
    assert_clean_failure(again, 6)
    assert "a governor already exists" in again.stderr
    assert cli.ok("init").strip().startswith("applied:")  # plain init still just migrates


# -- allowed ------------------------------------------------------------------------------------------


def test_allowed_lists_every_action_allowed_or_denied(pmw: Pmw) -> None:
    pmw.ok("tasks", "create", "Mine", "--id", "t1", actor="alice")
    mine = pmw.js("allowed", "task", "t1", actor="alice")
    assert (mine["kind"], mine["id"], mine["policy_epoch"]) == ("task", "t1", pmw.pdp.epoch)
    assert {"read", "abort", "claim"} <= set(mine["allowed"])
    assert {"assign", "complete", "release"} <= set(mine["denied"])  # no task.assign; not claimed; still open
    assert (mine["refused"]["assign"], mine["refused"]["complete"], mine["refused"]["release"]) == (
        "policy", "illegal_transition", "illegal_transition")
    assert sorted(mine["allowed"] + mine["denied"]) == sorted(
        ["read", "create", "assign", "claim", "complete", "fail", "release", "abort"])
    assert "owner" in mine["derived_roles"]
    theirs = pmw.js("allowed", "task", "t1", actor="bob")
    assert theirs["allowed"] == ["read"]
    # The command's own --json is the same as the global one.
    local = pmw.run("allowed", "task", "t1", "--json", actor="bob")
    assert json.loads(local.stdout) == theirs
    human = pmw.ok("allowed", "task", "t1", actor="bob")
    assert human.splitlines()[0].startswith(f"task t1  (policy epoch {pmw.pdp.epoch}")
    assert [line.split()[:3] for line in human.splitlines()[1:3]] == [["read", "allow"], ["create", "deny", "policy:"]]
    before = counts(pmw.db_url)
    pmw.ok("allowed", "task", "t1", actor="bob")
    assert counts(pmw.db_url) == before  # asking is not a denial: nothing is recorded


def test_allowed_for_many_objects_in_one_call(pmw: Pmw) -> None:
    pmw.ok("tasks", "create", "Mine", "--id", "t1", actor="alice")
    pmw.ok("state", "set", "plan", "1", "--expect-version", "0", actor="alice")
    batch = pmw.js("allowed", "--each", "task:t1", "--each", "state:plan", "--each", "tool:deploy",
                   "--each", "topology:world", actor="alice")
    assert [(d["kind"], d["id"]) for d in batch] == [("task", "t1"), ("state", "plan"), ("tool", "deploy"),
                                                     ("topology", "world")]
    assert {d["policy_epoch"] for d in batch} == {pmw.pdp.epoch}
    by_kind = {d["kind"]: d for d in batch}
    assert set(by_kind["state"]["allowed"]) == {"read", "invoke", "write"}
    assert (by_kind["tool"]["allowed"], by_kind["tool"]["denied"]) == (["invoke"], [])
    assert (by_kind["topology"]["allowed"], by_kind["topology"]["denied"]) == (["read"], ["write"])
    human = pmw.ok("allowed", "--each", "task:t1", "--each", "state:plan", actor="alice")
    headers = [line.split("  (")[0] for line in human.splitlines() if not line.startswith(" ")]
    assert headers == ["task t1", "state plan"]
    assert ["write", "allow"] in [line.split() for line in human.splitlines()]


# -- invoke and approvals -----------------------------------------------------------------------------


def test_s3_invocation_needs_one_governor_approval_spent_once(pmw: Pmw) -> None:
    payload = '{"env": "prod"}'
    plain = pmw.js("invoke", "tool", "deploy", "--payload", payload, actor="alice")  # S0: the PDP alone decides
    assert (plain["side_effect"], plain["policy_epoch"], plain["approval_id"]) == ("S0", pmw.pdp.epoch, None)
    missing = pmw.fails(6, "invoke", "tool", "deploy", "--side-effect", "S3", "--payload", payload, actor="alice")
    assert (missing["code"], missing["approval_id"]) == ("approval_invalid", None)
    requested = pmw.js("approvals", "request", "tool", "deploy", "--payload", payload, actor="alice")
    approval_id = requested["approval_id"]
    assert (requested["status"], requested["requested_by"], requested["side_effect"]) == ("pending", "alice", "S3")
    pending = pmw.fails(6, "invoke", "tool", "deploy", "--side-effect", "S3", "--payload", payload,
                        "--approval", approval_id, actor="alice")
    assert "pending" in pending["reason"]
    before = counts(pmw.db_url)
    assert pmw.fails(6, "approvals", "approve", approval_id, actor="alice")["code"] == "policy_denied"
    assert_one_denial(before, pmw.db_url, "alice")  # nobody approves its own request
    approved = pmw.js("approvals", "approve", approval_id, "--ttl", "600", actor=GOVERNOR)
    assert (approved["status"], approved["approver"], approved["policy_epoch"]) == (
        "approved", GOVERNOR, pmw.pdp.epoch)
    assert pmw.js("approvals", "show", approval_id, actor="alice")["status"] == "approved"
    other = pmw.fails(6, "invoke", "tool", "deploy", "--side-effect", "S3", "--payload", '{"env": "dev"}',
                      "--approval", approval_id, actor="alice")
    assert "another action or payload" in other["reason"]
    used = pmw.js("invoke", "tool", "deploy", "--side-effect", "S3", "--payload", payload, "--approval",
                  approval_id, actor="alice")
    assert (used["side_effect"], used["approval_id"], used["policy_epoch"]) == ("S3", approval_id, pmw.pdp.epoch)
    again = pmw.fails(6, "invoke", "tool", "deploy", "--side-effect", "S3", "--payload", payload,
                      "--approval", approval_id, actor="alice")
    assert (again["code"], again["approval_id"]) == ("approval_invalid", approval_id)
    assert "consumed" in again["reason"]
    assert pmw.js("approvals", "show", approval_id, actor=GOVERNOR)["status"] == "consumed"
    events = [e["event_type"] for e in pmw.js("events", "tail", "--limit", "6", actor=GOVERNOR)]
    assert events.count("capability.invoked") == 2
    human = pmw.ok("approvals", "show", approval_id, actor="alice")
    assert "status:" in human and "consumed" in human


def test_invoke_without_the_capability_is_denied_and_recorded(pmw: Pmw) -> None:
    before = counts(pmw.db_url)
    error = pmw.fails(6, "invoke", "tool", "deploy", actor="bob")
    assert (error["code"], error["action"], error["kind"], error["id"]) == ("policy_denied", "invoke", "tool",
                                                                            "deploy")
    assert_one_denial(before, pmw.db_url, "bob")
    assert "policy_epoch:" in pmw.ok("invoke", "tool", "deploy", actor="alice")


# -- policy explain, history, shadow, audit: governance calls ------------------------------------------


@pytest.fixture
def logged_world(tmp_path: Path) -> Iterator[Pmw]:
    """A world at ``tmp_path/world.db`` whose PDP serves the deployment beside it (``policy-deploys``) and
    writes the decision log beside it (``audit/decisions.log``), as the runtime's own PDP does; ``gov``,
    ``alice`` (the usual capabilities), ``bob`` (none) and alice's task ``t1``."""
    require_cerbos()
    deployment = governance.deploy(POLICY_DIR, tmp_path / "policy-deploys")
    managed = ManagedPdp(tmp_path / "policy-deploys" / "current", audit_path=tmp_path / "audit" / "decisions.log")
    address = managed.start()
    cli = Pmw(f"sqlite:///{tmp_path / 'world.db'}", Pdp(address=address, deploy_root=tmp_path / "policy-deploys",
                                                        epoch=deployment.epoch))
    cli.init()
    cli.agents("alice", caps=("task.create", "task.work", "state.write", "tool:deploy"))
    cli.agents("bob", caps=())
    cli.ok("tasks", "create", "Mine", "--id", "t1", actor="alice")
    yield cli
    managed.stop()


def test_policy_explain_names_the_rule_and_file_with_what_if_and_an_undeployed_set(logged_world: Pmw,
                                                                                   tmp_path: Path) -> None:
    pmw = logged_world
    yes = pmw.js("policy", "explain", "--principal", "alice", "task", "t1", "abort", actor=GOVERNOR)
    assert (yes["allowed"], yes["policy_epoch"], yes["policy_set"]) == (True, pmw.pdp.epoch, "deployed")
    assert (yes["rule"], yes["policy_file"], yes["policy"]) == (
        "abort", "resources/task.yaml", "resource.task.vdefault")
    assert "owner" in yes["derived_roles"]
    assert yes["principal_attr"]["capabilities"] == ["state.write", "task.create", "task.work", "tool:deploy"]
    assert (yes["resource_attr"]["owner"], yes["resource_attr"]["status"]) == ("alice", "open")
    no = pmw.js("policy", "explain", "--principal", "bob", "task", "t1", "abort", actor=GOVERNOR)
    assert (no["allowed"], no["rule"]) == (False, None)
    assert "owner" not in no["derived_roles"]
    what_if = pmw.js("policy", "explain", "--principal", "alice", "task", "t1", "abort", "--principal-attr",
                     '{"status": "offline"}', actor=GOVERNOR)
    assert (what_if["allowed"], what_if["rule"], what_if["what_if"]) == (False, "offline-read-only",
                                                                         ["principal.status"])
    edited = copy_policies(tmp_path, "edited")
    edit(edited / "resources" / "task.yaml", "    - name: abort\n", "    - name: abort-own-task\n")
    asked = pmw.js("policy", "explain", "--principal", "alice", "task", "t1", "abort", "--dir", str(edited),
                   actor=GOVERNOR)
    assert (asked["rule"], asked["policy_set"], asked["policy_dir"]) == ("abort-own-task", "candidate", str(edited))
    assert epochs(pmw.db_url, pmw.pdp) == [pmw.pdp.epoch]  # asked, never deployed
    human = pmw.ok("policy", "explain", "--principal", "bob", "task", "t1", "read", actor=GOVERNOR)
    assert "allowed:" in human and "true" in human.split("allowed:")[1].splitlines()[0]
    assert "rule:" in human and "read" in human.split("rule:")[1].splitlines()[0]
    assert pmw.fails(3, "policy", "explain", "--principal", "bob", "task", "t1", "read", "--resource-attr", "[1]",
                     actor=GOVERNOR)["field"] == "--resource-attr"
    before = counts(pmw.db_url)
    assert pmw.fails(6, "policy", "explain", "--principal", "bob", "task", "t1", "read",
                     actor="alice")["code"] == "policy_denied"
    assert_one_denial(before, pmw.db_url, "alice")


def test_policy_history_shadow_and_audit_are_a_governors(logged_world: Pmw, tmp_path: Path) -> None:
    pmw = logged_world
    pmw.ok("state", "set", "frozen", "1", "--expect-version", "0", actor="alice")
    pmw.fails(6, "state", "set", "plan", "1", "--expect-version", "0", actor="bob")
    history = pmw.js("policy", "history", actor=GOVERNOR)
    assert [h["epoch"] for h in history] == [pmw.pdp.epoch]
    deadline = time.monotonic() + 10  # the PDP writes its log asynchronously
    while not (denied := pmw.js("audit", "--agent", "bob", "--kind", "state", "--effect", "DENY", actor=GOVERNOR)):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert [(r["principal"], r["id"], r["action"], r["effect"]) for r in denied] == [("bob", "plan", "write", "DENY")]
    assert denied[0]["policy_epoch"] == pmw.pdp.epoch
    assert pmw.js("audit", "--since", "2999-01-01T00:00:00", actor=GOVERNOR) == []
    assert pmw.fails(3, "audit", "--effect", "MAYBE", actor=GOVERNOR)["field"] == "effect"
    assert pmw.fails(3, "audit", "--since", "yesterday", actor=GOVERNOR)["field"] == "--since"
    assert "PRINCIPAL" in pmw.ok("audit", "--agent", "bob", actor=GOVERNOR).splitlines()[0]
    same = pmw.js("policy", "shadow", "--dir", str(POLICY_DIR), actor=GOVERNOR)
    assert (same["changed"], same["checks_replayed"] > 0) == (0, True)
    frozen = copy_policies(tmp_path, "frozen")
    edit(frozen / "resources" / "state.yaml", "    # ---- guardrails", """    - name: frozen-key
      actions: ["write"]
      effect: EFFECT_DENY
      roles: ["*"]
      condition:
        match:
          expr: R.id == "frozen"
    # ---- guardrails""")
    before = counts(pmw.db_url)
    flipped = pmw.js("policy", "shadow", "--dir", str(frozen), actor=GOVERNOR)
    assert [(c["principal"], c["kind"], c["id"], c["action"], c["before"], c["after"]) for c in flipped["changes"]] \
        == [("alice", "state", "frozen", "write", "ALLOW", "DENY")]
    assert counts(pmw.db_url) == before  # shadowing commits nothing
    for args in (("policy", "history"), ("policy", "shadow", "--dir", str(frozen)), ("audit",),
                 ("policy", "reload", "--dir", str(frozen))):
        assert pmw.fails(6, *args, actor="bob")["code"] == "policy_denied", args
    assert epochs(pmw.db_url, pmw.pdp) == [pmw.pdp.epoch]


# -- policy test --------------------------------------------------------------------------------------


def test_policy_test_passes_on_the_repository_policies(tmp_path: Path) -> None:
    require_cerbos()
    junit = tmp_path / "reports" / "policies.xml"
    result = invoke(None, "policy", "test", "--dir", str(POLICY_DIR), "--junit", str(junit), as_json=True)
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["ok"], report["exit_code"], report["junit_path"]) == (True, 0, str(junit))
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites"
    assert int(root.get("tests", "0")) > 100
    assert int(root.get("failures", "0")) == 0
    human = invoke(None, "policy", "test", env={"PMW_POLICY_DIR": str(POLICY_DIR)})  # the default directory
    assert human.exit_code == 0, human.stderr
    assert f"ok: {POLICY_DIR} compiles and passes every test suite" in human.stdout


@pytest.mark.parametrize(("old", "new", "where"), [
    ("expr: V.can_create\n", "expr: V.can_create &&\n", "resources/task.yaml:"),
    ("  rules:\n", "  rules:\n    - name: [unclosed\n", "resources/task.yaml:"),
], ids=["bad-expression", "bad-yaml"])
def test_policy_test_on_a_broken_copy_exits_3_with_file_and_line(tmp_path: Path, old: str, new: str,
                                                                 where: str) -> None:
    require_cerbos()
    broken = copy_policies(tmp_path)
    edit(broken / "resources" / "task.yaml", old, new)
    human = invoke(None, "policy", "test", "--dir", str(broken))
    assert_clean_failure(human, 3)
    line = next(x for x in human.stderr.splitlines() if where in x)
    file_line = line.split()[0]
    assert file_line.startswith(where)
    assert file_line.split(":")[1].isdigit(), line  # resources/task.yaml:LINE:COLUMN
    assert "(policy_rejected)" in human.stderr
    as_json = invoke(None, "policy", "test", "--dir", str(broken), as_json=True)
    assert_clean_failure(as_json, 3)
    error = json.loads(as_json.stderr)
    assert (error["code"], error["policy_dir"]) == ("policy_rejected", str(broken))
    assert where in error["reason"]
    assert as_json.stdout == ""


def test_policy_test_reports_failing_suites_with_junit(tmp_path: Path) -> None:
    require_cerbos()
    loose = copy_policies(tmp_path)  # compiles, but the task suite expects task.create to be required
    edit(loose / "resources" / "task.yaml", "expr: V.can_create\n", "expr: V.can_create || true\n")
    junit = tmp_path / "junit.xml"
    result = invoke(None, "policy", "test", "--dir", str(loose), "--junit", str(junit))
    assert_clean_failure(result, 3)
    assert "(policy_rejected)" in result.stderr
    root = ET.parse(junit).getroot()
    assert int(root.get("failures", "0")) > 0


def test_policy_test_passes_verbose_and_test_filter_through(tmp_path: Path) -> None:
    require_cerbos()
    loose = copy_policies(tmp_path)  # the task suite's "create needs task.create" now fails
    edit(loose / "resources" / "task.yaml", "expr: V.can_create\n", "expr: V.can_create || true\n")
    other = invoke(None, "policy", "test", "--dir", str(loose), "--test-filter", "suite=StatePolicySuite")
    assert other.exit_code == 0, other.stderr  # only the state suite ran
    assert "selected" in other.stdout
    failing = "suite=TaskPolicySuite;test=create needs task.create and a live agent"
    plain = invoke(None, "policy", "test", "--dir", str(loose), "--test-filter", failing)
    assert_clean_failure(plain, 3)
    assert "rule=create" not in plain.stderr
    traced = invoke(None, "policy", "test", "--dir", str(loose), "--test-filter", failing, "--verbose")
    assert_clean_failure(traced, 3)
    assert "> rule=create > condition" in traced.stderr  # the evaluation trace of the failing test
    bad = invoke(None, "policy", "test", "--dir", str(loose), "--test-filter", "colour=red", as_json=True)
    assert_clean_failure(bad, 3)
    assert json.loads(bad.stderr)["field"] == "--test-filter"


# -- policy reload ------------------------------------------------------------------------------------


def epochs(db_url: str, pdp: Pdp, actor: str = GOVERNOR) -> list[str]:
    """The policy epochs the world activated, oldest first (from its policy.activated events)."""
    events = invoke(db_url, "events", "tail", "--limit", "1000", actor=actor, as_json=True, env=pdp.env)
    return [e["subject_id"] for e in json.loads(events.stdout) if e["event_type"] == "policy.activated"]


def test_a_broken_reload_is_refused_and_the_epoch_stays(pmw: Pmw, tmp_path: Path) -> None:
    broken = copy_policies(tmp_path, "edited")
    edit(broken / "resources" / "task.yaml", "expr: V.can_create\n", "expr: V.can_create &&\n")
    before = counts(pmw.db_url)
    human = pmw.run("policy", "reload", "--dir", str(broken), actor=GOVERNOR)
    assert_clean_failure(human, 3)
    assert "resources/task.yaml:" in human.stderr
    error = pmw.fails(3, "policy", "reload", "--dir", str(broken), actor=GOVERNOR)
    assert error["code"] == "policy_rejected"
    assert counts(pmw.db_url) == before
    assert epochs(pmw.db_url, pmw.pdp) == [pmw.pdp.epoch]
    assert pmw.js("invoke", "tool", "deploy", actor="alice")["policy_epoch"] == pmw.pdp.epoch
    assert not (tmp_path / "policy-deploys").exists()  # nothing was deployed


@pytest.fixture
def own_pdp(tmp_path: Path) -> Iterator[Pdp]:
    """A PDP of this test's own, serving ``tmp_path/policy-deploys/current``: the deployments of a world
    at ``tmp_path/world.db``, so that ``pmw policy reload`` deploys where this PDP reads."""
    require_cerbos()
    managed, pdp = start_pdp(tmp_path / "policy-deploys")
    yield pdp
    managed.stop()


def test_reload_activates_a_new_epoch_and_invalidates_older_approvals(tmp_path: Path, own_pdp: Pdp) -> None:
    cli = Pmw(f"sqlite:///{tmp_path / 'world.db'}", own_pdp)
    cli.init()
    cli.agents("alice", caps=("tool:deploy", "wake.enqueue"))
    cli.ok("wakes", "enqueue", GOVERNOR, "--cause", "review", "--key", "k1", actor="alice")
    approval = cli.js("approvals", "request", "tool", "deploy", actor="alice")["approval_id"]
    cli.ok("approvals", "approve", approval, actor=GOVERNOR)
    edited = copy_policies(tmp_path, "edited")
    edit(edited / "resources" / "tool.yaml", 'description: "tool:', 'description: "tool (reviewed):')
    report = cli.js("policy", "reload", "--dir", str(edited), actor=GOVERNOR)
    assert report["previous_epoch"] == own_pdp.epoch
    assert report["epoch"].startswith("p-") and report["epoch"] != own_pdp.epoch
    assert report["reload_seconds"] > 0 and report["revocation_seconds"] >= 0
    assert report["revoked"] == {"epoch": report["epoch"], "wakes_checked": 1, "handoffs_checked": 0,
                                 "wakes_revoked": [], "handoffs_revoked": []}
    assert epochs(cli.db_url, own_pdp) == [own_pdp.epoch, report["epoch"]]
    assert cli.js("allowed", "tool", "deploy", actor="alice")["policy_epoch"] == report["epoch"]
    stale = cli.fails(6, "invoke", "tool", "deploy", "--side-effect", "S3", "--approval", approval, actor="alice")
    assert (stale["code"], stale["approval_id"]) == ("approval_invalid", approval)
    assert own_pdp.epoch in stale["reason"]
    # Reloading the same set again is a no-op epoch change; humans get the same fields.
    human = cli.ok("policy", "reload", "--dir", str(edited), actor=GOVERNOR)
    for field in ("previous_epoch:", "epoch:", "reload_seconds:", "revocation_seconds:", "revoked.wakes_revoked:",
                  "revoked.handoffs_revoked:"):
        assert field in human


# -- the CLI's own PDP --------------------------------------------------------------------------------

CERBOS_BINARY = "cerbos-linux-x64"
CERBOS_SERVER = f"{CERBOS_BINARY} server"  # the PDP's command line (its policy directory is in its config)


def cerbos_children(parent: int) -> set[int]:
    """PIDs of the Cerbos servers whose parent is ``parent`` (other sessions' PDPs are not counted)."""
    found = subprocess.run(["pgrep", "-P", str(parent), "-f", CERBOS_SERVER], capture_output=True, text=True,
                           check=False)
    return {int(pid) for pid in found.stdout.split()}


def is_cerbos(pid: int) -> bool:
    """Whether ``pid`` is (still) a live Cerbos server (a zombie or a reused PID is not)."""
    try:
        return CERBOS_BINARY in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


def test_without_an_address_the_cli_starts_and_stops_its_own_pdp(tmp_path: Path) -> None:
    require_cerbos()
    if shutil.which("pgrep") is None:
        pytest.skip("pgrep is not installed")
    url = f"sqlite:///{tmp_path / 'world.db'}"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "CERBOS_NO_TELEMETRY": "1"}  # no PMW_PDP_ADDRESS
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "--db", url, "--json", "init", "--governor", "gov",
                             "--name", "Gov", "--term", "t-gov"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    seen: set[int] = set()
    while proc.poll() is None:  # the PDP lives at least as long as its start-up (over a second)
        seen |= cerbos_children(proc.pid)
        time.sleep(0.05)
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    assert json.loads(out)["governor"]["agent"]["role_id"] == "governor"
    assert len(seen) == 1, f"the CLI should have started exactly one PDP of its own, saw {seen}"
    assert not [pid for pid in seen if is_cerbos(pid)], "the CLI's PDP outlived the command"
    deploys = tmp_path / "policy-deploys"
    assert (deploys / "current").is_symlink()  # it deployed the default policies beside the database
    assert (deploys / "current").resolve().name.startswith("p-")


def test_argument_errors_never_start_a_pdp(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'world.db'}"  # no PMW_PDP_ADDRESS: a PDP would be the CLI's own
    for args, actor in ((("tasks", "create", "x", "--constraints", "{"), "a"), (("tasks", "list"), None),
                        (("allowed", "--each", "nokind"), "a"), (("invoke", "tool", "t", "--side-effect", "S7"), "a"),
                        (("policy", "explain", "--principal", "a", "task", "t", "fly"), None),
                        (("init", "--governor", "g"), None)):
        started = time.monotonic()
        result = invoke(url, *args, actor=actor)
        assert_clean_failure(result, 3)
        assert time.monotonic() - started < 1.0, args  # starting a PDP takes well over a second
    assert not (tmp_path / "policy-deploys").exists()
    assert not (tmp_path / "world.db").exists()


def test_an_unreachable_pdp_exits_9(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'world.db'}"
    env = {"PMW_PDP_ADDRESS": "127.0.0.1:9", "PMW_PDP_TIMEOUT_S": "0.5"}  # nothing listens on the discard port
    result = invoke(url, "tasks", "list", actor="a", as_json=True, env=env)
    assert_clean_failure(result, 9)
    assert json.loads(result.stderr)["code"] == "policy_unavailable"
    human = invoke(url, "tasks", "list", actor="a", env=env)
    assert_clean_failure(human, 9)
    assert "(policy_unavailable)" in human.stderr


def test_a_missing_cerbos_binary_exits_9_with_the_install_hint(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'world.db'}"
    result = invoke(url, "tasks", "list", actor="a", env={"PMW_CERBOS_BIN": str(tmp_path / "no-cerbos")})
    assert_clean_failure(result, 9)
    assert "npm ci" in result.stderr
    policy_test = invoke(None, "policy", "test", env={"PMW_CERBOS_BIN": str(tmp_path / "no-cerbos")})
    assert_clean_failure(policy_test, 9)
