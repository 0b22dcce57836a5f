"""``pmw backup DEST``: a consistent, verified copy of a SQLite world while it is in use (no PDP needed).

DEST is a new directory laid out as a data directory, so a copy can be served as it is
(``PMW_DB_URL=sqlite:///DEST/world.db``) or moved back in place:

- ``world.db``: the database as of one commit (SQLite's online backup API, ``store.backup``), verified:
  ``PRAGMA integrity_check`` is ``ok`` and the schema version equals the source's;
- ``artifacts/``: the artifact directory (content-addressed files and staged ones), copied after the
  database, so every version the copy records has its bytes (files only ever move from staging into place);
- ``policy-deploys/``: every deployed policy set, ``current`` pointing at the epoch the copied database
  records as current (what a start of the copy serves);
- ``backup.json``: what was copied, written last: a backup without it is incomplete.

Refused before anything is written: client mode, a DEST that exists (``AlreadyExists``), a DEST inside the
artifact or deployment directory, PostgreSQL (``pg_dump``/``pg_basebackup``: ``docs/operations.md``) and
an in-memory database (``InvalidInput``). A failure on the way removes DEST. The decision log
(``<data dir>/audit/``) is not part of the copy.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from engine.cli.runtime import invocation

if TYPE_CHECKING:
    from engine.models.common import Model
    from engine.settings import Settings

DB_FILE = "world.db"
ARTIFACTS = "artifacts"
DEPLOYS = "policy-deploys"
MANIFEST = "backup.json"
POSTGRES_HINT = ("pmw backup copies a SQLite world; back up PostgreSQL with its own tools: pg_dump (a logical "
                 "copy) or pg_basebackup (a physical one), see docs/operations.md")


@functools.cache
def report_model() -> type[Model]:
    """``BackupReport``, the model ``pmw backup`` shows; built on first use (loading the CLI imports no
    models)."""
    from engine.models.common import Model

    class BackupReport(Model):
        """A verified backup: where it is, what the copied database holds (schema version, last event seq,
        current policy epoch), the integrity check's answer, the artifact files and policy deployments
        copied beside it, and how long it took."""

        dest: str
        database: str
        bytes: int
        schema_version: int
        last_seq: int
        policy_epoch: str | None
        integrity: str
        artifact_files: int
        deployments: list[str]
        taken_at_us: int
        seconds: float

    return BackupReport


def _is_postgres(db_url: str) -> bool:
    return db_url.split(":", 1)[0].split("+", 1)[0].lower() in ("postgresql", "postgres")


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _copy_live_file(source: Path, dest: Path) -> bool:
    """Copy one file that may vanish meanwhile (a staged artifact promoted into place); whether it was."""
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, dest, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def copy_artifacts(source: Path, dest: Path) -> int:
    """Copy the artifact directory ``source`` into the new directory ``dest``; the number of files copied.
    Staging is copied first: a staged file that is promoted while it is being copied is then found in place."""
    from engine.world.artifacts import STAGING_DIR

    dest.mkdir()
    if not source.is_dir():
        return 0
    copied = 0
    tops = sorted(source.iterdir(), key=lambda p: (p.name != STAGING_DIR, p.name))
    for top in tops:
        if top.is_file() and not top.is_symlink():
            copied += _copy_live_file(top, dest / top.name)
            continue
        for folder, _dirs, files in os.walk(top):
            for name in sorted(files):
                path = Path(folder) / name
                copied += _copy_live_file(path, dest / path.relative_to(source))
    return copied


def copy_deployments(source: Path, dest: Path, epoch: str | None) -> list[str]:
    """Copy every deployed policy set under ``source`` (``p-*`` folders; deploys in progress are left out)
    into the new directory ``dest`` and point ``current`` at ``epoch`` (the copied database's), else at what
    ``source/current`` names. Returns the epochs copied."""
    dest.mkdir()
    if not source.is_dir():
        return []
    epochs = sorted(p.name for p in source.iterdir() if p.is_dir() and not p.is_symlink()
                    and not p.name.startswith("."))
    for name in epochs:
        shutil.copytree(source / name, dest / name, symlinks=True)
    link = source / "current"
    served = epoch if epoch in epochs else (link.resolve().name if link.is_symlink() else None)
    if served in epochs:
        (dest / "current").symlink_to(str(served))
    return epochs


def take_backup(settings: Settings, dest: Path) -> Model:
    """Back up the SQLite world ``settings`` name into the new directory ``dest`` (see the module
    docstring); the report. Checks come first and write nothing; a failure after them removes ``dest``."""
    from engine.errors import AlreadyExists, InvalidInput
    from engine.runtime import Runtime
    from engine.settings import sqlite_file
    from engine.sources import SystemClock
    from store.backup import copy_sqlite, verify_copy

    db_file = sqlite_file(settings.db_url)
    if db_file is None:
        if _is_postgres(settings.db_url):
            raise InvalidInput("--db", POSTGRES_HINT)
        raise InvalidInput("--db", "pmw backup copies a SQLite database file; an in-memory database has none")
    dest = Path(os.path.abspath(dest.expanduser()))
    if dest.exists() or dest.is_symlink():
        raise AlreadyExists("backup destination", str(dest))
    artifact_dir = Path(os.path.abspath(settings.resolved_artifact_dir()))
    deploy_root = Path(os.path.abspath(Runtime.deploy_root(settings)))
    for root in (artifact_dir, deploy_root):
        if _inside(dest, root):
            raise InvalidInput("DEST", f"{dest} is inside {root}, which the backup copies")
    if not db_file.is_file():
        from engine.errors import NotFound

        raise NotFound("database", str(db_file))
    started = time.monotonic()
    taken_at_us = SystemClock().now_us()
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        dest.mkdir()
    except FileExistsError:
        raise AlreadyExists("backup destination", str(dest)) from None
    try:
        version = copy_sqlite(db_file, dest / DB_FILE, busy_timeout_ms=settings.busy_timeout_ms)
        copied = verify_copy(dest / DB_FILE, version)
        files = copy_artifacts(artifact_dir, dest / ARTIFACTS)
        epochs = copy_deployments(deploy_root, dest / DEPLOYS, copied.policy_epoch)
        report = report_model().model_validate({
            "dest": str(dest), "database": str(db_file), "bytes": copied.bytes,
            "schema_version": copied.schema_version, "last_seq": copied.last_seq,
            "policy_epoch": copied.policy_epoch, "integrity": "ok", "artifact_files": files,
            "deployments": epochs, "taken_at_us": taken_at_us, "seconds": round(time.monotonic() - started, 3)})
        partial = dest / f".{MANIFEST}.partial"
        partial.write_text(json.dumps(report.model_dump(mode="json"), indent=2, sort_keys=True) + "\n")
        partial.replace(dest / MANIFEST)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    return report


def backup(
    ctx: typer.Context,
    dest: Annotated[Path, typer.Argument(metavar="DEST", help="A new directory (refused if it exists).")],
) -> None:
    """Copy the SQLite world of --db into DEST while it is in use (a running pmw serve keeps serving):
    world.db as of one commit (SQLite's online backup API), verified (integrity_check, schema version),
    with artifacts/ and policy-deploys/ beside it and backup.json last. PostgreSQL: use pg_dump or
    pg_basebackup. Needs no PDP; not as a client of a server."""
    with invocation(ctx) as run:
        run.embedded_only("pmw backup")
        run.show(take_backup(run.settings(), dest))


def register(app: typer.Typer) -> None:
    app.command("backup")(backup)
