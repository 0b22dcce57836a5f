"""The ``pmw`` command line: parse, call one World method, print.

Global options (before the command): ``--db URL`` (default ``PMW_DB_URL``), ``--as ACTOR`` (the acting
agent, default ``PMW_ACTOR``; writes and reads need it, the policy decides both) and ``--json`` (the result
models as JSON on stdout, errors as their ``to_dict()`` JSON on stderr).

Every call is decided by a Cerbos PDP: the runtime's own (started on loopback for the one command and
stopped after it) or the external one ``PMW_PDP_ADDRESS`` names (see :mod:`engine.runtime`). A fresh
world needs ``pmw init --governor ID --name NAME --term KEY``; the governor then grants agents their
capabilities (``pmw --as ID agents grant AGENT --capability task.create ...``).

Exit codes a script can rely on::

    0  success
    1  a demo check failed (or an unexpected internal error)
    2  usage error (typer/click): unknown command or option, wrong argument type, missing argument
    3  invalid input (InvalidInput, PayloadTooLarge, TargetUnresolved, PolicyInvalidRequest,
       PolicyRejected; bad JSON; missing --as)
    4  not found (NotFound)
    5  conflict (VersionConflict, AlreadyExists, OperationConflict, TerminalOwned, LeaseHeld,
       PolicyEpochChanged)
    6  illegal transition or not permitted (IllegalTransition, NotPermitted, PolicyDenied, ApprovalInvalid)
    7  artifact corrupted (ArtifactCorrupted)
    8  store unavailable (StoreUnavailable)
    9  policy unavailable (PolicyUnavailable: no decision could be had; nothing was done)

Codes 3 to 9 are the ``exit_code`` of the :class:`~engine.errors.PMWError` raised; such an error is
reported without a traceback.

The command modules deliberately do not use ``from __future__ import annotations``: Typer reads every
parameter's annotation at start-up, and evaluating them from strings makes each invocation about four
times slower to start.
"""

from __future__ import annotations

from engine.cli.app import app, main

__all__ = ["app", "main"]
