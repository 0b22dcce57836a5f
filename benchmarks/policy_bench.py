"""Policy benchmark: what the runtime's policy enforcement costs on top of the Cerbos PDP it asks.

Run from the repository root (``docs/benchmarks-policy.md`` has the figures and their interpretation)::

    .venv/bin/python -m benchmarks.policy_bench [--rows 100000] [--n 2000] [--batch-n 200]
                                                [--proj-rounds 3] [--check-rows 20000] [--json FILE]

One run deploys ``policies/`` (compile + every test suite, as the runtime does) into a temporary directory,
starts one ``cerbos server`` (``ManagedPdp``: loopback ports, audit off, warn-level logs; stopped by its PID
at the end) and a World on a SQLite file in the same temporary directory, decided by that PDP through
``PdpAuthorizer``. It seeds 50 worker agents (``state.write``/``memory.write``/``memory.invoke``, clearance 2,
each active in 2 of 10 rooms) and ``--rows`` memory rows written through the store's gateway
(``Store.commit`` with 1000 ``Insert`` changes per ``WriteRequest``: a seeding shortcut without per-row
policy checks). Then, with agent ``a00``:

1. **Single decision** (one resource, one action; ``--n`` samples of each contender after warm-up, the
   contenders interleaved in rotating rounds): (a) raw gRPC ``CerbosServiceStub.CheckResources`` with a
   prebuilt request (the principal and resource attributes the runtime sends) on its own channel, back to
   back; (b) ``PdpAuthorizer.authorize(actor, [Check("state", "k", "write", row)])``: principal from the
   store rows, resource, request, RPC, decode, one-epoch check; (c) the full
   ``World.allowed_actions(actor, "state", "k")``. Target (b)/(a) <= 1.3. Also printed: (b)'s client-side
   steps timed alone, and the raw RPC timed alone when (b)'s client-side steps run (untimed) before it.
2. **Batch of 100** memory rows (``--batch-n`` requests each, interleaved): raw ``CheckResources`` with 100
   prebuilt entries vs ``PdpAuthorizer.decide(actor, 100 Checks)`` (action ``read``); and raw 100 x all 11
   memory actions vs ``World.allowed_actions_batch`` (100 objects). Resources/s; target (b)/(a) >= 0.8.
3. **Projection** over all memory rows (interleaved, ``--proj-rounds`` each): (a) ``World._list(Memory,
   "memory", "memory", actor, {}, order_by=("updated_at_us",), descending=True, limit=None)``: one
   PlanResources, one SQL query with the plan as its WHERE clause, every visible row validated as a
   ``Memory``; (b) the same SELECT without a policy clause (``Reader.rows``); (c) per-object checks: read
   every row, then ``PdpAuthorizer.decide`` over them (the adapter sends 500 per request). The decide part
   of (c) runs on the first ``--check-rows`` rows and is scaled linearly to all rows (printed as
   EXTRAPOLATED; ``--check-rows 0`` runs all rows). (a) and (c) must select the same ids (checked on the
   rows (c) decided). Targets: (a)/(b) <= 3, (c)/(a) >= 50. ``project_world(budget=200)`` is timed too.

Times are wall-clock medians (p95 too for single decisions). This process and the PDP share the machine's
cores; the 1-minute load average at start and end is printed and recorded. This is a benchmark, not a
test: it never fails on a missed target.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import grpc
from cerbos.request.v1 import request_pb2
from cerbos.svc.v1 import svc_pb2_grpc

from engine.models.memory import Memory
from engine.policy import governance
from engine.policy.attributes import principal, resource
from engine.policy.cerbos_adapter import CerbosPdp, _principal, _resource
from engine.policy.enforcement import Check, PdpAuthorizer
from engine.policy.model import ACTIONS, PrincipalRef
from engine.policy.pdp_process import ManagedPdp, cerbos_binary
from engine.runtime import probe_epoch
from engine.sources import SeededIds, SystemClock
from engine.world.book import RuntimeBook
from store import Insert, Store, WriteRequest

REPO = Path(__file__).resolve().parents[1]

TARGET_SINGLE = 1.3  # runtime-mediated single decision <= 1.3 x raw gRPC
TARGET_BATCH = 0.8  # runtime batch rate >= 80 % of the raw batch rate
TARGET_PLAN_VS_SQL = 3.0  # plan-filtered projection <= 3 x unfiltered SQL
TARGET_CHECKS_VS_PLAN = 50.0  # per-object checks >= 50 x slower than the plan filter

N_AGENTS = 50
N_ROOMS = 10
ACTOR = "a00"
STATE_KEY = "k"
ROWS_PER_WRITE = 1000
BATCH = 100
CAPABILITIES = ["memory.invoke", "memory.write", "state.write"]
CLEARANCE = 2

SCOPES = (("private", 40), ("room", 30), ("shared", 25), ("archive", 5))
STATUSES = (("private", 30), ("candidate", 10), ("in_review", 5), ("shared", 30), ("archived", 10),
            ("reopened", 5), ("superseded", 5), ("revoked", 3), ("rejected", 2))
SENSITIVITY = ((0, 50), (1, 25), (2, 15), (3, 10))  # clearance 2: sensitivity 3 is denied
EPISTEMIC = ("observation", "user_statement", "tool_result", "hypothesis", "inference", "decision",
             "verified_fact", "open_question")


# -- timing helpers ---------------------------------------------------------------------------------------


def _pct(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Elapsed(float):
    """Returned by a contender that times only part of its call itself (the rest is untimed set-up)."""


def interleaved(contenders: dict[str, Callable[[], object]], n: int, warmup: int, rounds: int = 10
                ) -> dict[str, list[float]]:
    """Warm every contender up, then time ``n`` calls of each (seconds per call), in ``rounds`` rounds whose
    contender order rotates, so that drift on a shared machine hits every contender alike. A contender
    that returns an :class:`Elapsed` is timed by that value instead."""
    for fn in contenders.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    names = list(contenders)
    per_round = max(1, n // rounds)
    gc.collect()
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            fn, out = contenders[name], samples[name]
            for _ in range(per_round):
                t0 = time.perf_counter()
                result = fn()
                out.append(result if isinstance(result, Elapsed) else time.perf_counter() - t0)
    return samples


def once(fn: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds < 0.01 else f"{seconds * 1e3:.1f} ms"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


@dataclass
class Report:
    figures: dict[str, Any] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)

    def section(self, title: str) -> None:
        self.lines += ["", title, "-" * len(title)]
        print(f"\n{title}\n{'-' * len(title)}", flush=True)

    def row(self, label: str, value: str, note: str = "") -> None:
        line = f"  {label:<58} {value:>16}  {note}".rstrip()
        self.lines.append(line)
        print(line, flush=True)


# -- the world --------------------------------------------------------------------------------------------


def agent_ids() -> list[str]:
    return [f"a{i:02d}" for i in range(N_AGENTS)]


def rooms_of(i: int) -> tuple[str, str]:
    return f"room-{i % N_ROOMS:02d}", f"room-{(i + 3) % N_ROOMS:02d}"


def open_book(directory: Path, pdp: CerbosPdp) -> RuntimeBook:
    """A world on a SQLite file decided by the PDP (as ``Runtime.open`` builds it), with a governor, 50 worker
    agents and 10 rooms (every agent active in two); the runtime's book (``book.world`` is the World)."""
    store = Store(f"sqlite:///{directory / 'world.sqlite'}")
    book = RuntimeBook(store, policy=PdpAuthorizer(pdp, store.read), clock=SystemClock(), ids=SeededIds(7),
                       artifact_dir=directory / "artifacts")
    store.init(book.clock.now_us())
    book.activate_policy_epoch(probe_epoch(pdp), "benchmark")
    book.bootstrap_governor("gov", "Governor", "t-gov")
    world = book.world
    world.activate_session("term:t-gov")
    agents = agent_ids()
    for a in agents:
        world.register_agent(a, a.title(), "worker", f"t-{a}")
        world.activate_session(f"term:t-{a}")
        world.grant("gov", a, capabilities=CAPABILITIES, clearance=CLEARANCE)
    for r in range(N_ROOMS):
        room = f"room-{r:02d}"
        members = [a for i, a in enumerate(agents) if room in rooms_of(i)]
        world.create_room("gov", f"benchmark room {r}", members=members, room_id=room)
    world.compare_and_set_state(ACTOR, STATE_KEY, 0, {"n": 0})
    return book


def _weighted(rng: random.Random, table: Sequence[tuple[Any, int]]) -> Any:
    return rng.choices([v for v, _ in table], weights=[w for _, w in table])[0]


def memory_rows(n: int, start_us: int, seed: int = 11) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    agents = agent_ids()
    rows = []
    for i in range(n):
        scope = _weighted(rng, SCOPES)
        sensitivity = _weighted(rng, SENSITIVITY)
        rows.append({
            "memory_id": f"mem-{i:07d}", "scope": scope, "owner": rng.choice(agents),
            "room_id": f"room-{rng.randrange(N_ROOMS):02d}" if scope == "room" else None,
            "epistemic_type": rng.choice(EPISTEMIC), "content": f"benchmark memory item {i}",
            "source_refs": [], "confidence": round(rng.random(), 3), "status": _weighted(rng, STATUSES),
            "reviewer": rng.choice(agents) if rng.random() < 0.05 else None, "supersedes": None,
            "superseded_by": None, "permission_scope": {"sensitivity": sensitivity} if sensitivity else {},
            "valid_from_us": start_us + i, "valid_to_us": None, "expires_at_us": None,
            "created_at_us": start_us + i, "updated_at_us": start_us + i, "version": 1})
    Memory.model_validate(rows[0])  # the shape the World reads back
    return rows


def populate(book: RuntimeBook, rows: list[dict[str, Any]]) -> None:
    """Seed memory through the write gateway: 1000 inserts per WriteRequest (one event each). A raw set-up
    write no World call makes, so it goes through the runtime's own door."""
    for start in range(0, len(rows), ROWS_PER_WRITE):
        chunk = rows[start:start + ROWS_PER_WRITE]
        book._door.commit(WriteRequest(
            op_id=book.ids.new("op"), command="bench.seed_memory",
            request_hash=hashlib.sha256(f"seed-{start}".encode()).hexdigest(), actor_id="gov",
            event_id=book.ids.new("evt"), event_type="bench.memory_seeded", subject_kind="memory",
            subject_id=chunk[0]["memory_id"], created_at_us=book.clock.now_us(), result={"rows": len(chunk)},
            changes=[Insert("memory", r, "memory", r["memory_id"]) for r in chunk]))


# -- raw gRPC -------------------------------------------------------------------------------------------


class RawCerbos:
    """The floor: prebuilt ``CheckResourcesRequest`` messages sent with the generated stub on its own channel."""

    def __init__(self, address: str) -> None:
        self.channel = grpc.insecure_channel(address)
        self.stub = svc_pb2_grpc.CerbosServiceStub(self.channel)  # type: ignore[no-untyped-call]

    @staticmethod
    def request(book: RuntimeBook, actor: str, resources: Sequence[tuple[str, str, dict[str, Any] | None]],
                actions: Sequence[str]) -> request_pb2.CheckResourcesRequest:
        """The request the runtime would send (same principal and resource attributes), built once."""
        p = _principal(_principal_of(book, actor))
        return request_pb2.CheckResourcesRequest(
            request_id="bench", principal=p, include_meta=True,
            resources=[request_pb2.CheckResourcesRequest.ResourceEntry(
                actions=list(actions), resource=_resource(resource(kind, ident, row)))
                for kind, ident, row in resources])

    def check(self, req: request_pb2.CheckResourcesRequest) -> Any:
        return self.stub.CheckResources(req, timeout=2)

    def close(self) -> None:
        self.channel.close()


# -- sections -------------------------------------------------------------------------------------------


def _principal_of(book: RuntimeBook, actor: str) -> PrincipalRef:
    """What ``PdpAuthorizer`` does first on every call: the principal from the agent's rows (3 reads)."""
    read = book.store.read
    agent = read.get("agents", agent_id=actor)
    assert agent is not None
    return principal(read, agent)


def _request(p: PrincipalRef, resources: Sequence[tuple[str, str, dict[str, Any] | None]],
             actions: Sequence[str]) -> request_pb2.CheckResourcesRequest:
    """The adapter's request build (``CerbosPdp.check``): resource refs, then protobuf messages."""
    return request_pb2.CheckResourcesRequest(
        request_id=str(uuid.uuid4()), principal=_principal(p), include_meta=True,
        resources=[request_pb2.CheckResourcesRequest.ResourceEntry(
            actions=list(actions), resource=_resource(resource(kind, ident, row))) for kind, ident, row in resources])


def rpc_inside(authz: PdpAuthorizer, call: Callable[[], object], n: int) -> dict[str, float]:
    """Median time of ``call``, of the CheckResources RPC it makes, and of the rest (call minus RPC), with the
    adapter's stub method wrapped by a timer for the duration (one RPC per call)."""
    pdp = authz.pdp
    stub = pdp._svc
    original = stub.CheckResources
    rpc: list[float] = []

    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            rpc.append(time.perf_counter() - t0)

    stub.CheckResources = timed
    try:
        calls = interleaved({"call": call}, n, warmup=0)["call"]
    finally:
        stub.CheckResources = original
    assert len(rpc) == len(calls)
    return {"call": statistics.median(calls), "rpc": statistics.median(rpc),
            "rest": statistics.median(c - r for c, r in zip(calls, rpc, strict=True))}


def single_decision(book: RuntimeBook, authz: PdpAuthorizer, raw: RawCerbos, n: int, rep: Report) -> None:
    world = book.world
    rep.section(f"1. Single decision (state 'k', action write; {n} samples each, interleaved)")
    row = book.store.read.get("state_entries", key=STATE_KEY)
    assert row is not None
    asked = [("state", STATE_KEY, row)]
    req = raw.request(book, ACTOR, asked, ["write"])
    resp = raw.check(req)
    assert resp.results[0].actions["write"] == 1, "the benchmark agent must be allowed to write 'k'"
    check = [Check("state", STATE_KEY, "write", row)]
    assert authz.authorize(ACTOR, check)
    res, entry = resource("state", STATE_KEY, row), resp.results[0]

    def raw_after_client_work() -> Elapsed:
        _request(_principal_of(book, ACTOR), asked, ["write"])  # the runtime's client-side steps, untimed
        t0 = time.perf_counter()
        raw.check(req)
        return Elapsed(time.perf_counter() - t0)

    samples = interleaved({
        "raw": lambda: raw.check(req),
        "authorize": lambda: authz.authorize(ACTOR, check),
        "allowed_actions": lambda: world.allowed_actions(ACTOR, "state", STATE_KEY),
        "raw_after_work": raw_after_client_work,
    }, n, warmup=max(50, n // 10))
    p_ref = _principal_of(book, ACTOR)
    steps = interleaved({  # (b)'s client-side steps alone (the code paths the adapter runs), no RPC
        "principal": lambda: _principal_of(book, ACTOR),
        "request": lambda: _request(p_ref, asked, ["write"]),
        "decode": lambda: CerbosPdp._decision(entry, res),
    }, max(200, n // 4), warmup=50)
    inside = rpc_inside(authz, lambda: authz.authorize(ACTOR, check), max(200, n // 2))

    med = {k: statistics.median(v) for k, v in samples.items()}
    p95 = {k: _pct(v, 0.95) for k, v in samples.items()}
    smed = {k: statistics.median(v) for k, v in steps.items()}
    ratio = med["authorize"] / med["raw"]
    ratio_aa = med["allowed_actions"] / med["raw"]
    rep.row("(a) raw gRPC CheckResources, prebuilt, back to back", ms(med["raw"]), f"p95 {ms(p95['raw'])}")
    rep.row("(b) PdpAuthorizer.authorize", ms(med["authorize"]), f"p95 {ms(p95['authorize'])}")
    rep.row("(c) World.allowed_actions (row read + 3 actions)", ms(med["allowed_actions"]),
            f"p95 {ms(p95['allowed_actions'])}")
    rep.row("    (b) step: principal from store (3 Reader reads)", ms(smed["principal"]))
    rep.row("    (b) step: resource + protobuf request build", ms(smed["request"]))
    rep.row("    (b) step: decode response into a Decision", ms(smed["decode"]))
    rep.row("    (a) RPC alone, after (b)'s client steps (untimed)", ms(med["raw_after_work"]),
            f"p95 {ms(p95['raw_after_work'])}")
    rep.row("    (b) again, with its RPC timed inside: RPC / the rest", f"{ms(inside['rpc'])} / {ms(inside['rest'])}",
            f"(b) {ms(inside['call'])}")
    rep.row("ratio (b)/(a)   target <= 1.3", f"{ratio:.2f}x", verdict(ratio <= TARGET_SINGLE))
    rep.row("ratio (c)/(a)   (info)", f"{ratio_aa:.2f}x")
    rep.figures["single"] = {
        "n": n, **{f"{k}_median_s": v for k, v in med.items()}, **{f"{k}_p95_s": v for k, v in p95.items()},
        **{f"step_{k}_s": v for k, v in smed.items()},
        **{f"inside_authorize_{k}_median_s": v for k, v in inside.items()},
        "ratio_authorize_over_raw": ratio, "ratio_allowed_actions_over_raw": ratio_aa,
        "target": TARGET_SINGLE, "pass": ratio <= TARGET_SINGLE}


def batch_decisions(book: RuntimeBook, authz: PdpAuthorizer, raw: RawCerbos, rows: list[dict[str, Any]], n: int,
                    rep: Report) -> None:
    world = book.world
    rep.section(f"2. Batch of {BATCH} memory rows ({n} requests each, interleaved)")
    picked = rows[:BATCH]
    all_actions = list(ACTIONS["memory"])
    asked = [("memory", str(r["memory_id"]), r) for r in picked]
    req_read = raw.request(book, ACTOR, asked, ["read"])
    req_all = raw.request(book, ACTOR, asked, all_actions)
    checks = [Check("memory", r["memory_id"], "read", r) for r in picked]
    objects = [("memory", r["memory_id"]) for r in picked]
    resp = raw.check(req_read)
    raw_allowed = [e.actions["read"] == 1 for e in resp.results]
    ours = [d.allowed("read") for d in authz.decide(ACTOR, checks)]
    assert raw_allowed == ours, "raw and runtime decisions differ"
    samples = interleaved({
        "raw_read": lambda: raw.check(req_read),
        "decide": lambda: authz.decide(ACTOR, checks),
        "raw_all": lambda: raw.check(req_all),
        "allowed_actions_batch": lambda: world.allowed_actions_batch(ACTOR, objects),
    }, n, warmup=max(10, n // 10))
    p_ref = _principal_of(book, ACTOR)
    refs = [resource(k, i, r) for k, i, r in asked]
    read = book.store.read
    steps = interleaved({  # decide's client-side steps alone, no RPC
        "principal": lambda: _principal_of(book, ACTOR),
        "request": lambda: _request(p_ref, asked, ["read"]),
        "decode": lambda: [CerbosPdp._decision(e, r) for e, r in zip(resp.results, refs, strict=True)],
        "row_reads": lambda: [read.get("memory", memory_id=i) for _, i, _ in asked],
    }, max(20, n // 4), warmup=5)
    med = {k: statistics.median(v) for k, v in samples.items()}
    smed = {k: statistics.median(v) for k, v in steps.items()}
    rate = {k: BATCH / v for k, v in med.items()}
    ratio = rate["decide"] / rate["raw_read"]
    ratio_all = rate["allowed_actions_batch"] / rate["raw_all"]
    rep.row("(a) raw gRPC, 100 resources x read", f"{rate['raw_read']:,.0f} res/s", ms(med["raw_read"]))
    rep.row("(b) PdpAuthorizer.decide, 100 Checks", f"{rate['decide']:,.0f} res/s", ms(med["decide"]))
    rep.row("    (b) step: principal from store (3 Reader reads)", ms(smed["principal"]))
    rep.row("    (b) step: 100 resources + protobuf request build", ms(smed["request"]))
    rep.row("    (b) step: decode 100 results into Decisions", ms(smed["decode"]))
    rep.row(f"(a') raw gRPC, 100 resources x {len(all_actions)} actions", f"{rate['raw_all']:,.0f} res/s",
            ms(med["raw_all"]))
    rep.row("(b') World.allowed_actions_batch, 100 objects", f"{rate['allowed_actions_batch']:,.0f} res/s",
            ms(med["allowed_actions_batch"]))
    rep.row("    (b') step: 100 row reads (one Reader.get each)", ms(smed["row_reads"]))
    rep.row("ratio (b)/(a) rate   target >= 0.8", f"{ratio:.2f}", verdict(ratio >= TARGET_BATCH))
    rep.row("ratio (b')/(a') rate (info)", f"{ratio_all:.2f}")
    rep.figures["batch"] = {
        "batch": BATCH, "n": n, "allowed_in_batch": sum(ours),
        **{f"{k}_median_s": v for k, v in med.items()}, **{f"{k}_per_s": v for k, v in rate.items()},
        **{f"step_{k}_s": v for k, v in smed.items()},
        "ratio_decide_over_raw": ratio, "ratio_allowed_actions_batch_over_raw_all": ratio_all,
        "target": TARGET_BATCH, "pass": ratio >= TARGET_BATCH}


def projection(book: RuntimeBook, authz: PdpAuthorizer, n_rows: int, rounds: int, check_rows: int,
               rep: Report) -> None:
    world = book.world
    rep.section(f"3. Projection over {n_rows:,} memory rows for agent {ACTOR} (median of {rounds})")
    read = book.store.read
    order: dict[str, Any] = {"order_by": ("updated_at_us",), "descending": True}

    plan = authz.plan(ACTOR, "memory", "read")
    visible_rows = read.rows_allowed("memory", plan, {}, limit=None, **order)  # untimed: also the warm-up
    plan_ids = {m.memory_id for m in world._list(Memory, "memory", "memory", ACTOR, {}, limit=None, **order)}
    assert plan_ids == {r["memory_id"] for r in visible_rows}
    t_models, _ = once(lambda: [Memory.model_validate(r) for r in visible_rows])
    visible_rows.clear()
    samples = interleaved({  # results are dropped at once: at most one big result set alive at a time
        "list": lambda: len(world._list(Memory, "memory", "memory", ACTOR, {}, limit=None, **order)),
        "rows_allowed": lambda: len(read.rows_allowed("memory", plan, {}, limit=None, **order)),
        "rows": lambda: len(read.rows("memory", {}, limit=None, **order)),
        "project": lambda: world.project_world(ACTOR, budget=200),
    }, rounds, warmup=0, rounds=rounds)
    t_list, t_allowed, t_rows, t_project = (samples[k] for k in ("list", "rows_allowed", "rows", "project"))
    t_plan = interleaved({"plan": lambda: authz.plan(ACTOR, "memory", "read")}, 50, warmup=5)["plan"]
    view = world.project_world(ACTOR, budget=200)

    # (c) per-object checks: read every row (timed at full size), then ask the PDP about each row (the adapter
    # sends 500 per request); on a --check-rows subset the decide part is timed there and scaled linearly.
    t_read_all, rows = once(lambda: read.rows("memory", {}, limit=None, **order))
    subset = rows if check_rows <= 0 or check_rows >= len(rows) else rows[:check_rows]
    scale = len(rows) / len(subset)
    subset_ids = {r["memory_id"] for r in subset}

    def decide_all() -> set[str]:
        checks = [Check("memory", str(r["memory_id"]), "read", r) for r in subset]
        return {d.id for d in authz.decide(ACTOR, checks) if d.allowed("read")}

    t_decide, check_ids = once(decide_all)
    t_checks = t_read_all + t_decide * scale
    same = check_ids == plan_ids & subset_ids

    med = statistics.median
    a, b = med(t_list), med(t_rows)
    ratio_ab, ratio_ca = a / b, t_checks / a
    extrap = "measured" if scale == 1 else f"EXTRAPOLATED: decide timed on {n_rows / scale:,.0f} rows x {scale:.1f}"
    rep.row("rows in table / visible to the agent", f"{n_rows:,} / {len(plan_ids):,}")
    rep.row("(a) plan filter: World._list (PlanResources+SQL+models)", ms(a))
    rep.row("    (a) step: PlanResources (PdpAuthorizer.plan)", ms(med(t_plan)))
    rep.row("    (a) step: SQL with the plan clause (rows_allowed, dicts)", ms(med(t_allowed)))
    rep.row("    (a) step: Memory.model_validate of the visible rows", ms(t_models))
    rep.row("(b) unfiltered SQL: Reader.rows (all rows, dicts)", ms(b))
    rep.row("(c) per-object checks: read all + decide (500/request)", ms(t_checks), extrap)
    rep.row("    (c) step: read all rows", ms(t_read_all))
    rep.row("    (c) step: PdpAuthorizer.decide over all rows", ms(t_decide * scale),
            f"{n_rows / (t_decide * scale):,.0f} rows/s")
    rep.row("(info) (a) per visible row / (c) per table row",
            f"{a / max(1, len(plan_ids)) * 1e6:.1f} us / {t_checks / n_rows * 1e6:.1f} us")
    rep.row("(info) World.project_world(budget=200)", ms(med(t_project)),
            f"{len(view.shared_facts) + len(view.working_memory)} memory items kept")
    rep.row("(a) and (c) select the same ids", "yes" if same else "NO",
            f"{len(check_ids):,} ids" + ("" if scale == 1 else f" in the first {n_rows / scale:,.0f} rows"))
    rep.row("ratio (a)/(b)   target <= 3", f"{ratio_ab:.2f}x", verdict(ratio_ab <= TARGET_PLAN_VS_SQL))
    rep.row("ratio (c)/(a)   target >= 50", f"{ratio_ca:.1f}x", verdict(ratio_ca >= TARGET_CHECKS_VS_PLAN))
    rep.figures["projection"] = {
        "rows": n_rows, "visible": len(plan_ids), "rounds": rounds,
        "plan_s": med(t_plan), "list_s": a, "rows_allowed_s": med(t_allowed), "model_validate_visible_s": t_models,
        "rows_unfiltered_s": b, "project_world_s": med(t_project),
        "per_object_checks_s": t_checks, "per_object_read_all_s": t_read_all,
        "per_object_decide_measured_s": t_decide, "per_object_decide_rows": round(n_rows / scale),
        "per_object_extrapolated": scale != 1, "same_ids": same,
        "ratio_plan_over_sql": ratio_ab, "ratio_checks_over_plan": ratio_ca,
        "target_plan_over_sql": TARGET_PLAN_VS_SQL, "target_checks_over_plan": TARGET_CHECKS_VS_PLAN,
        "pass_plan_over_sql": ratio_ab <= TARGET_PLAN_VS_SQL,
        "pass_checks_over_plan": ratio_ca >= TARGET_CHECKS_VS_PLAN}


# -- main -----------------------------------------------------------------------------------------------


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "?"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000, help="memory rows for the projection (default 100000)")
    ap.add_argument("--n", type=int, default=2000, help="single-decision samples per contender (default 2000)")
    ap.add_argument("--batch-n", type=int, default=200, help="batch-of-100 requests per contender (default 200)")
    ap.add_argument("--proj-rounds", type=int, default=3, help="timed rounds per projection contender (default 3)")
    ap.add_argument("--check-rows", type=int, default=20_000,
                    help="per-object checks: PDP decisions on the first K rows, scaled to all rows "
                         "(default 20000; 0: all rows, no extrapolation)")
    ap.add_argument("--json", type=Path, help="also write the figures as JSON to this file")
    args = ap.parse_args(argv)
    if args.rows < BATCH or args.n < 10 or args.batch_n < 10 or args.proj_rounds < 1:
        ap.error(f"--rows must be >= {BATCH}, --n and --batch-n >= 10, --proj-rounds >= 1")

    rep = Report()
    rep.figures["env"] = {
        "python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count(),
        "cerbos_binary": str(cerbos_binary()), "grpcio": _version("grpcio"), "cerbos_sdk": _version("cerbos"),
        "protobuf": _version("protobuf"), "sqlalchemy": _version("sqlalchemy"), "loadavg_start": os.getloadavg(),
        "args": {
            k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}}
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="pmw-policy-bench-"))
    managed: ManagedPdp | None = None
    pdp: CerbosPdp | None = None
    raw: RawCerbos | None = None
    book: RuntimeBook | None = None
    try:
        t0 = time.perf_counter()
        deployment = governance.deploy(REPO / "policies", tmp / "policy-deploys")
        managed = ManagedPdp(tmp / "policy-deploys" / "current")
        address = managed.start()
        print(f"policies deployed (epoch {deployment.epoch}) and PDP pid {managed.pid} healthy on {address.grpc} "
              f"in {time.perf_counter() - t0:.1f} s", flush=True)
        pdp = CerbosPdp(address)
        raw = RawCerbos(address.grpc)
        t0 = time.perf_counter()
        book = open_book(tmp, pdp)
        world = book.world
        authz = book.policy
        assert isinstance(authz, PdpAuthorizer)
        rows = memory_rows(args.rows, world.clock.now_us() - 10 * args.rows)
        populate(book, rows)
        assert book.store.read.count("memory") == args.rows
        print(f"world seeded: {N_AGENTS} agents, {N_ROOMS} rooms, {args.rows:,} memory rows "
              f"in {time.perf_counter() - t0:.1f} s", flush=True)
        single_decision(book, authz, raw, args.n, rep)
        batch_decisions(book, authz, raw, rows, args.batch_n, rep)
        del rows
        projection(book, authz, args.rows, args.proj_rounds, args.check_rows, rep)
    finally:
        if book is not None:
            book.close()
        if raw is not None:
            raw.close()
        if pdp is not None:
            pdp.close()
        if managed is not None:
            managed.stop()  # by its PID
            # ManagedPdp.stop() leaves its own work directory (config, log) behind: remove it too.
            shutil.rmtree(managed._workdir, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
    total = time.perf_counter() - started
    rep.figures["total_s"] = total
    rep.figures["env"]["loadavg_end"] = os.getloadavg()
    load = rep.figures["env"]["loadavg_start"][0], rep.figures["env"]["loadavg_end"][0]
    print(f"\ntotal {total:.0f} s on {os.cpu_count()} CPUs, 1-min load average {load[0]:.1f} at start and "
          f"{load[1]:.1f} at end; targets are reported, never enforced (a benchmark, not a test)")
    if args.json:
        args.json.write_text(json.dumps(rep.figures, indent=2, sort_keys=True) + "\n")
        print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
