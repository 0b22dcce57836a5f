"""``pmw commands`` and ``pmw exec``: every write of the World by its command name (``engine.commands``).

``pmw commands`` lists the commands (name, whether an agent may use it as an effect, description);
``pmw commands NAME`` shows one, ``pmw commands NAME --schema`` prints its JSON schema (exactly
``engine.commands.json_schema(NAME)``). ``pmw --as ACTOR exec NAME --json BODY`` validates the JSON object
BODY as command NAME (bad input: exit 3, before anything is opened) and runs it with ``world.execute``,
decided by the PDP like the named command; ``--op-id`` makes it safe to retry. As a client of a server
(``--server`` / ``PMW_SERVER``) the call is sent by its name with BODY's fields (``execute`` is not served):
the server makes the token's agent its caller and validates BODY again.
"""

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from engine.cli.options import OpId
from engine.cli.runtime import Run, invocation, json_object
from engine.errors import InvalidInput

if TYPE_CHECKING:
    from engine.cli.results import CommandInfo
    from engine.commands import Command

CommandName = Annotated[str, typer.Argument(metavar="NAME", help="A command name (see `pmw commands`).")]


def info(cls: "type[Command]") -> "CommandInfo":
    """What ``pmw commands`` shows of the command class ``cls``."""
    from engine.cli.results import CommandInfo

    return CommandInfo(name=cls.name, effect=cls.agent_effect, events=list(cls.events), description=cls.description)


def commands(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Argument(metavar="[NAME]", help="Show only this command.")] = None,
    schema: Annotated[bool, typer.Option("--schema", help="Print the command's JSON schema.")] = False,
) -> None:
    """List every command the World accepts (EFFECT: an agent may name it in a decision), or show NAME; with
    --schema, print NAME's JSON schema (what `pmw exec NAME --json BODY` accepts)."""
    with invocation(ctx) as run:
        from engine.commands import COMMANDS, command, json_schema

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
        from engine.commands import parse

        fields = json_object("--json", body) or {}
        request = parse(name, fields)
        if run.remote:
            run.show(sent_by_name(run, type(request), fields, op_id))
        else:
            run.show(run.world.execute(run.actor, request, op_id=op_id))


def sent_by_name(run: Run, cls: "type[Command]", fields: dict[str, Any], op_id: str | None) -> Any:
    """Client mode: the command ``cls`` (``fields`` already validated as it) sent as the server's World call of
    its name, with the caller in the call's caller parameter (``actor``; ``worker`` for wakes) and ``op_id``.
    A command that takes no operation id refuses one (``InvalidInput``, as ``world.execute`` does); what the
    server answers (its errors too) is returned or raised unchanged."""
    arguments = {**fields, cls.actor_param: run.actor}
    if op_id is not None:
        if not cls.takes_op_id:
            raise InvalidInput("op_id", f"{cls.name} takes no operation id")
        arguments["op_id"] = op_id
    return getattr(run.world, cls.name)(**arguments)


def register(app: typer.Typer) -> None:
    """Add ``pmw commands`` and ``pmw exec`` to ``app``."""
    app.command("commands")(commands)
    app.command("exec")(exec_)
