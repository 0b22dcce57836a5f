"""Fixtures of the input-hardening tests: the backends (SQLite file and a real PostgreSQL: ``backend`` is
overridden here, so the root conftest's ``db_url`` gives a fresh database of each) and a seeded world
decided by the real PDP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.policy.cerbos_adapter import CerbosPdp
from tests.conftest import close_world, open_pdp_world
from tests.hardening.support import HARDENING_BACKENDS, Seeded, seed


@pytest.fixture(params=HARDENING_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """SQLite (a file) and PostgreSQL: the two stores whose drivers refuse different values."""
    return str(request.param)


@pytest.fixture
def seeded(db_url: str, tmp_path: Path, pdp_client: CerbosPdp) -> Iterator[Seeded]:
    """A seeded world (:func:`tests.hardening.support.seed`) on the current backend, every call decided by
    the real PDP."""
    world = open_pdp_world(db_url, pdp_client, tmp_path / "artifacts")
    try:
        yield Seeded(world, seed(world))
    finally:
        close_world(world)
