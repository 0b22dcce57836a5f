"""Studies: a hypothesis, the scenario family and sweep that test it, and claims whose verdicts the report states
with intervals. ``pmw simulate --study simulations/studies/h3`` runs one (``--ci``: its CI-sized variant).

A study is a folder with ``study.yaml`` (validated like a scenario: unknown fields, bad references and bad
figures fail at load with ``file:line: field``)::

    name: h3-adaptive-wake
    hypothesis: "H3 (seed 001 §81): for low event density, Cost(EventDriven) < Cost(FixedPolling) ..."
    family:                               # the scenarios compared (files relative to the study folder)
      - {label: event-driven, file: event_driven.yaml}
      - {label: polling, file: polling.yaml}
    sweep:                                # optional axes applied to every member (their grid)
      - {name: history, key: agents.0.params.handoff.after_steps, values: [2, 8]}
    seeds: 3                              # replicates of every variant
    metrics: [context_cost_bytes, task_quality]   # what the table and plot show (default: what varies)
    ci: {seeds: 2, sweep: {history: [2, 4]}}      # the CI-sized variant: fewer seeds, fewer values
    claims:
      - {kind: lower, metric: context_cost_bytes, of: {scenario: event-driven}, than: {scenario: polling}}
    notes: ["what the reader must know to read the answer"]

Claims (``of``/``than`` select variants by axis name, or ``scenario`` for the family member; a claim is
judged at every combination of the other axes):

* ``lower`` / ``higher``: ``of``'s mean is below / above ``than``'s, separated by Welch's 95 % interval of
  the difference. Verdict ``supported``, ``not separated`` (the interval includes 0) or ``contradicted``.
* ``not_lower``: ``of`` is not below ``than`` by more than ``tolerance`` (the interval's lower end).
* ``at_least``: every variant's interval (its mean without one) is at or above ``value``.
* ``gap_grows``: the gap ``than - of`` increases along ``axis``, from its first value to its last, by more
  than the two gaps' intervals.
* ``stronger_correlation``: over all runs, ``|r(metric, x)|`` exceeds ``|r(metric, than_x)|`` (Pearson, with
  Fisher-z intervals); ``cannot tell`` when a figure does not vary.

Verdicts are ``supported``, ``not separated``, ``contradicted`` or ``cannot tell``; the report states each with
the numbers it rests on. Writes ``study.md``/``.html`` (the answer first, then the batch's table and plot),
``study.csv``/``.json``/``.png``/``_runs.csv`` (the batch, as :mod:`simulations.sweep_report` writes it),
``answer.json`` (each claim's verdict and sentence) and every run under ``runs/``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.settings import Settings
from simulations.batch import Cell
from simulations.errors import ScenarioError
from simulations.figure_names import figure_names, is_figure
from simulations.grid import Axis, Scalar, Variant, format_value, parse_seeds
from simulations.results import SweepResult, VariantSummary
from simulations.scenario import _compose, _first_error, load_scenario
from simulations.stats import Delta, Summary, correlation, delta
from simulations.sweep_report import fmt, write_batch

Progress = Callable[[float], None]
STUDY_FILE = "study.yaml"
MEMBER_AXIS = "scenario"
Verdict = Literal["supported", "not separated", "contradicted", "cannot tell"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Member(_Strict):
    label: str = Field(pattern=r"^[a-z0-9][a-z0-9_\-]{0,63}$")
    file: str


class AxisSpec(_Strict):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")
    key: str | list[str] = Field(min_length=1, description="a dotted key, or several set to the same value")
    values: list[str | int | float | bool] = Field(min_length=1, max_length=100)


class CiSpec(_Strict):
    seeds: int = Field(default=2, ge=1, le=10)
    sweep: dict[str, list[str | int | float | bool]] = Field(default_factory=dict)


Selector = dict[str, str | int | float | bool]


class Claim(_Strict):
    kind: Literal["lower", "higher", "not_lower", "at_least", "gap_grows", "stronger_correlation"]
    metric: str
    of: Selector = Field(default_factory=dict)
    than: Selector = Field(default_factory=dict)
    value: float | None = None
    tolerance: float = Field(default=0.0, ge=0)
    axis: str | None = None
    x: str | None = None
    than_x: str | None = None
    says: str = Field(default="", max_length=500, description="the claim in words")


class Study(_Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_\-]{0,63}$")
    hypothesis: str = Field(min_length=1, max_length=4000)
    question: str = Field(default="", max_length=4000)
    family: list[Member] = Field(min_length=1, max_length=20)
    sweep: list[AxisSpec] = Field(default_factory=list, max_length=6)
    seeds: int = Field(default=3, ge=1, le=100)
    metrics: list[str] = Field(default_factory=list)
    ci: CiSpec = CiSpec()
    claims: list[Annotated[Claim, Field()]] = Field(min_length=1)
    notes: list[str] = Field(default_factory=list)
    folder: str = Field(default=".", exclude=True)

    def axes(self, *, ci: bool) -> list[tuple[str, Axis]]:
        """(name, axis) of each sweep axis; ``ci``: the CI-sized values where the study gives them."""
        return [(a.name, Axis(a.key if isinstance(a.key, str) else "+".join(a.key),
                             tuple(self.ci.sweep.get(a.name, a.values) if ci else a.values))) for a in self.sweep]

    def member_file(self, member: Member) -> Path:
        return (Path(self.folder) / member.file).resolve()


def load_study(path: str | Path, *, ci: bool = False) -> Study:
    """Read and validate ``path`` (a study folder or its ``study.yaml``), including every member scenario at
    every point of its grid (``ScenarioError`` naming the file, line and field)."""
    folder = Path(path)
    file = folder / STUDY_FILE if folder.is_dir() else folder
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(str(file), 0, "", f"cannot read the study: {exc.strerror or exc}") from exc
    data, lines = _compose(text, str(file))
    try:
        study = Study.model_validate({**data, "folder": str(file.resolve().parent)})
    except ValidationError as exc:
        raise _first_error(exc, str(file), lines) from None
    _check_study(study, str(file), lines)
    for variant, member_file in _members(study, ci=ci):
        load_scenario(member_file, variant.overrides)
    return study


def _check_study(s: Study, file: str, lines: Mapping[tuple[str | int, ...], int]) -> None:
    def fail(path: tuple[str | int, ...], reason: str) -> None:
        line = max((lines.get(path[:i], 0) for i in range(len(path), 0, -1)), default=1)
        raise ScenarioError(file, line or 1, ".".join(map(str, path)), reason)

    labels = [m.label for m in s.family]
    names = [a.name for a in s.sweep]
    for i, m in enumerate(s.family):
        if labels.count(m.label) > 1:
            fail(("family", i, "label"), f"label {m.label!r} is used twice")
        if not s.member_file(m).is_file():
            fail(("family", i, "file"), f"no scenario file {m.file!r} in the study's folder")
    for i, name in enumerate(s.metrics):
        if not is_figure(name):
            fail(("metrics", i), f"unknown figure {name!r}")
    for name in s.ci.sweep:
        if name not in names:
            fail(("ci", "sweep", name), f"no sweep axis is named {name!r}")
    for i, c in enumerate(s.claims):
        for field in ("metric", "x", "than_x"):
            value = getattr(c, field)
            if value is not None and not is_figure(value):
                fail(("claims", i, field), f"unknown figure {value!r}; figures: {', '.join(sorted(figure_names()))}")
        for side in ("of", "than"):
            for key, value in getattr(c, side).items():
                allowed = labels if key == MEMBER_AXIS else next((a.values for a in s.sweep if a.name == key), None)
                if allowed is None:
                    fail(("claims", i, side, key), f"no axis {key!r} (axes: {', '.join([MEMBER_AXIS, *names])})")
                elif value not in allowed:
                    fail(("claims", i, side, key), f"{value!r} is not a value of {key!r}")
        needs = {"at_least": ("value",), "gap_grows": ("axis",), "stronger_correlation": ("x", "than_x")}
        for field in needs.get(c.kind, ()):
            if getattr(c, field) is None:
                fail(("claims", i), f"a {c.kind} claim needs {field}")
        if c.axis is not None and c.axis not in names:
            fail(("claims", i, "axis"), f"no sweep axis is named {c.axis!r}")


def _members(s: Study, *, ci: bool) -> list[tuple[Variant, Path]]:
    from simulations.grid import grid

    named = s.axes(ci=ci)
    names = {a.key: name for name, a in named}
    out = []
    for m in s.family:
        for point in grid([a for _, a in named]):
            here = ",".join(f"{names[k]}={format_value(v)}" for k, v in point.point)
            parts = ([m.label] if len(s.family) > 1 else []) + ([here] if named else [])
            out.append((Variant(",".join(parts) or m.label, point.point, m.label), s.member_file(m)))
    return out


# -- running and judging ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Judgement:
    """One claim's verdict, with the sentence that states it and its numbers."""

    claim: Claim
    verdict: Verdict
    text: str


@dataclass(frozen=True)
class StudyResult:
    """A finished study: its definition, the batch it ran and each claim's judgement."""

    study: Study
    batch: SweepResult
    judgements: tuple[Judgement, ...]
    ci: bool

    def lines(self) -> list[str]:
        """The answer in words, one line per claim."""
        return [f"{self.study.name}: {j.verdict}: {j.text}" for j in self.judgements]


def run_study(path: str | Path, out: str | Path, *, ci: bool = False, jobs: int = 1, settings: Settings | None = None,
              progress: Progress | None = None, plots: bool = True, run_plots: bool = False) -> StudyResult:
    """Run the study at ``path`` into ``out`` and judge its claims. Everything is validated before any run."""
    from simulations.run import run_batch

    study = load_study(path, ci=ci)
    folder = Path(out)
    named = study.axes(ci=ci)
    seeds = parse_seeds(study.ci.seeds if ci else study.seeds, 1)
    cells: list[Cell] = []
    for variant, file in _members(study, ci=ci):
        for seed in seeds:
            base = folder / "runs" / variant.label
            cells.append(Cell(len(cells), variant, file, seed, base / f"seed={seed}" if len(seeds) > 1 else base,
                              load_scenario(file, {**variant.overrides, "seed": seed})))
    batch = run_batch(cells, [a for _, a in named], seeds, folder, metrics=study.metrics or None, jobs=jobs,
                      settings=settings, progress=progress, plots=run_plots)
    aliases = {name: axis.key for name, axis in named}
    judgements = tuple(judge(c, batch, aliases) for c in study.claims)
    result = StudyResult(study, batch, judgements, ci)
    write_study(result, folder, plots=plots)
    return result


def _matches(v: VariantSummary, selector: Mapping[str, Any], aliases: Mapping[str, str]) -> bool:
    for name, want in selector.items():
        got = v.variant.file_label if name == MEMBER_AXIS else dict(v.variant.point).get(aliases.get(name, name))
        if got != want:
            return False
    return True


def _context(v: VariantSummary, selector: Mapping[str, Any], aliases: Mapping[str, str]) -> tuple[Any, ...]:
    """What identifies a variant apart from the selector's axes (the combination a claim is judged at)."""
    keys = {aliases.get(k, k) for k in selector}
    rest = [(k, x) for k, x in v.variant.point if k not in keys]
    return (v.variant.file_label if MEMBER_AXIS not in selector else "", *rest)


def _pairs(batch: SweepResult, c: Claim, aliases: Mapping[str, str]) -> list[tuple[str, Summary, Summary]]:
    """(where, of's summary, than's summary) at every combination of the axes the claim does not select."""
    out = []
    names = {key: name for name, key in aliases.items()}
    selected = {**c.of, **c.than}
    for v in batch.variants:
        if not _matches(v, c.of, aliases):
            continue
        here = _context(v, selected, aliases)
        other = next((w for w in batch.variants if _matches(w, c.than, aliases)
                      and _context(w, selected, aliases) == here), None)
        if other is not None:
            where = ", ".join(f"{names.get(k, k)}={format_value(x)}" for k, x in here[1:]) or "every variant"
            out.append((where, v.summaries[c.metric], other.summaries[c.metric]))
    return out


def _name(sel: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={format_value(v)}" for k, v in sel.items()) or "every variant"


def _mean_ci(s: Summary) -> str:
    if s.mean is None:
        return "n/a"
    if s.ci_low is None or s.ci_high is None:
        return fmt(s.mean)
    return f"{fmt(s.mean)} [{fmt(s.ci_low)}, {fmt(s.ci_high)}]"


def _diff(d: Delta) -> str:
    if d.value is None:
        return "n/a"
    if d.ci_low is None or d.ci_high is None:
        return f"{d.value:+.4g}"
    return f"{d.value:+.4g} [{d.ci_low:+.4g}, {d.ci_high:+.4g}]"


def judge(c: Claim, batch: SweepResult, aliases: Mapping[str, str]) -> Judgement:
    """The verdict of one claim on a finished batch."""
    if c.kind == "at_least":
        return _at_least(c, batch)
    if c.kind == "stronger_correlation":
        return _correlation(c, batch)
    if c.kind == "gap_grows":
        return _gap_grows(c, batch, aliases)
    pairs = _pairs(batch, c, aliases)
    if not pairs:
        return Judgement(c, "cannot tell", f"no variant pair matches {_name(c.of)} vs {_name(c.than)}")
    verdicts: list[Verdict] = []
    parts = []
    for where, a, b in pairs:
        d = delta(b, a)  # of - than
        verdicts.append(_pair_verdict(c, d))
        rel = f", {abs(d.value) / abs(b.mean):.1%} of {_name(c.than)}" if d.value is not None and b.mean else ""
        parts.append(f"at {where}: {_name(c.of)} {_mean_ci(a)} vs {_name(c.than)} {_mean_ci(b)}, difference "
                     f"{_diff(d)}{rel}")
    verdict = _combine(verdicts)
    return Judgement(c, verdict, f"{c.says or c.kind + ' ' + c.metric} ({c.metric}): " + "; ".join(parts))


def _pair_verdict(c: Claim, d: Delta) -> Verdict:
    if d.value is None:
        return "cannot tell"
    low = d.ci_low if d.ci_low is not None else d.value
    high = d.ci_high if d.ci_high is not None else d.value
    if c.kind == "lower":
        return "supported" if high < 0 else "contradicted" if low > 0 else "not separated"
    if c.kind == "higher":
        return "supported" if low > 0 else "contradicted" if high < 0 else "not separated"
    # not_lower: of may not be below than by more than the tolerance
    return "supported" if low >= -c.tolerance else "contradicted" if high < -c.tolerance else "not separated"


WORST_FIRST: tuple[Verdict, ...] = ("contradicted", "cannot tell", "not separated")


def _combine(verdicts: Sequence[Verdict]) -> Verdict:
    """A claim judged at several points holds only where it holds at every one (the worst verdict wins)."""
    return next((v for v in WORST_FIRST if v in verdicts), "supported")


def _at_least(c: Claim, batch: SweepResult) -> Judgement:
    assert c.value is not None
    parts: list[str] = []
    verdicts: list[Verdict] = []
    for v in batch.variants:
        s = v.summaries[c.metric]
        if s.mean is None:
            verdicts.append("cannot tell")
        else:
            low = s.ci_low if s.ci_low is not None else s.mean
            high = s.ci_high if s.ci_high is not None else s.mean
            verdicts.append("supported" if low >= c.value else "contradicted" if high < c.value else "not separated")
        parts.append(f"{v.variant.label}: {_mean_ci(s)}")
    text = f"{c.says or c.metric + ' at least ' + fmt(c.value)} ({c.metric} >= {fmt(c.value)}): " + "; ".join(parts)
    return Judgement(c, _combine(verdicts), text)


def _gap_grows(c: Claim, batch: SweepResult, aliases: Mapping[str, str]) -> Judgement:
    assert c.axis is not None
    key = aliases[c.axis]
    pairs = _pairs(batch, c, aliases)
    gaps: list[tuple[Scalar, Delta]] = []
    for v in batch.variants:
        if _matches(v, c.of, aliases):
            other = next((w for w in batch.variants if _matches(w, c.than, aliases)
                          and _context(w, {**c.of, **c.than}, aliases) == _context(v, {**c.of, **c.than}, aliases)),
                         None)
            if other is not None:
                gaps.append((dict(v.variant.point).get(key), delta(v.summaries[c.metric], other.summaries[c.metric])))
    if len(gaps) < 2 or not pairs or any(g.value is None for _, g in gaps):
        return Judgement(c, "cannot tell", f"{c.metric}: fewer than two gaps along {c.axis}")
    first, last = gaps[0][1], gaps[-1][1]
    assert first.value is not None and last.value is not None
    first_high = first.ci_high if first.ci_high is not None else first.value
    last_low = last.ci_low if last.ci_low is not None else last.value
    first_low = first.ci_low if first.ci_low is not None else first.value
    last_high = last.ci_high if last.ci_high is not None else last.value
    verdict: Verdict = "supported" if last_low > first_high else "contradicted" if last_high < first_low \
        else "not separated"
    text = (f"{c.says or 'the gap grows'} (gap in {c.metric}, {_name(c.than)} - {_name(c.of)}, along {c.axis}): "
            + "; ".join(f"{c.axis}={format_value(x)}: {_diff(g)}" for x, g in gaps))
    return Judgement(c, verdict, text)


def _correlation(c: Claim, batch: SweepResult) -> Judgement:
    assert c.x is not None and c.than_x is not None
    rows = [r.result.figures for r in batch.runs]
    y = [row.get(c.metric) for row in rows]
    rx = correlation([row.get(c.x) for row in rows], y)
    rt = correlation([row.get(c.than_x) for row in rows], y)

    def show(name: str, r: Any) -> str:
        if r.r is None:
            return f"r({c.metric}, {name}) n/a over {r.n} runs (a side does not vary)"
        ci = f" [{r.ci_low:+.3f}, {r.ci_high:+.3f}]" if r.ci_low is not None else ""
        return f"r({c.metric}, {name}) = {r.r:+.3f}{ci} over {r.n} runs"

    text = f"{c.says or 'stronger correlation'}: {show(c.x, rx)}; {show(c.than_x, rt)}"
    if rx.r is None:
        return Judgement(c, "cannot tell", text)
    if rt.r is None:
        return Judgement(c, "supported" if abs(rx.r) > 0 else "cannot tell", text)
    if rx.ci_low is None or rt.ci_low is None or rx.ci_high is None or rt.ci_high is None:
        return Judgement(c, "supported" if abs(rx.r) > abs(rt.r) else "contradicted", text)
    low_x = min(abs(rx.ci_low), abs(rx.ci_high)) if rx.ci_low * rx.ci_high > 0 else 0.0
    high_t = max(abs(rt.ci_low), abs(rt.ci_high))
    verdict: Verdict = "supported" if low_x > high_t else "not separated" if abs(rx.r) >= abs(rt.r) \
        else "contradicted"
    return Judgement(c, verdict, text)


# -- the report -----------------------------------------------------------------------------------------------

def write_study(result: StudyResult, out: Path, *, plots: bool = True) -> None:
    """The batch's files at ``out/study.*`` with the answer first, and ``out/answer.json``."""
    s = result.study
    preface = [f"Hypothesis: {s.hypothesis.strip()}"]
    if s.question:
        preface.append(f"Question: {s.question.strip()}")
    preface.append(f"{'CI-sized variant' if result.ci else 'Full study'}: {len(result.batch.runs)} runs.")
    preface += [f"Answer ({j.verdict}): {j.text}" for j in result.judgements]
    preface += [f"Note: {n}" for n in s.notes]
    write_batch(result.batch, out / "study", title=f"Study {s.name}", plots=plots, preface=preface)
    import json

    body = {"study": s.name, "ci": result.ci, "hypothesis": s.hypothesis,
            "answers": [{"claim": j.claim.model_dump(), "verdict": j.verdict, "text": j.text}
                        for j in result.judgements]}
    (out / "answer.json").write_text(json.dumps(body, indent=2, sort_keys=True) + "\n", encoding="utf-8")


__all__ = ["Claim", "Judgement", "Study", "StudyResult", "judge", "load_study", "run_study", "write_study"]
