"""A run's plots (matplotlib PNG), each built as a figure first (``build_*``: what a test inspects) and then
saved (``plot_*``):

* ``wakes.png``: wakes issued, runs that acted and suppressions stacked by reason (a legend of reasons) per
  time bucket; below it, per agent, a heat map of wakes and a dot per suppression coloured by its reason
  (agents grouped by role; past :data:`MAX_AGENT_ROWS` agents, the most woken are shown, and the title says
  how many of how many);
* ``conflicts.png``: conflicts opened and resolved, cumulative; ``duplicates.png``: duplicate work;
* ``topology.png``: the topology at key moments, agents grouped by role (by the room they sit in when all
  share one role): each agent placed in its group's arc (with :data:`GROUP_THRESHOLD` agents or fewer), else
  one node per group sized by its agents, edges between groups drawn with the number of edges they stand
  for, each room a square joined to the groups of its members (with how many members each).

Every time axis carries the run's faults (:class:`~simulations.metrics.FaultMark`): a line at a crash, a
policy or rule change, a replacement, a duplicate delivery; a shaded span over a PDP outage; each with a
legend entry. Each mark's artist has the ``gid`` ``fault:<kind>:<index>`` (:func:`fault_gids`), so tests read
the marks from the figure, not its pixels. Figures carry no timestamps (``PNG_META``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from simulations.metrics import FaultMark, Series, TopologyFrame

PNG_META: dict[str, Any] = {"Software": None}
TIME_LABEL = "virtual time (s)"
MAX_AGENT_ROWS = 40
MAX_TIME_COLUMNS = 120
GROUP_THRESHOLD = 40
FAULT_COLOURS = {"pdp_outage": "#7f7f7f", "worker_crash": "#d62728", "policy_change": "#9467bd",
                 "rule_change": "#8c564b", "model_replacement": "#17becf", "conversation_replacement": "#bcbd22",
                 "duplicate_delivery": "#e377c2", "stale_write": "#ff7f0e"}
REASON_COLOURS = ("#ff7f0e", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#9467bd", "#d62728")


# -- faults on a time axis ------------------------------------------------------------------------------

def mark_faults(ax: Axes, marks: Sequence[FaultMark], *, legend: bool = True) -> list[str]:
    """Draw every fault on ``ax`` (a line, or a shaded span for an outage) and return the gids drawn."""
    gids, labelled = [], set()
    for i, m in enumerate(marks):
        colour = FAULT_COLOURS.get(m.kind, "#444444")
        label = m.kind.replace("_", " ") if legend and m.kind not in labelled else None
        labelled.add(m.kind)
        gid = f"fault:{m.kind}:{i}"
        if m.end_s is not None:
            ax.axvspan(m.at_s, m.end_s, color=colour, alpha=0.18, label=label, gid=gid, zorder=0)
        else:
            ax.axvline(m.at_s, color=colour, ls=":", lw=1.6, label=label, gid=gid, zorder=1)
        gids.append(gid)
    return gids


def fault_gids(ax: Axes) -> list[str]:
    """The fault marks drawn on ``ax`` (their gids, in drawing order)."""
    return [str(a.get_gid()) for a in ax.get_children() if str(a.get_gid() or "").startswith("fault:")]


def time_axes(fig: Figure) -> list[Axes]:
    """The axes of ``fig`` whose x axis is virtual time."""
    return [ax for ax in fig.axes if ax.get_xlabel() == TIME_LABEL]


def _save(fig: Figure, path: Path) -> None:
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata=PNG_META)
    plt.close(fig)


def _times(series: Series) -> list[float]:
    return [i * series.bucket_s for i in range(series.buckets)]


def _counts_axis(ax: Axes, top: int) -> None:
    """Whole-number ticks from 0, with headroom (a count axis never shows -0.04 or 0.2 conflicts)."""
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, max(1, top) * 1.15)


def _empty_note(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=10, color="#666")


def _cumulative(values: Sequence[int]) -> list[int]:
    total, out = 0, []
    for v in values:
        total += v
        out.append(total)
    return out


# -- wakes and suppressions -----------------------------------------------------------------------------

@dataclass(frozen=True)
class AgentRows:
    """The agents a per-agent panel shows, top to bottom (grouped by role, then by id), of ``total``."""

    agents: list[str]
    total: int
    groups: list[tuple[str, int]]   # (role, rows) in order


def agent_rows(series: Series, limit: int = MAX_AGENT_ROWS) -> AgentRows:
    """The agents with any wake, run or suppression, the ``limit`` most active kept, grouped by role."""
    activity: Counter[str] = Counter()
    for name in (series.wakes_by_agent, series.acted_by_agent):
        for agent, counts in name.items():
            activity[agent] += sum(counts.values())
    for agent, reasons in series.suppressed_by_agent.items():
        activity[agent] += sum(sum(c.values()) for c in reasons.values())
    active = [a for a, n in activity.items() if n]
    kept = sorted(active, key=lambda a: (-activity[a], a))[:limit]
    ordered = sorted(kept, key=lambda a: (series.roles.get(a, "?"), a))
    groups: list[tuple[str, int]] = []
    for a in ordered:
        role = series.roles.get(a, "?")
        if groups and groups[-1][0] == role:
            groups[-1] = (role, groups[-1][1] + 1)
        else:
            groups.append((role, 1))
    return AgentRows(ordered, len(active), groups)


def _columns(series: Series) -> tuple[int, float]:
    """Buckets per heat-map column and the column width in seconds (at most MAX_TIME_COLUMNS columns)."""
    per = max(1, math.ceil(series.buckets / MAX_TIME_COLUMNS))
    return per, per * series.bucket_s


def wake_matrix(series: Series, rows: AgentRows) -> list[list[int]]:
    """Wakes per agent (rows, as ``rows``) per column of time (:func:`_columns`)."""
    per, _ = _columns(series)
    width = math.ceil(series.buckets / per)
    matrix = [[0] * width for _ in rows.agents]
    for i, agent in enumerate(rows.agents):
        for bucket, n in series.wakes_by_agent.get(agent, {}).items():
            matrix[i][bucket // per] += n
    return matrix


def build_wakes(series: Series) -> Figure:
    """The wake figure: totals with suppressions stacked by reason, then wakes and suppressions per agent."""
    rows = agent_rows(series)
    per_agent = bool(rows.agents)
    height = 3.6 + (min(len(rows.agents), MAX_AGENT_ROWS) * 0.16 + 1.2) * 2 * per_agent
    ratios = [3.6, *([len(rows.agents) * 0.16 + 1.2] * 2 if per_agent else [])]
    fig, axes = plt.subplots(len(ratios), 1, figsize=(10, height), squeeze=False, layout="constrained",
                             gridspec_kw={"height_ratios": ratios}, sharex=True)
    _totals(axes[0][0], series)
    if per_agent:
        _wake_heatmap(fig, axes[1][0], series, rows)
        _suppression_dots(axes[2][0], series, rows)
    for ax in fig.axes:
        if ax.get_label() != "<colorbar>":
            ax.set_xlim(0, series.buckets * series.bucket_s)
    return fig


def _totals(ax: Axes, series: Series) -> None:
    t = _times(series)
    width = series.bucket_s * 0.4
    ax.bar([x + series.bucket_s * 0.1 for x in t], series.wakes, width=width, label="wakes issued",
           color="#1f77b4", align="edge")
    bottom = [0] * series.buckets
    for i, (reason, counts) in enumerate(sorted(series.suppressed_by_reason.items())):
        total = series.suppress_reasons.get(reason, 0)
        ax.bar([x + series.bucket_s * 0.5 for x in t], counts, width=width, bottom=bottom, align="edge",
               color=REASON_COLOURS[i % len(REASON_COLOURS)], label=f"suppressed: {reason} ({total})")
        bottom = [b + c for b, c in zip(bottom, counts, strict=True)]
    acted = [(x + series.bucket_s * 0.5, n) for x, n in zip(t, series.acted, strict=True) if n]
    ax.plot([x for x, _ in acted], [n for _, n in acted], color="#2ca02c", marker="o", ls="none", markersize=5,
            label="runs that acted")
    mark_faults(ax, series.faults)
    ax.set_title(f"Wakes issued, runs that acted and wake candidates suppressed (by reason), per "
                 f"{series.bucket_s:g} s", fontsize=9)
    ax.set_xlabel(TIME_LABEL)
    ax.xaxis.set_tick_params(labelbottom=True)
    ax.set_ylabel("count")
    _counts_axis(ax, max([*series.wakes, *bottom, *series.acted], default=0))
    ax.legend(fontsize=7, ncols=2, loc="upper right")


def _agent_axis(ax: Axes, rows: AgentRows, what: str) -> None:
    ax.set_yticks(range(len(rows.agents)), rows.agents, fontsize=6 if len(rows.agents) > 20 else 7)
    ax.set_ylim(len(rows.agents) - 0.5, -0.5)
    start = 0
    for role, n in rows.groups:  # a rule between role groups, the role at its right
        if start:
            ax.axhline(start - 0.5, color="#333", lw=0.6)
        ax.text(1.005, (start + n / 2 - 0.5), role, transform=ax.get_yaxis_transform(), fontsize=7,
                va="center", ha="left", color="#333")
        start += n
    shown = f"the {len(rows.agents)} most active of {rows.total} agents" if rows.total > len(rows.agents) \
        else f"{rows.total} agents"
    ax.set_title(f"{what} per agent ({shown}, grouped by role)", fontsize=9)
    ax.set_xlabel(TIME_LABEL)
    ax.xaxis.set_tick_params(labelbottom=True)


def _wake_heatmap(fig: Figure, ax: Axes, series: Series, rows: AgentRows) -> None:
    matrix = wake_matrix(series, rows)
    _, width_s = _columns(series)
    image = ax.imshow(matrix, aspect="auto", cmap="Blues", interpolation="nearest",
                      extent=(0, len(matrix[0]) * width_s, len(rows.agents) - 0.5, -0.5), vmin=0)
    # the colour bar in an inset beyond the role labels: the panel keeps the width of the others
    fig.colorbar(image, cax=ax.inset_axes((1.1, 0.0, 0.015, 1.0)), label=f"wakes per {width_s:g} s")
    _agent_axis(ax, rows, "Wakes")
    mark_faults(ax, series.faults, legend=False)


def _suppression_dots(ax: Axes, series: Series, rows: AgentRows) -> None:
    index = {a: i for i, a in enumerate(rows.agents)}
    reasons = sorted(series.suppressed_by_reason)
    for i, reason in enumerate(reasons):
        xs, ys, sizes = [], [], []
        for agent, by_reason in series.suppressed_by_agent.items():
            if agent not in index:
                continue
            for bucket, n in by_reason.get(reason, {}).items():
                xs.append((bucket + 0.5) * series.bucket_s)
                ys.append(index[agent])
                sizes.append(12 + 8 * min(n, 10))
        ax.scatter(xs, ys, s=sizes, color=REASON_COLOURS[i % len(REASON_COLOURS)], label=reason, zorder=3)
    _agent_axis(ax, rows, "Suppressions (dot: a bucket with suppressions, by reason)")
    if reasons:
        ax.legend(fontsize=7, title="reason", title_fontsize=7, loc="upper right")
    else:
        _empty_note(ax, "no wake candidate was suppressed")
    mark_faults(ax, series.faults, legend=False)


def plot_wakes(series: Series, path: Path) -> None:
    _save(build_wakes(series), path)


# -- conflicts, duplicates --------------------------------------------------------------------------------

def build_conflicts(series: Series) -> Figure:
    t = _times(series)
    opened, resolved = _cumulative(series.conflicts_opened), _cumulative(series.conflicts_resolved)
    fig, ax = plt.subplots(figsize=(8, 3.2))
    # opened drawn wide and resolved on top of it: when a conflict is resolved within its bucket the two
    # lines coincide, and both stay visible
    ax.step(t, opened, where="post", label="conflicts opened", color="#d62728", lw=4, alpha=0.45)
    ax.step(t, resolved, where="post", label="conflicts resolved", color="#2ca02c", lw=1.6, ls="--")
    total_open, total_resolved = (opened[-1] if opened else 0), (resolved[-1] if resolved else 0)
    ax.set_title(f"Conflicts opened and resolved (cumulative, per {series.bucket_s:g} s): {total_open} opened, "
                 f"{total_resolved} resolved", fontsize=9)
    ax.set_xlabel(TIME_LABEL)
    ax.set_ylabel("conflicts")
    _counts_axis(ax, max([*opened, *resolved], default=0))
    ax.set_xlim(0, series.buckets * series.bucket_s)
    if total_open == 0:
        _empty_note(ax, "no conflict in this run")
    mark_faults(ax, series.faults)
    ax.legend(fontsize=7, loc="upper left")
    return fig


def plot_conflicts(series: Series, path: Path) -> None:
    _save(build_conflicts(series), path)


def build_duplicates(series: Series) -> Figure:
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.bar(_times(series), series.duplicate_work, width=series.bucket_s * 0.8, color="#9467bd", align="edge")
    total = sum(series.duplicate_work)
    ax.set_title(f"Duplicate work per {series.bucket_s:g} s (a step, claim or answer done again): "
                 f"{total} in all", fontsize=9)
    ax.set_xlabel(TIME_LABEL)
    ax.set_ylabel("work units redone")
    _counts_axis(ax, max(series.duplicate_work, default=0))
    ax.set_xlim(0, series.buckets * series.bucket_s)
    if total == 0:
        _empty_note(ax, "no work was done twice")
    if mark_faults(ax, series.faults):
        ax.legend(fontsize=7, loc="upper left")
    return fig


def plot_duplicates(series: Series, path: Path) -> None:
    _save(build_duplicates(series), path)


# -- topology ---------------------------------------------------------------------------------------------

@dataclass
class TopologyLayout:
    """Where a frame's nodes go. ``mode``: ``agents`` (a node per agent, placed in its group's arc) or
    ``groups`` (a node per group: role, or room when every agent has the same role). ``nodes``: name ->
    (x, y, members); ``edges``: (src, dst, edges it stands for, type); ``rooms``: (room, x, y,
    [(node, members of the room there)]); ``groups``: group -> its agents."""

    mode: str
    nodes: dict[str, tuple[float, float, int]] = field(default_factory=dict)
    groups: dict[str, list[str]] = field(default_factory=dict)
    edges: list[tuple[str, str, int, str]] = field(default_factory=list)
    rooms: list[tuple[str, float, float, list[tuple[str, int]]]] = field(default_factory=list)


NO_ROOM = "in no room"


def group_of(frame: TopologyFrame, roles: Mapping[str, str]) -> dict[str, str]:
    """Each agent's group: its role when the agents have two roles or more, else the first room (by id)
    it sits in at that moment (:data:`NO_ROOM` outside every room)."""
    if len({roles.get(a, "?") for a in frame.agents}) > 1:
        return {a: roles.get(a, "?") for a in frame.agents}
    room_of: dict[str, str] = {}
    for room, members in sorted(frame.rooms.items()):
        for m in members:
            room_of.setdefault(m, f"room {room}")
    return {a: room_of.get(a, NO_ROOM) for a in frame.agents}


def _grouped(agents: Iterable[str], group: Mapping[str, str]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for a in sorted(agents, key=lambda a: (group[a], a)):
        groups.setdefault(group[a], []).append(a)
    return groups


def topology_layout(frame: TopologyFrame, roles: Mapping[str, str], threshold: int = GROUP_THRESHOLD
                    ) -> TopologyLayout:
    """The layout of ``frame``: agents grouped (:func:`group_of`), one node per group past ``threshold``
    agents."""
    group = group_of(frame, roles)
    groups = _grouped(frame.agents, group)
    node_of: dict[str, str]
    if len(frame.agents) <= threshold:
        layout = TopologyLayout("agents", groups=groups)
        order = [a for members in groups.values() for a in members]
        slots = len(order) + len(groups)  # a gap between role arcs
        k = 0
        for members in groups.values():
            for a in members:
                angle = 2 * math.pi * k / max(1, slots) + math.pi / 2
                layout.nodes[a] = (math.cos(angle), math.sin(angle), 1)
                k += 1
            k += 1
        node_of = {a: a for a in order}
    else:
        layout = TopologyLayout("groups", groups=groups)
        for i, (name, members) in enumerate(groups.items()):
            angle = 2 * math.pi * i / max(1, len(groups)) + math.pi / 2
            layout.nodes[name] = (math.cos(angle) * 0.8, math.sin(angle) * 0.8, len(members))
        node_of = dict(group)
    edges: Counter[tuple[str, str, str]] = Counter()
    for src, dst, kind in frame.edges:
        if src in node_of and dst in node_of:
            edges[(node_of[src], node_of[dst], kind)] += 1
    layout.edges = [(s, d, n, k) for (s, d, k), n in sorted(edges.items())]
    for j, (room, members) in enumerate(sorted(frame.rooms.items())):
        links = Counter(node_of[m] for m in members if m in node_of)
        if not links:
            continue
        pts = [layout.nodes[n] for n in links]
        cx = sum(p[0] for p in pts) / len(pts) * 0.45
        cy = sum(p[1] for p in pts) / len(pts) * 0.45 - 0.12 * j
        layout.rooms.append((room, cx, cy, sorted(links.items())))
    return layout


def _draw_layout(ax: Axes, frame: TopologyFrame, layout: TopologyLayout) -> None:
    grouped = layout.mode == "groups"
    colours = {role: REASON_COLOURS[i % len(REASON_COLOURS)] for i, role in enumerate(layout.groups)}
    for src, dst, n, _ in layout.edges:
        (x0, y0, _), (x1, y1, _) = layout.nodes[src], layout.nodes[dst]
        if src == dst:
            ax.annotate(f"{n}", (x0, y0 + 0.2), ha="center", fontsize=7, color="#1f77b4")
            continue
        ax.annotate("", xy=(x1, y1), xytext=(x0, y0), zorder=6,
                    arrowprops={"arrowstyle": "-|>", "color": "#1f77b4", "lw": min(6.0, 1.0 + math.log2(n)),
                                "mutation_scale": 14, "shrinkA": 20 if grouped else 17, "shrinkB": 20 if grouped
                                else 17})
        if grouped:
            ax.text((x0 + x1) / 2, (y0 + y1) / 2, str(n), fontsize=7, color="#1f77b4", ha="center")
    for room, cx, cy, links in layout.rooms:
        for node, count in links:
            px, py, _ = layout.nodes[node]
            ax.plot([cx, px], [cy, py], color="#d62728", lw=1.0, ls="--")
            if grouped:
                ax.text((cx + px) / 2, (cy + py) / 2, str(count), fontsize=7, color="#d62728")
        ax.scatter([cx], [cy], marker="s", s=160, color="#d62728", zorder=3)
        ax.text(cx, cy - 0.14, room, ha="center", va="top", fontsize=7, color="#d62728")
    for role, members in layout.groups.items():
        names = [role] if grouped else members
        for name in names:
            x, y, size = layout.nodes[name]
            ax.scatter([x], [y], s=300 + 40 * size if grouped else 700, color=colours[role], alpha=0.85, zorder=4)
            text = f"{role}\n{size} agents" if grouped else name
            ax.text(x, y, text, ha="center", va="center", fontsize=7, zorder=5)
    ax.set_xlim(-1.35, 1.35)
    ax.set_ylim(-1.35, 1.35)
    ax.set_aspect("equal")
    ax.set_axis_off()
    ax.set_title(f"t = {frame.at_s:g} s\n{frame.label}", fontsize=8)


def build_topology(frames: Sequence[TopologyFrame], roles: Mapping[str, str]) -> Figure:
    cols = min(3, max(1, len(frames)))
    rows = -(-len(frames) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 4.0 * rows), squeeze=False)
    for ax in axes.flat:
        ax.set_axis_off()
    grouped = False
    for ax, frame in zip(axes.flat, frames, strict=False):
        layout = topology_layout(frame, roles)
        grouped = grouped or layout.mode == "groups"
        _draw_layout(ax, frame, layout)
    how = "one node per group of agents, arrows: info edges (their number)" if grouped else \
        "agents grouped (colour), arrows: info edges"
    fig.suptitle(f"Collaboration topology at key moments ({how}; squares: rooms)", fontsize=10)
    return fig


def plot_topology(frames: Sequence[TopologyFrame], path: Path, roles: Mapping[str, str] | None = None) -> None:
    _save(build_topology(frames, roles or {}), path)


__all__ = ["GROUP_THRESHOLD", "MAX_AGENT_ROWS", "NO_ROOM", "PNG_META", "TIME_LABEL", "AgentRows", "TopologyLayout",
           "agent_rows", "build_conflicts", "build_duplicates", "build_topology", "build_wakes", "fault_gids",
           "group_of", "mark_faults", "plot_conflicts", "plot_duplicates", "plot_topology", "plot_wakes", "time_axes",
           "topology_layout", "wake_matrix"]
