"""What the console tests share: a served world (a real ``pmw serve`` subprocess, ``tests/service/support``)
seeded through the API with what every console page shows, candidate policy sets, a reports folder, and
real headless Chromium driven by Playwright (Debian's ``/usr/bin/chromium``; never a downloaded browser).

The seeded world holds secrets no page may show: alice's private memory (:data:`PRIVATE_SECRET`) and
alice's unrevealed answer in the room ``r-blind`` (:data:`ANSWER_SECRET`; bob has not answered).
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.errors import PMWError
from tests.conftest import IN_CI
from tests.service.support import GOVERNOR, Served

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
AXE = REPO / "node_modules" / "axe-core" / "axe.min.js"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PRIVATE_SECRET = "PLANTED-PRIVATE-7f3a9c"
ANSWER_SECRET = "PLANTED-ANSWER-51be02"
PAGES = ("/console/policies", "/console/decisions", "/console/explain", "/console/approvals", "/console/world",
         "/console/topology", "/console/reports", "/console/reports/flagship")
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def require_chromium() -> None:
    """Chromium must be there (``scripts/bootstrap.sh`` installs it): a failure under CI, else a skip."""
    if CHROMIUM.exists() and AXE.exists():
        return
    message = (f"the console's browser tests need {CHROMIUM} (apt-get install -y chromium chromium-driver, "
               f"or bash scripts/bootstrap.sh) and {AXE} (npm ci)")
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


def artifacts_dir() -> Path:
    """Where screenshots go: ``$PMW_ARTIFACTS/console`` or ``artifacts/console``."""
    base = Path(os.environ["PMW_ARTIFACTS"]) if os.environ.get("PMW_ARTIFACTS") else REPO / "artifacts"
    out = base / "console"
    out.mkdir(parents=True, exist_ok=True)
    return out


def candidate_sets(root: Path) -> tuple[Path, Path]:
    """Two candidate copies of the repository's policies: ``good`` (a comment changed: a new digest, every
    test passing) and ``bad`` (a test suite expecting what the policy does not allow)."""
    good, bad = root / "cand-good", root / "cand-bad"
    for target in (good, bad):
        shutil.copytree(REPO / "policies", target)
    tool = good / "resources" / "tool.yaml"
    tool.write_text(tool.read_text() + "\n# reviewed in the console test\n")
    suite = bad / "tests" / "tool_test.yaml"
    text = suite.read_text()
    flipped = text.replace("EFFECT_DENY", "EFFECT_ALLOW", 1)
    assert flipped != text, "the tool suite has no EFFECT_DENY expectation to flip"
    suite.write_text(flipped)
    return good, bad


def reports_dir(root: Path) -> Path:
    """A reports folder with one run, as ``pmw simulate`` writes it (and a secret outside it)."""
    reports = root / "reports"
    run = reports / "flagship"
    run.mkdir(parents=True)
    (run / "metrics.json").write_text('{"conflicts_opened": 1, "conflicts_resolved": 1}\n')
    (run / "report.md").write_text("# flagship\n\nconflicts opened: 1\n")
    (run / "events.jsonl").write_text(f'{{"secret": "{PRIVATE_SECRET}"}}\n')
    (root / "outside.md").write_text(f"{PRIVATE_SECRET}\n")
    return reports


@dataclass
class ConsoleWorld:
    """The served world and what the tests name in it."""

    served: Served
    tokens: dict[str, str]
    good: Path
    bad: Path
    ids: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.served.url

    def call(self, who: str, name: str, **arguments: Any) -> Any:
        return self.served.client(self.tokens[who]).call("world", name, (), arguments)


def seed(served: Served) -> dict[str, str]:
    """Agents (alice, bob: workers; rev: a reviewer), the secrets, a denial, an S3 approval, and topology
    versions with the room ``r-conflict`` open at one and closed at a later one. Returns their tokens."""
    tokens = {GOVERNOR: served.governor_token}
    caps = ["memory.write", "room.open", "state.write", "tool:search"]
    tokens["alice"] = served.add_agent("alice", caps)
    tokens["bob"] = served.add_agent("bob", ["memory.write"])
    gov = served.client(served.governor_token).call
    gov("world", "register_agent", (), {"agent_id": "rev", "display_name": "Rev", "role_id": "reviewer",
                                        "term_key": "t-rev"})
    gov("world", "activate_session", (), {"target": "term:t-rev"})
    tokens["rev"] = served.issue("rev")
    alice = served.client(tokens["alice"]).call
    bob = served.client(tokens["bob"]).call
    alice("world", "store_memory", (), {"content": PRIVATE_SECRET, "epistemic_type": "observation"})
    alice("world", "create_room", (), {"goal": "blind round", "members": ["alice", "bob"], "room_id": "r-blind"})
    alice("world", "commit_answer", (), {"room_id": "r-blind", "content": ANSWER_SECRET})
    alice("world", "compare_and_set_state", (), {"key": "plan", "expected_version": 0, "value": {"step": 1}})
    try:  # bob holds no state.write: denied, and the decision log records the denial
        bob("world", "compare_and_set_state", (), {"key": "plan", "expected_version": 1, "value": {"x": 1}})
    except PMWError:
        pass
    else:
        raise AssertionError("bob's state write was allowed")
    gov("world", "create_room", (), {"goal": "resolve the conflict", "members": ["alice", "bob"],
                                     "room_id": "r-conflict"})
    gov("world", "set_topology_edge", (), {"source_agent": "alice", "target_agent": "bob", "edge_type": "room",
                                           "scope": "r-conflict", "reason": "conflict room opened"})
    gov("world", "close_room", (), {"room_id": "r-conflict"})
    gov("world", "set_topology_edge", (), {"source_agent": "alice", "target_agent": "bob", "edge_type": "room",
                                           "scope": "r-conflict", "active": False, "reason": "conflict room closed"})
    return tokens


def signed_in(base_url: str, token: str) -> tuple[httpx.Client, str]:
    """An HTTP client holding a console session for ``token``, and the session's CSRF secret."""
    client = httpx.Client(base_url=base_url, timeout=120.0, follow_redirects=False)
    form = client.get("/console/sign-in")
    done = client.post("/console/sign-in", data={"csrf": CSRF.findall(form.text)[0], "token": token})
    assert done.status_code == 303, done.text[:500]
    page = client.get("/console/policies")
    return client, CSRF.findall(page.text)[0]


__all__ = ["ANSWER_SECRET", "AXE", "CHROMIUM", "CHROMIUM_ARGS", "PAGES", "PRIVATE_SECRET", "ConsoleWorld",
           "artifacts_dir", "candidate_sets", "reports_dir", "require_chromium", "seed", "signed_in"]
