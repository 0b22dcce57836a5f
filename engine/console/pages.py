"""Rendering console pages: one Jinja2 environment over the package's templates (autoescape on for every
template), the headers every console answer carries, and the refusal pages.

Every page answer is ``no-store`` (a page shows what its viewer may see now), framed by nobody
(``frame-ancestors 'none'``), and runs only the package's own script and styles (``default-src 'self'``:
no inline script, no CDN).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from engine.console.calls import Refused
from engine.errors import PMWError
from engine.service.http_app import STATUS_OF_EXIT

PACKAGE = Path(__file__).resolve().parent
TEMPLATES = PACKAGE / "templates"
STATIC = PACKAGE / "static"
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
                               "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
NAV = (("policies", "Policies"), ("decisions", "Decisions"), ("approvals", "Approvals"), ("world", "World"),
       ("topology", "Topology"), ("reports", "Reports"))


def when(us: object) -> str:
    """µs since the Unix epoch as an ISO time in UTC (``-`` for none)."""
    if not isinstance(us, int) or isinstance(us, bool):
        return "-"
    return datetime.fromtimestamp(us / 1_000_000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def pretty(value: object) -> str:
    """A value as indented JSON (for attribute and payload blocks)."""
    return json.dumps(value, indent=2, sort_keys=True, default=str)


def _environment() -> Environment:
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=select_autoescape(default=True),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["when"] = when
    env.filters["pretty"] = pretty
    env.globals["nav"] = NAV
    env.tests["refused"] = lambda value: isinstance(value, Refused)
    return env


ENV = _environment()


def render(template: str, status: int = 200, headers: dict[str, str] | None = None, **context: Any) -> HTMLResponse:
    """``template`` rendered with ``context`` as an HTML answer with the console's headers."""
    context.setdefault("viewer", None)
    context.setdefault("page", template.removesuffix(".html"))
    context.setdefault("notice", None)
    body = ENV.get_template(template).render(**context)
    return HTMLResponse(body, status_code=status, headers={**HEADERS, **(headers or {})})


def status_of(exc: PMWError) -> int:
    """The HTTP status the API answers ``exc`` with."""
    return STATUS_OF_EXIT.get(exc.exit_code, 500)


def refusal(exc: PMWError, *, pre_csrf: str = "") -> HTMLResponse:
    """A refused request as a page, with the API's status: 401 is the sign-in form (and the API's
    ``WWW-Authenticate``), anything else the error's code and message."""
    status = status_of(exc)
    if status == 401:
        return render("sign_in.html", 401, {"WWW-Authenticate": 'Bearer realm="pmw"'}, error=exc, pre_csrf=pre_csrf,
                      page="sign-in")
    return render("error.html", status, error=exc, page="error")


__all__ = ["HEADERS", "NAV", "STATIC", "TEMPLATES", "refusal", "render", "status_of", "when"]
