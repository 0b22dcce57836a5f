"""A token's secret is nowhere at rest: not in the SQLite file, its WAL, the PDP's decision log, the policy
deployment or any other file under the world's data directory, before or after close; the token string
neither. (The grep is shown to work: the token's id, which is not secret, is found.)"""

from __future__ import annotations

from pathlib import Path

from engine.auth.tokens import authenticate, parse_token
from tests.conftest import add_agent, runtime_on_policy_copy


def _files_holding(root: Path, needle: bytes) -> list[Path]:
    return [p for p in sorted(root.rglob("*")) if p.is_file() and needle in p.read_bytes()]


def test_the_secret_is_not_in_any_file_of_the_data_directory(tmp_path: Path) -> None:
    runtime = runtime_on_policy_copy(tmp_path)
    data = tmp_path / "data"
    try:
        world = runtime.world
        add_agent(world, "alice", ["state.write"])
        issued = [world.issue_token("gov", "alice", op_id="issue-a"), world.issue_token("gov", "gov", scope="read")]
        again = world.issue_token("gov", "alice", op_id="issue-a")
        assert again.token is None
        world.revoke_token("alice", issued[0].token_id)
        world.list_tokens("gov")
        world.events(actor="gov", limit=1000)
        runtime.book.take_snapshot("gov")
        tokens = [t.token for t in issued]
        assert all(tokens)
        secrets = [parse_token(t)[1] for t in tokens if t]
        assert authenticate(runtime.store.read, tokens[1], world.clock.now_us()).agent_id == "gov"
        wal = data / "w.db-wal"
        open_files = sorted(p for p in data.rglob("*") if p.is_file())
        assert data / "w.db" in open_files
        for needle in [*secrets, *tokens]:
            assert needle is not None
            assert _files_holding(data, needle.encode()) == [], "the secret is at rest (while open)"
        assert _files_holding(data, issued[0].token_id.encode())  # the grep reads the world's files
        if wal.exists():
            assert wal in open_files
    finally:
        runtime.close()
    for needle in [*secrets, *tokens]:
        assert needle is not None
        assert _files_holding(tmp_path, needle.encode()) == [], "the secret is at rest (after close)"
