"""The governance calls (``engine/service/governance.py``) on a runtime with its own real PDP, whose decision
log is the real PDP's: only live governors may call them; ``explain`` names the rule and the policy file
that really decided (a candidate edit changes them), under what-if attributes and of an undeployed set
without deploying it; ``shadow`` lists exactly the logged decisions a candidate flips (none for an
identical set) and commits nothing; ``audit`` filters the log."""

from __future__ import annotations

import gzip
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.errors import InvalidInput, PolicyDenied, PolicyInvalidRequest, PolicyRejected
from engine.policy.candidate_pdp import candidate_epoch
from engine.policy.decision_log import AuditRow, audit_filter, audit_rows, read_checks
from engine.runtime import Runtime, probe_epoch
from engine.service.governance import GovernanceCalls
from tests.conftest import REPO, add_agent, runtime_on_policy_copy

FROZEN_RULE = """
    # A candidate change: nobody may write the key "frozen".
    - name: frozen-key
      actions: ["write"]
      effect: EFFECT_DENY
      roles: ["*"]
      condition:
        match:
          expr: R.id == "frozen"
"""


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory, policy_deployment: Path) -> Iterator[Runtime]:
    """One runtime (its own PDP, decision log in its data directory) for the module: ``gov``; ``alice``
    (state.write, task.create, task.work); ``bob`` (task.work); ``carol`` (nothing); task ``t1`` by alice;
    alice wrote ``plan`` and ``frozen``, bob was denied ``plan``."""
    rt = runtime_on_policy_copy(tmp_path_factory.mktemp("gov"))
    world = rt.world
    add_agent(world, "alice", ["state.write", "task.create", "task.work"])
    add_agent(world, "bob", ["task.work"])
    add_agent(world, "carol", [])
    world.create_task("alice", "write the report", task_id="t1")
    world.compare_and_set_state("alice", "plan", expected_version=0, value={"step": 1})
    world.compare_and_set_state("alice", "frozen", expected_version=0, value={"v": 1})
    with pytest.raises(PolicyDenied):
        world.compare_and_set_state("bob", "plan", expected_version=1, value={"step": 2})
    yield rt
    rt.close()


@pytest.fixture(scope="module")
def calls(runtime: Runtime) -> GovernanceCalls:
    return GovernanceCalls(runtime)


def decision_log(runtime: Runtime) -> Path:
    assert runtime.managed is not None and runtime.managed.audit_path is not None
    return runtime.managed.audit_path


def wait_for(found: Callable[[], bool], timeout: float = 10.0) -> None:
    """The PDP writes its decision log asynchronously: wait (bounded) until ``found``."""
    deadline = time.monotonic() + timeout
    while not found():
        assert time.monotonic() < deadline, "the PDP did not log the decisions in time"
        time.sleep(0.1)


def logged(runtime: Runtime, **filters: Any) -> list[AuditRow]:
    return audit_rows(decision_log(runtime), audit_filter(limit=100_000, **filters))


@pytest.fixture(scope="module")
def log_ready(runtime: Runtime) -> None:
    """Wait until the fixture's writes are in the log (bob's denied write of ``plan`` is among the last)."""
    wait_for(lambda: any(r.principal == "bob" and r.id == "plan" for r in logged(runtime, kind="state")))


def candidate(tmp_path: Path, edit: Callable[[Path], None] | None = None) -> Path:
    target = tmp_path / "candidate"
    shutil.copytree(REPO / "policies", target)
    if edit is not None:
        edit(target)
    return target


def replace_in(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


def freeze(policies: Path) -> None:
    replace_in(policies / "resources" / "state.yaml", "    # ---- guardrails", FROZEN_RULE + "    # ---- guardrails")


def world_fingerprint(runtime: Runtime) -> tuple[Any, ...]:
    """What a governance question must leave as it was: the store, the epoch, the PDP's epoch, deployments."""
    deploys = sorted(p.name for p in Runtime.deploy_root(runtime.settings).iterdir())
    return (runtime.store.read.counts_and_versions(), runtime.book.current_policy_epoch(), probe_epoch(runtime.pdp),
            deploys)


# -- only live governors -------------------------------------------------------------------------------


CALLS: dict[str, Callable[[GovernanceCalls, str, Path], object]] = {
    "history": lambda c, who, d: c.history(who),
    "reload": lambda c, who, d: c.reload(who, str(d)),
    "explain": lambda c, who, d: c.explain(who, "bob", "task", "t1", "claim"),
    "explain --dir": lambda c, who, d: c.explain(who, "bob", "task", "t1", "claim", policy_dir=str(d)),
    "shadow": lambda c, who, d: c.shadow(who, str(d)),
    "audit": lambda c, who, d: c.audit(who, agent="bob"),
    "audit (bad filter)": lambda c, who, d: c.audit(who, effect="MAYBE"),
}


@pytest.mark.parametrize("call", list(CALLS))
def test_a_non_governor_is_refused_and_the_denial_recorded(runtime: Runtime, calls: GovernanceCalls,
                                                           tmp_path: Path, call: str) -> None:
    directory = candidate(tmp_path, freeze)
    before = world_fingerprint(runtime)
    events = before[0]["events"]
    with pytest.raises(PolicyDenied) as denied:
        CALLS[call](calls, "alice", directory)
    assert (denied.value.actor, denied.value.kind) == ("alice", "world")
    after = world_fingerprint(runtime)
    assert after[0]["events"] == events + 1  # the denial's record, nothing else
    assert ({k: v for k, v in after[0].items() if k != "events"}, *after[1:]) == (
        {k: v for k, v in before[0].items() if k != "events"}, *before[1:])
    last = runtime.store.read.events(0, 1, newest=True)[0]
    assert (last["event_type"], last["actor_id"]) == ("policy.denied", "alice")


def test_a_governor_reads_the_activation_history(calls: GovernanceCalls, runtime: Runtime) -> None:
    history = calls.history("gov")
    assert [h.epoch for h in history][-1] == probe_epoch(runtime.pdp)
    with pytest.raises(InvalidInput):
        calls.history("gov", limit=0)


# -- explain -------------------------------------------------------------------------------------------


def test_explain_names_the_rule_and_the_file_that_decided(calls: GovernanceCalls, runtime: Runtime) -> None:
    yes = calls.explain("gov", "bob", "task", "t1", "claim")
    assert (yes.allowed, yes.effect, yes.policy_set) == (True, "ALLOW", "deployed")
    assert (yes.policy, yes.policy_file, yes.rule) == ("resource.task.vdefault", "resources/task.yaml", "claim")
    assert yes.policy_epoch == probe_epoch(runtime.pdp)
    assert Path(yes.policy_dir) == runtime.managed.policy_dir.resolve()  # type: ignore[union-attr]
    assert yes.policy_file is not None and (Path(yes.policy_dir) / yes.policy_file).is_file()
    assert "live_agent" in yes.derived_roles
    assert any("rule=claim" in step.path for step in yes.trace)
    no = calls.explain("gov", "carol", "task", "t1", "claim")  # no task.work: no rule allows it
    assert (no.allowed, no.effect, no.rule, no.rules) == (False, "DENY", None, [])
    mine = calls.explain("gov", "alice", "state", "frozen", "write")
    assert (mine.allowed, mine.policy_file, mine.rule) == (True, "resources/state.yaml", "write")


def test_a_candidate_edit_changes_the_rule_and_file_named(calls: GovernanceCalls, runtime: Runtime,
                                                          tmp_path: Path) -> None:
    def rename_and_move(policies: Path) -> None:
        task = policies / "resources" / "task.yaml"
        replace_in(task, "    - name: claim\n", "    - name: claim-by-any-worker\n")
        (policies / "resources" / "work").mkdir()
        task.rename(policies / "resources" / "work" / "tasks.yaml")

    directory = candidate(tmp_path, rename_and_move)
    before = world_fingerprint(runtime)
    asked = calls.explain("gov", "bob", "task", "t1", "claim", policy_dir=str(directory))
    assert (asked.allowed, asked.policy_set, asked.policy_dir) == (True, "candidate", str(directory))
    assert (asked.rule, asked.policy_file) == ("claim-by-any-worker", "resources/work/tasks.yaml")
    assert asked.policy_epoch == candidate_epoch(directory) != probe_epoch(runtime.pdp)
    assert world_fingerprint(runtime) == before  # asked, not deployed: the world's epoch is unchanged
    assert calls.explain("gov", "bob", "task", "t1", "claim").rule == "claim"  # the deployed set still decides


def test_an_undeployed_denial_is_explained_without_deploying(calls: GovernanceCalls, runtime: Runtime,
                                                             tmp_path: Path) -> None:
    directory = candidate(tmp_path, freeze)
    before = world_fingerprint(runtime)
    asked = calls.explain("gov", "alice", "state", "frozen", "write", policy_dir=str(directory))
    assert (asked.allowed, asked.rule, asked.policy_file) == (False, "frozen-key", "resources/state.yaml")
    assert world_fingerprint(runtime) == before
    assert calls.explain("gov", "alice", "state", "frozen", "write").allowed is True
    broken = tmp_path / "broken"
    shutil.copytree(directory, broken)
    replace_in(broken / "resources" / "state.yaml", 'expr: R.id == "frozen"', 'expr: R.id == "frozen" &&')
    with pytest.raises(PolicyRejected, match=r"resources/state\.yaml"):
        calls.explain("gov", "alice", "state", "frozen", "write", policy_dir=str(broken))
    with pytest.raises(InvalidInput):
        calls.explain("gov", "alice", "state", "frozen", "write", policy_dir=str(tmp_path / "nowhere"))
    assert world_fingerprint(runtime) == before


def test_what_if_attributes_flip_the_answer(calls: GovernanceCalls) -> None:
    offline = calls.explain("gov", "bob", "task", "t1", "claim", principal_attr={"status": "offline"})
    assert (offline.allowed, offline.rule, offline.what_if) == (False, "offline-read-only", ["principal.status"])
    assert offline.principal_attr["status"] == "offline"
    assert calls.explain("gov", "bob", "task", "t1", "read").allowed is True
    secret = calls.explain("gov", "bob", "task", "t1", "read", resource_attr={"sensitivity": 4})
    assert (secret.allowed, secret.what_if, secret.resource_attr["sensitivity"]) == (
        False, ["resource.sensitivity"], 4)
    granted = calls.explain("gov", "carol", "task", "t1", "claim", principal_attr={"capabilities": ["task.work"]})
    assert (granted.allowed, granted.rule) == (True, "claim")
    as_governor = calls.explain("gov", "carol", "task", "t1", "abort", principal_attr={"role": "governor"})
    assert (as_governor.allowed, as_governor.rule, as_governor.principal_roles) == (
        True, "governor-all", ["agent", "governor"])
    with pytest.raises(InvalidInput, match="no attribute"):
        calls.explain("gov", "bob", "task", "t1", "claim", principal_attr={"wings": True})
    with pytest.raises(PolicyInvalidRequest):  # the PDP's schemas refuse a wrong type
        calls.explain("gov", "bob", "task", "t1", "claim", principal_attr={"clearance": "high"})
    with pytest.raises(InvalidInput):
        calls.explain("gov", "bob", "task", "t1", "fly")


# -- shadow --------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("log_ready")
def test_shadow_of_an_identical_set_changes_nothing(calls: GovernanceCalls, runtime: Runtime,
                                                    tmp_path: Path) -> None:
    before = world_fingerprint(runtime)
    report = calls.shadow("gov", str(candidate(tmp_path)))
    assert report.checks_replayed > 10 and report.decisions_replayed >= report.checks_replayed
    assert (report.changed, report.changes) == (0, [])
    # a request the schemas refused (the what-if test's) is refused again: not a change
    assert report.invalid == sum(c.invalid for c in read_checks(decision_log(runtime)))
    assert report.log_files == [str(decision_log(runtime))]
    assert world_fingerprint(runtime) == before


@pytest.mark.usefixtures("log_ready")
def test_shadow_lists_exactly_the_decisions_a_candidate_flips(calls: GovernanceCalls, runtime: Runtime,
                                                              tmp_path: Path) -> None:
    before = world_fingerprint(runtime)
    report = calls.shadow("gov", str(candidate(tmp_path, freeze)), limit=100_000)
    assert world_fingerprint(runtime) == before  # nothing deployed, nothing written
    expected = {(r.call_id, r.principal, r.kind, r.id, r.action)
                for r in logged(runtime, kind="state", action="write", effect="ALLOW") if r.id == "frozen"}
    assert expected, "alice's write of 'frozen' should be in the log"
    assert {(c.call_id, c.principal, c.kind, c.id, c.action) for c in report.changes} == expected
    assert {(c.before, c.after) for c in report.changes} == {("ALLOW", "DENY")}
    assert (report.changed, report.allow_to_deny, report.deny_to_allow) == (len(report.changes), len(expected), 0)
    with pytest.raises(InvalidInput):
        calls.shadow("gov", str(tmp_path / "nowhere"))
    with pytest.raises(InvalidInput):
        calls.shadow("gov", str(tmp_path / "candidate"), limit=0)


# -- audit ---------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("log_ready")
def test_audit_filters_the_real_decision_log(calls: GovernanceCalls, runtime: Runtime) -> None:
    everything = calls.audit("gov", limit=100_000)
    assert {r.principal for r in everything} >= {"gov", "alice", "bob"}
    assert "pmw-epoch-probe" not in {r.principal for r in everything}  # the runtime's own probes
    bobs = calls.audit("gov", agent="bob", limit=100_000)
    assert bobs and {r.principal for r in bobs} == {"bob"}
    assert len(bobs) == sum(r.principal == "bob" for r in everything)
    denied = calls.audit("gov", agent="bob", kind="state", action="write", effect="DENY")
    assert [(r.id, r.effect, r.policy, r.policy_file) for r in denied] == [
        ("plan", "DENY", "resource.state.vdefault", "resources/state.yaml")]
    assert denied[0].policy_epoch == probe_epoch(runtime.pdp) and denied[0].call_id
    assert all(r.effect == "ALLOW" for r in calls.audit("gov", effect="ALLOW", limit=100_000))
    times = [r.time_us for r in everything]
    assert times == sorted(times)
    middle = times[len(times) // 2]
    window = calls.audit("gov", since_us=middle, limit=100_000)
    assert window and all(r.time_us >= middle for r in window)
    # each call's own governor check is logged too: compare what was in the log at the first call
    assert [r for r in window if r.time_us <= times[-1]] == [r for r in everything if r.time_us >= middle]
    assert all(r.time_us <= middle for r in calls.audit("gov", until_us=middle, limit=100_000))
    assert calls.audit("gov", until_us=times[0] - 1) == []
    assert calls.audit("gov", since_us=int(time.time() * 1e6) + 3_600_000_000) == []  # an hour from now
    newest = calls.audit("gov", limit=1)
    assert len(newest) == 1 and newest[0].time_us >= times[-1]
    for bad in ({"kind": "nokind"}, {"action": "fly"}, {"kind": "task", "action": "write"}, {"effect": "MAYBE"},
                {"since_us": 5, "until_us": 4}, {"since_us": -1}, {"limit": 0}, {"agent": ""}):
        with pytest.raises(InvalidInput):
            calls.audit("gov", **bad)


@pytest.mark.usefixtures("log_ready")
def test_audit_reads_rotated_and_compressed_files_oldest_first(runtime: Runtime, tmp_path: Path) -> None:
    lines = decision_log(runtime).read_text().splitlines(keepends=True)
    half = len(lines) // 2
    log = tmp_path / "audit" / "decisions.log"
    log.parent.mkdir()
    with gzip.open(log.parent / "decisions-2026-01-01T00-00-00.000.log.gz", "wt") as old:
        old.writelines(lines[:half])
    (log.parent / "decisions-2026-01-02T00-00-00.000.log").write_text("".join(lines[half:]))
    log.write_text('{"truncated": \n')  # a line being written is skipped
    rows = audit_rows(log, audit_filter(limit=100_000))
    assert rows == audit_rows(decision_log(runtime), audit_filter(limit=100_000))[:len(rows)]
    assert len(list(read_checks(log))) <= len(list(read_checks(decision_log(runtime))))  # the live log grows
    assert len(rows) > 10
