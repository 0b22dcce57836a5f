"""``pmw commands`` and ``pmw exec``: every write of the World by its command name (``engine.commands``).

``pmw commands`` lists the commands (name, whether an agent may use it as an effect, description);
``pmw commands NAME`` shows one, ``pmw commands NAME --schema`` prints its JSON schema (exactly
``engine.commands.json_schema(NAME)``). ``pmw --as ACTOR exec NAME --json BODY`` validates the JSON object
BODY as command NAME (bad input: exit 3, before anything is opened) and runs it with ``world.execute``,
decided by the PDP like the named command; ``--op-id`` makes it safe to retry.
"""

import json
from typing import Annotated

import typer

from engine.cli.options import OpId
from engine.cli.runtime import invocation, json_object
from engine.commands import COMMANDS, Command, command, json_schema, parse
from engine.errors import InvalidInput
from engine.models.common import Model

CommandName = Annotated[str, typer.Argument(metavar="NAME", help="A command name (see `pmw commands`).")]


class CommandInfo(Model):
    """What ``pmw commands`` shows of one command."""

    name: str
    effect: bool
    events: list[str]
    description: str


def info(cls: type[Command]) -> CommandInfo:
    return CommandInfo(name=cls.name, effect=cls.agent_effect, events=list(cls.events), description=cls.description)


def commands(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Argument(metavar="[NAME]", help="Show only this command.")] = None,
    schema: Annotated[bool, typer.Option("--schema", help="Print the command's JSON schema.")] = False,
) -> None:
    """List every command the World accepts (EFFECT: an agent may name it in a decision), or show NAME; with
    --schema, print NAME's JSON schema (what `pmw exec NAME --json BODY` accepts)."""
    with invocation(ctx) as run:
        if name is None:
            if schema:
                raise InvalidInput("--schema", "needs a command NAME")
            run.show([info(c) for c in COMMANDS.values()], columns=("name", "effect", "description"))
            return
        cls = command(name)
        if schema:
            typer.echo(json.dumps(json_schema(cls.name), indent=2, ensure_ascii=False))
        else:
            run.show(info(cls))


def exec_(
    ctx: typer.Context,
    name: CommandName,
    body: Annotated[str, typer.Option("--json", metavar="BODY", help=(
        "The command's fields as a JSON object (default {}); see `pmw commands NAME --schema`."))] = "{}",
    op_id: OpId = None,
) -> None:
    """Run command NAME as the acting agent with the fields in BODY (the same call, policy decision and
    result as the named command; bad input exits 3 and nothing is written)."""
    with invocation(ctx, acting=True) as run:
        request = parse(name, json_object("--json", body) or {})
        run.show(run.world.execute(run.actor, request, op_id=op_id))


def register(app: typer.Typer) -> None:
    """Add ``pmw commands`` and ``pmw exec`` to ``app``."""
    app.command("commands")(commands)
    app.command("exec")(exec_)
