"""``benchmarks/fault_harness.py`` summarises the fault harness's takeover times (the harness itself runs in
the suite as tests/multihost/test_deployment_faults.py, its CI-sized variant)."""

from __future__ import annotations

import pytest

from benchmarks.fault_harness import main, quantile, summarise, table


def test_quantiles_are_nearest_rank() -> None:
    values = [3.0, 1.0, 2.0, 5.0, 4.0, 10.0, 6.0, 7.0, 8.0, 9.0]
    assert (quantile(values, 0.5), quantile(values, 0.9), quantile(values, 1.0)) == (5.0, 9.0, 10.0)
    assert quantile([2.5], 0.9) == 2.5
    with pytest.raises(ValueError, match="no values"):
        quantile([], 0.5)


def test_the_summary_and_its_table() -> None:
    report = {"seed": 7, "reps": 3, "wakes": 40, "generations": 9, "namespaces": False,
              "takeover_s": {"stop_leader": [1.9, 1.7, 6.2], "kill_leader": [1.2, 1.1, 1.3], "kill_pdp": []}}
    s = summarise(report["takeover_s"])
    assert list(s) == ["kill_leader", "stop_leader"]  # a fault without takeovers is left out
    assert s["stop_leader"] == {"n": 3, "min": 1.7, "median": 1.9, "p90": 6.2, "max": 6.2}
    lines = table(report).splitlines()
    assert "seed 7" in lines[0] and lines[2].startswith("kill_leader") and lines[2].endswith("met")
    assert lines[3].startswith("stop_leader") and lines[3].endswith("MISSED")  # 6.2 s against the 5 s goal


def test_bad_repetitions_are_refused_before_anything_runs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as refused:
        main(["--reps", "0"])
    assert refused.value.code == 2 and "--reps" in capsys.readouterr().err
