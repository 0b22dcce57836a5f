"""``pmw worker``, ``pmw trace`` and ``pmw rules`` against the session's real PDP."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.cli_support import (
    Pdp,
    Pmw,
    pdp_fixture,  # noqa: F401 - the session's PDP (fixture ``pdp``)
)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def pmw(tmp_path: Path, pdp: Pdp) -> Pmw:
    cli = Pmw(f"sqlite:///{tmp_path / 'world.db'}", pdp)
    cli.init()
    cli.agents("alice", "bob", "carol", caps=("state.write",))
    with cli.world() as world:
        world.subscribe("bob", "alice-out")
        world.subscribe("carol", "bob-out")
    return cli


def test_worker_runs_the_controller_and_the_agents_until_idle(pmw: Pmw) -> None:
    pmw.ok("state", "set", "alice-out", "1", "--expect-version", "0", actor="alice")
    report = pmw.js("worker", "--agent", "bob=tests.runloop.cli_agents:bob",
                    "--agent", "carol=tests.runloop.cli_agents:llm_like", "--until-idle", actor="gov")
    assert (report["cycles"], report["outcomes"]) == (2, {"acted": 1, "no_action": 1})
    assert pmw.js("state", "get", "bob-out", actor="bob")["value"] == 1
    traces = pmw.js("trace", actor="gov")
    assert sorted(t["agent_id"] for t in traces) == ["bob", "carol"]
    one = pmw.js("trace", traces[0]["trace_id"], actor="gov")
    assert one["worker_id"] == "worker-1" and one["latency_us"] >= 0
    bob_trace = next(t for t in traces if t["agent_id"] == "bob")
    assert bob_trace["tools"] == ["compare_and_set_state"] and bob_trace["commits"] == ["bob-out"]
    assert "state:alice-out" in bob_trace["retrieved_refs"]
    # a second worker finds nothing left to do: the controller's position is durable
    again = pmw.js("worker", "--agent", "bob=tests.runloop.cli_agents:bob", "--until-idle", actor="gov")
    assert (again["cycles"], again["wakes"]) == (0, 0)


@pytest.mark.parametrize("spec", ["bob", "bob=nowhere.module:x", "bob=tests.runloop.cli_agents:missing",
                                  "bob=tests.runloop.cli_agents:NOT_AN_ADAPTER"])
def test_a_bad_agent_spec_is_a_clear_error_and_runs_nothing(pmw: Pmw, spec: str) -> None:
    pmw.ok("state", "set", "alice-out", "1", "--expect-version", "0", actor="alice")
    error = pmw.fails(3, "worker", "--agent", spec, "--until-idle", actor="gov")
    assert error["code"] == "invalid_input" and "--agent" in error["message"]
    with pmw.book() as book:
        assert book.controller_position("main") is None


def test_rules_check_names_the_file_line_and_rule(tmp_path: Path, pmw: Pmw) -> None:
    assert "wake_storm/storm_depth" in pmw.js("rules", "check", str(REPO / "rules"))["rules"]
    bad = tmp_path / "bad"
    shutil.copytree(REPO / "rules", bad)
    text = (bad / "wake_storm.yaml").read_text().replace("reason: depth", "reason: depht", 1)
    (bad / "wake_storm.yaml").write_text(text)
    result = pmw.run("rules", "check", str(bad), as_json=True)
    assert result.exit_code == 3
    assert "wake_storm.yaml:" in result.stderr and "storm_depth" in result.stderr


def test_rules_shadow_prints_what_a_changed_rule_set_would_decide(tmp_path: Path, pmw: Pmw) -> None:
    pmw.ok("state", "set", "alice-out", "1", "--expect-version", "0", actor="alice")
    pmw.js("worker", "--agent", "bob=tests.runloop.cli_agents:bob", "--until-idle", actor="gov")
    candidate = tmp_path / "candidate"
    shutil.copytree(REPO / "rules", candidate)
    (candidate / "wake_targeting.yaml").write_text(
        (candidate / "wake_targeting.yaml").read_text().replace("cause: subscriber", "cause: follower"))
    before = pmw.js("events", "tail", "--limit", "1000", actor="gov")
    report = pmw.js("rules", "shadow", str(candidate), actor="gov")
    assert report["differing"] == 2 and "follower" in report["diff"]
    assert pmw.js("events", "tail", "--limit", "1000", actor="gov") == before  # committed nothing
