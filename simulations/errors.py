"""The simulator's errors, in PMW's one error tree (:mod:`engine.errors`).

::

    PMWError
    └── InvalidInput                    invalid_input
        └── ScenarioError               scenario_invalid   (file, line, field, reason)
            └── ScenarioTimelineError   scenario_timeline  (an impossible timeline: order, stop, references)

Both are raised before anything is written: a scenario that fails to load never opens a world.
"""

from __future__ import annotations

from typing import Any

from engine.errors import InvalidInput


class ScenarioError(InvalidInput):
    """A scenario file is not valid. ``line`` is 1-based (0 when the file could not be read at all);
    ``field`` is the dotted path of the offending value (``agents.1.behaviour``), empty for syntax."""

    code = "scenario_invalid"

    def __init__(self, file: str, line: int, field: str, reason: str) -> None:
        super().__init__(field or "scenario", reason)
        self.file = file
        self.line = line
        self.field = field
        where = f"{file}:{line}" if line else file
        self.message = f"{where}: {field + ': ' if field else ''}{reason}"
        self.args = (self.message,)

    def details(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "field": self.field, "reason": self.reason}


class ScenarioTimelineError(ScenarioError):
    """The timeline cannot happen: times out of order or past the stop, or an entry names an agent,
    task or room the scenario does not declare."""

    code = "scenario_timeline"


__all__ = ["ScenarioError", "ScenarioTimelineError"]
