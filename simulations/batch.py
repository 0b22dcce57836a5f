"""Run many scenario variants, in this process or in ``jobs`` worker processes, with the same results.

A :class:`Cell` is one run: a scenario file, the overrides of its variant, a seed and an output folder.
:func:`load_cells` validates every cell's scenario before any runs (a bad value fails the whole batch with
its ``ScenarioError``). :func:`run_cells` runs them: with ``jobs`` > 1 in a pool of spawned processes (each
run opens its own runtime and world, so a run's ``metrics.json`` and ``events.jsonl`` depend on its file,
overrides and seed alone, never on the job count or the order runs finish). Runs share one Cerbos PDP the
batch starts (or the one ``settings`` name); a scenario that stops or reloads its PDP (``pdp_outage``,
``policy_change``) gets the runtime's own, with a 1 s decision deadline.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import InvalidInput
from engine.settings import Settings, load_settings
from simulations.grid import Scalar, Variant
from simulations.results import Result
from simulations.scenario import Scenario, load_scenario

OWN_PDP_KINDS = frozenset({"pdp_outage", "policy_change"})
OWN_PDP_TIMEOUT_S = 1.0
MAX_JOBS = 64
Progress = Callable[[float], None]


@dataclass(frozen=True)
class Cell:
    """One run of a batch."""

    index: int
    variant: Variant
    file: Path
    seed: int
    out: Path
    scenario: Scenario

    @property
    def overrides(self) -> dict[str, Scalar]:
        return {**self.variant.overrides, "seed": self.seed}


def needs_own_pdp(scenario: Scenario) -> bool:
    """The scenario stops or reloads its PDP: it cannot share one."""
    return any(e.kind in OWN_PDP_KINDS for e in scenario.timeline)


def load_cells(members: Sequence[tuple[Variant, Path]], seeds: Sequence[int], folder: Callable[[Variant, int], Path]
               ) -> list[Cell]:
    """Every (variant, seed) cell, its scenario loaded and validated (``ScenarioError`` before any run)."""
    cells: list[Cell] = []
    for variant, file in members:
        for seed in seeds:
            scenario = load_scenario(file, {**variant.overrides, "seed": seed})
            cells.append(Cell(len(cells), variant, file, seed, folder(variant, seed), scenario))
    return cells


@contextmanager
def shared_pdp(settings: Settings | None, out: Path) -> Iterator[Settings]:
    """Settings whose PDP every run may share: ``settings`` if they name one, else a PDP started here on a
    deployment of ``settings.policy_dir`` under ``out/.pdp`` (stopped on exit)."""
    base = settings or load_settings()
    if base.pdp_address or getattr(base, "pdp_addresses", None):
        yield base
        return
    from engine.policy.governance import deploy
    from engine.policy.pdp_process import ManagedPdp

    root = out / ".pdp"
    deploy(base.policy_dir, root / "deploys")
    pdp = ManagedPdp(root / "deploys" / "current", run_dir=root / "run")
    address = pdp.start()
    try:
        yield base.model_copy(update={"pdp_address": address.grpc, "pdp_admin_user": address.admin_user,
                                      "pdp_admin_password": address.admin_password})
    finally:
        pdp.stop()


def cell_settings(cell: Cell, shared: Settings, own: Settings) -> Settings:
    return own if needs_own_pdp(cell.scenario) else shared


def run_cell(cell: Cell, settings: Settings, plots: bool, db_url: str | None = None) -> Result:
    """Run one cell into its folder (what a worker process calls)."""
    from simulations.run import run_scenario_file

    return run_scenario_file(cell.scenario, cell.out, settings=settings, plots=plots, db_url=db_url)


def run_cells(cells: Sequence[Cell], *, settings: Settings | None = None, jobs: int = 1, plots: bool = True,
              db_url: str | None = None, progress: Progress | None = None) -> list[Result]:
    """Run every cell; results in the cells' order whatever ``jobs`` is. ``db_url`` (one empty database) is
    only for a batch of one run: ``InvalidInput`` otherwise."""
    if not 1 <= jobs <= MAX_JOBS:
        raise InvalidInput("--jobs", f"between 1 and {MAX_JOBS} (got {jobs})")
    if db_url is not None and len(cells) > 1:
        raise InvalidInput("--db", f"a batch of {len(cells)} runs needs a fresh world for each; --db names one")
    if not cells:
        return []
    base = settings or load_settings()
    external: dict[str, Any] = {k: None for k in ("pdp_address", "pdp_addresses") if k in type(base).model_fields}
    own = base.model_copy(update={**external, "pdp_timeout_s": min(base.pdp_timeout_s, OWN_PDP_TIMEOUT_S)})
    shares = any(not needs_own_pdp(c.scenario) for c in cells)
    with _maybe_shared(base, cells[0].out.parent, shares) as shared:
        if jobs == 1 or len(cells) == 1:
            return _sequential(cells, shared, own, plots, db_url, progress)
        return _parallel(cells, shared, own, plots, min(jobs, len(cells)), progress)


@contextmanager
def _maybe_shared(base: Settings, out: Path, shares: bool) -> Iterator[Settings]:
    if not shares:
        yield base
        return
    out.mkdir(parents=True, exist_ok=True)
    with shared_pdp(base, out) as shared:
        yield shared


def _sequential(cells: Sequence[Cell], shared: Settings, own: Settings, plots: bool, db_url: str | None,
                progress: Progress | None) -> list[Result]:
    results = []
    for i, cell in enumerate(cells):
        def part(x: float, i: int = i) -> None:
            if progress is not None:
                progress((i + x) / len(cells))
        from simulations.run import run_scenario_file

        results.append(run_scenario_file(cell.scenario, cell.out, settings=cell_settings(cell, shared, own),
                                         plots=plots, db_url=db_url, progress=part))
    return results


def _parallel(cells: Sequence[Cell], shared: Settings, own: Settings, plots: bool, jobs: int,
              progress: Progress | None) -> list[Result]:
    done: dict[int, Result] = {}
    context = multiprocessing.get_context("spawn")  # no forked copy of this process's threads or channels
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = {pool.submit(run_cell, cell, cell_settings(cell, shared, own), plots): cell.index
                   for cell in cells}
        try:
            for future in as_completed(futures):
                done[futures[future]] = future.result()
                if progress is not None:
                    progress(len(done) / len(cells))
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    return [done[c.index] for c in cells]


__all__ = ["Cell", "load_cells", "needs_own_pdp", "run_cell", "run_cells", "shared_pdp"]
