"""The metrics of a run, computed from the store alone (its event log, which records every row change).

Seed 000 §126 names ten metrics; seed 003 adds two. Each is defined, with its formula, in
``docs/simulations.md``; :func:`compute_metrics` folds the log once, page by page (memory stays bounded
by the number of wakes and tasks, not events), and returns a :class:`Metrics` with the figures, the
counts they are made of, and time series for the report.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from engine.protocol.adapters import upgrade_effect
from simulations.scenario import Scenario
from store import Store

PAGE = 2000
_WAKE_OP = re.compile(r"^(wak_[0-9a-f]+):(\d+)$")
RUNTIME_ACTORS = frozenset({"pmw-controller", "pmw-runtime", "sim-worker"})
# Event types that are bookkeeping of the protocol or the runtime, not an agent's own action.
BOOKKEEPING = frozenset({"wake.claim", "wake.ack", "agent.decided", "session.activate", "agent.registered",
                         "policy.denied", "governor.bootstrapped", "policy.activated", "controller.step"})
# Which capability each agent action needs (docs/policy-contract.md).
CAPABILITY_OF = {"state.set": "state.write", "task.created": "task.create", "task.claim": "task.work",
                 "task.complete": "task.work", "task.fail": "task.work", "task.release": "task.work",
                 "memory.stored": "memory.write", "handoff.created": "handoff.create", "wake.issued": "wake.enqueue",
                 "room.opened": "room.open", "topology.changed": "topology.write",
                 "artifact.committed": "artifact.write"}
TOPOLOGY_EVENTS = frozenset({"room.opened", "room.joined", "room.left", "room.closed", "topology.changed"})


class Metrics(BaseModel):
    """Every figure of a run (``None``: not applicable, e.g. no conflict to time)."""

    model_config = ConfigDict(frozen=True)

    scenario: str
    seed: int
    duration_s: float
    events: int
    task_quality: float | None
    continuation_fidelity: float | None
    coordination_latency_s: float | None
    duplicate_work_ratio: float
    state_conflict_rate: float
    failure_propagation: float
    context_cost_bytes: int
    context_bytes_per_wake: float
    wake_efficiency: float | None
    topology_mutation_rate: float
    recovery_success: float | None
    unauthorized_action_rate: float
    duplicate_side_effect_rate: float
    counts: dict[str, int]
    checks: dict[str, bool]


@dataclass(frozen=True)
class FaultMark:
    """A fault on the time axis: injected at ``at_s`` (virtual seconds from the start); ``end_s`` closes a
    span (a PDP outage: until its ``restored`` result; ``None`` for an instant); ``result`` is its observed
    result (``restored``, ``activated``, ``rejected`` ...; empty when none was recorded)."""

    kind: str
    at_s: float
    end_s: float | None
    result: str
    label: str


@dataclass
class Series:
    """Per-bucket counts over virtual time, the faults on that axis, the topology at key moments, and per
    agent (sparse: bucket -> count, only where something happened) its wakes, acted runs and suppressions by
    reason. ``roles`` maps each declared agent to its role (the topology groups by it)."""

    bucket_s: float
    buckets: int
    wakes: list[int]
    suppressed: list[int]
    acted: list[int]
    conflicts_opened: list[int]
    conflicts_resolved: list[int]
    duplicate_work: list[int]
    suppress_reasons: dict[str, int]
    frames: list[TopologyFrame]
    start_us: int = 0
    faults: list[FaultMark] = field(default_factory=list)
    suppressed_by_reason: dict[str, list[int]] = field(default_factory=dict)
    wakes_by_agent: dict[str, dict[int, int]] = field(default_factory=dict)
    acted_by_agent: dict[str, dict[int, int]] = field(default_factory=dict)
    suppressed_by_agent: dict[str, dict[str, dict[int, int]]] = field(default_factory=dict)
    roles: dict[str, str] = field(default_factory=dict)


@dataclass
class TopologyFrame:
    """Who works with whom at one moment: info edges and room memberships."""

    at_s: float
    label: str
    agents: list[str]
    edges: list[tuple[str, str, str]]
    rooms: dict[str, list[str]]


@dataclass
class _Wake:
    target: str
    key: str
    created_us: int
    chain: str
    claims: int = 0
    receipts: int = 0
    outcome: str = ""
    done_us: int = 0


@dataclass
class _Memory:
    owner: str
    scope: str
    status: str
    sensitivity: int


@dataclass
class _Fold:
    """What the log fold accumulates."""

    agents: set[str]
    start_us: int
    bucket_us: int
    buckets: int
    wakes: dict[str, _Wake] = field(default_factory=dict)
    outcomes: Counter[str] = field(default_factory=Counter)
    suppress_reasons: Counter[str] = field(default_factory=Counter)
    series: dict[str, list[int]] = field(default_factory=dict)
    steps: dict[str, int] = field(default_factory=dict)        # task -> highest step committed
    step_writes: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    work_units: int = 0
    redone_units: int = 0
    claims_seen: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    answers_seen: Counter[tuple[str, str]] = field(default_factory=Counter)
    contested_us: dict[str, int] = field(default_factory=dict)
    resolved_us: dict[str, int] = field(default_factory=dict)
    completed: set[str] = field(default_factory=set)
    state_writes: int = 0
    stale_refused: int = 0
    stale_overwrote: int = 0
    denied: int = 0
    actions: int = 0
    unauthorized: int = 0
    caps: dict[str, set[str]] = field(default_factory=dict)
    side_effects: int = 0
    side_effect_keys: Counter[tuple[str, int]] = field(default_factory=Counter)
    context_bytes: int = 0
    traced: int = 0
    full_runs: int = 0                                            # runs shown a projection (the layered wake's layer 3)
    layers: Counter[str] = field(default_factory=Counter)         # monitored, checked, stopped_at_check
    mutations: int = 0
    faults: list[dict[str, Any]] = field(default_factory=list)
    fault_results: dict[int, dict[str, Any]] = field(default_factory=dict)
    receipts_by_agent: dict[str, list[tuple[int, str]]] = field(default_factory=lambda: defaultdict(list))
    accepts: list[tuple[int, str]] = field(default_factory=list)
    epochs: list[int] = field(default_factory=list)
    edges: set[tuple[str, str, str]] = field(default_factory=set)
    rooms: dict[str, set[str]] = field(default_factory=dict)
    frames: list[TopologyFrame] = field(default_factory=list)
    answer_memories: dict[str, str] = field(default_factory=dict)   # memory -> room, while private
    early_reveals: int = 0
    clearance: dict[str, int] = field(default_factory=dict)
    agent_list: list[str] = field(default_factory=list)
    memories: dict[str, _Memory] = field(default_factory=dict)   # memory id -> what its visibility depends on
    reviewers: dict[str, str] = field(default_factory=dict)      # memory -> its row's reviewer (the routed one)
    verdicts: Counter[str] = field(default_factory=Counter)       # memory.promote / memory.reject by reviewers
    private_shown: int = 0
    shared_shown: int = 0
    candidate_shown: int = 0
    above_clearance_shown: int = 0
    epoch: str | None = None
    epoch_changed: bool = False
    old_epoch_after_change: int = 0
    new_epoch_after_change: int = 0
    outage_from_us: int | None = None
    during_outage: int = 0
    artifact_commits: dict[str, Counter[int]] = field(default_factory=dict)   # artifact -> version -> commits
    artifact_authors: dict[tuple[str, int], str] = field(default_factory=dict)
    expected_versions: dict[tuple[str, str], int | None] = field(default_factory=dict)  # (wake, artifact) -> seen
    revisions: int = 0
    revisions_on_seen: int = 0
    revisions_by_another: int = 0
    artifacts_read: bool = False
    read_back_ok: set[tuple[str, int]] = field(default_factory=set)
    read_back_failed: int = 0
    events: int = 0
    last_us: int = 0
    by_agent: dict[str, dict[str, Counter[int]]] = field(default_factory=dict)   # series -> agent -> bucket
    handoff_packets: list[int] = field(default_factory=list)     # UTF-8 bytes of each handoff's goal
    handoff_waiting: dict[str, int] = field(default_factory=dict)  # receiver -> its packet's bytes, until it runs
    handoff_views: list[tuple[int, int]] = field(default_factory=list)  # (receiver's next view, its packet)

    def bucket(self, t_us: int) -> int:
        return min(self.buckets - 1, max(0, (t_us - self.start_us) // self.bucket_us))

    def tick(self, name: str, t_us: int, n: int = 1) -> None:
        self.series.setdefault(name, [0] * self.buckets)[self.bucket(t_us)] += n

    def tick_agent(self, name: str, agent: str, t_us: int) -> None:
        """Count one ``name`` (``wakes``, ``acted``, ``suppressed:<reason>``) for ``agent`` in its bucket."""
        self.by_agent.setdefault(name, {}).setdefault(agent, Counter())[self.bucket(t_us)] += 1


def _pages(store: Store) -> Iterator[dict[str, Any]]:
    after = 0
    while True:
        rows = store.read.events(after, PAGE)
        if not rows:
            return
        yield from rows
        after = int(rows[-1]["seq"])


def _inserted(row: dict[str, Any], table: str) -> list[dict[str, Any]]:
    return [c["values"] for c in row["changes"] if c.get("table") == table and c.get("op") == "insert"]


def _updated(row: dict[str, Any], table: str) -> list[dict[str, Any]]:
    return [c for c in row["changes"] if c.get("table") == table and c.get("op") == "update"]


class _Folder:
    """Applies one event at a time to a :class:`_Fold`."""

    def __init__(self, fold: _Fold) -> None:
        self.f = fold

    def apply(self, e: dict[str, Any]) -> None:
        f, t, kind = self.f, int(e["created_at_us"]), str(e["event_type"])
        f.events += 1
        f.last_us = max(f.last_us, t)
        handler = getattr(self, "on_" + kind.replace(".", "_"), None)
        if handler is not None:
            handler(e, t)
        if kind in TOPOLOGY_EVENTS:
            f.mutations += 1
            self._topology(e, t, kind)
        self._audit(e, kind)
        self._memory_rows(e)
        self._epoch(e, kind)
        if f.outage_from_us is not None and not kind.startswith("sim."):
            f.during_outage += 1  # anything written while the PDP was down
        m = _WAKE_OP.match(str(e["op_id"]))
        if m and kind not in BOOKKEEPING:
            f.side_effects += 1
            wake = f.wakes.get(m.group(1))
            f.side_effect_keys[(wake.key if wake else m.group(1), int(m.group(2)))] += 1

    # -- wakes and receipts -----------------------------------------------------------------------------

    def on_wake_issued(self, e: dict[str, Any], t: int) -> None:
        for w in _inserted(e, "wakes"):
            self._new_wake(w, t)

    def _new_wake(self, w: dict[str, Any], t: int) -> None:
        payload = w.get("payload") or {}
        chain = payload.get("chain") if isinstance(payload, dict) else None
        self.f.wakes[w["wake_id"]] = _Wake(w["target_agent"], w["idempotency_key"], t, str(chain or w["wake_id"]))
        self.f.tick("wakes", t)
        self.f.tick_agent("wakes", str(w["target_agent"]), t)

    def on_controller_step(self, e: dict[str, Any], t: int) -> None:
        for w in _inserted(e, "wakes"):
            self._new_wake(w, t)
        for d in e["payload"].get("decisions", []):
            if d.get("kind") == "suppress":
                reason = str(d.get("reason"))
                self.f.suppress_reasons[reason] += 1
                self.f.tick("suppressed", t)
                self.f.tick(f"suppressed:{reason}", t)
                self.f.tick_agent(f"suppressed:{reason}", str(d.get("agent")), t)

    def on_wake_claim(self, e: dict[str, Any], t: int) -> None:
        wake = self.f.wakes.get(str(e["subject_id"]))
        if wake is not None:
            wake.claims += 1

    def on_wake_ack(self, e: dict[str, Any], t: int) -> None:
        for r in _inserted(e, "receipts"):
            self._receipt(r, t)
        for tr in _inserted(e, "traces"):
            cost = tr.get("cost") or {}
            self.f.context_bytes += int(cost.get("context_bytes", 0))
            self.f.traced += 1
            self.f.full_runs += int(cost.get("context_bytes", 0)) > 0
            if str(tr.get("agent_id")) in self.f.handoff_waiting:  # the receiver's first run shows the packet
                packet = self.f.handoff_waiting.pop(str(tr.get("agent_id")))
                self.f.handoff_views.append((int(cost.get("context_bytes", 0)), packet))
            self._shown(str(tr.get("agent_id")), tr.get("retrieved_refs") or [])

    def _shown(self, agent: str, refs: list[str]) -> None:
        """What a run was shown, against who may see it: another's private memory, a candidate to anyone
        but its owner and its reviewer, a memory above the agent's clearance."""
        f = self.f
        for ref in refs:
            if not str(ref).startswith("memory:"):
                continue
            mid = str(ref)[len("memory:"):]
            mem = f.memories.get(mid)
            if mem is None or mem.owner == agent:
                continue
            if mem.scope != "private" and mem.status != "candidate" and mem.sensitivity <= f.clearance.get(agent, 0):
                f.shared_shown += 1
            if mem.status == "candidate":
                f.candidate_shown += f.reviewers.get(mid) != agent  # its reviewer sees it, to review it
            elif mem.scope == "private":
                f.private_shown += 1
            if mem.sensitivity > f.clearance.get(agent, 0):
                f.above_clearance_shown += 1

    def _memory_rows(self, e: dict[str, Any]) -> None:
        for c in e["changes"]:
            if c.get("table") != "memory":
                continue
            v = c.get("values") or {}
            mid = v.get("memory_id") or (c.get("key") or {}).get("memory_id")
            if c.get("op") == "insert" and mid:
                scope = v.get("permission_scope") or {}
                sens = scope.get("sensitivity", 0) if isinstance(scope, dict) else 0
                self.f.memories[str(mid)] = _Memory(str(v.get("owner")), str(v.get("scope")), str(v.get("status")),
                                                    int(sens) if isinstance(sens, int) else 0)
            elif mid and str(mid) in self.f.memories:
                mem = self.f.memories[str(mid)]
                mem.status = str(v.get("status", mem.status))
                mem.scope = str(v.get("scope", mem.scope))
                if isinstance(v.get("reviewer"), str):
                    self.f.reviewers[str(mid)] = str(v["reviewer"])

    def on_memory_promote(self, e: dict[str, Any], t: int) -> None:
        self.f.verdicts["promoted"] += 1

    def on_memory_reject(self, e: dict[str, Any], t: int) -> None:
        self.f.verdicts["rejected"] += 1

    def _epoch(self, e: dict[str, Any], kind: str) -> None:
        f = self.f
        if kind == "policy.activated":
            for row in _inserted(e, "policy_epochs"):
                if f.epoch is not None and row.get("epoch") != f.epoch:
                    f.epoch_changed = True
                f.epoch = str(row.get("epoch"))
            return
        stamped = e.get("policy_epoch")
        if f.epoch_changed and stamped:
            if stamped == f.epoch:
                f.new_epoch_after_change += 1
            else:
                f.old_epoch_after_change += 1

    on_wake_cancel = on_wake_ack

    def _receipt(self, r: dict[str, Any], t: int) -> None:
        f = self.f
        f.outcomes[r["outcome"]] += 1
        f.receipts_by_agent[r["agent_id"]].append((t, r["outcome"]))
        if r["outcome"] == "acted":
            f.tick("acted", t)
            f.tick_agent("acted", str(r["agent_id"]), t)
        layer = (r.get("payload") or {}).get("wake_layer")
        if isinstance(layer, dict):
            f.layers["monitored"] += layer.get("depth") == "monitor"
            f.layers["checked"] += layer.get("checked") is True
            f.layers["stopped_at_check"] += layer.get("reached") == "check"
        wake = f.wakes.get(str(r.get("wake_id")))
        if wake is not None:
            wake.receipts += 1
            wake.outcome = r["outcome"]
            wake.done_us = t

    # -- work -------------------------------------------------------------------------------------------

    def on_state_set(self, e: dict[str, Any], t: int) -> None:
        f = self.f
        f.state_writes += 1
        key = str(e["subject_id"])
        if not key.startswith("progress:"):
            return
        values = [c["values"] for c in e["changes"] if c.get("table") == "state_entries"]
        value = values[0].get("value") if values else None
        step = value.get("step") if isinstance(value, dict) else None
        if not isinstance(step, int):
            return
        task = key.split(":", 1)[1]
        before = f.steps.get(task, 0)
        f.step_writes[task].append(step)
        f.work_units += max(1, step - before)
        if step <= before:  # a step already committed was done again
            f.redone_units += 1
            f.tick("duplicate_work", t)
        f.steps[task] = max(before, step)

    def on_task_complete(self, e: dict[str, Any], t: int) -> None:
        self.f.completed.add(str(e["subject_id"]))

    def on_claim_asserted(self, e: dict[str, Any], t: int) -> None:
        p = e["payload"]
        key = (str(e["actor_id"]), str(p.get("term")), str(p.get("value")))
        self.f.claims_seen[key] += 1
        self.f.work_units += 1
        if self.f.claims_seen[key] > 1:
            self.f.redone_units += 1
            self.f.tick("duplicate_work", t)

    def on_claim_contested(self, e: dict[str, Any], t: int) -> None:
        term = str(e["payload"].get("term"))
        if term not in self.f.contested_us:
            self.f.contested_us[term] = t
            self.f.tick("conflicts_opened", t)

    def on_conflict_resolved(self, e: dict[str, Any], t: int) -> None:
        term = str(e["payload"].get("term"))
        if term in self.f.contested_us and term not in self.f.resolved_us:
            self.f.resolved_us[term] = t
            self.f.tick("conflicts_resolved", t)

    def on_room_answered(self, e: dict[str, Any], t: int) -> None:
        f = self.f
        key = (str(e["subject_id"]), str(e["actor_id"]))
        f.answers_seen[key] += 1
        f.work_units += 1
        for m in _inserted(e, "memory"):
            if m.get("scope") == "private":
                f.answer_memories[m["memory_id"]] = str(e["subject_id"])
        revealed = e["payload"].get("revealed") or []
        room = str(e["subject_id"])
        members = f.rooms.get(room, set())
        if revealed and members and not members <= set(revealed):
            f.early_reveals += 1  # revealed before every member had committed
        if revealed:
            for mid in [m for m, r in f.answer_memories.items() if r == room]:
                del f.answer_memories[mid]

    # -- artifacts ------------------------------------------------------------------------------------

    def on_agent_decided(self, e: dict[str, Any], t: int) -> None:
        """The version each revision was decided on (the head its view showed), by (wake, artifact)."""
        for raw in e["payload"].get("effects") or []:
            effect = upgrade_effect(raw)  # a decision recorded under an old effect name reads as its command
            if isinstance(effect, dict) and effect.get("effect") == "new_artifact_version":
                seen = effect.get("expected_version")
                self.f.expected_versions[(str(e["subject_id"]), str(effect.get("artifact_id")))] = \
                    seen if isinstance(seen, int) else None

    def on_artifact_committed(self, e: dict[str, Any], t: int) -> None:
        f = self.f
        for v in _inserted(e, "artifact_versions"):
            aid, version, author = str(v["artifact_id"]), int(v["version"]), str(v["created_by"])
            f.artifact_commits.setdefault(aid, Counter())[version] += 1
            f.artifact_authors[(aid, version)] = author
            if version == 1:
                continue
            f.revisions += 1
            before = f.artifact_authors.get((aid, version - 1))
            f.revisions_by_another += before is not None and before != author
            m = _WAKE_OP.match(str(e["op_id"]))
            seen = f.expected_versions.get((m.group(1), aid)) if m else None
            f.revisions_on_seen += seen is not None and seen == e.get("base_version") == version - 1

    def on_sim_artifacts_read(self, e: dict[str, Any], t: int) -> None:
        f = self.f
        f.artifacts_read = True
        for r in e["payload"].get("versions") or []:
            if r.get("ok"):
                f.read_back_ok.add((str(r["artifact"]), int(r["version"])))
            else:
                f.read_back_failed += 1

    def on_handoff_created(self, e: dict[str, Any], t: int) -> None:
        for h in _inserted(e, "handoffs"):
            size = len(str(h.get("goal") or "").encode("utf-8"))
            self.f.handoff_packets.append(size)
            self.f.handoff_waiting[str(h.get("target_agent"))] = size

    def on_handoff_accept(self, e: dict[str, Any], t: int) -> None:
        self.f.accepts.append((t, str(e["actor_id"])))

    # -- faults, policy ---------------------------------------------------------------------------------

    def on_sim_fault(self, e: dict[str, Any], t: int) -> None:
        self.f.faults.append({**e["payload"], "at_us": t, "seq": int(e["seq"])})
        if e["payload"].get("kind") == "pdp_outage":
            self.f.outage_from_us = t

    def on_sim_fault_result(self, e: dict[str, Any], t: int) -> None:
        p = e["payload"]
        self.f.fault_results[int(p["entry"])] = {**p, "at_us": t}
        if p.get("kind") == "pdp_outage":
            self.f.outage_from_us = None
        if p.get("kind") == "stale_write":
            if p.get("result") == "version_conflict":
                self.f.stale_refused += 1
            else:
                self.f.stale_overwrote += 1

    def on_policy_denied(self, e: dict[str, Any], t: int) -> None:
        if e["actor_id"] in self.f.agents:
            self.f.denied += 1

    def on_policy_activated(self, e: dict[str, Any], t: int) -> None:
        self.f.epochs.append(t)

    def on_agent_granted(self, e: dict[str, Any], t: int) -> None:
        caps = e["payload"].get("capabilities")
        if isinstance(caps, list):
            self.f.caps[str(e["subject_id"])] = {str(c) for c in caps}

    def _audit(self, e: dict[str, Any], kind: str) -> None:
        f = self.f
        actor = str(e["actor_id"])
        if actor not in f.agents or kind in BOOKKEEPING or kind.startswith("sim."):
            return
        f.actions += 1
        needed = CAPABILITY_OF.get(kind)
        if needed is not None and needed not in f.caps.get(actor, set()):
            f.unauthorized += 1

    # -- topology ---------------------------------------------------------------------------------------

    def _topology(self, e: dict[str, Any], t: int, kind: str) -> None:
        f = self.f
        room = str(e["subject_id"])
        p = e["payload"]
        if kind == "room.opened":
            f.rooms[room] = {m for m in p.get("members", []) if m in f.agents}
        elif kind == "room.joined" and p.get("agent_id") in f.agents:
            f.rooms.setdefault(room, set()).add(str(p["agent_id"]))
        elif kind == "room.left":
            f.rooms.get(room, set()).discard(str(p.get("agent_id")))
        elif kind == "room.closed":
            f.rooms.pop(room, None)
        elif kind == "topology.changed":
            # the edges are in the rows the event wrote (its subject is the topology version)
            changed = []
            for c in e["changes"]:
                if c.get("table") != "topology_edges":
                    continue
                v, k = c.get("values") or {}, c.get("key") or {}
                src, dst = v.get("source_agent", k.get("source_agent")), v.get("target_agent", k.get("target_agent"))
                edge = (str(src), str(dst), str(v.get("edge_type", k.get("edge_type", "info"))))
                if v.get("active", True):
                    f.edges.add(edge)
                    changed.append(f"{edge[2]} edge {edge[0]} -> {edge[1]}")
                else:
                    f.edges.discard(edge)
                    changed.append(f"{edge[2]} edge {edge[0]} -> {edge[1]} removed")
            self.frame(t, "; ".join(changed) or "topology changed")
            return
        label = {"room.opened": "room {} opened", "room.joined": "{} joined", "room.left": "{} left",
                 "room.closed": "room {} closed"}[kind]
        who = p.get("agent_id") if kind in ("room.joined", "room.left") else None
        self.frame(t, label.format(f"{who} -> {room}" if who else room))

    def frame(self, t: int, label: str) -> None:
        f = self.f
        if len(f.agent_list) != len(f.agents):
            f.agent_list = sorted(f.agents)  # one list shared by every frame (1,000 agents x many frames)
        snap = TopologyFrame((t - f.start_us) / 1e6, label, f.agent_list, sorted(f.edges),
                             {r: sorted(m) for r, m in sorted(f.rooms.items()) if m})
        if f.frames and f.frames[-1].at_s == snap.at_s:
            snap.label = f.frames[-1].label if f.frames[-1].label != "start" else label
            f.frames[-1] = snap  # one frame per moment: the state after that moment's changes
        else:
            f.frames.append(snap)


# -- the metrics --------------------------------------------------------------------------------------

def compute_metrics(scenario: Scenario, store: Store, start_us: int, stop_us: int) -> tuple[Metrics, Series]:
    """Fold the log of a finished run of ``scenario`` into its metrics and time series."""
    bucket_us = max(1, round(scenario.clock.bucket_s * 1e6))
    buckets = max(1, -(-(stop_us - start_us) // bucket_us))
    fold = _Fold(agents={a.id for a in scenario.agents}, start_us=start_us, bucket_us=bucket_us, buckets=buckets,
                 clearance={a.id: a.authority.clearance for a in scenario.agents})
    folder = _Folder(fold)
    folder.frame(start_us, "start")
    for event in _pages(store):
        folder.apply(event)
    folder.frame(max(stop_us, fold.last_us), "end")
    duration_s = max(1e-9, (stop_us - start_us) / 1e6)
    metrics = Metrics(
        scenario=scenario.name, seed=scenario.seed, duration_s=round(duration_s, 6), events=fold.events,
        task_quality=_task_quality(scenario, fold), continuation_fidelity=_continuation(fold),
        coordination_latency_s=_latency(fold), duplicate_work_ratio=_ratio(fold.redone_units, fold.work_units),
        state_conflict_rate=_ratio(fold.outcomes["conflict"] + fold.stale_refused + fold.stale_overwrote,
                                   fold.state_writes + fold.outcomes["conflict"] + fold.stale_refused),
        failure_propagation=_propagation(fold), context_cost_bytes=fold.context_bytes,
        context_bytes_per_wake=round(fold.context_bytes / fold.traced, 3) if fold.traced else 0.0,
        wake_efficiency=_ratio(fold.outcomes["acted"], sum(fold.outcomes.values())) if fold.outcomes else None,
        topology_mutation_rate=round(fold.mutations / (duration_s / 60), 6),
        recovery_success=_recovery(scenario, fold),
        unauthorized_action_rate=_ratio(fold.unauthorized, fold.actions),
        duplicate_side_effect_rate=_ratio(sum(n - 1 for n in fold.side_effect_keys.values() if n > 1),
                                          fold.side_effects),
        counts=_counts(fold), checks=_checks(fold))
    def col(name: str) -> list[int]:
        return fold.series.get(name, [0] * buckets)
    series = Series(scenario.clock.bucket_s, buckets, wakes=col("wakes"), suppressed=col("suppressed"),
                    acted=col("acted"), conflicts_opened=col("conflicts_opened"),
                    conflicts_resolved=col("conflicts_resolved"), duplicate_work=col("duplicate_work"),
                    suppress_reasons=dict(sorted(fold.suppress_reasons.items())), frames=_key_frames(fold.frames),
                    start_us=start_us, faults=fault_marks(fold),
                    suppressed_by_reason={r: col(f"suppressed:{r}") for r in sorted(fold.suppress_reasons)},
                    wakes_by_agent=_per_agent(fold, "wakes"), acted_by_agent=_per_agent(fold, "acted"),
                    suppressed_by_agent=_suppressed_by_agent(fold),
                    roles={a.id: a.role for a in scenario.agents})
    return metrics, series


def _per_agent(f: _Fold, name: str) -> dict[str, dict[int, int]]:
    return {a: dict(sorted(c.items())) for a, c in sorted(f.by_agent.get(name, {}).items())}


def _suppressed_by_agent(f: _Fold) -> dict[str, dict[str, dict[int, int]]]:
    """agent -> reason -> bucket -> suppressions."""
    out: dict[str, dict[str, dict[int, int]]] = {}
    for name in sorted(k for k in f.by_agent if k.startswith("suppressed:")):
        reason = name.split(":", 1)[1]
        for agent, counts in f.by_agent[name].items():
            out.setdefault(agent, {})[reason] = dict(sorted(counts.items()))
    return dict(sorted(out.items()))


def fault_marks(f: _Fold) -> list[FaultMark]:
    """Each injected fault as a mark on the time axis, in log order: a PDP outage as the span from its
    ``sim.fault`` to its ``restored`` result, every other fault at its ``sim.fault``."""
    marks = []
    for fault in f.faults:
        kind, at = str(fault["kind"]), (int(fault["at_us"]) - f.start_us) / 1e6
        result = f.fault_results.get(int(fault["entry"]), {})
        end = (int(result["at_us"]) - f.start_us) / 1e6 if kind == "pdp_outage" and "at_us" in result else None
        outcome = str(result.get("result") or "")
        who = f" {fault['agent']}" if fault.get("agent") else ""
        marks.append(FaultMark(kind, round(at, 6), round(end, 6) if end is not None else None, outcome,
                               f"{kind.replace('_', ' ')}{who}" + (f" ({outcome})" if outcome else "")))
    return marks


def _ratio(num: int, den: int) -> float:
    return round(num / den, 6) if den else 0.0


def _task_quality(s: Scenario, f: _Fold) -> float | None:
    if not s.world.tasks:
        return None
    good = 0
    for t in s.world.tasks:
        writes = f.step_writes.get(t.id, [])
        increasing = all(b > a for a, b in itertools.pairwise(writes))
        good += t.id in f.completed and f.steps.get(t.id) == t.steps and increasing
    return round(good / len(s.world.tasks), 6)


def _interruptions(f: _Fold) -> list[tuple[int, str]]:
    """(time, agent) of each interruption an agent must continue across."""
    points = [(int(x["at_us"]), str(x["agent"])) for x in f.faults
              if x["kind"] in ("model_replacement", "conversation_replacement")]
    points += [(w.created_us, w.target) for w in f.wakes.values() if w.claims > 1]
    points += f.accepts
    return sorted(points)


def _continuation(f: _Fold) -> float | None:
    """Of the interruptions, the share whose agent's next run (that did not decline) acted."""
    points = _interruptions(f)
    if not points:
        return None
    ok = 0
    for t, agent in points:
        after = [o for (rt, o) in f.receipts_by_agent.get(agent, []) if rt > t and o != "no_action"]
        ok += bool(after) and after[0] == "acted"
    return round(ok / len(points), 6)


def _latency(f: _Fold) -> float | None:
    spans = [(f.resolved_us[t] - f.contested_us[t]) / 1e6 for t in f.resolved_us]
    return round(sum(spans) / len(spans), 6) if spans else None


def _propagation(f: _Fold) -> float:
    """Failed runs (failed, denied, conflict) followed in the same chain by another agent's failed run."""
    failing = ("failed", "denied", "conflict")
    by_chain: dict[str, list[_Wake]] = defaultdict(list)
    for w in f.wakes.values():
        if w.outcome in failing:
            by_chain[w.chain].append(w)
    failures = sum(len(ws) for ws in by_chain.values())
    spread = 0
    for ws in by_chain.values():
        ws.sort(key=lambda w: w.done_us)
        spread += sum(1 for i, w in enumerate(ws) if any(o.target != w.target for o in ws[i + 1:]))
    return _ratio(spread, failures)


def _recovery(s: Scenario, f: _Fold) -> float | None:
    if not f.faults:
        return None
    ok = 0
    for fault in f.faults:
        ok += _recovered(fault, f)
    return round(ok / len(f.faults), 6)


def _recovered(fault: dict[str, Any], f: _Fold) -> bool:
    kind, result = fault["kind"], f.fault_results.get(int(fault["entry"]), {})
    if kind == "worker_crash":
        crashed = [w for w in f.wakes.values() if w.claims > 1 and w.created_us <= f.last_us]
        return bool(crashed) and all(w.receipts == 1 for w in crashed)
    if kind == "duplicate_delivery":
        wakes = [w for w in f.wakes.values() if w.key == fault.get("key")]
        return len(wakes) == 1 and wakes[0].receipts == 1
    if kind == "stale_write":
        return result.get("result") == "version_conflict"
    if kind == "pdp_outage":
        before = [w for w in f.wakes.values() if w.created_us <= int(result.get("at_us", f.last_us))]
        return result.get("result") == "restored" and all(w.receipts == 1 for w in before)
    if kind == "policy_change":
        return result.get("result") == "activated"
    if kind == "rule_change":
        return result.get("result") == "reloaded"
    agent, at = str(fault.get("agent")), int(fault["at_us"])
    after = [o for (t, o) in f.receipts_by_agent.get(agent, []) if t > at and o != "no_action"]
    return bool(after) and after[0] == "acted"


def _counts(f: _Fold) -> dict[str, int]:
    deliveries = sum(int(x.get("deliveries", 0)) for x in f.faults if x["kind"] == "duplicate_delivery")
    return {
        "wakes": len(f.wakes), "receipts": sum(f.outcomes.values()), "acted": f.outcomes["acted"],
        "no_action": f.outcomes["no_action"], "conflict_receipts": f.outcomes["conflict"],
        "denied_receipts": f.outcomes["denied"], "failed_receipts": f.outcomes["failed"],
        "suppressed": sum(f.suppress_reasons.values()),
        **{f"suppressed_{k}": v for k, v in sorted(f.suppress_reasons.items())},
        "wakes_run_twice": sum(1 for w in f.wakes.values() if w.claims > 1),
        "wakes_without_receipt": sum(1 for w in f.wakes.values() if w.receipts == 0),
        "wakes_with_two_receipts": sum(1 for w in f.wakes.values() if w.receipts > 1),
        "conflicts_opened": len(f.contested_us), "conflicts_resolved": len(f.resolved_us),
        "tasks_completed": len(f.completed), "state_writes": f.state_writes, "stale_writes_refused": f.stale_refused,
        "stale_writes_accepted": f.stale_overwrote, "side_effects": f.side_effects, "work_units": f.work_units,
        "redone_units": f.redone_units, "denied_attempts": f.denied, "agent_actions": f.actions,
        "unauthorized_actions": f.unauthorized, "topology_mutations": f.mutations, "faults": len(f.faults),
        "deliveries": deliveries, "policy_epochs": len(f.epochs), "traced_runs": f.traced,
        "full_runs": f.full_runs, "monitored_wakes": f.layers["monitored"], "checks_run": f.layers["checked"],
        "stopped_at_check": f.layers["stopped_at_check"],
        "memories": len(f.memories), "memory_candidates": sum(m.status == "candidate" for m in f.memories.values()),
        "memories_promoted": f.verdicts["promoted"], "memories_rejected": f.verdicts["rejected"],
        "answers": sum(f.answers_seen.values()), "shared_memory_shown_to_others": f.shared_shown,
        "private_memory_shown_to_others": f.private_shown, "candidate_memory_shown_to_others": f.candidate_shown,
        "memory_shown_above_clearance": f.above_clearance_shown,
        "events_on_old_epoch_after_change": f.old_epoch_after_change,
        "events_on_new_epoch_after_change": f.new_epoch_after_change, "events_during_pdp_outage": f.during_outage,
        "runs_refused_by_pdp_outage": max((int(r.get("refused_so_far", 0)) for r in f.fault_results.values()
                                           if r.get("kind") == "pdp_outage"), default=0),
        "entries_deferred_by_pdp_outage": sum(int(r.get("deferred_entries", 0)) for r in f.fault_results.values()
                                              if r.get("kind") == "pdp_outage"),
        **_artifact_counts(f), **_handoff_counts(f),
    }


def _handoff_counts(f: _Fold) -> dict[str, int]:
    """H2's two shares of what a handoff's receiver is shown: ``handoff_packet_bytes``, the representation
    alone (the handoff's goal text: transcript, summary, structured state or pointers), and
    ``handoff_projection_bytes``, the rest of the receiver's first view after it (its projection of the
    shared world, the same whatever the representation): ``handoff_receiver_context_bytes`` minus the packets
    of the handoffs whose receiver ran."""
    views = sum(v for v, _ in f.handoff_views)
    return {"handoffs": len(f.handoff_packets), "handoff_packet_bytes": sum(f.handoff_packets),
            "handoff_receiver_context_bytes": views,
            "handoff_projection_bytes": max(0, views - sum(p for _, p in f.handoff_views))}


def _artifact_versions_lost(f: _Fold) -> int:
    """Versions below an artifact's head never committed, plus (when the registry was read back at the stop)
    committed versions that did not read back with their registered checksum."""
    lost = 0
    for aid, commits in f.artifact_commits.items():
        lost += max(commits) - len(commits)
        if f.artifacts_read:
            lost += sum((aid, v) not in f.read_back_ok for v in commits)
    return lost


def _artifact_counts(f: _Fold) -> dict[str, int]:
    return {
        "artifacts": sum(1 in c for c in f.artifact_commits.values()),
        "artifact_versions": sum(len(c) for c in f.artifact_commits.values()),
        "artifact_revisions": f.revisions, "artifact_revisions_on_seen_version": f.revisions_on_seen,
        "artifact_revisions_blind": f.revisions - f.revisions_on_seen,
        "artifact_revisions_by_another_agent": f.revisions_by_another,
        "artifact_versions_read_back": len(f.read_back_ok), "artifact_checksum_failures": f.read_back_failed,
        "artifact_versions_lost": _artifact_versions_lost(f),
    }


def _checks(f: _Fold) -> dict[str, bool]:
    return {
        "every_wake_has_at_most_one_receipt": all(w.receipts <= 1 for w in f.wakes.values()),
        "blind_answers_hidden_until_all_committed": f.early_reveals == 0,
        "no_unauthorized_action": f.unauthorized == 0,
        "no_duplicate_side_effect": all(n == 1 for n in f.side_effect_keys.values()),
        "private_memory_never_shown_to_others": f.private_shown == 0 and f.candidate_shown == 0,
        "no_memory_shown_above_clearance": f.above_clearance_shown == 0,
        "nothing_written_during_pdp_outage": f.during_outage == 0,
        "later_events_on_the_new_policy_epoch": f.old_epoch_after_change == 0,
        "no_artifact_version_lost": _artifact_versions_lost(f) == 0 and f.read_back_failed == 0,
        "artifact_revisions_on_the_version_seen": f.revisions == f.revisions_on_seen,
    }


def count_and_check_names() -> frozenset[str]:
    """The name of every count and every check a run reports (those of an empty fold: a count per
    suppression reason, ``suppressed_<reason>``, is open-ended and not among them)."""
    fold = _Fold(agents=set(), start_us=0, bucket_us=1, buckets=1)
    return frozenset(_counts(fold)) | frozenset(_checks(fold))


def _key_frames(frames: list[TopologyFrame], limit: int = 6) -> list[TopologyFrame]:
    """The start, the end and the moments between them where the topology changed shape (at most ``limit``)."""
    if len(frames) <= limit:
        return frames
    distinct = [frames[0]]
    for fr in frames[1:-1]:
        if (fr.edges, fr.rooms) != (distinct[-1].edges, distinct[-1].rooms):
            distinct.append(fr)
    distinct.append(frames[-1])
    if len(distinct) <= limit:
        return distinct
    step = (len(distinct) - 1) / (limit - 1)
    return [distinct[round(i * step)] for i in range(limit)]


__all__ = ["FaultMark", "Metrics", "Series", "TopologyFrame", "compute_metrics", "count_and_check_names", "fault_marks"]
