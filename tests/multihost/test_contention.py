"""Contention stress, CI-sized (``benchmarks/contention_bench.py`` is the full run): 8 processes make a few
thousand compare-and-set attempts on 4 keys (2 counters, 2 registers) through the gateway, on a SQLite file
and on PostgreSQL; then every acknowledged write is in the history at its version with its value, nothing
unacknowledged is, versions form one legal order, no value is corrupted, and the log folds to the state.
The checker itself is shown to catch each kind of violation on doctored histories."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.contention_bench import check_counter, check_register, run

PROCS = 8


def _assert_clean(report: dict[str, object]) -> None:
    assert report["violations"] == 0, report
    assert report["fold_equals_state"] is True
    assert isinstance(report["conflicts"], int) and report["conflicts"] > 0  # the keys really were contended


def test_contended_writes_on_sqlite_lose_nothing_and_corrupt_nothing(tmp_path: Path) -> None:
    report = run(f"sqlite:///{tmp_path / 'w.db'}", procs=PROCS, attempts=2_000, keys=4,
                 artifact_dir=tmp_path / "artifacts")
    _assert_clean(report)
    assert report["attempts"] == 2_000


@pytest.mark.postgres
def test_contended_writes_on_postgres_lose_nothing_and_corrupt_nothing(pg_url: str, tmp_path: Path) -> None:
    report = run(pg_url, procs=PROCS, attempts=800, keys=4, artifact_dir=tmp_path / "artifacts")
    _assert_clean(report)
    assert report["attempts"] == 800


COUNTER = [(0, 1, 0), (1, 2, 1), (2, 3, 2), (3, 4, 3)]
REGISTER = [(0, 1, None), (1, 2, {"w": 0, "n": 0}), (2, 3, {"w": 1, "n": 0}), (3, 4, {"w": 0, "n": 1})]
REGISTER_ACKS = [(2, {"w": 0, "n": 0}), (3, {"w": 1, "n": 0}), (4, {"w": 0, "n": 1})]


def test_the_checker_passes_a_legal_history() -> None:
    assert check_counter("c", COUNTER, 3, (4, 3)).total() == 0
    assert check_register("r", REGISTER, REGISTER_ACKS, (4, {"w": 0, "n": 1}), 2).total() == 0


def test_the_checker_catches_a_lost_increment_and_a_phantom_one() -> None:
    assert check_counter("c", COUNTER, 4, (4, 3)).lost
    assert check_counter("c", COUNTER, 2, (4, 3)).phantom


def test_the_checker_catches_a_corrupted_counter_and_a_version_written_twice() -> None:
    assert check_counter("c", [*COUNTER[:3], (3, 4, 7)], 3, (4, 7)).corrupted
    assert check_counter("c", [*COUNTER[:3], (2, 3, 2)], 3, (3, 2)).order


def test_the_checker_catches_a_lost_register_write_a_phantom_and_a_reordered_process() -> None:
    lost = check_register("r", REGISTER[:3], REGISTER_ACKS, (3, {"w": 1, "n": 0}), 2)
    assert lost.lost and not lost.phantom
    assert check_register("r", REGISTER, REGISTER_ACKS[:2], (4, {"w": 0, "n": 1}), 2).phantom
    swapped = [REGISTER[0], (1, 2, {"w": 0, "n": 1}), REGISTER[2], (3, 4, {"w": 0, "n": 0})]
    acks = [(2, {"w": 0, "n": 1}), (3, {"w": 1, "n": 0}), (4, {"w": 0, "n": 0})]
    assert check_register("r", swapped, acks, (4, {"w": 0, "n": 0}), 2).order
    assert check_register("r", [*REGISTER[:3], (3, 4, {"w": 9})], REGISTER_ACKS, (4, {"w": 9}), 2).corrupted
    assert check_register("r", REGISTER, REGISTER_ACKS, (3, {"w": 1, "n": 0}), 2).state
