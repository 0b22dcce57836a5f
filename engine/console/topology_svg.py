"""The layered topology graph drawn on the server as SVG: agents grouped (by role, or by the open room they
sit in), one box per group, and between groups one line per edge layer (info, control, authority, memory,
room) labelled with its number of edges. Readable at 100 agents: the boxes list their members, a layer is
told apart by its dash pattern and its label as well as by its colour, and every count is text.

Also the changes between two topology versions (:func:`version_diff`). Pure functions of folded versions.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from markupsafe import Markup, escape

from engine.console.log_fold import TopologyVersion

Grouping = Literal["role", "room"]
#: (colour, dash pattern) of each layer: never colour alone
LAYERS: dict[str, tuple[str, str]] = {
    "info": ("#1f5fa8", ""), "control": ("#a83a1f", "8 4"), "authority": ("#5b2a86", "2 3"),
    "memory": ("#1d6b3a", "12 3 2 3"), "room": ("#7a5a00", "4 4"),
}
BOX_W, COLUMNS, NAMES_PER_LINE, LINE_H, GAP = 260, 4, 3, 14, 70
NO_ROOM = "(in no open room)"


@dataclass(frozen=True)
class EdgeDiff:
    """One edge that changed between two versions (``added``, ``removed`` or ``changed``)."""

    change: Literal["added", "removed", "changed"]
    source: str
    target: str
    edge_type: str
    before: str
    after: str


def active_edges(version: TopologyVersion) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The edges of ``version`` that are active."""
    return {k: v for k, v in version.edges.items() if v.get("active")}


def open_rooms(version: TopologyVersion) -> list[str]:
    """The rooms open at ``version``, sorted."""
    return sorted(r for r, row in version.rooms.items() if row.get("status") == "open")


def groups_of(version: TopologyVersion, roles: dict[str, str], grouping: Grouping) -> dict[str, list[str]]:
    """Every agent (registered or named by an edge) under its group's name, names sorted."""
    agents = set(roles)
    for source, target, _ in version.edges:
        agents.update((source, target))
    seat: dict[str, str] = {}
    if grouping == "room":
        for room in open_rooms(version):
            for agent, row in sorted(version.members.get(room, {}).items()):
                if row.get("active"):
                    seat.setdefault(agent, f"room {room}")
    out: dict[str, list[str]] = {}
    for agent in sorted(agents):
        name = seat.get(agent, NO_ROOM) if grouping == "room" else f"role {roles.get(agent, '(unknown)')}"
        out.setdefault(name, []).append(agent)
    return dict(sorted(out.items()))


def _box_height(members: list[str]) -> int:
    lines = (len(members) + NAMES_PER_LINE - 1) // NAMES_PER_LINE
    return 40 + LINE_H * max(lines, 1)


def render_svg(version: TopologyVersion, roles: dict[str, str], grouping: Grouping) -> Markup:
    """The SVG of ``version`` grouped by ``grouping`` (every text escaped)."""
    groups = groups_of(version, roles, grouping)
    where: dict[str, tuple[int, int, int]] = {}  # group -> (x, y, height)
    member_of = {agent: name for name, agents in groups.items() for agent in agents}
    row_y, row_h = 20, 0
    for n, (name, agents) in enumerate(groups.items()):
        col = n % COLUMNS
        if col == 0 and n:
            row_y += row_h + GAP
            row_h = 0
        height = _box_height(agents)
        where[name] = (20 + col * (BOX_W + GAP), row_y, height)
        row_h = max(row_h, height)
    width = 40 + COLUMNS * BOX_W + (COLUMNS - 1) * GAP
    height = row_y + row_h + 40
    counts = Counter((member_of[s], member_of[t], e) for (s, t, e) in active_edges(version))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-labelledby="topo-title" '
             f'viewBox="0 0 {width} {height}" width="100%" class="topology">',
             f'<title id="topo-title">Topology version {version.version}, grouped by {escape(grouping)}: '
             f'{len(groups)} groups, {sum(counts.values())} active edges</title>',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" '
             'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#333333"/></marker></defs>']
    parts += _edge_lines(counts, where)
    parts += _boxes(groups, where, counts)
    parts.append("</svg>")
    return Markup("".join(parts))


def _edge_lines(counts: Counter[tuple[str, str, str]], where: dict[str, tuple[int, int, int]]) -> list[str]:
    out = []
    layer_index = {name: n for n, name in enumerate(LAYERS)}
    for (src, dst, layer), count in sorted(counts.items()):
        if src == dst:
            continue
        colour, dash = LAYERS.get(layer, ("#333333", ""))
        offset = (layer_index.get(layer, 0) - 2) * 6
        (x1, y1, h1), (x2, y2, h2) = where[src], where[dst]
        ax, ay, bx, by = x1 + BOX_W // 2 + offset, y1 + h1 // 2 + offset, x2 + BOX_W // 2 + offset, y2 + h2 // 2
        out.append(f'<line x1="{ax}" y1="{ay}" x2="{bx}" y2="{by + offset}" stroke="{colour}" stroke-width="2" '
                   f'stroke-dasharray="{dash}" marker-end="url(#arrow)"><title>{escape(layer)}: {escape(src)} to '
                   f'{escape(dst)}, {count} edges</title></line>')
        out.append(f'<text x="{(ax + bx) // 2}" y="{(ay + by) // 2 - 4}" class="edge-label" fill="{colour}">'
                   f'{escape(layer)} {count}</text>')
    return out


def _boxes(groups: dict[str, list[str]], where: dict[str, tuple[int, int, int]],
           counts: Counter[tuple[str, str, str]]) -> list[str]:
    out = []
    for name, agents in groups.items():
        x, y, h = where[name]
        inside = ", ".join(f"{layer} {c}" for (s, d, layer), c in sorted(counts.items()) if s == d == name)
        out.append(f'<g class="group"><rect x="{x}" y="{y}" width="{BOX_W}" height="{h}" rx="6" fill="#ffffff" '
                   f'stroke="#222222"/><text x="{x + 8}" y="{y + 16}" class="group-name">{escape(name)} '
                   f'({len(agents)})</text>')
        if inside:
            out.append(f'<text x="{x + 8}" y="{y + 30}" class="group-inside">within: {escape(inside)}</text>')
        for line in range(0, len(agents), NAMES_PER_LINE):
            names = ", ".join(agents[line:line + NAMES_PER_LINE])
            out.append(f'<text x="{x + 8}" y="{y + 44 + (line // NAMES_PER_LINE) * LINE_H}" class="member">'
                       f'{escape(names)}</text>')
        out.append("</g>")
    return out


def _describe(edge: dict[str, Any]) -> str:
    return f"scope {edge.get('scope', '')!r}, weight {edge.get('weight', 1.0)}" if edge.get("active") else "inactive"


def version_diff(before: TopologyVersion, after: TopologyVersion) -> list[EdgeDiff]:
    """Every edge whose activity, scope or weight differs between ``before`` and ``after``, sorted."""
    out = []
    for key in sorted(set(before.edges) | set(after.edges)):
        a, b = before.edges.get(key, {}), after.edges.get(key, {})
        was, now = bool(a.get("active")), bool(b.get("active"))
        if was == now and (not now or (a.get("scope"), a.get("weight")) == (b.get("scope"), b.get("weight"))):
            continue
        change: Literal["added", "removed", "changed"] = "added" if now and not was else (
            "removed" if was and not now else "changed")
        out.append(EdgeDiff(change, key[0], key[1], key[2], _describe(a) if a else "absent", _describe(b)))
    return out


__all__ = ["LAYERS", "EdgeDiff", "Grouping", "active_edges", "groups_of", "open_rooms", "render_svg",
           "version_diff"]
