"""``pmw backup``: a consistent copy of a SQLite world taken while ``pmw serve`` runs and writes, and the
refusals that write nothing (an existing DEST, PostgreSQL, client mode).

The server is a real subprocess (``tests.service.support.Served``) with a client thread committing a
compare-and-set counter through the API the whole time; the backup is a real ``pmw backup`` process; the
copy is checked on its own (``PRAGMA integrity_check``), against the live log (its events are the live
log's first events, at least those committed before the backup started) and by opening it with
``Runtime.open`` on a real PDP serving the copied deployment (the working tree is pointed nowhere).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from engine.client.http import ServerClient
from engine.errors import PMWError
from engine.runtime import Runtime
from engine.settings import Settings
from store import Store
from store.backup import integrity_check
from tests.service.support import GOVERNOR, Served, base_env, pmw, wait_until

COUNTER = "counter"


class CounterWriter:
    """Commits ``counter`` = {"n": v} at version v through the server until stopped; counts its commits."""

    def __init__(self, client: ServerClient, actor: str) -> None:
        self.client = client
        self.actor = actor
        self.committed = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="counter-writer", daemon=True)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                version = self.committed
                self.client.call("world", "compare_and_set_state", (), {
                    "actor": self.actor, "key": COUNTER, "expected_version": version, "value": {"n": version + 1}})
                self.committed = version + 1
        except PMWError as exc:  # reported by stop() (a RemoteError, ServerUnreachable)
            self.error = exc

    def start(self) -> CounterWriter:
        self._thread.start()
        return self

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive(), "the writer did not stop"
        if self.error is not None:
            raise AssertionError(f"the writer failed: {self.error!r}")
        return self.committed


def events_of(db: Path) -> list[tuple[int, str, str, str]]:
    """Every event of the SQLite file ``db`` (the store's reader): (seq, event_id, op_id, subject_id)."""
    store = Store(f"sqlite:///{db}")
    try:
        return [(int(r["seq"]), str(r["event_id"]), str(r["op_id"]), str(r["subject_id"]))
                for r in store.read.events(0, None)]
    finally:
        store.close()


def copy_settings(copy: Path, nowhere: Path) -> Settings:
    """The copy opened as a world of its own: its data directory is the backup, the working tree's policy
    directory a path that does not exist (so a start that tried to deploy it would fail)."""
    return Settings(db_url=f"sqlite:///{copy / 'world.db'}", artifact_dir=None, policy_dir=nowhere,
                    pdp_address=None, pdp_admin_user=None, pdp_admin_password=None, policy_deploy_root=None)


def backup_cli(env: dict[str, str], cwd: Path, dest: Path, *extra: str) -> tuple[int, Any, str]:
    done = pmw([*extra, "--json", "backup", str(dest)], env, cwd=cwd)
    out: Any = json.loads(done.stdout) if done.returncode == 0 else None
    return done.returncode, out, done.stderr


def test_a_backup_taken_while_the_server_writes_is_consistent(tmp_path: Path) -> None:
    artifact = tmp_path / "report.txt"
    artifact.write_bytes(b"the report, version 1\n")
    with Served(tmp_path) as served:
        alice = served.add_agent("alice", ["state.write"])
        # an artifact's bytes go in through the embedded CLI (the API carries no bytes yet), while serving
        done = pmw(["--as", GOVERNOR, "--json", "artifacts", "register", str(artifact), "--type", "report",
                    "--id", "art-1"], served.env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        writer = CounterWriter(served.client(alice), "alice").start()
        wait_until(lambda: writer.committed >= 20 or writer.error is not None, 60, "20 commits before the backup")
        live_db = served.data / "world.db"
        store = Store(f"sqlite:///{live_db}")
        try:
            head_before = store.read.last_seq()
        finally:
            store.close()
        dest = tmp_path / "backups" / "b1"
        code, report, err = backup_cli(served.env, tmp_path, dest)
        at_return = writer.committed
        wait_until(lambda: writer.committed >= at_return + 20 or writer.error is not None, 60,
                   "20 commits after the backup")
        writes = writer.stop()
        assert served.health()["status"] == "ok"
    assert code == 0, err
    copy_db = dest / "world.db"

    # the copy on its own: whole, the same schema, verified by the command too
    assert integrity_check(copy_db) == ["ok"]
    assert report["integrity"] == "ok"
    live_store = Store(f"sqlite:///{served.data / 'world.db'}")
    try:
        assert report["schema_version"] == live_store.schema_version()
    finally:
        live_store.close()
    assert sorted(p.name for p in dest.iterdir()) == ["artifacts", "backup.json", "policy-deploys", "world.db"]
    assert json.loads((dest / "backup.json").read_text()) == report

    # against the live log: the copy is a prefix of it, at least as far as it was when the backup started,
    # and the server went on writing after it
    live, copied = events_of(served.data / "world.db"), events_of(copy_db)
    assert copied == live[:len(copied)]
    assert copied[-1][0] == report["last_seq"] >= head_before
    assert len(live) > len(copied)
    assert writes > at_return

    # no torn state: the counter's row agrees with the counter's events in the copy
    counter_events = sum(1 for e in copied if e[3] == COUNTER)
    with Runtime.open(copy_settings(dest, tmp_path / "no-such-policies")) as runtime:
        entry = runtime.world.get_state(COUNTER, actor=GOVERNOR)
        assert entry.version == counter_events == entry.value["n"]
        assert entry.version <= writes
        # the copied deployment is what the copy serves (the working tree was pointed nowhere), unchanged
        assert runtime.book.current_policy_epoch().epoch == report["policy_epoch"]  # type: ignore[union-attr]
        assert (dest / "policy-deploys" / "current").resolve().name == report["policy_epoch"]
        assert report["policy_epoch"] in report["deployments"]
        # the artifact's bytes came along, verified against the checksum the copy records
        assert runtime.world.read_artifact("art-1", actor=GOVERNOR).content == artifact.read_bytes()
    assert report["artifact_files"] >= 1


def test_an_existing_dest_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    env = base_env(tmp_path / "data")
    done = pmw(["--json", "init"], env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    a_file = tmp_path / "a-file"
    a_file.write_bytes(b"keep me")
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    for dest in (empty, a_file):
        code, _, err = backup_cli(env, tmp_path, dest)
        assert code == 5, err
        problem = json.loads(err)
        assert problem["code"] == "already_exists"
        assert problem["id"] == str(dest)
    assert list(empty.iterdir()) == []
    assert a_file.read_bytes() == b"keep me"
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before
    # and a new DEST works on the same world (the refusal was about DEST, not the world)
    code, report, err = backup_cli(env, tmp_path, tmp_path / "fresh")
    assert code == 0, err
    assert report["integrity"] == "ok"


def test_a_postgresql_world_is_refused_with_pg_dump_named(tmp_path: Path, pg_url: str) -> None:
    env = base_env(tmp_path / "data", PMW_DB_URL=pg_url)
    done = pmw(["--json", "init"], env, cwd=tmp_path)  # a real PostgreSQL world
    assert done.returncode == 0, done.stderr
    dest = tmp_path / "b"
    code, _, err = backup_cli(env, tmp_path, dest)
    assert code == 3, err
    problem = json.loads(err)
    assert problem["code"] == "invalid_input"
    assert problem["field"] == "--db"
    assert "pg_dump" in problem["message"] and "pg_basebackup" in problem["message"]
    assert not dest.exists()


def test_a_client_of_a_server_is_refused(tmp_path: Path) -> None:
    env = base_env(tmp_path / "data", PMW_SERVER="http://127.0.0.1:9", PMW_TOKEN="pmw_tok_x_y")
    dest = tmp_path / "b"
    code, _, err = backup_cli(env, tmp_path, dest)
    assert code == 3, err
    assert json.loads(err)["field"] == "--server"
    assert not dest.exists()


@pytest.mark.parametrize("inside", ["artifacts", "policy-deploys"])
def test_a_dest_inside_what_is_copied_is_refused(tmp_path: Path, inside: str) -> None:
    env = base_env(tmp_path / "data")
    assert pmw(["--json", "init"], env, cwd=tmp_path).returncode == 0
    dest = tmp_path / "data" / inside / "b"
    code, _, err = backup_cli(env, tmp_path, dest)
    assert code == 3, err
    assert json.loads(err)["field"] == "DEST"
    assert not dest.exists()
