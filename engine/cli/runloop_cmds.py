"""``pmw worker``, ``pmw trace`` and ``pmw rules``: running the world, reading its run traces, and checking
or shadowing rule changes."""

from __future__ import annotations

import importlib
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from engine.cli.options import Limit
from engine.cli.runtime import invocation
from engine.errors import InvalidInput

if TYPE_CHECKING:
    from engine.protocol.adapters import AgentAdapter

#: The repository's rule directory: ``engine.runloop.DEFAULT_RULES`` (the same path, named here so that the
#: option defaults need no import of the run loop).
DEFAULT_RULES = Path(__file__).resolve().parents[2] / "rules"

rules_group = typer.Typer(help="Check rule files and shadow a rule change over the recorded log.",
                          no_args_is_help=True)

RulesDir = Annotated[Path, typer.Option("--rules", help="The controller's rule directory.")]


def load_adapter(spec: str) -> tuple[str, AgentAdapter]:
    """``AGENT=MODULE:ATTR``: ATTR is an adapter (has ``run``), a zero-argument factory returning one, or a
    function mapping a JSON context to a JSON decision (wrapped in a ``CallableAdapter``)."""
    from engine.protocol.adapters import CallableAdapter

    agent, sep, target = spec.partition("=")
    module_name, colon, attr = target.partition(":")
    if not (sep and colon and agent and module_name and attr):
        raise InvalidInput("--agent", f"expected AGENT=MODULE:ATTR, got {spec!r}")
    try:
        found: Any = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise InvalidInput("--agent", f"cannot load {target!r}: {exc}") from exc
    if hasattr(found, "run"):
        return agent, found
    if callable(found):
        try:
            made = found()
        except TypeError:
            return agent, CallableAdapter(found)
        if hasattr(made, "run"):
            return agent, made
    raise InvalidInput("--agent", f"{target!r} is neither an adapter, an adapter factory nor a decision function")


def register(app: typer.Typer) -> None:
    app.add_typer(rules_group, name="rules")

    @app.command("worker")
    def worker(
        ctx: typer.Context,
        agents: Annotated[list[str] | None, typer.Option(
            "--agent", metavar="AGENT=MODULE:ATTR", help="An agent this worker runs (repeatable).")] = None,
        rules: RulesDir = DEFAULT_RULES,
        controller: Annotated[bool, typer.Option(
            "--controller/--no-controller", help="Also run the world's controller (follows the log).")] = True,
        worker_id: Annotated[str, typer.Option("--worker-id", help="Names this worker's leases.")] = "worker-1",
        lease: Annotated[float, typer.Option("--lease-seconds")] = 30.0,
        poll: Annotated[float, typer.Option("--poll-seconds", help="Fallback poll when no commit signal comes.")]
        = 1.0,
        until_idle: Annotated[bool, typer.Option("--until-idle", help="Stop at the first quiet round.")] = False,
        max_rounds: Annotated[int | None, typer.Option("--max-rounds", min=1)] = None,
    ) -> None:
        """Run wakes for --agent's (claim, rehydrate, observe, decide, act, receipt) and, with --controller,
        the controller that decides the wakes. Runs until SIGTERM/SIGINT (or --until-idle/--max-rounds);
        sleeps on commits (LISTEN/NOTIFY on PostgreSQL) between quiet rounds. --as names the governor that
        grants the controller's agent on first start."""
        with invocation(ctx, acting=True) as run:
            from engine.cli.results import WorkerReport
            from engine.runloop import InProcessRunner

            adapters = dict(load_adapter(s) for s in agents or [])
            runner = InProcessRunner(run.book, adapters=adapters, rule_dir=rules, governor=run.actor,
                                     worker_id=worker_id, lease_seconds=lease, controller=controller,
                                     follow_policy=run.runtime.follow_policy)  # a reload elsewhere: carry on
            stop = threading.Event()
            previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGTERM, signal.SIGINT)}
            try:
                runner.start()
                stats = runner.serve(stop, poll_s=poll, max_rounds=max_rounds, until_idle=until_idle)
            finally:
                for s, handler in previous.items():
                    signal.signal(s, handler)
                runner.close()
            run.show(WorkerReport(worker_id=worker_id, rounds=stats.rounds, events=stats.events, steps=stats.steps,
                                  wakes=stats.wakes, suppressed=stats.suppressed, cycles=stats.cycles,
                                  crashes=stats.crashes, unavailable=stats.unavailable,
                                  epoch_changes=stats.epoch_changes, outcomes=dict(stats.outcomes)))

    @app.command("trace")
    def trace(
        ctx: typer.Context,
        wake_id: Annotated[str | None, typer.Argument(metavar="[WAKE_ID]", help="One run's trace.")] = None,
        agent: Annotated[str | None, typer.Option("--agent", help="Only this agent's runs.")] = None,
        limit: Limit = 20,
    ) -> None:
        """A run's trace (retrieved refs, tools, decisions, commits, cost, latency, result), or the latest
        runs' traces. Never the agent's reasoning."""
        with invocation(ctx, acting=True) as run:
            if wake_id is not None:
                run.show(run.world.get_trace(wake_id, actor=run.actor))
            else:
                run.show(run.world.list_traces(agent_id=agent, limit=limit, actor=run.actor),
                         columns=("trace_id", "agent_id", "decision", "outcome", "latency_us", "commits"))


@rules_group.command("check")
def check(ctx: typer.Context,
          directory: Annotated[Path, typer.Argument(help="A rule directory.")] = DEFAULT_RULES,
          as_json: Annotated[bool, typer.Option("--json", help="The same as the global --json.")] = False) -> None:
    """Validate and compile a rule directory; a bad file is reported with file, line and rule (exit 3)."""
    with invocation(ctx, as_json=as_json) as run:
        from engine.cli.results import RulesChecked
        from engine.controller import load_rule_dir
        from engine.controller.actions import ACTIONS

        ruleset = load_rule_dir(directory, ACTIONS)
        run.show(RulesChecked(directory=str(directory), digest=ruleset.digest, rules=sorted(ruleset.definition)))


@rules_group.command("shadow")
def shadow(
    ctx: typer.Context,
    candidate: Annotated[Path, typer.Argument(help="The changed rule directory.")],
    rules: RulesDir = DEFAULT_RULES,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Replay at most this many events.")] = 100_000,
) -> None:
    """Replay the recorded log through the rules in force and CANDIDATE; print the decisions that would
    differ. Commits nothing. --as must be allowed to read the log."""
    with invocation(ctx, acting=True) as run:
        from engine.cli.results import ShadowReport
        from engine.controller import format_diffs
        from engine.runloop.shadow_log import shadow_log

        run.world.events(limit=1, actor=run.actor)  # the replay reads the log: so must the actor
        diffs = shadow_log(run.book, rules, candidate, limit=limit)
        run.show(ShadowReport(candidate=str(candidate), events=run.book.store.read.last_seq(),
                              differing=len(diffs), diff=format_diffs(diffs)))
