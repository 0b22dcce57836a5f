"""Shared fixtures: every store backend (SQLite in memory, SQLite file, a real PostgreSQL the tests
start themselves), worlds with an injected clock and ids.

Tests play the runtime: a world is opened as the runtime opens it (:func:`engine.world.book.open_world`),
the fixtures hand the test the agent-facing World, and :func:`book_of` gives back the runtime's book of
that world (bootstrap, recorded decisions, controller steps, epochs, state images) for the runtime's part
of a test. Nothing reachable from a World leads to its book."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from engine.policy.cerbos_adapter import CerbosPdp
from engine.policy.enforcement import LocalScopeRules, PdpAuthorizer
from engine.policy.pdp_process import ManagedPdp
from engine.runtime import Runtime
from engine.settings import load_settings
from engine.sources import ManualClock, SeededIds
from engine.world import World
from engine.world.book import RuntimeBook, open_world
from store import Store
from tests import hypothesis_budget
from tests.pg_cluster import INSTALL_HINT, PgCluster, binaries_available

#: The hypothesis budget of this run (``HYPOTHESIS_PROFILE``: ``ci`` unless ``thorough``; tests/hypothesis_budget.py).
HYPOTHESIS_PROFILE = hypothesis_budget.load()

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


_BOOKS: dict[int, RuntimeBook] = {}


def kept(book: RuntimeBook) -> World:
    """``book.world``, remembered so that :func:`book_of` finds its book."""
    _BOOKS[id(book.world)] = book
    return book.world


def book_of(world: World) -> RuntimeBook:
    """The runtime's book of a world a test opened (through :func:`kept`)."""
    return _BOOKS[id(world)]


def close_world(world: World) -> None:
    """Close the store of a world a test opened."""
    _BOOKS.pop(id(world)).close()


def open_local_world(url: str, artifact_dir: Path, *, clock: ManualClock | None = None, seed: int = 7) -> World:
    """A world with no PDP (the store's own rules only), as the store's conformance tests use."""
    return kept(open_world(url, policy=LocalScopeRules(), artifact_dir=artifact_dir, clock=clock or ManualClock(),
                           ids=SeededIds(seed)))


@pytest.fixture
def world(db_url: str, tmp_path: Path, clock: ManualClock) -> Iterator[World]:
    w = open_local_world(db_url, tmp_path / "artifacts", clock=clock)
    yield w
    close_world(w)


@pytest.fixture
def pg_url(pg_cluster: PgCluster) -> str:
    return pg_cluster.create_database()


# -- the policy decision point ------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[1]


def _require_cerbos() -> None:
    from engine.errors import PolicyUnavailable
    from engine.policy.pdp_process import INSTALL_HINT, cerbos_binary

    try:
        cerbos_binary()
    except PolicyUnavailable:
        if IN_CI:
            pytest.fail(f"CI needs the Cerbos PDP: {INSTALL_HINT}")
        pytest.skip(f"Cerbos PDP not installed: {INSTALL_HINT}")


@pytest.fixture(scope="session")
def policy_deployment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository's policies, validated and deployed under their epoch (the runtime's own path)."""
    from engine.policy.governance import deploy

    _require_cerbos()
    root = tmp_path_factory.mktemp("policy-deploys")
    deploy(REPO / "policies", root)
    return root / "current"


@pytest.fixture(scope="session")
def managed_pdp(policy_deployment: Path) -> Iterator[ManagedPdp]:
    pdp = ManagedPdp(policy_deployment)
    pdp.start()
    yield pdp
    pdp.stop()


#: The deadline of the session's shared PDP client. The runtime's 2 s default (``PMW_PDP_TIMEOUT_S``) and what
#: a missed deadline does are tested with hung and slow PDPs of their own (tests/policy/test_faults.py); the
#: shared client answers tests about what is decided, on a CI machine that may be busy with other work, where
#: one large batch check was seen to take over 2 s (DEADLINE_EXCEEDED in test_plan_check_agreement at load 9).
SHARED_PDP_TIMEOUT_S = 15.0


@pytest.fixture(scope="session")
def pdp_client(managed_pdp: ManagedPdp) -> Iterator[CerbosPdp]:
    assert managed_pdp.address is not None
    client = CerbosPdp(managed_pdp.address, timeout_s=SHARED_PDP_TIMEOUT_S)
    yield client
    client.close()


def open_pdp_world(url: str, pdp: CerbosPdp, artifact_dir: Path, *, clock: ManualClock | None = None,
                   seed: int = 7) -> World:
    """A world decided by the real PDP, its epoch recorded, with a bootstrapped governor ``gov``."""
    from engine.runtime import probe_epoch

    store = Store(url)
    book = RuntimeBook(store, policy=PdpAuthorizer(pdp, store.read), clock=clock or ManualClock(),
                       ids=SeededIds(seed), artifact_dir=artifact_dir)
    store.init(book.clock.now_us())
    book.activate_policy_epoch(probe_epoch(pdp), "tests")
    book.bootstrap_governor("gov", "Governor", "t-gov")
    world = kept(book)
    world.activate_session("term:t-gov")
    return world


def _privileged_roles() -> frozenset[str]:
    import yaml

    doc = yaml.safe_load((REPO / "policies" / "_authority" / "authority.yaml").read_text())
    return frozenset(doc["exportConstants"]["definitions"]["privileged_roles"])


#: Workspace roles no agent may take itself (the policy's ``privileged_roles``): the governor grants them.
PRIVILEGED_ROLES = _privileged_roles()


def add_agent(world: World, agent_id: str, capabilities: list[str] | None = None, *, clearance: int = 0,
              role: str = "worker", active: bool = True) -> str:
    """Register ``agent_id`` and have the governor grant it ``capabilities`` and ``clearance``. A privileged
    ``role`` (:data:`PRIVILEGED_ROLES`) is never self-taken: the agent registers as ``worker`` and ``gov``
    grants the role."""
    privileged = role in PRIVILEGED_ROLES
    world.register_agent(agent_id, agent_id.title(), "worker" if privileged else role, f"t-{agent_id}")
    if active:
        world.activate_session(f"term:t-{agent_id}")
    granted = bool(capabilities or clearance)
    if granted or privileged:
        world.grant("gov", agent_id, capabilities=(capabilities or []) if granted else None,
                    clearance=clearance if granted else None, role_id=role if privileged else None)
    return agent_id


@pytest.fixture
def pworld(tmp_path: Path, pdp_client: CerbosPdp) -> Iterator[World]:
    """A world on a SQLite file, every call decided by the real PDP."""
    w = open_pdp_world(f"sqlite:///{tmp_path / 'world.db'}", pdp_client, tmp_path / "artifacts")
    yield w
    close_world(w)


def runtime_on_policy_copy(tmp_path: Path, name: str = "policies") -> Runtime:
    """A runtime (with its own PDP) over a SQLite world in ``tmp_path``, deciding with a copy of the
    repository's policies at ``tmp_path / name`` that the test may edit and reload; governor ``gov``
    bootstrapped and active. The caller closes it."""
    source = tmp_path / name
    shutil.copytree(REPO / "policies", source)
    rt = Runtime.open(load_settings(db_url=f"sqlite:///{tmp_path / 'data' / 'w.db'}", policy_dir=source))
    rt.book.bootstrap_governor("gov", "Governor", "t-gov")
    rt.world.activate_session("term:t-gov")
    return rt

