"""A remembered check decision is always what the PDP answers now: whatever grants, revocations, handoffs,
memory and task transitions happen, the memo's answer equals a second authorizer's with the memo off (the
real PDP asked directly), right after each change; a new epoch forgets everything; a policy set that reads
the clock is never memoized (visibly)."""

from __future__ import annotations

import logging
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.errors import PMWError
from engine.policy.cerbos_adapter import CerbosPdp
from engine.policy.decision_memo import DecisionMemo, clock_reads_in_dir, id_free_kinds_in_dir, scan_deployment
from engine.policy.enforcement import Check, PdpAuthorizer
from engine.policy.governance import deploy
from engine.policy.model import ACTIONS, Decision, PrincipalRef, ResourceRef
from engine.policy.pdp_process import ManagedPdp
from engine.runtime import probe_epoch
from engine.sources import ManualClock, SeededIds
from engine.world import World
from engine.world.book import RuntimeBook
from engine.world.permissions import OBJECT_TABLES
from store import Store
from tests.conftest import REPO, add_agent

CAPS = ["task.create", "task.work", "handoff.create", "memory.write", "memory.review", "state.write"]
SETTINGS = settings(max_examples=12, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
AGENTS = ("a", "b")
CLOCK_RULE = """
    - name: clock-window                 # reads the clock; never true after 2000
      actions: ["invoke"]
      effect: EFFECT_DENY
      roles: ["*"]
      condition:
        match:
          expr: now() < timestamp("2000-01-01T00:00:00Z")

    # ---- guardrails"""


SUITE_NOW = 'options:\n  now: "2024-01-01T00:00:00Z"\n'


def open_memo_world(url: str, pdp: CerbosPdp, deploy_root: Path, artifact_dir: Path) -> tuple[World, RuntimeBook]:
    """A world whose every call is decided through a decision memo scanning ``deploy_root``."""
    store = Store(url)
    book = RuntimeBook(store, policy=PdpAuthorizer(pdp, store.read, deploy_root=deploy_root),
                       clock=ManualClock(), ids=SeededIds(3), artifact_dir=artifact_dir)
    store.init(book.clock.now_us())
    book.activate_policy_epoch(probe_epoch(pdp), "tests")
    book.bootstrap_governor("gov", "Governor", "t-gov")
    book.world.activate_session("term:t-gov")
    return book.world, book


def memo_of(book: RuntimeBook) -> PdpAuthorizer:
    assert isinstance(book.policy, PdpAuthorizer)
    return book.policy


def objects_of(book: RuntimeBook) -> list[tuple[str, str, dict[str, Any] | None]]:
    """Every task, memory, handoff and agent of the world, as its row is now, plus two row-less kinds."""
    out: list[tuple[str, str, dict[str, Any] | None]] = []
    for kind in ("task", "memory", "handoff", "agent", "wake"):
        table, key = OBJECT_TABLES[kind]
        out += [(kind, str(row[key]), row) for row in book.store.read.rows(table, {})]
    # kinds keyed without their id (state) and one whose policy reads it (tool: "tool:<id>" capabilities)
    return [*out, ("tool", "deploy", None), ("tool", "other", None), ("state", "plan", None),
            ("state", "other", None)]


def assert_memo_agrees(book: RuntimeBook, direct: PdpAuthorizer) -> None:
    """For every agent and object: all actions (one request) and single actions (another key), asked
    twice through the memo (the second from memory), equal the PDP's direct answers."""
    memo = memo_of(book)
    objects = objects_of(book)
    singles = [Check(k, i, a, row) for k, i, row in objects for a in sorted(ACTIONS[k])[:2]]
    for actor in sorted(str(row["agent_id"]) for row in book.store.read.rows("agents", {})):
        first, again = memo.decide_actions(actor, objects), memo.decide_actions(actor, objects)
        assert first == again == direct.decide_actions(actor, objects)
        one, two = memo.decide(actor, singles), memo.decide(actor, singles)
        assert one == two == direct.decide(actor, singles)


Step = tuple[str, Any]
steps = st.lists(st.one_of(
    st.tuples(st.just("grant"), st.tuples(st.sampled_from(AGENTS), st.lists(st.sampled_from(CAPS), unique=True))),
    st.tuples(st.just("revoke"), st.tuples(st.sampled_from(AGENTS), st.sampled_from(CAPS))),
    st.tuples(st.just("clearance"), st.tuples(st.sampled_from(AGENTS), st.integers(0, 5))),
    st.tuples(st.just("task"), st.tuples(st.sampled_from(AGENTS), st.integers(0, 5))),
    st.tuples(st.just("claim"), st.sampled_from(AGENTS)),
    st.tuples(st.just("complete"), st.sampled_from(AGENTS)),
    st.tuples(st.just("handoff"), st.sampled_from(AGENTS)),
    st.tuples(st.just("memory"), st.tuples(st.sampled_from(AGENTS), st.integers(0, 5))),
    st.tuples(st.just("memory_step"), st.tuples(st.sampled_from(AGENTS),
                                                st.sampled_from(["propose", "review", "promote", "archive"]))),
    st.tuples(st.just("offline"), st.sampled_from(AGENTS)),
    st.tuples(st.just("online"), st.sampled_from(AGENTS)),
), min_size=1, max_size=10)


def apply(world: World, book: RuntimeBook, step: Step) -> None:
    """One change of the world; a change the world refuses (denied, illegal) is just no change."""
    what, arg = step
    read = book.store.read
    tasks = read.rows("tasks", {})
    memories = read.rows("memory", {})
    try:
        if what == "grant":
            world.grant("gov", arg[0], capabilities=arg[1])
        elif what == "revoke":
            agent = world.get_agent(arg[0], actor="gov")
            held = list(agent.capability_profile.get("capabilities", []))
            world.grant("gov", arg[0], capabilities=[c for c in held if c != arg[1]])
        elif what == "clearance":
            world.grant("gov", arg[0], clearance=arg[1])
        elif what == "task":
            world.create_task(arg[0], "work", constraints={"sensitivity": arg[1]})
        elif what == "claim" and tasks:
            world.claim_task(arg, tasks[-1]["task_id"])
        elif what == "complete" and tasks:
            world.complete_task(arg, tasks[-1]["task_id"])
        elif what == "handoff" and tasks:
            task = tasks[-1]
            target = "b" if arg == "a" else "a"
            h = world.create_handoff(arg, target, task["task_id"], "carry on",
                                     authority_scope={"capabilities": ["task.work"]})
            world.accept_handoff(target, h.handoff_id)
        elif what == "memory":
            world.store_memory(arg[0], "a note", "observation", permission_scope={"sensitivity": arg[1]})
        elif what == "memory_step" and memories:
            getattr(world, f"{arg[1]}_memory")(arg[0], memories[-1]["memory_id"])
        elif what == "offline":
            if world.get_agent(arg, actor="gov").status.value != "offline":
                world.detach_session(f"term:t-{arg}")
        elif what == "online" and world.get_agent(arg, actor="gov").status.value == "offline":
            world.register_agent(arg, arg.title(), "worker", f"t-{arg}")
            world.activate_session(f"term:t-{arg}")
    except PMWError:
        pass


def test_a_remembered_decision_always_equals_the_pdps_answer_now(pdp_client: CerbosPdp, policy_deployment: Path,
                                                                 tmp_path: Path) -> None:
    totals = {"hits": 0, "checks": 0}

    @SETTINGS
    @given(changes=steps)
    def scenario(changes: list[Step]) -> None:
        world, book = open_memo_world("sqlite://", pdp_client, policy_deployment.parent, tmp_path / "art")
        try:
            add_agent(world, "a", ["task.create", "task.work", "handoff.create", "memory.write"])
            add_agent(world, "b", ["task.work", "memory.write", "memory.review"])
            direct = PdpAuthorizer(pdp_client, book.store.read, decision_memo=DecisionMemo(0))
            assert_memo_agrees(book, direct)
            for change in changes:
                apply(world, book, change)
                assert_memo_agrees(book, direct)                     # right after each change
            counters = memo_of(book).decision_memo.counters()
            assert counters.memoized is True and counters.bypassed == 0
            totals["hits"] += counters.hits
            totals["checks"] += counters.hits + counters.misses
        finally:
            book.close()
    scenario()
    assert totals["hits"] > totals["checks"] // 3  # the memo served (the comparisons are not vacuous)


def test_every_authority_change_misses_and_the_world_decides_through_the_memo(pdp_client: CerbosPdp,
                                                                             policy_deployment: Path,
                                                                             tmp_path: Path) -> None:
    world, book = open_memo_world(f"sqlite:///{tmp_path / 'w.db'}", pdp_client, policy_deployment.parent,
                                  tmp_path / "art")
    try:
        add_agent(world, "b", ["state.write"])
        memo = memo_of(book).decision_memo
        world.compare_and_set_state("b", "plan", expected_version=0, value={"n": 1})
        before = memo.counters()
        world.compare_and_set_state("b", "plan", expected_version=1, value={"n": 2})  # same question: a hit
        after = memo.counters()
        assert after.hits > before.hits and after.round_trips_saved > before.round_trips_saved
        world.grant("gov", "b", capabilities=[])                                         # revoked
        misses = memo.counters().misses
        with pytest.raises(PMWError) as denied:
            world.compare_and_set_state("b", "plan", expected_version=2, value={"n": 3})
        assert denied.value.code == "policy_denied"
        assert memo.counters().misses > misses                     # the revocation changed the key
    finally:
        book.close()


def _deploy_copy(tmp_path: Path, name: str, root: Path, *, clock: bool) -> str:
    source = tmp_path / name
    shutil.copytree(REPO / "policies", source)
    if clock:
        tool = source / "resources" / "tool.yaml"
        text = tool.read_text()
        assert "\n    # ---- guardrails" in text
        tool.write_text(text.replace("\n    # ---- guardrails", CLOCK_RULE, 1))
        for suite in (source / "tests").glob("*_test.yaml"):  # Cerbos' suites need a fixed `now` once a rule reads it
            suite.write_text(suite.read_text().replace("\ntests:\n", f"\n{SUITE_NOW}tests:\n", 1))
    return deploy(source, root).epoch


def _reload_to(pdp: CerbosPdp, book: RuntimeBook, epoch: str) -> None:
    pdp.reload()
    deadline = time.monotonic() + 10
    while probe_epoch(pdp) != epoch:
        assert time.monotonic() < deadline, "the PDP did not reload"
        time.sleep(0.05)
    book.clock.advance(1)  # type: ignore[attr-defined]
    book.activate_policy_epoch(epoch, "tests")


def test_a_new_epoch_forgets_and_a_set_that_reads_the_clock_is_never_memoized(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "deploys"
    plain = _deploy_copy(tmp_path, "plain", root, clock=False)
    managed = ManagedPdp(root / "current", run_dir=tmp_path / "run")
    address = managed.start()
    pdp = CerbosPdp(address, timeout_s=10.0)  # a loaded machine: the test is about the memo, not deadlines
    world, book = open_memo_world(f"sqlite:///{tmp_path / 'w.db'}", pdp, root, tmp_path / "art")
    try:
        add_agent(world, "a", ["task.create", "memory.write", "tool:deploy"])
        world.create_task("a", "work")
        memo = memo_of(book).decision_memo
        direct = PdpAuthorizer(pdp, book.store.read, decision_memo=DecisionMemo(0))
        assert_memo_agrees(book, direct)
        assert memo.status is not None and (memo.status.epoch, memo.status.memoized) == (plain, True)
        assert memo.counters().size > 0

        timed = _deploy_copy(tmp_path, "timed", root, clock=True)              # a set that calls now()
        with caplog.at_level(logging.WARNING, logger="pmw.policy"):
            _reload_to(pdp, book, timed)
            bypassed = memo.counters().bypassed
            assert_memo_agrees(book, direct)
        status = memo.status
        assert status is not None and (status.epoch, status.memoized) == (timed, False)
        assert [(r.file, r.function) for r in status.clock_reads] == [("resources/tool.yaml", "now")]
        assert "now()" in status.reason and any("decision memo OFF" in r.getMessage() for r in caplog.records)
        counters = memo.counters()
        assert (counters.size, counters.memoized) == (0, False)               # forgotten, and nothing kept
        assert counters.bypassed > bypassed

        assert deploy(tmp_path / "plain", root).epoch == plain                 # rolled back: memo on again
        _reload_to(pdp, book, plain)
        assert memo.counters().size == 0
        assert_memo_agrees(book, direct)
        assert memo.status is not None and memo.status.memoized and memo.counters().size > 0
    finally:
        book.close()
        pdp.close()
        managed.stop()


def test_the_scan_names_each_clock_function_and_skips_test_suites(tmp_path: Path) -> None:
    (tmp_path / "resources").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "resources" / "a.yaml").write_text(
        "x: 1\n  expr: timestamp(R.attr.seen).timeSince() > duration('1h')\n  expr: now ( ) > C.t\n")
    (tmp_path / "resources" / "b.yaml").write_text("expr: timestamp('2020-01-01T00:00:00Z').getHours() > 3\n"
                                                   "known(x) && snow(y)\n")
    (tmp_path / "tests" / "a_test.yaml").write_text("options:\n  now: now()\n")
    reads = clock_reads_in_dir(tmp_path)
    assert [(r.file, r.line, r.function) for r in reads] == [("resources/a.yaml", 2, "timeSince"),
                                                             ("resources/a.yaml", 3, "now")]
    assert not scan_deployment("p-x", tmp_path).memoized
    assert scan_deployment("p-y", REPO / "policies").memoized  # the repository's set reads no clock


def test_kinds_whose_policies_never_read_the_id_are_keyed_without_it(tmp_path: Path) -> None:
    kinds = id_free_kinds_in_dir(REPO / "policies")
    assert {"wake", "task", "state", "memory"} <= set(kinds) and "tool" not in kinds  # tool.yaml reads R.id

    def scan(files: dict[str, str]) -> list[str]:
        root = tmp_path / str(len(list(tmp_path.iterdir())))
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        return id_free_kinds_in_dir(root)

    a = "resourcePolicy:\n  resource: a\n  rules:\n  - expr: R.attr.x == 1\n"
    b = "resourcePolicy:\n  resource: b\n  rules:\n  - expr: request.resource.id == P.id\n"
    assert scan({"a.yaml": a, "b.yaml": b}) == ["a"]
    assert scan({"a.yaml": a, "b_test.yaml": b.replace("resource: b", "resource: a")}) == ["a"]  # suites skipped
    derived = "derivedRoles:\n  name: d\n  definitions:\n  - condition: {match: {expr: R.id != ''}}\n"
    assert scan({"a.yaml": a, "d.yaml": derived}) == []  # a derived role may decide any kind
    assert scan({"a.yaml": a.replace("R.attr.x == 1", "has(R) && R[\"attr\"].x == 1")}) == []  # the whole R
    assert scan({"a.yaml": a, "c.yaml": "resourcePolicy: [unclosed\n"}) == []  # cannot parse: cannot tell


def test_checks_that_differ_only_in_an_unread_id_are_answered_once(pdp_client: CerbosPdp, policy_deployment: Path,
                                                                    tmp_path: Path) -> None:
    """A wake's claim is the same check for every wake of one agent in one state; a tool's is not (its policy
    reads the id): the memo's answers are the PDP's, with the asked resource's id."""
    world, book = open_memo_world("sqlite://", pdp_client, policy_deployment.parent, tmp_path / "art")
    try:
        add_agent(world, "a", ["wake.enqueue", "tool:deploy"])
        wakes = [world.enqueue_wake("gov", "a", "go", f"k-{n}").wake for n in range(3)]
        direct = PdpAuthorizer(pdp_client, book.store.read, decision_memo=DecisionMemo(0))
        memo = memo_of(book)
        before = memo.decision_memo.counters()
        checks = [Check("wake", w.wake_id, "claim", book.store.read.get("wakes", wake_id=w.wake_id)) for w in wakes]
        tools = [Check("tool", t, "invoke", None) for t in ("deploy", "other")]
        for one in [*checks, *tools]:
            assert memo.decide("a", [one]) == direct.decide("a", [one])
        after = memo.decision_memo.counters()
        assert after.hits - before.hits == 2 and after.misses - before.misses == 3  # 1 wake + 2 tools asked
        assert [d.id for d in memo.decide("a", checks)] == [w.wake_id for w in wakes]
        assert [d.allowed("invoke") for d in memo.decide("a", tools)] == [True, False]
    finally:
        book.close()


def test_the_memo_is_bounded_and_off_without_a_deployment_or_size(pdp_client: CerbosPdp) -> None:
    epoch = probe_epoch(pdp_client)
    asked_pdp: list[int] = []

    def fetch(asked: Any) -> list[Decision]:
        asked_pdp.append(len(asked))
        return [Decision(kind=r.kind, id=r.id, actions=dict.fromkeys(acts, True), epoch=epoch) for r, acts in asked]

    who = PrincipalRef(id="a", roles=["agent"], attr={"n": 1})
    res = [ResourceRef(kind="tool", id=f"t{i}", attr={}) for i in range(5)]
    memo = DecisionMemo(3, scan=lambda e: scan_deployment(e, REPO / "policies"))
    memo.check(epoch, who, [(r, ["invoke"]) for r in res], fetch)
    assert memo.counters().size == 3                                     # LRU bound
    memo.check(epoch, who, [(res[4], ["invoke"])], fetch)                # newest kept: a hit, no PDP call
    assert asked_pdp == [5] and memo.hits == 1
    memo.check(epoch, who, [(res[0], ["invoke"])], fetch)                # evicted: asked again
    assert asked_pdp == [5, 1]
    memo.check(epoch, PrincipalRef(id="a", roles=["agent"], attr={"n": 2}), [(res[4], ["invoke"])], fetch)
    assert asked_pdp == [5, 1, 1]                                        # another principal: another key
    memo.check("p-other", who, [(res[4], ["invoke"])], fetch)            # a decision under another epoch
    assert memo.counters().size == 0                                     # new epoch forgot; nothing kept

    for off in (DecisionMemo(0, scan=lambda e: scan_deployment(e, REPO / "policies")), DecisionMemo()):
        off.check(epoch, who, [(res[0], ["invoke"])], fetch)
        off.check(epoch, who, [(res[0], ["invoke"])], fetch)
        assert (off.active, off.hits, off.bypassed, off.counters().memoized) == (False, 0, 2, False)
        assert off.status is not None and "memo off" in off.status.reason


def test_concurrent_checks_agree_with_the_pdp(pdp_client: CerbosPdp, policy_deployment: Path,
                                              tmp_path: Path) -> None:
    world, book = open_memo_world(f"sqlite:///{tmp_path / 'w.db'}", pdp_client, policy_deployment.parent,
                                  tmp_path / "art")
    try:
        add_agent(world, "a", ["task.create", "memory.write"])
        for n in range(4):
            world.create_task("a", f"t{n}", constraints={"sensitivity": n})
        direct = PdpAuthorizer(pdp_client, book.store.read, decision_memo=DecisionMemo(0))
        objects = objects_of(book)
        expected = {actor: direct.decide_actions(actor, objects) for actor in ("a", "gov")}
        memo = memo_of(book)
        memo.decision_memo.capacity = 8                                  # evictions while threads race
        failures: list[str] = []

        def ask(actor: str) -> None:
            for _ in range(15):
                if memo.decide_actions(actor, objects) != expected[actor]:
                    failures.append(actor)
        threads = [threading.Thread(target=ask, args=(actor,)) for actor in ("a", "gov", "a", "gov")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert failures == [] and memo.decision_memo.counters().size <= 8
        assert memo.decision_memo.hits > 0
    finally:
        book.close()
