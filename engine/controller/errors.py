"""The controller's errors: a sub-tree of :class:`engine.errors.PMWError`.

::

    PMWError
    └── ControllerError              controller_error          1
        ├── RuleFileError            rule_file_invalid         3   (file, line, rule, reason)
        ├── FactIdCollision          fact_id_collision         5   (world, fact_id, other_id)
        ├── WorldIdCollision         world_id_collision        5   (world, other_world)
        ├── StaleEvent               stale_event               5   (world, position, last_position)
        ├── ActionFailed             controller_action_failed  1   (rule, action, reason)
        ├── ControllerNotLoaded      controller_not_loaded     1   (world)
        └── EngineFailure            controller_engine_failure 1   (operation, reason)

Bad facts and events handed to the controller are :class:`engine.errors.InvalidInput` (field, reason).
durable_rules' own exceptions never leave ``engine/controller/durable_host.py``: they are mapped to these
classes there with ``raise ... from exc``.
"""

from __future__ import annotations

from typing import Any

from engine.errors import PMWError


class ControllerError(PMWError):
    """Base of every controller error."""

    code = "controller_error"


class RuleFileError(ControllerError):
    """A rule file (or the rule directory as a whole) is invalid; the rules in force are unchanged.

    ``file`` is the path as given, ``line`` the 1-based line of the offending YAML node when known,
    ``rule`` the rule's name when the problem is inside one rule."""

    code = "rule_file_invalid"
    exit_code = 3

    def __init__(self, file: str, reason: str, *, line: int | None = None, rule: str | None = None) -> None:
        where = file if line is None else f"{file}:{line}"
        what = f"rule {rule!r}: " if rule else ""
        super().__init__(f"{where}: {what}{reason}")
        self.file = file
        self.line = line
        self.rule = rule
        self.reason = reason

    def details(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "rule": self.rule, "reason": self.reason}


class FactIdCollision(ControllerError):
    """Two distinct fact ids of one world have the same 32-bit id hash, which durable_rules treats as the
    same message (the second would be rejected and retracting it would remove the first). Nothing was
    changed. ``other_id`` is ``None`` when the engine reported a clash with a message the controller
    does not hold. Re-key one of the facts."""

    code = "fact_id_collision"
    exit_code = 5

    def __init__(self, world: str, fact_id: str, other_id: str | None) -> None:
        other = repr(other_id) if other_id is not None else "a message the controller does not hold"
        super().__init__(f"fact id {fact_id!r} in world {world!r} has the same 32-bit hash as {other}")
        self.world = world
        self.fact_id = fact_id
        self.other_id = other_id

    def details(self) -> dict[str, Any]:
        return {"world": self.world, "fact_id": self.fact_id, "other_id": self.other_id}


class WorldIdCollision(ControllerError):
    """Two world ids have the same 32-bit hash: durable_rules would give them one partition."""

    code = "world_id_collision"
    exit_code = 5

    def __init__(self, world: str, other_world: str) -> None:
        super().__init__(f"world id {world!r} has the same 32-bit hash as {other_world!r}")
        self.world = world
        self.other_world = other_world

    def details(self) -> dict[str, Any]:
        return {"world": self.world, "other_world": self.other_world}


class StaleEvent(ControllerError):
    """An event at or before the last observed position: the controller's facts are already past it."""

    code = "stale_event"
    exit_code = 5

    def __init__(self, world: str, position: int, last_position: int) -> None:
        super().__init__(f"event at position {position} in world {world!r} is not after {last_position}")
        self.world = world
        self.position = position
        self.last_position = last_position

    def details(self) -> dict[str, Any]:
        return {"world": self.world, "position": self.position, "last_position": self.last_position}


class ActionFailed(ControllerError):
    """A rule's action raised (or broke a contract, e.g. posted a wake candidate no rule consumed).
    The call that triggered it changed nothing; the original exception is the ``__cause__``."""

    code = "controller_action_failed"

    def __init__(self, rule: str, action: str, reason: str) -> None:
        super().__init__(f"rule {rule!r} (action {action!r}) failed: {reason}")
        self.rule = rule
        self.action = action
        self.reason = reason

    def details(self) -> dict[str, Any]:
        return {"rule": self.rule, "action": self.action, "reason": self.reason}


class ControllerNotLoaded(ControllerError):
    """The controller has no rules in force yet: call ``load()`` first."""

    code = "controller_not_loaded"

    def __init__(self, world: str) -> None:
        super().__init__(f"controller for world {world!r} has no rules loaded")
        self.world = world

    def details(self) -> dict[str, Any]:
        return {"world": self.world}


class EngineFailure(ControllerError):
    """durable_rules failed in a way the fences do not cover (a C error code, an internal exception)."""

    code = "controller_engine_failure"

    def __init__(self, operation: str, reason: str) -> None:
        super().__init__(f"durable_rules failed during {operation}: {reason}")
        self.operation = operation
        self.reason = reason

    def details(self) -> dict[str, Any]:
        return {"operation": self.operation, "reason": self.reason}


__all__ = [
    "ActionFailed",
    "ControllerError",
    "ControllerNotLoaded",
    "EngineFailure",
    "FactIdCollision",
    "RuleFileError",
    "StaleEvent",
    "WorldIdCollision",
]
