"""``benchmarks/transport_bench.py`` in its CI-sized variant (``--ci``: 30 calls, 10 pushes, 20 connections x
3 s) against a real ``pmw serve`` and an embedded world, both on the real Cerbos PDP.

It must exit 0, print the side-by-side table with the targets (PASS/MISS), and its JSON must hold finite
median and p99 latencies for both calls in process, over REST and (when ``/mcp`` is served) over MCP, push
latencies for every wake sent (none missed) and the held connections with 0 errors. No timing is asserted:
the figures belong to the benchmark (docs/benchmarks-transport.md).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

from tests.cli_support import require_cerbos

REPO = Path(__file__).resolve().parents[1]


def test_the_ci_variant_runs_and_reports_every_figure(tmp_path: Path) -> None:
    require_cerbos()
    out = tmp_path / "transport.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PMW_")}
    done = subprocess.run([sys.executable, "-m", "benchmarks.transport_bench", "--ci", "--json", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    for needle in ("in process", "REST", "MCP", "overhead rest", "push sse", "connections"):
        assert needle in done.stdout, done.stdout
    assert "PASS" in done.stdout or "MISS" in done.stdout
    figures = json.loads(out.read_text())
    transports = ["in_process", "rest", *(["mcp", "mcp_raw"] if "mcp" in figures["call_latency"] else [])]
    assert "mcp" in figures["call_latency"] or any("/mcp" in n for n in figures["notes"])
    for transport in transports:
        for call in ("allowed_actions", "compare_and_set_state"):
            summary = figures["call_latency"][transport][call]
            assert summary["n"] == 30
            assert math.isfinite(summary["median_ms"]) and summary["p99_ms"] >= summary["median_ms"] > 0
    for transport in transports:  # CPU per call measured for every transport (the server's for all but in process)
        cpu = figures["cpu_per_call_ms"][transport]
        assert cpu["client_cpu_ms"] > 0 and (transport == "in_process" or cpu["server_cpu_ms"] > 0), cpu
    for name, push in figures["push"].items():
        assert push["missed"] == 0 and push["n"] == push["sent"] == 10, (name, push)
        assert math.isfinite(push["p99_ms"])
    hold = figures["connections"]
    assert hold["opened"] == hold["connections"] == 20 and hold["errors"] == 0, hold
    assert hold["wakes_sent"] >= 3 and hold["wakes_received"] == hold["wakes_sent"]
