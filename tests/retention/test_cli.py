"""`pmw contracts check` names the first problem as file:line: field and exits 3; a good folder is listed."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from engine.cli.app import app


def test_check_refuses_a_bad_contract_with_its_line(tmp_path: Path) -> None:
    (tmp_path / "actions").mkdir()
    (tmp_path / "actions" / "ping.yaml").write_text("action: ping\nside_effect: S9\n")
    result = CliRunner().invoke(app, ["--json", "contracts", "check", "--dir", str(tmp_path)])
    assert result.exit_code == 3
    error = json.loads(result.stderr)
    assert error["code"] == "contract_invalid" and error["file"].endswith("ping.yaml")


def test_check_lists_the_repository_contracts() -> None:
    result = CliRunner().invoke(app, ["--json", "contracts", "check"])
    assert result.exit_code == 0, result.output
    assert "send_message" in json.loads(result.stdout)["contracts"]
