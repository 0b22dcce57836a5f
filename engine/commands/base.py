"""The base of every command: one write of the World, as a pydantic model with its metadata.

A command class declares, once, what one agent-facing mutating World call accepts:

* its fields: exactly the World method's parameters minus the caller (``actor``), ``op_id`` and
  ``cause``, with the same names, defaults and optionality, and the limits the World enforces;
* ``name``: the World method it stands for (``compare_and_set_state``, ``claim_task`` ...), which is
  also its name for tools and transports;
* ``description``: its contract in one paragraph (the class docstring, made one line; the JSON schema's
  ``description``);
* ``events``: the event types a successful call appends (a refused call appends at most a
  ``policy.denied`` audit record; an ``<event_type>`` entry means the caller names the type);
* ``agent_effect``: whether an agent may name it as an effect of a decision (``engine.protocol``).

How a command maps onto its World call is :meth:`Command.arguments` (overridden where the World's
shape differs, e.g. artifact content is UTF-8 text here and bytes in the World); who the caller is,
the operation id and the cause are passed by :meth:`engine.world.execute.ExecuteCalls.execute`.
Command classes never import ``engine.world`` (the World imports them).
"""

from __future__ import annotations

from typing import Any, ClassVar

from engine.models.common import Model


class Command(Model):
    """Base of every command (abstract: only subclasses with a ``name`` are registered)."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    events: ClassVar[tuple[str, ...]] = ()
    agent_effect: ClassVar[bool] = False
    actor_param: ClassVar[str] = "actor"  # the World parameter that receives the caller ("worker" for wakes)
    cause_param: ClassVar[str | None] = "cause"  # the World parameter that receives the Cause (None: takes none)
    takes_op_id: ClassVar[bool] = True  # whether the World call takes an operation id
    ref_field: ClassVar[str | None] = None  # dotted attribute of the result that names what was written

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if "__doc__" in cls.__dict__ and cls.__doc__:
            # one paragraph, also in the JSON schema (pydantic takes the schema's description from __doc__)
            cls.description = " ".join(cls.__doc__.split()).replace("``", "`")
            cls.__doc__ = cls.description

    def arguments(self) -> dict[str, Any]:
        """The keyword arguments of the World call (without caller, operation id and cause): every field
        as validated, nested models kept as models."""
        return {field: getattr(self, field) for field in type(self).model_fields}

    def command(self) -> Command:
        """This request as its registered command (an agent effect returns it without its tag)."""
        return self

    def ref(self, result: object) -> str | None:
        """What the call wrote, named from its result (``ref_field``); ``None`` when it names nothing."""
        if self.ref_field is None or result is None:
            return None
        value: Any = result
        for part in self.ref_field.split("."):
            value = getattr(value, part)
        return str(value)


__all__ = ["Command"]
