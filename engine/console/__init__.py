"""The governance console: server-rendered pages on ``pmw serve`` at ``/console`` for the people who govern a
world (governors act; reviewers read), every read and action going through the same calls, PDP and gateway
as any other client (``docs/console.md``).

Modules: ``routes`` (the pages and forms; :func:`mount`), ``viewer`` (who asks: token, session, standing),
``sessions`` (sign-in sessions and CSRF secrets), ``calls`` (the one door for the pages' calls),
``page_data`` (what each page shows), ``log_fold`` (approvals, rooms, topology versions from the log),
``topology_svg`` (the layered graph), ``policy_files`` (a candidate's diff, rollback targets), ``reports``
(simulation reports), ``pages`` (templates and headers). Templates and styles ship in the package.
"""

from __future__ import annotations

from engine.console.routes import mount

__all__ = ["mount"]
