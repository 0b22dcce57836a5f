"""Runtime settings, read once from the environment (prefix ``PMW_``) or given explicitly.

``PMW_DB_URL``          database URL; default ``sqlite:///./pmw-data/world.db`` (SQLite, WAL)
``PMW_ARTIFACT_DIR``    artifact content directory; default ``artifacts/`` beside a SQLite file, else
                        ``./pmw-data/artifacts``
``PMW_SQLITE_SYNCHRONOUS``  ``NORMAL`` (default) or ``FULL``
``PMW_BUSY_TIMEOUT_MS`` SQLite busy timeout (default 30000)
``PMW_PG_IDLE_IN_TRANSACTION_MS``  PostgreSQL ends a session of ours idle inside a transaction this long
                      (default 10000; 0: never): a paused or cut-off writer's row locks are released
``PMW_POLICY_DIR``      the Cerbos policy directory the runtime's own PDP serves (default: the repo's
                        ``policies/``)
``PMW_PDP_ADDRESS``     ``host:port`` of an external PDP's gRPC listener; unset: the runtime starts its own
``PMW_PDP_ADDRESSES``   several external PDP replicas, ``host:port,host:port`` (with ``PMW_PDP_ADDRESS``, if also
                        set, first); the runtime spreads calls over them and fails over (``engine.policy.pdp_replicas``)
``PMW_PDP_REPLICAS``    how many PDPs the runtime starts itself when no external one is named (default 1)
``PMW_PDP_ADMIN_USER`` / ``PMW_PDP_ADMIN_PASSWORD``  admin credentials of an external PDP (for reloads)
``PMW_PDP_TIMEOUT_S``   deadline of every PDP call (default 2.0 s)
``PMW_POLICY_DEPLOY_ROOT``  where validated policy sets are deployed (``<root>/current`` is served);
                        default ``<data dir>/policy-deploys``; point it at an external PDP's directory
``PMW_DECISION_MEMO_SIZE``  decisions remembered per policy epoch (``engine.policy.decision_memo``); default 0:
                        off, so the PDP's decision log holds every decision (``pmw audit``); a remembered
                        decision is answered without the PDP and is not logged again
``PMW_PLAN_MEMO_SIZE``  query plans remembered (``engine.policy.plan_memo``, an exact-key LRU; default 4096):
                        a projection asks ~6 plans per agent, so a world of N agents that all wake needs
                        ~6 x N to keep missing out (each entry ~9 KB: 4096 is ~35 MB)
``PMW_CONSOLE_REPORTS``  the directory the console browses simulation reports from (``/console/reports``);
                        default ``./sim-out``, where ``pmw simulate`` writes

A bad value fails with :class:`~engine.errors.InvalidInput` naming the variable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from engine.errors import InvalidInput, StoreUnavailable
from store import DatabaseOptions

DEFAULT_DB_URL = "sqlite:///./pmw-data/world.db"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PMW_", extra="ignore", frozen=True)

    db_url: str = DEFAULT_DB_URL
    artifact_dir: Path | None = None
    sqlite_synchronous: Literal["NORMAL", "FULL"] = "NORMAL"
    busy_timeout_ms: int = Field(default=30_000, ge=0, le=600_000)
    pg_idle_in_transaction_ms: int = Field(default=10_000, ge=0, le=3_600_000)
    policy_dir: Path = Field(default_factory=lambda: Path(__file__).resolve().parents[1] / "policies")
    pdp_address: str | None = Field(default=None, pattern=r"^[A-Za-z0-9.\-\[\]:]+:[0-9]{1,5}$")
    pdp_addresses: str | None = Field(default=None, pattern=r"^[A-Za-z0-9.\-\[\]:]+:[0-9]{1,5}"
                                                            r"(,[A-Za-z0-9.\-\[\]:]+:[0-9]{1,5}){0,31}$")
    pdp_replicas: int = Field(default=1, ge=1, le=16)
    pdp_admin_user: str | None = None
    pdp_admin_password: str | None = None
    pdp_timeout_s: float = Field(default=2.0, gt=0, le=60)
    policy_deploy_root: Path | None = None
    decision_memo_size: int = Field(default=0, ge=0, le=10_000_000)
    plan_memo_size: int = Field(default=4096, ge=0, le=1_000_000)
    console_reports: Path = Path("sim-out")

    def pdp_address_list(self) -> list[str]:
        """The external PDP replicas' gRPC addresses (``PMW_PDP_ADDRESS`` first, then ``PMW_PDP_ADDRESSES``),
        each once, in order; empty: the runtime starts its own."""
        named = [self.pdp_address or "", *(self.pdp_addresses or "").split(",")]
        return list(dict.fromkeys(a for a in named if a))

    def resolved_data_dir(self) -> Path:
        """Where runtime files live: beside a SQLite database file, else ``./pmw-data``."""
        path = sqlite_file(self.db_url)
        return path.resolve().parent if path is not None else Path("pmw-data").resolve()

    def resolved_artifact_dir(self) -> Path:
        return self.artifact_dir if self.artifact_dir is not None else self.resolved_data_dir() / "artifacts"

    def database_options(self) -> DatabaseOptions:
        return DatabaseOptions(sqlite_synchronous=self.sqlite_synchronous, busy_timeout_ms=self.busy_timeout_ms,
                               pg_idle_in_transaction_ms=self.pg_idle_in_transaction_ms)

    def ensure_sqlite_parent(self) -> None:
        """Create the directory of a SQLite database file if it does not exist yet."""
        ensure_sqlite_parent(self.db_url)


def sqlite_file(db_url: str) -> Path | None:
    """The database file a ``sqlite:///`` URL names (``None``: in memory, or not SQLite)."""
    prefix = "sqlite:///"
    path = db_url[len(prefix):].split("?", 1)[0] if db_url.startswith(prefix) else ""
    return Path(path).expanduser() if path and path != ":memory:" else None


def ensure_sqlite_parent(db_url: str) -> None:
    """Create the directory of a SQLite database file named by ``db_url``, if any; else do nothing."""
    path = sqlite_file(db_url)
    if path is not None:
        parent = path.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreUnavailable(f"cannot create the database directory {parent}: {exc}") from exc


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment, with explicit ``overrides`` (``None`` values ignored)."""
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**given)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors()[0]
        name = "PMW_" + str(first["loc"][0]).upper() if first["loc"] else "PMW settings"
        raise InvalidInput(name, first["msg"]) from exc


__all__ = ["DEFAULT_DB_URL", "Settings", "ensure_sqlite_parent", "load_settings"]
