"""The topology graph at 100 agents is grouped (a box per role or room, never 100 dots), names every agent
once, labels every line with its layer and count; a version diff lists exactly the edges that changed."""

from __future__ import annotations

import re

from engine.console.log_fold import TopologyVersion
from engine.console.topology_svg import groups_of, render_svg, version_diff

ROLES = {f"a{n:03d}": ("worker", "reviewer", "planner", "critic", "scout")[n % 5] for n in range(100)}


def version_with(edges: dict[tuple[str, str, str], dict[str, object]], number: int = 1) -> TopologyVersion:
    rooms = {"r-1": {"status": "open"}, "r-2": {"status": "closed"}}
    members = {"r-1": {f"a{n:03d}": {"active": True} for n in range(10)},
               "r-2": {f"a{n:03d}": {"active": True} for n in range(10, 20)}}
    return TopologyVersion(number, "gov", "", 0, edges, rooms, members)


EDGES = {(f"a{n:03d}", f"a{(n + 1) % 100:03d}", ("info", "control", "room")[n % 3]):
         {"active": True, "scope": "", "weight": 1.0} for n in range(100)}


def test_one_hundred_agents_are_five_role_groups_each_named_once() -> None:
    svg = str(render_svg(version_with(EDGES), ROLES, "role"))
    assert svg.count('class="group"') == 5
    names = re.findall(r"a\d{3}", re.sub(r"<title>.*?</title>", "", svg))
    assert sorted(set(names)) == sorted(ROLES) and len(names) == 100


def test_grouping_by_room_seats_only_members_of_open_rooms() -> None:
    groups = groups_of(version_with(EDGES), ROLES, "room")
    assert groups["room r-1"] == [f"a{n:03d}" for n in range(10)]
    assert "room r-2" not in groups and len(groups["(in no open room)"]) == 90


def test_every_line_between_groups_is_labelled_with_its_layer_and_count() -> None:
    svg = str(render_svg(version_with(EDGES), ROLES, "role"))
    counts = [int(c) for c in re.findall(r'class="edge-label"[^>]*>(?:info|control|room) (\d+)<', svg)]
    assert counts and sum(counts) == 100  # every edge joins two roles (n % 5 differs from (n + 1) % 5)


def test_the_diff_lists_added_removed_and_changed_edges_only() -> None:
    before = version_with(dict(EDGES), 1)
    after_edges = dict(EDGES)
    after_edges[("a000", "a001", "info")] = {"active": False}
    after_edges[("a001", "a002", "control")] = {"active": True, "scope": "s", "weight": 2.0}
    after_edges[("a050", "a000", "memory")] = {"active": True, "scope": "", "weight": 1.0}
    diff = version_diff(before, version_with(after_edges, 2))
    assert [(d.change, d.source, d.target, d.edge_type) for d in diff] == [
        ("removed", "a000", "a001", "info"), ("changed", "a001", "a002", "control"),
        ("added", "a050", "a000", "memory")]
