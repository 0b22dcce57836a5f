"""Simulation runs share one real PDP (the session's managed Cerbos server): each run still opens its own
runtime, world and controller, but not its own PDP process."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.policy.pdp_process import ManagedPdp
from engine.settings import Settings, load_settings

SCENARIOS = Path(__file__).resolve().parents[2] / "simulations" / "scenarios"


@pytest.fixture(scope="session")
def sim_settings(managed_pdp: ManagedPdp) -> Settings:
    address = managed_pdp.address
    assert address is not None
    return load_settings(pdp_address=address.grpc, pdp_admin_user=address.admin_user,
                         pdp_admin_password=address.admin_password)
