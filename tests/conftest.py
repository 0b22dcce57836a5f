"""Shared fixtures: every store backend (SQLite in memory, SQLite file, a real PostgreSQL the tests
start themselves), worlds with an injected clock and ids."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from engine.policy.enforcement import LocalScopeRules
from engine.sources import ManualClock, SeededIds
from engine.world import World
from tests.pg_cluster import INSTALL_HINT, PgCluster, binaries_available

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
BACKENDS = ("sqlite-memory", "sqlite-file", "postgres")


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    if not binaries_available():
        if IN_CI:
            pytest.fail(f"CI needs PostgreSQL: {INSTALL_HINT}")
        pytest.skip(INSTALL_HINT)
    cluster = PgCluster()
    try:
        cluster.start()
    except Exception as exc:  # noqa: BLE001 - any failure to start is reported, and fails in CI
        cluster.stop()
        if IN_CI:
            pytest.fail(f"could not start PostgreSQL: {exc}")
        pytest.skip(f"could not start PostgreSQL ({exc}); {INSTALL_HINT}")
    yield cluster
    cluster.stop()


DbUrlFactory = Callable[[], str]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def db_url_factory(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> DbUrlFactory:
    """Makes URLs of fresh, empty databases of the current backend."""
    counter = iter(range(1_000_000))

    def make() -> str:
        n = next(counter)
        if backend == "sqlite-memory":
            return "sqlite://"
        if backend == "sqlite-file":
            return f"sqlite:///{tmp_path / f'world{n}.db'}"
        cluster: PgCluster = request.getfixturevalue("pg_cluster")
        return cluster.create_database()
    return make


@pytest.fixture
def db_url(db_url_factory: DbUrlFactory) -> str:
    return db_url_factory()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def world(db_url: str, tmp_path: Path, clock: ManualClock) -> Iterator[World]:
    w = World.open(db_url, policy=LocalScopeRules(), artifact_dir=tmp_path / "artifacts", clock=clock, ids=SeededIds(7))
    yield w
    w.close()


@pytest.fixture
def pg_url(pg_cluster: PgCluster) -> str:
    return pg_cluster.create_database()
