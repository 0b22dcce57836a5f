"""Defence in depth below validation: a value the database or its driver refuses is ``InvalidInput`` (exit 3,
"do not retry"), never ``StoreUnavailable`` (exit 8, "retry later"), on SQLite and PostgreSQL, and nothing
is written. The requests here go around every model on purpose (a raw ``WriteRequest`` to the gateway, a
reader query with a bad key), which is the only way to reach the store with such values now.

A store that really is unavailable is still ``StoreUnavailable`` (the mapping is not a blanket).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.errors import InvalidInput, StoreUnavailable
from store import Insert, Store, WriteRequest
from store.gateway import commit
from tests.hardening.support import HARDENING_BACKENDS

NOW = 1_767_225_600_000_000


@pytest.fixture(scope="module", params=HARDENING_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def store(backend: str, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Store]:
    """One store per backend for the module: every refused request leaves it as it was (asserted)."""
    if backend == "postgres":
        url = request.getfixturevalue("pg_cluster").create_database()
    else:
        url = f"sqlite:///{tmp_path_factory.mktemp('mapping') / 'world.db'}"
    s = Store(url)
    s.init(NOW)
    yield s
    s.close()


def _request(n: int, *, key: str | None = None, value: Any = None, version: int = 1, created_at_us: int = NOW,
             payload: dict[str, Any] | None = None, subject_id: str = "k") -> WriteRequest:
    key = key if key is not None else f"k{n}"
    row = {"key": key, "value": value if value is not None else {"v": 1}, "updated_by": "alice",
           "updated_at_us": NOW, "version": version}
    return WriteRequest(op_id=f"op-{n}", command="raw_write", request_hash="0" * 64, actor_id="alice",
                        event_id=f"evt-{n}", event_type="state.set", subject_kind="state", subject_id=subject_id,
                        created_at_us=created_at_us, result={"key": key}, payload=payload or {},
                        changes=[Insert("state_entries", row, "state", key)])


# (label, request, backends where the driver refuses it; SQLite keeps a NUL character as data)
BAD_WRITES: list[tuple[str, WriteRequest, tuple[str, ...]]] = [
    ("version 2**63", _request(1, version=2**63), ("sqlite-file", "postgres")),
    ("version -2**63-1", _request(2, version=-(2**63) - 1), ("sqlite-file", "postgres")),
    ("event time 2**64", _request(3, created_at_us=2**64), ("sqlite-file", "postgres")),
    ("surrogate in a key", _request(4, key="k\udcff", subject_id="k"), ("sqlite-file", "postgres")),
    ("surrogate in the event", _request(5, subject_id="\ud800"), ("sqlite-file", "postgres")),
    ("int beyond 64 bits in JSON", _request(6, value={"n": 2**70}), ("sqlite-file", "postgres")),
    ("surrogate in JSON", _request(7, payload={"s": "\udcff"}), ("sqlite-file", "postgres")),
    ("NUL in a key", _request(8, key="k\x00", subject_id="k"), ("postgres",)),
    ("NUL in the event", _request(9, subject_id="a\x00b"), ("postgres",)),
]


@pytest.mark.parametrize(("label", "request_", "refused_on"), BAD_WRITES, ids=[c[0] for c in BAD_WRITES])
def test_a_raw_write_with_a_value_the_store_cannot_hold_is_invalid_input(
        store: Store, backend: str, label: str, request_: WriteRequest, refused_on: tuple[str, ...]) -> None:
    if backend not in refused_on:  # SQLite keeps a NUL character as data: the write commits
        assert not commit(store.db, request_).replayed
        return
    before = store.read.counts_and_versions()
    with pytest.raises(InvalidInput) as refused:
        commit(store.db, request_)
    assert not isinstance(refused.value, StoreUnavailable)
    assert (refused.value.code, refused.value.exit_code) == ("invalid_input", 3)
    assert "raw_write" in refused.value.reason
    assert store.read.counts_and_versions() == before


def test_the_same_request_with_good_values_commits(store: Store) -> None:
    """The bad requests differ from a good one only in the bad value (so the refusal is that value's)."""
    outcome = commit(store.db, _request(100))
    assert not outcome.replayed and store.read.get("state_entries", key="k100") is not None


READS: list[tuple[str, Callable[[Store], Any], tuple[str, ...]]] = [
    ("get by a key beyond 64 bits", lambda s: s.read.get("events", seq=2**64), ("sqlite-file",)),
    ("rows with a limit beyond 64 bits", lambda s: s.read.rows("tasks", limit=2**70), ("sqlite-file", "postgres")),
    ("events after 2**70", lambda s: s.read.events(after_seq=2**70), ("sqlite-file", "postgres")),
    ("get by a key with a surrogate", lambda s: s.read.get("tasks", task_id="t\udcff"), ("sqlite-file", "postgres")),
    ("rows by a key with a surrogate", lambda s: s.read.rows("tasks", {"owner_agent": "\ud800"}),
     ("sqlite-file", "postgres")),
    ("principal of a surrogate", lambda s: s.read.principal_inputs("\udcff"), ("sqlite-file", "postgres")),
    ("get by a key with NUL", lambda s: s.read.get("tasks", task_id="t\x00"), ("postgres",)),
    ("rows by a key with NUL", lambda s: s.read.rows("tasks", {"owner_agent": "\x00"}), ("postgres",)),
    ("principal of NUL", lambda s: s.read.principal_inputs("a\x00"), ("postgres",)),
    ("a negative limit", lambda s: s.read.rows("tasks", limit=-1), ("postgres",)),
]


@pytest.mark.parametrize(("label", "query", "refused_on"), READS, ids=[c[0] for c in READS])
def test_a_read_with_a_value_the_store_cannot_compare_is_invalid_input(
        store: Store, backend: str, label: str, query: Callable[[Store], Any], refused_on: tuple[str, ...]) -> None:
    if backend not in refused_on:  # the database answers (nothing matches): still never store_unavailable
        query(store)
        return
    with pytest.raises(InvalidInput) as refused:
        query(store)
    assert not isinstance(refused.value, StoreUnavailable)
    assert refused.value.code == "invalid_input"


def test_an_unreachable_store_is_still_store_unavailable(tmp_path: Path) -> None:
    gone = Store(f"sqlite:///{tmp_path / 'no-such-dir' / 'world.db'}")
    with pytest.raises(StoreUnavailable):
        gone.read.count("events")
    with pytest.raises(StoreUnavailable):
        commit(gone.db, _request(200))
