"""Child: the run loop (controller follower + worker) on a SQLite world, to be SIGKILLed at a random point.

Two programs in one module:

* ``python -m tests.procs.run_loop_child zygote CTL_DIR`` imports the engine once, then forks one run per
  command file ``CTL_DIR/cmd-<n>.json`` (a JSON list of arguments, or ``"stop"``) and reports, in
  ``CTL_DIR/zygote.jsonl``, ``{"n", "pid"}`` when the run started and ``{"n", "pid", "exit"}`` once it
  was reaped (``-9``: SIGKILLed). Forking saves each restart the second it takes to import the engine; a
  forked run is its own process (its own PID, SQLite connection and PDP channel, all opened after the
  fork) and dies with the zygote (``PR_SET_PDEATHSIG``).
* a run (forked, or ``python -m tests.procs.run_loop_child run ARGS...`` directly):
  ``URL PDP_GRPC PDP_HTTP ARTIFACT_DIR LOG MODE SEED LEASE_S JITTER_MS DEADLINE_S`` opens the world
  decided by the PDP at those addresses, builds an :class:`InProcessRunner` with the scripted agents below
  and runs it. ``MODE`` ``serve``: ``runner.serve`` until killed (or ``DEADLINE_S``); ``quiet``: rounds
  until nothing is due any more (waiting out leases and deferred wakes), then one summary line, exit 0.

Every World and book call of the cycle (claim, record decision, each effect, ack, controller step) is wrapped: a
random sleep of up to ``JITTER_MS`` (seeded) widens the window before it, and ``{"p": call, "at":
"before"|"after"}`` lines in ``LOG`` say where the run was when it died.

The agents (see :func:`adapters`): every wake writes ``mark.<wake_id>`` once (expected version 0, the
value carrying a random nonce: an agent that decided twice would make a second, different request under
the same operation id); a wake with ``payload.task`` also completes that task and notes it on the
worker's topic; an observer notes each wake on the next topic. Topic notes wake the topic's subscribers
(the controller), task events wake the task's owner.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import random
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from tests.procs import emit

ZYGOTE_MAX_S = 600.0    # a zygote nobody stops exits by itself
SERVE_POLL_S = 0.02
WORKERS = ("w0", "w1", "w2")
OBSERVERS = ("o0", "o1", "o2")
BOSS = "boss"
PRELOAD = ("engine.policy.cerbos_adapter", "engine.policy.enforcement", "engine.protocol.adapters", "engine.runloop",
           "engine.sources", "engine.world", "engine.world.book", "store")
WRAPPED = ("claim_wake", "compare_and_set_state", "complete_task", "append_event", "ack_wake")  # World calls
BOOK_WRAPPED = ("record_decision", "commit_controller_step")  # the runtime's book's calls


def topic(i: int) -> str:
    return f"topic-{i % len(OBSERVERS)}"


def adapters(rng: random.Random, log: str) -> dict[str, Any]:
    """The scripted agents by id (see the module docstring)."""
    from engine.models.agents import Agent
    from engine.models.wakes import Wake
    from engine.protocol.adapters import AgentDecision, AppendEvent, CompleteTask, Effect, RuleAgent, SetState
    from engine.world.projection import WorldView

    def agent(note_topic: str) -> RuleAgent:
        def rule(me: Agent, view: WorldView, wake: Wake) -> AgentDecision:
            nonce = f"{os.getpid()}-{rng.getrandbits(48):012x}"
            emit(log, p="decide", at="inside", wake=wake.wake_id, nonce=nonce)
            effects: list[Effect] = [SetState(key=f"mark.{wake.wake_id}", expected_version=0,
                                              value={"nonce": nonce, "agent": me.agent_id})]
            task = wake.payload.get("task")
            if isinstance(task, str):
                effects.append(CompleteTask(task_id=task, result={"wake": wake.wake_id, "nonce": nonce}))
            effects.append(AppendEvent(event_type="work.noted", subject_kind="topic", subject_id=note_topic,
                                       payload={"wake": wake.wake_id, "nonce": nonce}))
            return AgentDecision(decision="act", effects=effects, reason=f"wake {wake.wake_id}")
        return RuleAgent([rule])

    team: dict[str, Any] = {w: agent(topic(i)) for i, w in enumerate(WORKERS)}
    team.update({o: agent(topic(i + 1)) for i, o in enumerate(OBSERVERS)})
    team[BOSS] = agent("boss-desk")  # nobody follows the boss's desk
    return team


def _wrap(target: Any, name: str, log: str, rng: random.Random, jitter_s: float) -> None:
    call = getattr(target, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if jitter_s:
            time.sleep(rng.uniform(0, jitter_s))
        emit(log, p=name, at="before", t=round(time.monotonic(), 4))
        result = call(*args, **kwargs)
        emit(log, p=name, at="after", none=result is None, t=round(time.monotonic(), 4))
        return result
    setattr(target, name, wrapped)


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the run's own deadline still bounds it
        ctypes.CDLL(None, use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL


def run(argv: list[str]) -> int:
    url, pdp_grpc, pdp_http, artifact_dir, log, mode, seed, lease_s, jitter_ms, deadline_s = argv
    from engine.policy.cerbos_adapter import CerbosPdp
    from engine.policy.enforcement import PdpAuthorizer
    from engine.policy.pdp_process import PdpAddress
    from engine.runloop import InProcessRunner, RunStats
    from engine.sources import RandomIds, SystemClock
    from engine.world.book import RuntimeBook
    from store import Store

    deadline = time.monotonic() + float(deadline_s)
    rng = random.Random(seed)
    jitter = float(jitter_ms) / 1000
    pdp = CerbosPdp(PdpAddress(grpc=pdp_grpc, http=pdp_http))  # decisions only: no admin credentials
    store = Store(url)
    book = RuntimeBook(store, policy=PdpAuthorizer(pdp, store.read), clock=SystemClock(), ids=RandomIds(),
                       artifact_dir=Path(artifact_dir))
    world = book.world
    runner = InProcessRunner(book, adapters=adapters(rng, log), worker_id=f"worker-{os.getpid()}",
                             lease_seconds=float(lease_s))
    try:
        runner.start()
        for name in WRAPPED:
            _wrap(world, name, log, rng, jitter)
        for name in BOOK_WRAPPED:
            _wrap(book, name, log, rng, jitter)
        emit(log, ready=True, pid=os.getpid(), position=runner.loop.position if runner.loop else None)
        stats = RunStats()
        if mode == "serve":
            stop = threading.Event()
            while time.monotonic() < deadline:  # killed long before
                stats = runner.serve(stop, poll_s=SERVE_POLL_S, max_rounds=50)
            emit(log, deadline=True)
            return 3
        while time.monotonic() < deadline:  # quiet: until no round does anything and nothing is due later
            if runner.round(stats):
                continue
            due = runner.next_due_us()
            if due is None:
                break
            time.sleep(min(max(due - world.clock.now_us(), 0) / 1e6 + 0.001, 0.5))
        else:
            emit(log, deadline=True)
            return 3
        emit(log, quiet=True, position=runner.loop.position if runner.loop else None,
             last_seq=book.store.read.last_seq(), cycles=stats.cycles, rounds=stats.rounds,
             outcomes=dict(stats.outcomes), unavailable=stats.unavailable)
        return 0
    finally:
        runner.close()
        book.close()
        pdp.close()


def zygote(ctl_dir: str) -> int:
    for module in PRELOAD:  # imported once, before any fork
        importlib.import_module(module)

    ctl = Path(ctl_dir)
    zlog = str(ctl / "zygote.jsonl")
    emit(zlog, ready=True, pid=os.getpid(), threads=threading.active_count())
    deadline = time.monotonic() + ZYGOTE_MAX_S
    n = 0
    while time.monotonic() < deadline:
        cmd = ctl / f"cmd-{n}.json"
        if not cmd.exists():
            time.sleep(0.001)
            continue
        args = json.loads(cmd.read_text())
        if args == "stop":
            return 0
        if threading.active_count() != 1:
            raise RuntimeError("the zygote must not fork with threads running")
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                _die_with_parent()
                random.seed()
                code = run(args)
            except BaseException:  # noqa: BLE001 - reported, then the run exits 70
                traceback.print_exc()
            finally:
                os._exit(code)
        emit(zlog, n=n, pid=pid)
        _, status = os.waitpid(pid, 0)
        emit(zlog, n=n, pid=pid, exit=os.waitstatus_to_exitcode(status))
        n += 1
    return 4


def main(argv: list[str]) -> int:
    if argv[0] == "zygote":
        return zygote(argv[1])
    return run(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
