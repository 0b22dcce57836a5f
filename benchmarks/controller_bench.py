"""Controller benchmark: decisions per second at 1k live facts per world, against a plain-Python ladder.

Run from the repository root (``docs/benchmarks-controller.md`` has the figures and their interpretation)::

    .venv/bin/python -m benchmarks.controller_bench [--events 20000] [--rounds 3] [--batch 256] [--quick | --ci]
                                                    [--json FILE]

Two scenarios, each run by the durable_rules controller (``engine.controller.Controller.observe_step``) and
by the plain-Python baseline (``benchmarks.plain_ladder.PlainController``, the same envelope: event and fact
validation, decision models, net fact changes) over the same events from the same 1,000 live facts:

1. **ladder**: the storm ladder alone. Rules: ``rules/wake_storm.yaml`` plus the handoff rule of
   ``rules/wake_targeting.yaml`` (the one way a wake candidate enters the controller); every event is a
   ``handoff.created`` that posts one candidate, which the ladder decides (TTL, depth, dedupe, cooldown,
   budget or allow). The 1,000 live facts are controller facts the ladder joins on: 800 ``woken`` facts of
   older chains, 100 ``cooldown`` and 100 ``budget`` facts.
2. **full**: ``observe_step`` with the shipped ``rules/`` directory (every rule file). The 1,000 live facts
   are 800 world facts (tasks, subscriptions, rooms, members, contexts, reviewers, claims, edges) and 200
   controller facts. Events: task updates (each carrying the task fact's upsert; wakes the owner and the
   subscriber), state changes (two subscribers), room messages (the other members), handoffs (the target)
   and high-risk capability calls (a forced refresh when the actor's context has expired).

Four contenders per scenario (issue 12, item 6: the events of one log batch posted together):

* **one at a time**: ``Controller.observe_step`` per event;
* **batched**: ``benchmarks.controller_batch.observe_batch`` over batches of ``--batch`` events (the run
  loop's batch), whose contract is the one-at-a-time result;
* **engine batch**: ``benchmarks.controller_batch.post_together``, durable_rules' own batch (every event
  fact of a batch in one ``assert_facts``, one dispatch), which is not equivalent by design;
* **plain**: the plain-Python baseline.

Each round builds a fresh controller per contender and a fresh baseline (untimed: rule compile, rebuild
from the facts) and times one pass over the events for each, the order rotating from round to round.
Rates are decisions per second of wall-clock time (medians of the rounds); CPU time of the process and the
1-minute load average are recorded. Before the figures count, the benchmark checks that one at a time and
the plain baseline produced the same decisions (every field but the index within an event, compared per
event) and the same fact changes for every event; and it reports, per event, whether each batched
contender gave exactly the one-at-a-time step (decisions in order with their indexes, fact changes) and
the same facts at the end.

Targets (issue 4): >= 20,000 decisions/s, and the controller's cost <= 2x the plain ladder's. This is a
benchmark, not a test: it prints PASS/MISS and exits 0 (1 only if the controller and the plain baseline
disagree on a decision, or ``observe_batch`` is not exactly one at a time; the engine batch may differ).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol

from benchmarks.controller_batch import observe_batch, post_together
from benchmarks.plain_ladder import PlainController, PlainLadder, storm_constants
from engine.controller import Controller, EngineFailure, Observation, Step

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "rules"

TARGET_RATE = 20_000.0  # decisions per second
TARGET_RATIO = 2.0  # controller cost <= 2 x the plain ladder's

WORLD = "w-bench"
T0 = 1_700_000_000_000_000  # logical microseconds
SECOND = 1_000_000
STEP_US = SECOND  # logical time between events
N_AGENTS = 100
LIVE_FACTS = 1000
CHAIN_LEN = 5  # events per chain
STALE_EVERY = 25  # every 25th chain began beyond the TTL
FAR = T0 + 10**12  # an `until` beyond any run


def agents() -> list[str]:
    return [f"a{i:03d}" for i in range(N_AGENTS)]


# -- the worlds ---------------------------------------------------------------------------------------------


def controller_facts(rng: random.Random, woken: int) -> list[dict[str, Any]]:
    """``woken`` woken facts of older chains (live for the whole run), a cooldown and a budget per agent."""
    ags = agents()
    out: list[dict[str, Any]] = []
    for i in range(woken):
        chain, agent = f"old{i}", rng.choice(ags)
        out.append({"id": f"woken:{chain}:{agent}", "kind": "woken", "key": f"{chain}:{agent}", "chain": chain,
                    "agent": agent, "until": FAR + i})
    for a in ags:
        out.append({"id": f"cooldown:{a}", "kind": "cooldown", "key": a, "agent": a,
                    "until": T0 + rng.randrange(0, 3 * SECOND)})
        out.append({"id": f"budget:{a}", "kind": "budget", "key": a, "agent": a, "used": rng.randrange(0, 20),
                    "until": T0 + rng.randrange(1, 3600) * SECOND})
    return out


N_TASKS, N_STATES, N_ROOMS, ROOM_SIZE = 150, 75, 20, 4


def world_facts(rng: random.Random) -> list[dict[str, Any]]:
    """800 world facts; no event's targets name one agent twice (so decisions within an event are independent
    of the order the rules fire in)."""
    ags = agents()
    out: list[dict[str, Any]] = []
    for i in range(N_TASKS):
        owner, sub = rng.sample(ags, 2)
        out.append({"id": f"task:t{i}", "kind": "task", "key": f"t{i}", "owner": owner, "status": "open"})
        out.append({"id": f"sub:t{i}:{sub}", "kind": "subscription", "key": f"t{i}", "agent": sub})
    for i in range(N_STATES):
        for a in rng.sample(ags, 2):
            out.append({"id": f"sub:s{i}:{a}", "kind": "subscription", "key": f"s{i}", "agent": a})
    for i in range(N_ROOMS):
        out.append({"id": f"room:r{i}", "kind": "room", "key": f"r{i}", "status": "open", "topic": f"topic {i}"})
        for a in rng.sample(ags, ROOM_SIZE):
            out.append({"id": f"member:r{i}:{a}", "kind": "member", "key": f"r{i}", "agent": a})
    for i, a in enumerate(ags):
        valid = FAR if i % 2 == 0 else T0 - SECOND  # half the agents' contexts have expired
        out.append({"id": f"context:{a}", "kind": "context", "key": a, "agent": a, "valid_until": valid})
    for a in ags[:10]:
        out.append({"id": f"reviewer:{a}", "kind": "reviewer", "key": a, "agent": a, "scope": "memory"})
    for i in range(60):
        a = rng.choice(ags)
        out.append({"id": f"claim:k{i}:{a}", "kind": "claim", "key": f"k{i}", "agent": a, "value": i,
                    "claim": f"st_{i}"})
    for i in range(80):
        src, dst = rng.sample(ags, 2)
        out.append({"id": f"edge:{i}", "kind": "edge", "key": f"{src}:{dst}", "src": src, "dst": dst,
                    "edge_type": "info"})
    return out


@dataclass(frozen=True)
class Input:
    event: dict[str, Any]
    upserts: tuple[dict[str, Any], ...] = ()


def _event(seq: int, actor: str, event_type: str, subject_kind: str, subject: str, payload: dict[str, Any],
           rng: random.Random) -> dict[str, Any]:
    """A World event as the run loop hands it over: chains of CHAIN_LEN events, some stale, depths 0..4."""
    chain_no = seq // CHAIN_LEN
    origin = T0 + chain_no * CHAIN_LEN * STEP_US - (700 * SECOND if chain_no % STALE_EVERY == 0 else 0)
    now = T0 + seq * STEP_US
    return {"seq": seq, "event_id": f"evt_{seq}", "event_type": event_type, "actor_id": actor,
            "subject_kind": subject_kind, "subject_id": subject, "payload": payload,
            "correlation_id": f"c{chain_no}", "created_at_us": now,
            "cascade_depth": rng.choice((0, 0, 0, 1, 1, 2, 3, 4)), "chain_origin_us": min(origin, now),
            "op_id": f"op_{seq}", "command": "bench"}


def ladder_inputs(n: int, rng: random.Random) -> list[Input]:
    """Handoffs: each chain hands work to three agents in turn (dedupe), across 100 agents (cooldown and
    budget), some chains stale (TTL) or deep (depth)."""
    ags = agents()
    out: list[Input] = []
    for seq in range(1, n + 1):
        chain_no = seq // CHAIN_LEN
        target = ags[(chain_no * 7 + rng.randrange(3)) % N_AGENTS]
        actor = rng.choice([a for a in (ags[(chain_no * 7 + 50) % N_AGENTS], ags[seq % N_AGENTS]) if a != target])
        payload = {"target_agent": target, "task_id": f"t{seq % N_TASKS}"}
        out.append(Input(_event(seq, actor, "handoff.created", "handoff", f"hof_{seq}", payload, rng)))
    return out


def full_inputs(n: int, rng: random.Random, facts: list[dict[str, Any]]) -> list[Input]:
    """The full mix (see the module doc); every task update carries the task fact's new status."""
    ags = agents()
    tasks = {f["key"]: f for f in facts if f["kind"] == "task"}
    out: list[Input] = []
    for seq in range(1, n + 1):
        roll = rng.random()
        actor = rng.choice(ags)
        if roll < 0.35:
            key = f"t{rng.randrange(N_TASKS)}"
            task = {**tasks[key], "status": ("open", "active", "review")[seq % 3]}
            ev = _event(seq, actor, "task.updated", "task", key, {"status": task["status"]}, rng)
            out.append(Input(ev, (task,)))
        elif roll < 0.55:
            ev = _event(seq, actor, "state.set", "state", f"s{rng.randrange(N_STATES)}", {"version": seq}, rng)
            out.append(Input(ev))
        elif roll < 0.80:
            ev = _event(seq, actor, "room.message", "room", f"r{rng.randrange(N_ROOMS)}", {"text": "hello"}, rng)
            out.append(Input(ev))
        elif roll < 0.95:
            target = rng.choice([a for a in ags if a != actor])
            ev = _event(seq, actor, "handoff.created", "handoff", f"hof_{seq}",
                        {"target_agent": target, "task_id": f"t{seq % N_TASKS}"}, rng)
            out.append(Input(ev))
        else:
            ev = _event(seq, actor, "capability.invoked", "capability", "shell", {"risk": "high"}, rng)
            out.append(Input(ev))
    return out


# -- contenders -------------------------------------------------------------------------------------------


class Observer(Protocol):
    def observe_step(self, event: Any, *, upserts: Sequence[Any] = ..., retracts: Sequence[str] = ...) -> Step:
        ...


def make_controller(rule_dir: Path, facts: list[dict[str, Any]]) -> Controller:
    ctl = Controller(WORLD, rule_dir)
    ctl.load()
    ctl.rebuild(facts)
    return ctl


def make_plain(rule_dir: Path, facts: list[dict[str, Any]], *, targeting: bool) -> PlainController:
    c = storm_constants(rule_dir)
    ladder = PlainLadder(c["max_depth"], c["ttl_us"], c["cooldown_us"], c["budget"], c["budget_window_us"],
                         max_deferrals=c["max_deferrals"])
    plain = PlainController(WORLD, ladder, targeting=targeting)
    plain.rebuild(facts)
    return plain


@dataclass
class Run:
    wall: float
    cpu: float
    steps: list[Step]
    retried: list[str] = field(default_factory=list)
    facts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def decisions(self) -> int:
        return sum(len(s.decisions) for s in self.steps)


def timed(observer: Observer, inputs: list[Input]) -> Run:
    """One pass. An ``EngineFailure`` (the step was rolled back and the controller rebuilt its host from the
    restored facts) is retried once, as the run loop would; the retries are counted and reported."""
    steps: list[Step] = []
    retried: list[str] = []
    append = steps.append
    gc.collect()
    c0, t0 = time.process_time(), time.perf_counter()
    for item in inputs:  # bounded: one pass over the prepared events, at most one retry each
        try:
            append(observer.observe_step(item.event, upserts=item.upserts))
        except EngineFailure as exc:
            retried.append(f"seq {item.event['seq']}: {exc}")
            append(observer.observe_step(item.event, upserts=item.upserts))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return Run(wall, cpu, steps, retried)


def timed_batches(ctl: Controller, inputs: list[Input], size: int, *, engine_batch: bool) -> Run:
    """One pass in batches of ``size`` (``observe_batch``, or ``post_together`` with ``engine_batch``).
    A batch that fails with ``EngineFailure`` is retried once from its failing event (``observe_batch``:
    the steps before it stand) or whole (``post_together``: nothing of it was observed)."""
    observations = [Observation(i.event, i.upserts) for i in inputs]
    steps: list[Step] = []
    retried: list[str] = []
    gc.collect()
    c0, t0 = time.process_time(), time.perf_counter()
    for start in range(0, len(observations), size):  # bounded: one pass, at most one retry per batch
        batch = observations[start:start + size]
        if engine_batch:
            try:
                steps.extend(post_together(ctl, batch).steps)
            except EngineFailure as exc:
                retried.append(f"batch at seq {batch[0].event['seq']}: {exc}")
                steps.extend(post_together(ctl, batch).steps)
            continue
        result = observe_batch(ctl, batch)
        steps.extend(result.steps)
        if result.error is not None:
            if not isinstance(result.error, EngineFailure):
                raise result.error
            retried.append(f"seq {batch[len(result.steps)].event['seq']}: {result.error}")
            again = observe_batch(ctl, batch[len(result.steps):])
            if again.error is not None:
                raise again.error
            steps.extend(again.steps)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return Run(wall, cpu, steps, retried)


def _exact_step(step: Step) -> tuple[Any, ...]:
    return (step.position, [d.model_dump(mode="json") for d in step.decisions],
            sorted(json.dumps(f, sort_keys=True) for f in step.changes.upserted), sorted(step.changes.retracted))


def same_as_one_at_a_time(one: Run, other: Run) -> dict[str, Any]:
    """Per event: exactly the same step (decisions in order, with indexes; fact changes)? Which part
    differs, and are the facts the same at the end?"""
    decisions = changes = 0
    first = ""
    for a, b in zip(one.steps, other.steps, strict=True):
        ea, eb = _exact_step(a), _exact_step(b)
        decisions += ea[1] != eb[1]
        changes += ea[2:] != eb[2:]
        if ea != eb and not first:
            first = f"event {a.position}: one at a time {ea!r} != {eb!r}"
    facts = sorted(json.dumps(f, sort_keys=True) for f in one.facts) == sorted(
        json.dumps(f, sort_keys=True) for f in other.facts)
    return {"events_with_other_decisions": decisions, "events_with_other_fact_changes": changes,
            "same_facts_at_end": facts, "first_difference": first[:400],
            "identical": decisions == 0 and changes == 0 and facts}


def _canon_step(step: Step) -> tuple[Any, ...]:
    decisions = sorted(json.dumps({k: v for k, v in d.model_dump(mode="json").items() if k != "index"},
                                  sort_keys=True) for d in step.decisions)
    indexes = sorted(d.index for d in step.decisions)
    upserted = sorted(json.dumps(f, sort_keys=True) for f in step.changes.upserted)
    return (step.position, decisions, indexes, upserted, sorted(step.changes.retracted))


def compare(a: list[Step], b: list[Step]) -> tuple[bool, str, int]:
    """Same decisions and fact changes for every event; the number of events decided in the same order."""
    same_order = 0
    for sa, sb in zip(a, b, strict=True):
        ca, cb = _canon_step(sa), _canon_step(sb)
        if ca != cb:
            return False, f"event {sa.position}: controller {ca!r} != plain {cb!r}", same_order
        same_order += [d.model_dump() for d in sa.decisions] == [d.model_dump() for d in sb.decisions]
    return True, "", same_order


# -- the report -------------------------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def row(label: str, value: str, note: str = "") -> None:
    print(f"  {label:<46} {value:>14}  {note}".rstrip(), flush=True)


@dataclass
class Scenario:
    name: str
    title: str
    rule_dir: Path
    facts: list[dict[str, Any]]
    inputs: list[Input]
    targeting: bool
    figures: dict[str, Any] = field(default_factory=dict)


CONTENDERS = ("controller", "batched", "engine_batch", "plain")
LABELS = {"controller": "one at a time", "batched": "batched (observe_batch)",
          "engine_batch": "engine batch (post_together)", "plain": "plain"}


def run_scenario(sc: Scenario, rounds: int, batch: int) -> bool:
    print(f"\n{sc.title}\n{'-' * len(sc.title)}", flush=True)
    runs: dict[str, list[Run]] = {name: [] for name in CONTENDERS}
    live: tuple[int, int] = (0, 0)
    for r in range(rounds):
        shift = r % len(CONTENDERS)
        for name in CONTENDERS[shift:] + CONTENDERS[:shift]:
            if name == "plain":
                runs[name].append(timed(make_plain(sc.rule_dir, sc.facts, targeting=sc.targeting), sc.inputs))
                continue
            ctl = make_controller(sc.rule_dir, sc.facts)
            try:
                start = len(ctl.facts())
                if name == "controller":
                    run = timed(ctl, sc.inputs)
                    live = (start, len(ctl.facts()))
                else:
                    run = timed_batches(ctl, sc.inputs, batch, engine_batch=name == "engine_batch")
                run.facts = ctl.facts()
                runs[name].append(run)
            finally:
                ctl.close()
    same, why, same_order = compare(runs["controller"][0].steps, runs["plain"][0].steps)
    n_events = len(sc.inputs)
    n_dec = runs["controller"][0].decisions
    kinds: dict[str, int] = {}
    for step in runs["controller"][0].steps:
        for d in step.decisions:
            label = getattr(d, "reason", None) if d.kind == "suppress" else d.kind
            kinds[str(label)] = kinds.get(str(label), 0) + 1
    med: dict[str, dict[str, Any]] = {}
    for name, rs in runs.items():
        wall = statistics.median(r.wall for r in rs)
        cpu = statistics.median(r.cpu for r in rs)
        med[name] = {"wall_s": wall, "cpu_s": cpu, "rate": n_dec / wall, "cpu_rate": n_dec / cpu,
                     "us_per_decision": wall / n_dec * 1e6, "us_per_event": wall / n_events * 1e6,
                     "walls": [r.wall for r in rs], "cpus": [r.cpu for r in rs]}
    ratio = med["controller"]["wall_s"] / med["plain"]["wall_s"]
    ratio_cpu = med["controller"]["cpu_s"] / med["plain"]["cpu_s"]
    row("events / decisions per pass", f"{n_events:,} / {n_dec:,}",
        "  ".join(f"{k} {v:,}" for k, v in sorted(kinds.items())))
    row("live facts (controller, start -> end of a pass)", f"{live[0]:,} -> {live[1]:,}")
    retried = [x for name in CONTENDERS[:3] for r in runs[name] for x in r.retried]
    row("engine failures retried (all rounds, durable)", f"{len(retried)}", "; ".join(retried[:3]))
    row("same decisions and fact changes", "yes" if same else "NO",
        f"(same order within every event: {same_order:,} of {n_events:,})" if same else why[:300])
    batched = {name: same_as_one_at_a_time(runs["controller"][0], runs[name][0])
               for name in ("batched", "engine_batch")}
    for name in ("batched", "engine_batch"):
        b = batched[name]
        note = ("decisions, order, indexes, fact changes and final facts" if b["identical"] else
                f"other decisions in {b['events_with_other_decisions']:,} and other fact changes in "
                f"{b['events_with_other_fact_changes']:,} of {n_events:,} events; same facts at the end: "
                f"{'yes' if b['same_facts_at_end'] else 'no'}")
        row(f"{LABELS[name]} == one at a time", "yes" if b["identical"] else "NO", note)
    for name in CONTENDERS:
        m = med[name]
        label = LABELS[name]
        row(f"{label}: decisions/s (wall)", f"{m['rate']:,.0f}",
            f"{m['us_per_decision']:.1f} us/decision, {m['us_per_event']:.1f} us/event")
        row(f"{label}: decisions/s (CPU)", f"{m['cpu_rate']:,.0f}",
            "wall s per round: " + ", ".join(f"{w:.2f}" for w in m["walls"])
            + "; CPU s: " + ", ".join(f"{c:.2f}" for c in m["cpus"]))
    row("one at a time / plain cost (wall; CPU)", f"{ratio:.2f}x", f"CPU {ratio_cpu:.2f}x")
    for name in ("batched", "engine_batch"):
        m = med[name]
        row(f"{LABELS[name]} / one at a time (CPU)", f"{m['cpu_s'] / med['controller']['cpu_s']:.2f}x",
            f"/ plain: {m['cpu_s'] / med['plain']['cpu_s']:.2f}x CPU, {m['wall_s'] / med['plain']['wall_s']:.2f}x wall")
    rate_ok = med["controller"]["rate"] >= TARGET_RATE
    ratio_ok = ratio <= TARGET_RATIO
    row(f"target >= {TARGET_RATE:,.0f} decisions/s", verdict(rate_ok))
    row(f"target <= {TARGET_RATIO:.0f}x the plain ladder", verdict(ratio_ok))
    sc.figures = {"events": n_events, "decisions": n_dec, "by_kind": kinds, "live_facts": live,
                  "same_decisions": same, "mismatch": why, "same_order_events": same_order,
                  "controller": med["controller"], "plain": med["plain"], "ratio_wall": ratio,
                  "batched": {**med["batched"], **batched["batched"]},
                  "engine_batch": {**med["engine_batch"], **batched["engine_batch"]}, "batch_size": batch,
                  "ratio_cpu": ratio_cpu, "engine_failures_retried": retried, "pass_rate": rate_ok,
                  "pass_ratio": ratio_ok}
    return same and batched["batched"]["identical"]


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "?"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--events", type=int, default=20_000, help="events per pass and scenario (default 20000)")
    ap.add_argument("--rounds", type=int, default=3, help="timed passes per contender; medians (default 3)")
    ap.add_argument("--batch", type=int, default=256, help="events per batch for the batched contenders "
                    "(default 256, the run loop's batch)")
    ap.add_argument("--quick", action="store_true", help="a small fast run: 2000 events, 1 round")
    ap.add_argument("--ci", action="store_true", help="the CI-sized run: 300 events, 1 round, batches of 64")
    ap.add_argument("--seed", type=int, default=4, help="seed of the world and events (default 4)")
    ap.add_argument("--json", type=Path, help="also write the figures as JSON to this file")
    args = ap.parse_args(argv)
    if args.quick:
        args.events, args.rounds = 2000, 1
    if args.ci:
        args.events, args.rounds, args.batch = 300, 1, 64
    if args.events < 100 or args.rounds < 1 or args.batch < 1:
        ap.error("--events must be >= 100, --rounds >= 1 and --batch >= 1")

    load0 = os.getloadavg()
    env: dict[str, Any] = {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count(),
           "durable_rules": _version("durable_rules"), "pydantic": _version("pydantic"),
           "loadavg_start": load0, "args": {k: str(v) for k, v in vars(args).items()}}
    print(f"controller benchmark: {args.events:,} events x {args.rounds} round(s) per contender and scenario "
          f"(batches of {args.batch}), "
          f"{LIVE_FACTS:,} live facts per world; Python {env['python']}, durable_rules {env['durable_rules']}, "
          f"{env['cpus']} CPUs, 1-min load average {load0[0]:.2f}", flush=True)
    started = time.perf_counter()
    cpu0 = time.process_time()
    tmp = Path(tempfile.mkdtemp(prefix="pmw-controller-bench-"))
    ok = True
    figures: dict[str, Any] = {"env": env}
    try:
        ladder_dir = tmp / "ladder"
        ladder_dir.mkdir()
        shutil.copy(RULES / "wake_storm.yaml", ladder_dir / "wake_storm.yaml")
        (ladder_dir / "wake_targeting.yaml").write_text(_handoff_only((RULES / "wake_targeting.yaml").read_text()))
        rng = random.Random(args.seed)
        ladder_facts = controller_facts(rng, LIVE_FACTS - 2 * N_AGENTS)
        wfacts = world_facts(rng)
        full_facts = wfacts + controller_facts(rng, 0)
        assert len(ladder_facts) == LIVE_FACTS and len(full_facts) == LIVE_FACTS
        scenarios = [
            Scenario("ladder", "1. The storm ladder alone (handoff -> one wake candidate -> ladder decision)",
                     ladder_dir, ladder_facts, ladder_inputs(args.events, rng), targeting=False),
            Scenario("full", "2. Controller.observe_step with the shipped rules/ (every rule file)",
                     RULES, full_facts, full_inputs(args.events, rng, wfacts), targeting=True),
        ]
        for sc in scenarios:
            ok = run_scenario(sc, args.rounds, args.batch) and ok
            figures[sc.name] = sc.figures
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    load1 = env["loadavg_end"] = os.getloadavg()
    figures["total_s"] = time.perf_counter() - started
    figures["total_cpu_s"] = time.process_time() - cpu0
    print(f"\ntotal {figures['total_s']:.0f} s wall, {figures['total_cpu_s']:.0f} s CPU on {os.cpu_count()} CPUs; "
          f"1-min load average {load0[0]:.2f} at start, {load1[0]:.2f} at end. "
          "Targets are reported, never enforced (a benchmark, not a test).")
    if not ok:
        print("the controller and the plain ladder DISAGREE, or observe_batch differs from one at a time: "
              "the comparison above is not valid")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, sort_keys=True, default=str) + "\n")
        print(f"figures written to {args.json}")
    return 0 if ok else 1


def _handoff_only(text: str) -> str:
    """``wake_targeting.yaml`` with only its ``wake_handoff_target`` rule."""
    import yaml

    data = yaml.safe_load(text)
    data["rules"] = [r for r in data["rules"] if r["name"] == "wake_handoff_target"]
    return yaml.safe_dump(data, sort_keys=False)


if __name__ == "__main__":
    raise SystemExit(main())
