"""The root of ``pmw``: global options, command groups and :func:`main`."""

from typing import Annotated

import typer

from engine.cli import (
    agents,
    artifacts,
    audit,
    backup,
    commands,
    events,
    handoffs,
    memory,
    permissions,
    policy,
    pull,
    receipts,
    rooms,
    runloop_cmds,
    serve,
    simulate,
    state,
    tasks,
    tokens,
    topology,
    wakes,
    world_cmds,
)
from engine.cli.runtime import Globals

EXIT_CODES = """\
Exit codes:

\b
  0  success
  1  a demo check failed (or an unexpected internal error)
  2  usage error: unknown command or option, wrong argument type, missing argument
  3  invalid input: bad id, bad JSON, unknown value, payload over 64 KiB, missing --as; a policy set
     that fails to compile or its tests (policy_rejected); a YAML file refused (yaml_refused)
  4  not found
  5  conflict: stale --expect-version, already exists, --op-id reused, terminal owned, lease held,
     policy epoch changed
  6  illegal transition or not permitted: denied by the policy (policy_denied), approval invalid,
     a write with no decision (undecided_write)
  7  artifact corrupted (checksum mismatch)
  8  store unavailable (also: a database migrated by a newer PMW, schema_too_new; a server that does not
     answer, server_unreachable)
  9  policy unavailable: no decision could be had from the PDP (nothing was done)
 10  unauthenticated: a client of a server whose token is missing, malformed, unknown, expired or revoked
"""

app = typer.Typer(
    name="pmw",
    help="PMW: the persistent multi-agent workspace. Every command opens the shared world, makes one call "
         "decided by the Cerbos PDP (its own, or PMW_PDP_ADDRESS) and prints its result (--json: the models "
         "as JSON on stdout; errors as JSON on stderr).",
    epilog=EXIT_CODES,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    add_completion=False,
)


@app.callback()
def root(
    ctx: typer.Context,
    db: Annotated[str | None, typer.Option(
        "--db", metavar="URL", help="Database URL (default: PMW_DB_URL, else sqlite:///./pmw-data/world.db).")]
    = None,
    actor: Annotated[str | None, typer.Option(
        "--as", metavar="ACTOR", envvar="PMW_ACTOR", help="The acting agent id (needed by writes and reads: "
                                                          "the policy decides both).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine output: JSON on stdout, errors on stderr.")]
    = False,
    server: Annotated[str | None, typer.Option(
        "--server", metavar="URL", envvar="PMW_SERVER", help="Be a client of this pmw serve (token: PMW_TOKEN "
                                                             "or `pmw login`); else the world is opened here.")]
    = None,
) -> None:
    """Store the global options for the command that follows."""
    ctx.obj = Globals(db=db, actor=actor, json=as_json, server=server or None)


for _name, _module in (("agents", agents), ("state", state), ("tasks", tasks), ("memory", memory),
                       ("wakes", wakes), ("handoffs", handoffs), ("receipts", receipts), ("events", events),
                       ("artifacts", artifacts), ("topology", topology), ("policy", policy),
                       ("rooms", rooms), ("tokens", tokens)):
    app.add_typer(_module.group, name=_name)
world_cmds.register(app)
permissions.register(app)
runloop_cmds.register(app)
simulate.register(app)
commands.register(app)
serve.register(app)
pull.register(app)
audit.register(app)
backup.register(app)
__import__("engine.cli.contracts", fromlist=["register"]).register(app)  # pmw contracts, pmw retention
__import__("engine.cli.mcp", fromlist=["register"]).register(app)  # pmw mcp (its body imports the MCP server)
__import__("engine.cli.metrics", fromlist=["register"]).register(app)  # pmw metrics (engine.metrics, §31)


def main() -> None:
    """The ``pmw`` console script."""
    app(prog_name="pmw")
