"""YAML from outside is read safely: an alias bomb, a recursive alias, nesting 10,000 deep, a number of
5,000 digits and a file that is not UTF-8 are each refused with a typed error naming the file (and the
line), by the scenario loader, the rule-file loader and the rule copier alike, and by ``pmw simulate`` and
``pmw rules check`` with the invalid-input exit code; documents PMW writes itself (which share repeated
lists as anchors) still load, as plain data that shares nothing.

The alias bomb is measured in a child process (its own baseline, its own peak RSS): refused within 1 s and
50 MB above that baseline, where the old loaders took 26 s and 1.2 GB (``pmw simulate``) or hung.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from engine.controller import RuleFileError, load_rule_dir
from engine.errors import YamlRefused
from engine.yaml_input import ALIAS_BUDGET, MAX_YAML_DEPTH, load_yaml, parse_yaml, parse_yaml_data
from simulations.errors import ScenarioError
from simulations.generator import dump, workload
from simulations.rules import declared_constants, prepare_rules
from simulations.scenario import load_scenario
from tests.cli_support import assert_clean_failure, invoke

REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "simulations" / "scenarios" / "flagship.yaml"


def alias_bomb(levels: int = 9, fan: int = 9) -> str:
    """The "billion laughs": each level a list of ``fan`` aliases to the level below (fan**levels leaves)."""
    leaf = '"' + " ".join(["lol"] * 12) + '"'
    lines = ["name: bomb", "seed: 1", f"l0: &l0 [{leaf}, {leaf}, {leaf}]"]
    for i in range(1, levels + 1):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * fan)}]")
    return "\n".join(lines) + "\n"


BOMB = alias_bomb()
DEEP = "v: " + "[" * 10_000 + "]" * 10_000 + "\n"
LATIN1 = "name: caf\xe9\nseed: 1\n".encode("latin-1")


def test_the_bomb_is_the_size_the_issue_measured() -> None:
    assert 600 <= len(BOMB.encode()) <= 800


# -- the child process: time and memory of each loader on the bomb ------------------------------------------

CHILD = textwrap.dedent("""
    import json, resource, sys, time, tracemalloc
    from pathlib import Path
    from engine.controller.rules_file import load_rule_file
    from engine.errors import PMWError
    from simulations.scenario import load_scenario
    from simulations.rules import declared_constants
    path = Path(sys.argv[1])
    out = {}
    for name, load in (("scenario", lambda: load_scenario(path)), ("rules", lambda: load_rule_file(path)),
                       ("constants", lambda: declared_constants(path.parent))):
        baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
        tracemalloc.start()
        started = time.process_time()  # CPU seconds: a bomb's expansion is work, and load cannot inflate them
        try:
            load()
            error = None
        except PMWError as exc:
            error = exc.code
        seconds = time.process_time() - started
        peak_traced = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - baseline
        out[name] = {"error": error, "seconds": seconds, "traced_mb": peak_traced / 2**20, "rss_mb": grown / 1024}
    print(json.dumps(out))
""")


def test_an_alias_bomb_is_refused_within_a_second_and_50_mb(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    done = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, timeout=120,
                          cwd=REPO, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    assert measured["scenario"]["error"] == "scenario_invalid", measured
    assert measured["rules"]["error"] == "rule_file_invalid", measured
    assert measured["constants"]["error"] == "yaml_refused", measured
    for name, m in measured.items():
        assert m["seconds"] < 1.0, (name, m)
        assert m["traced_mb"] < 50 and m["rss_mb"] < 50, (name, m)


# -- each loader: typed, file:line -------------------------------------------------------------------------------


def _bomb_line(line: int | None) -> int:
    """The line a bomb refusal must name: one of its alias lines (where the expansion crossed the budget)."""
    assert line is not None and 1 <= line <= BOMB.count("\n"), line
    assert "*l" in BOMB.splitlines()[line - 1], line
    return line


def _write(tmp_path: Path, text: str | bytes, name: str = "f.yaml") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize(("text", "line", "reason"), [
    (BOMB, -1, "aliases expand past the budget"),
    ("name: x\nloop: &a [1, *a]\n", 2, "recursive document"),
    (DEEP, 1, f"nested deeper than {MAX_YAML_DEPTH} levels"),
    ("name: x\nseed: " + "9" * 5000 + "\n", 0, "a value cannot be read"),
    ("name: x\nwhen: 2024-13-45\n", 0, "a value cannot be read"),
    ("name: x\nnul: \"a\\0b\"\n", 0, ""),  # an escaped NUL is legal YAML: the scenario's models refuse it
], ids=["alias-bomb", "recursive-alias", "deep", "huge-int", "bad-date", "escaped-nul"])
def test_the_scenario_loader_refuses_with_file_and_line(tmp_path: Path, text: str, line: int, reason: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    assert err.value.file == str(path)
    assert reason in err.value.reason
    if line:
        expected = _bomb_line(err.value.line) if line == -1 else line
        assert err.value.line == expected
        assert str(err.value).startswith(f"{path}:{expected}: ")


@pytest.mark.parametrize(("text", "line", "reason"), [
    (BOMB, -1, "aliases expand past the budget"),
    ("version: 1\nloop: &a [1, *a]\n", 2, "recursive document"),
    (DEEP, 1, f"nested deeper than {MAX_YAML_DEPTH} levels"),
    ("version: " + "9" * 5000 + "\n", None, "a value cannot be read"),
], ids=["alias-bomb", "recursive-alias", "deep", "huge-int"])
def test_the_rule_loader_refuses_with_file_and_line(tmp_path: Path, text: str, line: int | None,
                                                     reason: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(RuleFileError) as err:
        load_rule_dir(tmp_path)
    expected = _bomb_line(err.value.line) if line == -1 else line
    assert (err.value.file, err.value.line, err.value.code) == (str(path), expected, "rule_file_invalid")
    assert reason in err.value.reason


def test_a_file_that_is_not_utf8_is_a_typed_error_naming_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, LATIN1)
    with pytest.raises(ScenarioError) as scenario:
        load_scenario(path)
    assert (scenario.value.file, scenario.value.line) == (str(path), 1)
    assert "not UTF-8: byte 0xe9 at offset 9" in scenario.value.reason
    with pytest.raises(RuleFileError) as rules:
        load_rule_dir(tmp_path)
    assert (rules.value.file, rules.value.line) == (str(path), 1) and "not UTF-8" in rules.value.reason
    for copy in (lambda: declared_constants(tmp_path), lambda: prepare_rules(tmp_path, {"x": 1}, tmp_path / "out")):
        with pytest.raises(YamlRefused) as refused:
            copy()
        assert (refused.value.file, refused.value.line, refused.value.code) == (str(path), 1, "yaml_refused")


def test_a_syntax_error_in_a_rule_file_a_scenario_names_is_typed(tmp_path: Path) -> None:
    _write(tmp_path, "version: 1\nconstants: {a: [1\n")
    with pytest.raises(YamlRefused) as refused:
        declared_constants(tmp_path)
    assert refused.value.line == 3 and "YAML syntax" in refused.value.reason


# -- what must still load -------------------------------------------------------------------------------------


def test_documents_pmw_writes_load_as_plain_unshared_data() -> None:
    text = dump(workload(300, 900, seed=3))
    assert "&id001" in text and "*id001" in text  # safe_dump shares the capability list: aliases
    data = parse_yaml(text, "generated").data
    first, second = data["agents"][0]["capabilities"], data["agents"][1]["capabilities"]
    assert first == second and first is not second
    first.append("mutated")
    assert "mutated" not in second


def test_the_shipped_scenarios_and_rules_load_unchanged() -> None:
    for path in sorted((REPO / "simulations" / "scenarios").glob("*.yaml")):
        load_scenario(path)
    assert load_rule_dir(REPO / "rules").definition


def test_the_alias_budget_is_what_the_docs_say() -> None:
    """Aliases may add as many nodes as the document has, or the budget, whichever is larger: just under
    passes, just over is refused."""
    fan = ALIAS_BUDGET // 10
    under = "base: &b [1, 2, 3, 4, 5, 6, 7, 8, 9]\nuses: [" + ", ".join(["*b"] * fan) + "]\n"
    assert len(parse_yaml_data(under)["uses"]) == fan
    over = "base: &b [1, 2, 3, 4, 5, 6, 7, 8, 9]\nuses: [" + ", ".join(["*b"] * (fan * 2)) + "]\n"
    with pytest.raises(YamlRefused, match="budget"):
        parse_yaml_data(over)


def test_a_nul_character_or_surrogate_in_yaml_text_is_refused(tmp_path: Path) -> None:
    with pytest.raises(YamlRefused, match="NUL"):
        parse_yaml("a: b\x00c\n", "t.yaml")
    with pytest.raises(YamlRefused, match="surrogate"):
        parse_yaml("a: \udcff\n", "t.yaml")
    assert load_yaml(_write(tmp_path, "a: 1\n")).data == {"a": 1}


# -- the command line ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("content", [BOMB, LATIN1, DEEP], ids=["alias-bomb", "not-utf8", "deep"])
def test_pmw_rules_check_and_simulate_exit_with_invalid_input(tmp_path: Path, content: str | bytes) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    _write(rules, content, "bad.yaml")
    scenario = _write(tmp_path, content, "scenario.yaml")
    for args, code in ((("rules", "check", str(rules)), "rule_file_invalid"),
                       (("simulate", str(scenario), "--out", str(tmp_path / "out")), "scenario_invalid")):
        for as_json in (False, True):
            result = invoke(None, *args, as_json=as_json)
            assert_clean_failure(result, 3)
            if as_json:
                assert json.loads(result.stderr)["code"] == code
    assert not (tmp_path / "out").exists()  # refused before any output
