"""``PMW_CONSOLE_REPORTS`` is a declared setting: read with the others, and the console browses it."""

from __future__ import annotations

from pathlib import Path

import pytest

import engine.settings as settings_module
from engine.settings import load_settings


def test_console_reports_defaults_to_where_pmw_simulate_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PMW_CONSOLE_REPORTS", raising=False)
    assert load_settings().console_reports == Path("sim-out")


def test_console_reports_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PMW_CONSOLE_REPORTS", str(tmp_path / "runs"))
    assert load_settings().console_reports == tmp_path / "runs"
    assert "PMW_CONSOLE_REPORTS" in (settings_module.__doc__ or "")  # listed with the others
