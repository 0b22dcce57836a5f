"""The ``pmw`` command line: parse, call one World method, print.

Global options (before the command): ``--db URL`` (default ``PMW_DB_URL``), ``--as ACTOR`` (the acting
agent, default ``PMW_ACTOR``; writes need it) and ``--json`` (the result models as JSON on stdout,
errors as their ``to_dict()`` JSON on stderr).

Exit codes a script can rely on::

    0  success
    1  a demo check failed (or an unexpected internal error)
    2  usage error (typer/click): unknown command or option, wrong argument type, missing argument
    3  invalid input (InvalidInput, PayloadTooLarge, TargetUnresolved; bad JSON; missing --as)
    4  not found (NotFound)
    5  conflict (VersionConflict, AlreadyExists, OperationConflict, TerminalOwned, LeaseHeld)
    6  illegal transition or not permitted (IllegalTransition, NotPermitted)
    7  artifact corrupted (ArtifactCorrupted)
    8  store unavailable (StoreUnavailable)

Codes 3 to 8 are the ``exit_code`` of the :class:`~engine.errors.PMWError` raised; such an error is
reported without a traceback.

The command modules deliberately do not use ``from __future__ import annotations``: Typer reads every
parameter's annotation at start-up, and evaluating them from strings makes each invocation about four
times slower to start.
"""

from __future__ import annotations

from engine.cli.app import app, main

__all__ = ["app", "main"]
