"""A database migrated by a newer PMW refuses to open (``SchemaTooNew``, with the versions, nothing written),
on SQLite and PostgreSQL, through the store, the World, the runtime and ``pmw init``; and a call after
``close()`` is a typed ``Closed`` error (code ``closed``), never grpc's ``ValueError`` or a SQLAlchemy error
(nor, for an in-memory SQLite world, a fresh empty database).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import store.migrations as migrations
from engine.errors import Closed, SchemaTooNew
from engine.policy.attributes import resource
from engine.policy.cerbos_adapter import CerbosPdp
from engine.policy.enforcement import LocalScopeRules, provisional_principal
from engine.policy.model import PrincipalRef
from engine.policy.pdp_process import ManagedPdp
from engine.runtime import Runtime
from engine.world.book import open_world
from store import LATEST, Store
from tests.cli_support import Pdp, assert_clean_failure, invoke, pdp_fixture
from tests.conftest import add_agent, book_of, close_world, open_pdp_world

pdp = pdp_fixture


def _migrated_by_a_newer_pmw(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Migrate ``url`` as a PMW one migration ahead would (its migration changes nothing else), then go back
    to this PMW's migrations."""
    future = migrations.Migration(LATEST + 1, "a migration from the future", lambda conn: None)
    with monkeypatch.context() as newer:
        newer.setattr(migrations, "MIGRATIONS", (*migrations.MIGRATIONS, future))
        newer.setattr(migrations, "LATEST", LATEST + 1)
        s = Store(url)
        assert s.init(1) == list(range(1, LATEST + 2))
        s.close()


def test_a_newer_schema_refuses_to_open(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _migrated_by_a_newer_pmw(db_url, monkeypatch)
    reader = Store(db_url)
    before = reader.read.counts_and_versions()
    with pytest.raises(SchemaTooNew):
        migrations.require_supported(reader.db)
    refused_store = Store(db_url)
    with pytest.raises(SchemaTooNew) as refused:
        refused_store.init(2)
    assert (refused.value.found, refused.value.supported, refused.value.code) == (LATEST + 1, LATEST,
                                                                                  "schema_too_new")
    with pytest.raises(Closed):  # the refused store was not kept open
        refused_store.read.count("events")
    with pytest.raises(SchemaTooNew):
        open_world(db_url, policy=LocalScopeRules())
    assert reader.read.counts_and_versions() == before
    reader.close()


def test_the_current_schema_opens(db_url: str) -> None:
    """The refusal is the newer version's: the same steps on this PMW's own schema open fine."""
    s = Store(db_url)
    s.init(1)
    assert migrations.require_supported(s.db) == LATEST
    s.close()
    open_world(db_url, policy=LocalScopeRules()).close()


def test_the_runtime_and_pmw_init_refuse_a_newer_schema(tmp_path: Path, pdp: Pdp,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'world.db'}"
    _migrated_by_a_newer_pmw(url, monkeypatch)
    with pytest.raises(SchemaTooNew):
        Runtime.open(pdp.settings(url))
    result = invoke(url, "init", as_json=True, env=pdp.env)
    assert_clean_failure(result, 8)
    error = json.loads(result.stderr)
    assert (error["code"], error["found"], error["supported"]) == ("schema_too_new", LATEST + 1, LATEST)


# -- after close() -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["sqlite-memory", "sqlite-file", "postgres"], indirect=True)
def test_world_calls_after_close_are_closed(db_url: str, tmp_path: Path) -> None:
    book = open_world(db_url, policy=LocalScopeRules(), artifact_dir=tmp_path / "artifacts")
    world = book.world
    world.register_agent("alice", "Alice", "worker", "t-alice")
    book.close()
    for call in (lambda: world.get_agent("alice"), world.list_tasks,
                 lambda: world.create_task("alice", "after close"), world.events,
                 book.store.read.counts_and_versions):
        with pytest.raises(Closed) as closed:
            call()
        assert (closed.value.code, closed.value.what) == ("closed", "store")
    book.close()  # closing twice is harmless


def test_the_pdp_client_after_close_is_closed(managed_pdp: ManagedPdp) -> None:
    assert managed_pdp.address is not None
    client = CerbosPdp(managed_pdp.address)
    client.close()
    with pytest.raises(Closed) as closed:
        client.plan(_principal(), "task", "read")
    assert closed.value.code == "closed"
    with pytest.raises(Closed):
        client.plans(_principal(), [("task", "read"), ("memory", "read")])


def test_a_pdp_world_after_its_runtime_closed_is_closed(tmp_path: Path, pdp: Pdp) -> None:
    runtime = Runtime.open(pdp.settings(f"sqlite:///{tmp_path / 'world.db'}"))
    runtime.book.bootstrap_governor("gov", "Governor", "t-gov")
    world, client = runtime.world, runtime.pdp
    runtime.close()
    with pytest.raises(Closed):
        world.get_agent("gov", actor="gov")
    with pytest.raises(Closed):
        world.create_task("gov", "after close")
    with pytest.raises(Closed):
        client.check(_principal(), [(resource("agent", "gov"), ["read"])])  # the PDP client itself
    with pytest.raises(Closed):
        client.plan(_principal(), "task", "read")


def test_a_pdp_decided_world_whose_client_closed_is_closed(tmp_path: Path, managed_pdp: ManagedPdp) -> None:
    """The store open, the PDP client closed: the decision is ``Closed``, not a raw grpc error."""
    assert managed_pdp.address is not None
    client = CerbosPdp(managed_pdp.address)
    world = open_pdp_world(f"sqlite:///{tmp_path / 'world.db'}", client, tmp_path / "artifacts")
    add_agent(world, "alice", ["task.create"])
    client.close()
    before = book_of(world).store.read.counts_and_versions()
    with pytest.raises(Closed):
        world.create_task("alice", "after the client closed")
    assert book_of(world).store.read.counts_and_versions() == before
    close_world(world)


def _principal() -> PrincipalRef:
    return provisional_principal("alice")
