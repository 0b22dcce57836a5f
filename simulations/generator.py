"""Large scenarios, generated: N agents, M wake events over a virtual timeline, from a seed.

:func:`workload` gives every agent one long task (a step per scheduled wake) and wakes it ``M / N``
times (one repeated wake entry with jitter per agent, so the file stays O(N) lines however large M is);
every ``follow_every``-th agent also follows the previous agent's progress, so the controller wakes it on
each of that agent's steps (event-driven wakes on top of the scheduled ones). :func:`sleep_wake` is seed
001 benchmark 1 at any size: ``tasks`` long tasks, ``per_agent`` to an agent, each run followed by a random
sleep, and a conversation replacement for every ``replace_every``-th agent halfway through.

Both return a scenario as a plain mapping (``yaml.safe_dump`` it, or validate it with
:func:`simulations.scenario.parse_scenario`); the same arguments give the same scenario::

    python -m simulations.generator workload --agents 1000 --events 100000 --seed 7 --out big.yaml
    python -m simulations.generator sleep-wake --tasks 100 --out sleep_wake_100.yaml
    pmw simulate big.yaml --out sim-out/big
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path
from typing import Any

import yaml

WORKER_CAPS = ["state.write", "task.create", "task.work"]


def _agent(i: int) -> str:
    return f"a{i:05d}"


def workload(agents: int, events: int, *, seed: int = 0, every_s: float = 60.0, jitter_s: float = 20.0,
             follow_every: int = 10, name: str | None = None) -> dict[str, Any]:
    """``agents`` workers, each with a task of as many steps as it has scheduled wakes, woken ``events``
    times in all (spread evenly: the first ``events % agents`` agents get one wake more), each agent's
    first wake at a random offset within ``every_s``; every ``follow_every``-th agent (0: none) follows
    its predecessor's progress."""
    if agents < 1 or events < 1:
        raise ValueError("agents and events must be at least 1")
    rng = random.Random(seed)
    base, extra = divmod(events, agents)
    counts = [base + (1 if i < extra else 0) for i in range(agents)]
    offsets = [round(rng.uniform(1.0, every_s), 3) for _ in range(agents)]
    stop = math.ceil(max(o + (c - 1) * every_s for o, c in zip(offsets, counts, strict=True) if c) + jitter_s
                     + every_s)
    timeline = [{"at": offsets[i], "kind": "wake", "target": _agent(i), "task": f"t{i:05d}",
                 "every_s": every_s, "count": counts[i], "jitter_s": jitter_s}
                for i in sorted(range(agents), key=lambda i: (offsets[i], i)) if counts[i]]
    subs = [{"agent": _agent(i), "subject": f"progress:t{i - 1:05d}"}
            for i in range(1, agents) if follow_every and i % follow_every == 0]
    return {
        "name": name or f"workload-{agents}x{events}",
        "description": f"Generated: {agents} agents, {events} scheduled wakes every {every_s:g} s "
                       f"(jitter {jitter_s:g} s), seed {seed}; every {follow_every}th agent follows its "
                       "predecessor's progress (controller wakes).",
        "seed": seed,
        "clock": {"bucket_s": max(every_s, stop / 60), "think_s": 0},  # serial runs must not outrun the schedule
        "stop": {"at_s": stop, "max_rounds": 10_000_000},
        "agents": [{"id": _agent(i), "behaviour": "worker", "capabilities": WORKER_CAPS} for i in range(agents)],
        "world": {"tasks": [{"id": f"t{i:05d}", "goal": f"long task of {_agent(i)}", "owner": _agent(i),
                             "assignee": _agent(i), "steps": max(1, counts[i])} for i in range(agents)],
                  "subscriptions": subs},
        "timeline": timeline,
        "expect": {"duplicate_side_effect_rate": 0, "wakes_with_two_receipts": 0},
    }


def sleep_wake(tasks: int = 100, *, per_agent: int = 2, steps: int = 4, every_s: float = 60.0,
               jitter_s: float = 40.0, replace_every: int = 2, seed: int = 1) -> dict[str, Any]:
    """Seed 001 benchmark 1: ``tasks`` long tasks of ``steps`` steps, ``per_agent`` to an agent; each is
    woken ``steps + 1`` times, ``every_s`` plus up to ``jitter_s`` apart; every ``replace_every``-th agent
    (0: none) loses its conversation after its second run."""
    agents = math.ceil(tasks / per_agent)
    owner = [_agent(t // per_agent) for t in range(tasks)]
    timeline: list[dict[str, Any]] = [
        {"at": 1 + t, "kind": "wake", "target": owner[t], "task": f"t{t:05d}", "every_s": every_s,
         "count": steps + 1, "jitter_s": jitter_s} for t in range(tasks)]
    replace_at = 1 + tasks + every_s + jitter_s  # after every task's second run
    timeline += [{"at": replace_at, "kind": "conversation_replacement", "agent": _agent(i)}
                 for i in range(agents) if replace_every and i % replace_every == 0]
    return {
        "name": f"sleep-wake-{tasks}",
        "description": f"Seed 001 benchmark 1, generated: {tasks} long tasks of {steps} steps, {per_agent} per "
                       f"agent, a random sleep ({every_s:g} s + up to {jitter_s:g} s) between runs; every "
                       f"{replace_every}nd agent loses its conversation mid-task.",
        "seed": seed,
        "clock": {"bucket_s": every_s / 2},
        "stop": {"at_s": 1 + tasks + (steps + 1) * (every_s + jitter_s)},
        "agents": [{"id": _agent(i), "behaviour": "worker", "capabilities": WORKER_CAPS} for i in range(agents)],
        "world": {"tasks": [{"id": f"t{t:05d}", "goal": f"long task {t}", "owner": owner[t], "assignee": owner[t],
                             "steps": steps} for t in range(tasks)]},
        "timeline": timeline,
        "expect": {"task_quality": 1, "duplicate_work_ratio": 0, "state_conflict_rate": 0,
                   "tasks_completed": tasks, "acted": tasks * steps},
    }


def dump(scenario: dict[str, Any]) -> str:
    return yaml.safe_dump(scenario, sort_keys=False, width=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simulations.generator", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="kind", required=True)
    w = sub.add_parser("workload", help="N agents, M scheduled wakes")
    w.add_argument("--agents", type=int, default=1000)
    w.add_argument("--events", type=int, default=10_000)
    w.add_argument("--every", type=float, default=60.0, help="seconds between an agent's wakes")
    w.add_argument("--follow-every", type=int, default=10)
    s = sub.add_parser("sleep-wake", help="seed 001 benchmark 1")
    s.add_argument("--tasks", type=int, default=100)
    s.add_argument("--per-agent", type=int, default=2)
    s.add_argument("--steps", type=int, default=4)
    for p in (w, s):
        p.add_argument("--seed", type=int, default=1)
        p.add_argument("--out", type=Path, help="the file to write (default: standard output)")
    args = parser.parse_args(argv)
    if args.kind == "workload":
        data = workload(args.agents, args.events, seed=args.seed, every_s=args.every, follow_every=args.follow_every)
    else:
        data = sleep_wake(args.tasks, per_agent=args.per_agent, steps=args.steps, seed=args.seed)
    text = dump(data)
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["dump", "main", "sleep_wake", "workload"]
