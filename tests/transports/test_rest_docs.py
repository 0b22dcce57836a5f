"""docs/rest.md names every route of the REST table (``engine.service.rest_routes.ROUTES``) with its World
call, and no route the table does not hold."""

from __future__ import annotations

import re

from engine.service.rest_routes import ROUTES
from tests.cli_support import REPO

PAGE = REPO / "docs" / "rest.md"


def test_the_page_names_every_route_and_its_call() -> None:
    rows = re.findall(r"^\| [a-z]+ \| `(GET|PUT|POST|DELETE) (/v1/[^`]+)` \| `([a-z_]+)`", PAGE.read_text(), re.M)
    documented = {(method, path): call for method, path, call in rows}
    table = {(r.method, r.path): r.call for r in ROUTES}
    assert documented == table
    assert len(rows) == len(ROUTES)  # no route twice
