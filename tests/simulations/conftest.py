"""Simulation runs share one real PDP (the session's managed Cerbos server): each run still opens its own
runtime, world and controller, but not its own PDP process (except the runs that stop or reload a PDP)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from engine.policy.pdp_process import ManagedPdp
from engine.settings import Settings, load_settings
from simulations.run import Result, run_scenario_file
from simulations.scenario import load_scenario

SCENARIOS = Path(__file__).resolve().parents[2] / "simulations" / "scenarios"


@pytest.fixture(scope="session")
def sim_settings(managed_pdp: ManagedPdp) -> Settings:
    address = managed_pdp.address
    assert address is not None
    return load_settings(pdp_address=address.grpc, pdp_admin_user=address.admin_user,
                         pdp_admin_password=address.admin_password)


OWN_PDP_KINDS = ("pdp_outage", "policy_change")


@pytest.fixture(scope="session")
def shipped(tmp_path_factory: pytest.TempPathFactory, sim_settings: Settings) -> Callable[[str], Result]:
    """Runs a shipped scenario once per session (plots included) and hands back its result. A scenario
    that stops or reloads the PDP gets the runtime's own PDP (short decision timeout: an outage is
    noticed in 1 s, and a
    loaded 2-core machine still answers well within it), never the shared one."""
    out = tmp_path_factory.mktemp("shipped")
    done: dict[str, Result] = {}

    def run(name: str) -> Result:
        if name not in done:
            scenario = load_scenario(SCENARIOS / name)
            own = any(e.kind in OWN_PDP_KINDS for e in scenario.timeline)
            settings = load_settings(pdp_timeout_s=1.0) if own else sim_settings
            done[name] = run_scenario_file(scenario, out / name, settings=settings, plots=name == "flagship.yaml")
        return done[name]
    return run
