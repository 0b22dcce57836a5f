"""Conformance: ordered migrations, idempotent on an existing database."""

from __future__ import annotations

import pytest

from engine.policy.enforcement import LocalScopeRules
from engine.world.book import open_world
from store import LATEST, Store
from tests.conftest import close_world, kept


def test_init_applies_every_migration_once(db_url: str) -> None:
    store = Store(db_url)
    assert store.schema_version() == 0
    assert store.init(1) == list(range(1, LATEST + 1))
    assert store.init(2) == []
    assert store.schema_version() == LATEST
    store.close()


@pytest.mark.parametrize("backend", ["sqlite-file", "postgres"], indirect=True)  # memory: new db per Store
def test_init_on_a_populated_database_keeps_the_data(db_url: str) -> None:
    w = kept(open_world(db_url, policy=LocalScopeRules()))
    w.register_agent("a", "A", "worker", "t")
    close_world(w)
    again = kept(open_world(db_url, policy=LocalScopeRules()))
    assert again.get_agent("a").display_name == "A"
    close_world(again)
