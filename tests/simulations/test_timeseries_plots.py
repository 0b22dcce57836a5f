"""Data out and plots that answer questions: ``timeseries.csv`` has one row per event of the log (loaded
into pandas by ``simulations.timeseries.load``), and every time axis of the plots carries the run's faults
(read from the figures' artists, not their pixels); wakes and suppressions are split per agent; the
topology stays readable past 100 agents by grouping."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from engine.errors import OptionalDependencyMissing
from engine.settings import load_settings
from simulations import timeseries
from simulations.driver import simulate
from simulations.metrics import Series, TopologyFrame, compute_metrics
from simulations.plots import (
    agent_rows,
    build_conflicts,
    build_duplicates,
    build_topology,
    build_wakes,
    fault_gids,
    time_axes,
    topology_layout,
    wake_matrix,
)
from simulations.report import write_report
from simulations.scenario import parse_scenario
from tests.simulations.conftest import SCENARIOS

FAULTS = """
name: faults-on-the-axis
seed: 5
clock: {bucket_s: 15}
stop: {at_s: 240}
agents:
  - {id: ada, behaviour: worker, capabilities: [state.write, task.create, task.work]}
  - {id: rita, role: reviewer, behaviour: reviewer, capabilities: [state.write]}
world:
  tasks: [{id: t1, goal: steady work, owner: ada, assignee: ada, steps: 6}]
timeline:
  - {at: 1, kind: worker_crash}
  - {at: 1, kind: wake, target: ada, task: t1, every_s: 30, count: 7}
  - {at: 10, kind: wake, target: rita, cause: look, every_s: 40, count: 5}
  - {at: 31, kind: pdp_outage, duration_s: 20}
  - {at: 150, kind: policy_change, policy_dir: policies, overlay: OVERLAY}
"""
# A policy set governance refuses (it does not compile): the change is marked with its result, and the
# run does not wait on a PDP reload (which a loaded 2-core machine can time out).
BROKEN = "apiVersion: api.cerbos.dev/v1\nresourcePolicy: {resource: [unclosed\n"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Series, list[dict[str, Any]]]:
    """The scenario above (a crash, a 20 s outage, a refused policy change) on the runtime's own PDP: its
    output folder (no PNGs), its series and its log."""
    out = tmp_path_factory.mktemp("faults")
    overlay = tmp_path_factory.mktemp("overlay")
    (overlay / "resources").mkdir()
    (overlay / "resources" / "broken.yaml").write_text(BROKEN, encoding="utf-8")
    scenario = parse_scenario(FAULTS.replace("OVERLAY", str(overlay)), base_dir=SCENARIOS)
    sim, runtime = simulate(scenario, out, settings=load_settings(pdp_timeout_s=1.0))
    try:
        metrics, series = compute_metrics(scenario, runtime.store, sim.start_us, sim.stop_us)
        write_report(out, scenario, metrics, series, runtime.store, plots=False)
    finally:
        runtime.close()
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    return out, series, events


def test_timeseries_has_one_row_per_event_of_the_log(run: tuple[Path, Series, list[dict[str, Any]]]) -> None:
    out, series, events = run
    frame = timeseries.load(str(out))  # a str works as well as a Path
    assert list(frame.columns) == list(timeseries.COLUMNS)
    assert list(frame["seq"]) == [e["seq"] for e in events]
    assert list(frame["kind"]) == [e["event_type"] for e in events]
    assert list(frame["actor"]) == [e["actor_id"] for e in events]
    t0 = series.start_us
    assert list(frame["t_s"]) == pytest.approx([(e["created_at_us"] - t0) / 1e6 for e in events])
    acks = frame[frame["kind"] == "wake.ack"]
    receipts = [c["values"] for e in events if e["event_type"] == "wake.ack" for c in e["changes"]
                if c.get("table") == "receipts"]
    assert list(acks["outcome"]) == [r["outcome"] for r in receipts]
    assert list(acks["agent"]) == [r["agent_id"] for r in receipts]
    issued = frame[frame["kind"] == "wake.issued"]
    assert set(issued["agent"]) == {"ada", "rita"} and set(issued["cause"]) >= {"scenario", "look"}
    faults = frame[frame["kind"] == "sim.fault"]
    assert list(faults["fault"]) == ["worker_crash", "pdp_outage", "policy_change"]
    results = frame[frame["kind"] == "sim.fault_result"].set_index("fault")["outcome"]
    assert (results["pdp_outage"], results["policy_change"]) == ("restored", "rejected")
    assert frame["outcome"].isna().sum() > 0  # what does not apply is missing, not ""


def test_load_without_pandas_names_the_data_extra(run: tuple[Path, Series, list[dict[str, Any]]],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # what an install without the extra looks like
    with pytest.raises(OptionalDependencyMissing) as caught:
        timeseries.load(run[0] / timeseries.FILE_NAME)
    assert caught.value.details() == {"package": "pandas", "extra": "data", "feature": "simulations.timeseries.load"}
    assert "pmw[data]" in caught.value.message


def test_the_series_carries_each_fault_with_the_outage_as_a_span(run: tuple[Path, Series, list[dict[str, Any]]]
                                                                 ) -> None:
    _, series, events = run
    assert [(m.kind, m.result) for m in series.faults] == [
        ("worker_crash", ""), ("pdp_outage", "restored"), ("policy_change", "rejected")]
    restored = next(e for e in events if e["event_type"] == "sim.fault_result"
                    and e["payload"]["kind"] == "pdp_outage")
    outage = series.faults[1]
    assert outage.at_s == pytest.approx(31.0)
    assert outage.end_s == pytest.approx((restored["created_at_us"] - series.start_us) / 1e6)
    assert outage.end_s is not None and outage.end_s >= 51.0 and series.faults[0].end_s is None


def test_every_time_axis_of_every_plot_marks_every_fault(run: tuple[Path, Series, list[dict[str, Any]]]) -> None:
    _, series, _ = run
    wanted = [f"fault:{m.kind}:{i}" for i, m in enumerate(series.faults)]
    figures = {"wakes": build_wakes(series), "conflicts": build_conflicts(series),
               "duplicates": build_duplicates(series)}
    for name, fig in figures.items():
        axes = time_axes(fig)
        assert axes, name
        for ax in axes:
            assert fault_gids(ax) == wanted, (name, ax.get_title())
    assert len(time_axes(figures["wakes"])) == 3  # totals, wakes per agent, suppressions per agent
    labels = figures["wakes"].axes[0].get_legend_handles_labels()[1]
    assert {"worker crash", "pdp outage", "policy change"} <= set(labels)  # a legend entry per fault kind


def test_wakes_are_split_per_agent_and_add_up_to_the_totals(run: tuple[Path, Series, list[dict[str, Any]]]
                                                            ) -> None:
    _, series, events = run
    rows = agent_rows(series)
    assert rows.agents == ["rita", "ada"] or rows.agents == ["ada", "rita"]
    assert [g for g, _ in rows.groups] == sorted({"worker", "reviewer"})  # grouped by role
    matrix = wake_matrix(series, rows)
    issued = [c["values"]["target_agent"] for e in events for c in e["changes"]
              if c.get("table") == "wakes" and c.get("op") == "insert"]
    for agent, line in zip(rows.agents, matrix, strict=True):
        assert sum(line) == issued.count(agent)
    assert sum(map(sum, matrix)) == sum(series.wakes)


def synthetic_series(reasons: dict[str, dict[str, dict[int, int]]]) -> Series:
    zero = [0] * 10
    by_reason: dict[str, list[int]] = {}
    for per_reason in reasons.values():
        for reason, buckets in per_reason.items():
            line = by_reason.setdefault(reason, [0] * 10)
            for b, n in buckets.items():
                line[b] += n
    return Series(10.0, 10, zero, [sum(x) for x in zip(*by_reason.values(), strict=True)] if by_reason else zero,
                  zero, zero, zero, zero, {r: sum(v) for r, v in by_reason.items()}, [],
                  suppressed_by_reason=by_reason, suppressed_by_agent=reasons,
                  wakes_by_agent={a: {0: 1} for a in reasons}, roles=dict.fromkeys(reasons, "worker"))


def test_suppressions_per_agent_have_a_legend_of_reasons() -> None:
    series = synthetic_series({"a": {"depth": {1: 2}}, "b": {"cooldown": {3: 1}, "depth": {4: 1}}})
    fig = build_wakes(series)
    dots = time_axes(fig)[-1]
    legend = dots.get_legend()
    assert legend is not None
    assert [t.get_text() for t in legend.get_texts()] == ["cooldown", "depth"]
    offsets = {c.get_label(): [(float(x), float(y)) for x, y in c.get_offsets().tolist()]  # type: ignore[union-attr]
               for c in dots.collections}
    assert offsets["depth"] == [(15.0, 0.0), (45.0, 1.0)] and offsets["cooldown"] == [(35.0, 1.0)]


def test_the_topology_of_120_agents_is_drawn_as_a_few_groups() -> None:
    agents = [f"a{i:03d}" for i in range(120)]
    roles = {a: ("worker" if i < 100 else "reviewer" if i < 115 else "lead") for i, a in enumerate(agents)}
    edges = [(agents[i], agents[i + 1], "info") for i in range(0, 99)] + [(agents[0], agents[100], "info"),
                                                                          (agents[1], agents[101], "info")]
    frame = TopologyFrame(10.0, "busy", agents, edges, {"council": [agents[0], agents[100], agents[116]]})
    layout = topology_layout(frame, roles)
    assert layout.mode == "groups"
    assert {n: size for n, (_, _, size) in layout.nodes.items()} == {"lead": 5, "reviewer": 15, "worker": 100}
    assert sorted((s, d, n) for s, d, n, _ in layout.edges) == [("worker", "reviewer", 2), ("worker", "worker", 99)]
    (room,) = layout.rooms
    assert room[0] == "council" and room[3] == [("lead", 1), ("reviewer", 1), ("worker", 1)]
    fig = build_topology([frame], roles)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert len(texts) < 15  # a few labelled groups, not 120 names
    assert "worker\n100 agents" in texts


def test_a_single_role_world_is_grouped_by_room() -> None:
    agents = [f"w{i:03d}" for i in range(60)]
    frame = TopologyFrame(0.0, "start", agents, [], {"r1": agents[:10], "r2": agents[10:15]})
    layout = topology_layout(frame, dict.fromkeys(agents, "worker"))
    assert {n: size for n, (_, _, size) in layout.nodes.items()} == {"room r1": 10, "room r2": 5, "in no room": 45}
    small = TopologyFrame(0.0, "start", agents[:6], [], {})
    assert topology_layout(small, dict.fromkeys(agents, "worker")).mode == "agents"
