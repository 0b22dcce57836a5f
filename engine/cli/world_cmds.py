"""Top-level commands on the whole world: ``init``, ``project``, ``snapshot`` and ``demo``."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from engine.cli.runtime import Run, invocation

if TYPE_CHECKING:
    from engine.models.common import Model
    from engine.settings import Settings
    from engine.world.agents import RegisterAgent

#: What ``pmw init --governor`` says about the token it shows (humans; --json has the ``token`` field).
TOKEN_SHOWN_ONCE = ("the governor's token is shown only this once (it is stored only as a hash): keep it "
                    "(e.g. PMW_TOKEN); a governor issues more with `pmw tokens issue`")


@functools.cache
def result_models() -> tuple[type[Model], type[Model]]:
    """``(InitResult, GovernorInit)``, the models ``pmw init`` shows; built on first use, so that loading the
    command line imports no models (``pmw --help`` stays fast)."""
    from engine.models.agents import Registration
    from engine.models.common import Model

    class InitResult(Model):
        """What ``pmw init`` did: the migrations applied now (none when current) and the schema version."""

        applied: list[int]
        schema_version: int

    class GovernorInit(InitResult):
        """``pmw init --governor``: the migrations, the world's first governor (with its session) and its
        first token: ``token`` (``pmw_<token_id>_<secret>``) is shown this once and stored only as a hash."""

        governor: Registration
        token_id: str
        token: str | None

    return InitResult, GovernorInit


def migrate(settings: Settings) -> Model:
    """Apply pending migrations without a PDP (migrations decide nothing)."""
    from engine.errors import StoreUnavailable
    from engine.sources import SystemClock
    from store import Store

    settings.ensure_sqlite_parent()
    try:
        store = Store(settings.db_url, settings.database_options())
    except OSError as exc:
        raise StoreUnavailable(f"cannot open {settings.db_url!r}: {exc}") from exc
    try:
        applied = store.init(SystemClock().now_us())
        init_result, _ = result_models()
        return init_result.model_validate({"applied": applied, "schema_version": store.schema_version()})
    finally:
        store.close()


def governor_request(governor: str | None, name: str | None, term: str | None) -> RegisterAgent | None:
    """The checked ``--governor/--name/--term`` triple (all or none), before anything is opened."""
    from engine.errors import InvalidInput
    from engine.policy.attributes import GOVERNOR_ROLE
    from engine.validation import build
    from engine.world.agents import RegisterAgent

    if governor is None:
        for option, value in (("--name", name), ("--term", term)):
            if value is not None:
                raise InvalidInput(option, "only with --governor")
        return None
    for option, value in (("--name", name), ("--term", term)):
        if value is None:
            raise InvalidInput(option, "--governor needs --name and --term")
    return build(RegisterAgent, agent_id=governor, display_name=name, role_id=GOVERNOR_ROLE, term_key=term)


def init(
    ctx: typer.Context,
    governor: Annotated[str | None, typer.Option(
        "--governor", metavar="AGENT_ID", help="Also register the world's first governor (allowed once): the "
                                               "human principal who grants agents their capabilities.")] = None,
    name: Annotated[str | None, typer.Option("--name", help="The governor's display name.")] = None,
    term: Annotated[str | None, typer.Option("--term", help="The governor's terminal context (term_key).")]
    = None,
) -> None:
    """Create or migrate the database (idempotent: a current database is left as it is); with --governor,
    then bootstrap the first governor (exit 6 if the world already has one) and issue its first token,
    shown only this once (field ``token``)."""
    with invocation(ctx) as run:
        request = governor_request(governor, name, term)
        settings = run.settings()
        result = migrate(settings)
        if request is None:
            run.show(result)
            return
        runtime = run.open(settings)  # init is embedded: it creates the world a server would serve
        registration = runtime.book.bootstrap_governor(request.agent_id, request.display_name, request.term_key)
        issued = runtime.world.issue_token(actor=request.agent_id, agent_id=request.agent_id,
                                           label="first governor token (pmw init)")
        _, governor_init = result_models()
        run.show(governor_init.model_validate({**result.model_dump(), "governor": registration,
                                               "token_id": issued.token_id, "token": issued.token}))
        if not run.options.json:
            typer.echo(f"note: {TOKEN_SHOWN_ONCE}", err=True)


def project(
    ctx: typer.Context,
    agent_id: Annotated[str, typer.Argument(metavar="AGENT_ID", help="The agent whose view to show.")],
    budget: Annotated[int, typer.Option("--budget", min=1, max=10_000, help="Items per section.")] = 200,
) -> None:
    """Show the world as AGENT may see it (its tasks, state, visible memory, handoffs, rooms), as the policy
    decides for AGENT. The view includes AGENT's private memory, so --as must be AGENT itself or a
    governor (default: AGENT)."""
    with invocation(ctx) as run:
        run.show(run.world.project_world(agent_id, budget=budget, actor=run.actor_or_none or agent_id))


def require_governor(run: Run, command: str) -> None:
    """Raise ``PolicyDenied`` (recorded as a denial) unless ``--as`` is a live governor, as the PDP decides it:
    ``agent:grant`` on itself, the authority only live governors hold (``docs/policy.md``, "Governance
    commands"). For commands that ask the runtime's book for what no agent's authority covers."""
    from engine.errors import PolicyDenied

    actor = run.actor
    answer = run.world.allowed_actions(actor, "agent", actor)
    if "grant" not in answer.allowed:
        denied = PolicyDenied(actor, command, "world", "snapshot", answer.policy_epoch)
        run.book.record_denial(actor, command, denied)
        raise denied


def snapshot(ctx: typer.Context) -> None:
    """Record the state image at the current log position (the log is never truncated). A governance
    command: --as must be a live governor (the image holds every private memory; it is never shown)."""
    with invocation(ctx, acting=True) as run:
        require_governor(run, "snapshot")
        run.show(run.book.take_snapshot(run.actor))


def demo(
    ctx: typer.Context,
    db: Annotated[str | None, typer.Option(
        "--db", help="An empty database to run in (default: a fresh OUT/world.db; PMW_DB_URL is ignored).")]
    = None,
    out: Annotated[Path, typer.Option("--out", file_okay=False, help="Folder of the default demo database.")]
    = Path("pmw-demo"),
) -> None:
    """Run a short end-to-end demo under the policy: a governor grants three agents their capabilities; a
    denied write, allowed actions, a task, a stale write, an idempotent wake, reviewed memory, a versioned
    artifact and a handoff; then check fold(events) == state. Exit 1 if a check fails."""
    from engine.demo import demo_sources, prepare_demo_db, run_demo
    from engine.settings import load_settings

    with invocation(ctx) as run:
        url = db or run.options.db or prepare_demo_db(out)
        clock, ids = demo_sources()
        runtime = run.open(load_settings(db_url=url), clock=clock, ids=ids)
        summary = run_demo(runtime.book, lambda line: typer.echo(line, err=run.options.json))
        if run.options.json:
            run.show(summary)
        if not summary.ok:
            raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the top-level commands to ``app``."""
    for command in (init, project, snapshot, demo):
        app.command(command.__name__)(command)
