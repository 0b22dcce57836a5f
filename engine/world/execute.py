"""``world.execute``: run one registered command as the World call it names.

The command vocabulary (``engine.commands``) declares each agent-facing write once; ``execute`` is how
agents' effects, ``pmw exec`` and the transports reach the World with it. It is exactly the named call:
the same validation, operation identity (an ``op_id`` reused with the same request returns the original
result whether it came through ``execute`` or the named method), policy decision and commit.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from engine.commands import COMMANDS, Command
from engine.errors import InvalidInput
from engine.validation import invalid_from
from engine.world.core import Cause, WorldCore


class ExecuteCalls(WorldCore):
    def execute(self, actor: str, command: Command, *, op_id: str | None = None, cause: Cause | None = None) -> Any:
        """Run ``command`` as ``actor`` and return what its World method returns.

        ``command`` must be an instance of a registered command class (an agent effect is run as its
        command); anything else, runtime bookkeeping included, is ``InvalidInput`` and nothing is done.
        ``op_id`` and ``cause`` are passed to the call; a command whose call takes no operation id (or no
        cause) refuses one (``InvalidInput``). Every error of the named call is raised unchanged."""
        plain = command.command() if isinstance(command, Command) else None
        registered = COMMANDS.get(getattr(type(plain), "name", "")) if plain is not None else None
        if plain is None or registered is None or type(plain) is not registered:
            raise InvalidInput("command", f"{type(command).__name__} is not a registered command")
        plain = _revalidated(registered, plain)  # an instance made without validation (model_construct) too
        kwargs = plain.arguments()
        kwargs[registered.actor_param] = actor
        if op_id is not None:
            if not registered.takes_op_id:
                raise InvalidInput("op_id", f"{registered.name} takes no operation id")
            kwargs["op_id"] = op_id
        if cause is not None:
            if registered.cause_param is None:
                raise InvalidInput("cause", f"{registered.name} takes no cause")
            kwargs[registered.cause_param] = cause
        return getattr(self, registered.name)(**kwargs)


def _revalidated(registered: type[Command], command: Command) -> Command:
    """``command`` validated again from its fields: what the caller built is never trusted as valid."""
    try:
        fields = {name: getattr(command, name) for name in registered.model_fields if hasattr(command, name)}
        return registered.model_validate(fields)
    except ValidationError as exc:
        raise invalid_from(exc) from exc


__all__ = ["ExecuteCalls"]
